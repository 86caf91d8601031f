"""Running citewell: ``serve`` the HTTP API and the UI; ``migrate`` the embedded store to
PostgreSQL."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import click
import uvicorn

from citewell.cli.common import (
    SetupFailed,
    data_dir_option,
    main,
    open_library,
    reported,
    settings_from,
)
from citewell.generate import GENERATORS
from citewell.model import Agent


@main.command()
@click.option("--host", help="Interface to bind. [default: 127.0.0.1, or CITEWELL_SERVER__HOST]")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    help="TCP port; 0 picks a free one. [default: 8750, or CITEWELL_SERVER__PORT]",
)
@click.option("--demo", is_flag=True, help="Load the demo documents into the bucket 'demo' first.")
@click.option(
    "--generator",
    type=click.Choice(sorted(GENERATORS)),
    help=f"Generator of the default agent ({Agent.DEFAULT_NAME}). [default: extractive]",
)
@click.option("--model", help="Model name the default agent passes to its generator.")
@data_dir_option
def serve(
    host: str | None,
    port: int | None,
    demo: bool,
    generator: str | None,
    model: str | None,
    data_dir: Path | None,
) -> None:
    """Serve the HTTP API until Ctrl-C."""
    from citewell.api import create_app

    server_options = {k: v for k, v in {"host": host, "port": port}.items() if v is not None}
    settings = settings_from(data_dir, server=server_options)
    if settings.admin_key is None and not _is_loopback(settings.server.host):
        raise SetupFailed(
            f"refusing to serve on {settings.server.host} without CITEWELL_ADMIN_KEY: an open "
            "server answers anyone who reaches it. Set CITEWELL_ADMIN_KEY, or bind to 127.0.0.1."
        )
    policy = {"generator": generator, "model": model}
    agent = Agent.model_validate({k: v for k, v in policy.items() if v is not None})
    with open_library(settings) as library:
        if demo:
            from citewell.demo import DEMO_BUCKET, load_demo

            loaded = load_demo(library)
            click.echo(f"demo bucket '{DEMO_BUCKET}': {len(loaded)} documents")
        config = uvicorn.Config(
            create_app(settings, library, agents=[agent]),
            host=settings.server.host,
            port=settings.server.port,
        )
        try:
            _AnnouncingServer(config).run()
        except KeyboardInterrupt:
            pass  # uvicorn re-raises Ctrl-C after shutting down cleanly: a normal end


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class _AnnouncingServer(uvicorn.Server):
    """Prints the URL once the socket is bound, so that a script may wait for that line."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            host, port = self.config.host, self.servers[0].sockets[0].getsockname()[1]
            shown = f"[{host}]" if ":" in host else host
            url = f"http://{shown}:{port}"
            click.echo(f"citewell is serving at {url}")
            click.echo(f"open {url}/ in a browser to ask, read and check the sources")


@main.command()
@click.option(
    "--to",
    "database_url",
    required=True,
    envvar="CITEWELL_DATABASE_URL",
    show_envvar=True,
    help="PostgreSQL (with pgvector) to copy into: postgresql://user:password@host/database.",
)
@data_dir_option
def migrate(database_url: str, data_dir: Path | None) -> None:
    """Copy the embedded store of the data folder into an empty PostgreSQL database."""
    from pydantic import SecretStr

    from citewell.library import copy_to_postgres

    settings = settings_from(data_dir, database_url=SecretStr(database_url))
    with reported():
        counts = copy_to_postgres(settings)
    copied = ", ".join(f"{count} {table}" for table, count in counts.items())
    click.echo(f"copied {copied}")
