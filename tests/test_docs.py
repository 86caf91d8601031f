"""The documentation covers what the code offers, and the generated page is current."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import click
from fastapi.testclient import TestClient

from citewell.api import create_app
from citewell.cli import main
from citewell.config import Settings

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _settings_page() -> str:
    path = Path(__file__).resolve().parents[1] / "scripts" / "settings_doc.py"
    spec = importlib.util.spec_from_file_location("settings_doc", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.render())


def test_the_settings_page_is_generated_from_the_current_settings() -> None:
    assert (DOCS / "settings.md").read_text() == _settings_page(), (
        "docs/settings.md is stale: run .venv/bin/python scripts/settings_doc.py"
    )


def test_every_command_is_documented_with_help() -> None:
    page = (DOCS / "cli.md").read_text()
    for name, command in main.commands.items():  # type: ignore[attr-defined]
        assert f"## {name}" in page, f"docs/cli.md lacks a section on `citewell {name}`"
        assert command.help, f"`citewell {name}` has no help text"
        if isinstance(command, click.Group):
            for sub in command.commands:
                assert f"citewell {name} {sub}" in page, f"docs/cli.md lacks `{name} {sub}`"


def test_every_route_is_documented_by_path_and_operation_id(settings: Settings) -> None:
    page = (DOCS / "api.md").read_text()
    with TestClient(create_app(settings)) as client:
        spec = client.get("/openapi.json").json()
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            heading = f"{method.upper()} {path}"
            assert heading in page, f"docs/api.md lacks `{heading}`"
            if path != "/healthz":
                assert f"`{operation['operationId']}`" in page
