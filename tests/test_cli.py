"""The citewell command: per-file results, clear failures, tables and the API's JSON."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from fastapi.testclient import TestClient

from citewell.api import create_app
from citewell.cli import main
from citewell.config import RetrieveSettings, Settings

HANDBOOK = b"""# Staff handbook

## Refunds

A refund is paid within thirty days of the request, to the card used for the purchase.
"""
NOTE = "Shipping is free for orders above fifty euros."


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def run(data_dir: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    """``citewell ARGS --data-dir DATA_DIR``: the fast embedder, a terminal of 100 columns."""
    environment = {"CITEWELL_RETRIEVE__EMBEDDER": "use", "COLUMNS": "100", **(env or {})}
    return CliRunner().invoke(main, [*args, "--data-dir", str(data_dir)], env=environment)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Two good files (one in a subfolder), a damaged PDF and a hidden file."""
    docs = tmp_path / "docs"
    (docs / "more").mkdir(parents=True)
    (docs / "handbook.md").write_bytes(HANDBOOK)
    (docs / "more" / "note.txt").write_text(NOTE)
    (docs / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog")
    (docs / ".draft.txt").write_text("Not ready yet.")
    return docs


def test_ingest_reports_every_file_and_continues_past_bad_ones(
    folder: Path, data_dir: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "missing.txt"
    result = run(data_dir, "ingest", str(folder), str(missing), "--bucket", "handbook")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 4
    assert lines[0].startswith(f"{folder / 'broken.pdf'}: failed: broken.pdf ")
    assert lines[1].startswith(f"{folder / 'handbook.md'}: created (src_")
    assert lines[1].endswith(", version 1)")
    assert lines[2].startswith(f"{folder / 'more' / 'note.txt'}: created (src_")
    assert lines[3] == f"{missing}: failed: cannot read the file: no such file or directory"
    assert result.stderr.strip() == "4 files, 2 created, 2 failed"
    listed = run(data_dir, "sources", "list", "--bucket", "handbook")
    assert [line.split("\t")[2] for line in listed.stdout.splitlines()] == [
        "handbook.md",
        "note.txt",
    ]


def test_an_empty_folder_ingests_nothing(tmp_path: Path, data_dir: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = run(data_dir, "ingest", str(tmp_path / "empty"), "--bucket", "notes")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "0 files\n")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_a_file_without_read_permission_is_reported(tmp_path: Path, data_dir: Path) -> None:
    locked = tmp_path / "locked.txt"
    locked.write_text(NOTE)
    locked.chmod(0)
    result = run(data_dir, "ingest", str(locked), "--bucket", "notes")
    assert result.exit_code == 1
    assert result.stdout == f"{locked}: failed: cannot read the file: permission denied\n"


def test_a_pipe_is_refused_without_being_read(tmp_path: Path, data_dir: Path) -> None:
    """Reading a FIFO would block forever; it is reported and the next file still goes in."""
    pipe = tmp_path / "pipe.txt"
    os.mkfifo(pipe)
    note = tmp_path / "note.txt"
    note.write_text(NOTE)
    result = run(data_dir, "ingest", str(pipe), str(note), "--bucket", "notes")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"{pipe}: failed: pipe.txt is not a regular file (a folder, pipe, device or socket)"
    )
    assert lines[1].startswith(f"{note}: created (src_")


def test_ingesting_the_same_files_again_changes_nothing(folder: Path, data_dir: Path) -> None:
    (folder / "broken.pdf").unlink()
    assert run(data_dir, "ingest", str(folder), "--bucket", "handbook").exit_code == 0
    again = run(data_dir, "ingest", str(folder), "--bucket", "handbook")
    assert again.exit_code == 0
    assert [line.split(": ")[1].split(" ")[0] for line in again.stdout.splitlines()] == [
        "unchanged",
        "unchanged",
    ]
    assert again.stderr.strip() == "2 files, 2 unchanged"


def test_a_changed_file_becomes_a_new_version(tmp_path: Path, data_dir: Path) -> None:
    note = tmp_path / "note.txt"
    note.write_text(NOTE)
    run(data_dir, "ingest", str(note), "--bucket", "notes")
    note.write_text("Shipping is free for orders above eighty euros.")
    result = run(data_dir, "ingest", str(note), "--bucket", "notes")
    assert result.stdout.startswith(f"{note}: new_version (src_")
    assert result.stdout.rstrip().endswith(", version 2)")
    listed = run(data_dir, "sources", "list", "--bucket", "notes", "--include-superseded")
    assert len(listed.stdout.splitlines()) == 2
    assert "superseded by src_" in listed.stdout


def test_ingest_without_create_refuses_an_unknown_bucket(folder: Path, data_dir: Path) -> None:
    result = run(data_dir, "ingest", str(folder), "--bucket", "nope", "--no-create")
    assert result.exit_code == 1
    assert result.stderr == "Error: no bucket 'nope'\n"


def test_ingest_stores_acl_metadata_and_effective_date(tmp_path: Path, data_dir: Path) -> None:
    note = tmp_path / "note.txt"
    note.write_text(NOTE)
    options = ["--acl", "hr", "--acl", "legal", "--effective-date", "2024-03-01"]
    options += ["--metadata", "team=hr", "--metadata", "year=2024", "--metadata", "code=007"]
    assert run(data_dir, "ingest", str(note), "--bucket", "notes", *options).exit_code == 0
    listed = json.loads(run(data_dir, "sources", "list", "--bucket", "notes", "--json").stdout)
    source = listed["data"][0]
    assert source["acl"] == ["hr", "legal"]
    assert source["effective_date"] == "2024-03-01"
    assert source["metadata"] == {"team": "hr", "year": 2024, "code": "007"}


def test_ingest_json_prints_one_record_per_file(folder: Path, data_dir: Path) -> None:
    result = run(
        data_dir,
        "ingest",
        str(folder / "handbook.md"),
        str(folder / "broken.pdf"),
        "--bucket",
        "handbook",
        "--json",
    )
    records = json.loads(result.stdout)
    assert [(r["path"], r["outcome"]) for r in records] == [
        (str(folder / "handbook.md"), "created"),
        (str(folder / "broken.pdf"), "failed"),
    ]
    assert records[0]["source"]["filename"] == "handbook.md"
    assert records[0]["superseded"] is None
    assert records[1]["error"].startswith("broken.pdf ")


def test_a_bad_metadata_option_is_a_usage_error(folder: Path, data_dir: Path) -> None:
    result = run(data_dir, "ingest", str(folder), "--bucket", "b", "--metadata", "team")
    assert result.exit_code == 2
    assert "'team' is not KEY=VALUE" in result.stderr


def test_the_progress_bar_is_hidden_when_stderr_is_not_a_terminal(
    folder: Path, data_dir: Path
) -> None:
    result = run(data_dir, "ingest", str(folder), "--bucket", "handbook")
    assert "ingesting" not in result.stderr


def test_the_progress_bar_is_shown_on_a_terminal(folder: Path, data_dir: Path) -> None:
    controller, terminal = pty.openpty()
    # A new pseudo-terminal is 0 columns wide, and tqdm draws nothing in 0 columns.
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    citewell = str(Path(sys.executable).parent / "citewell")
    command = [citewell, "ingest", str(folder), "--bucket", "b", "--data-dir", str(data_dir)]
    env = {**os.environ, "CITEWELL_RETRIEVE__EMBEDDER": "use"}
    process = subprocess.run(command, stderr=terminal, stdout=subprocess.PIPE, env=env, timeout=120)
    os.close(terminal)
    shown = b""
    while chunk := _read_available(controller):
        shown += chunk
    os.close(controller)
    assert process.returncode == 1
    assert b"ingesting: 100%" in shown
    assert b"3/3" in shown


def _read_available(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # the terminal closed: everything was read
        return b""


# search --------------------------------------------------------------------------------------
@pytest.fixture
def filled(folder: Path, data_dir: Path) -> Path:
    (folder / "broken.pdf").unlink()
    assert run(data_dir, "ingest", str(folder), "--bucket", "handbook").exit_code == 0
    return data_dir


def test_search_prints_a_table_of_ranked_passages(filled: Path) -> None:
    result = run(filled, "search", "refund paid to the card", "--bucket", "handbook")
    assert result.exit_code == 0
    header, first, *_ = result.stdout.splitlines()
    assert header.split() == ["#", "score", "source", "best", "sentence"]
    rank, score, *_ = first.split()
    assert rank == "1"
    assert 0 < float(score) <= 1
    assert "  handbook.md (§ Refunds)  " in first
    best = first[first.index("A refund") :]
    assert best.endswith("…")
    full = "A refund is paid within thirty days of the request, to the card used for the purchase."
    assert full.startswith(best[:-1])
    assert all(len(line) <= 100 for line in result.stdout.splitlines())


def test_search_json_prints_the_same_objects_as_the_http_api(filled: Path) -> None:
    result = run(filled, "search", "refund", "--bucket", "handbook", "--max-results", "2", "--json")
    printed = json.loads(result.stdout)
    settings = Settings(data_dir=filled, retrieve=RetrieveSettings(embedder="use", threads=1))
    with TestClient(create_app(settings)) as client:
        served = client.post(
            "/v1/search", json={"query": "refund", "buckets": ["handbook"], "max_results": 2}
        ).json()
    # A signed link needs the server that signs it: the command line has none to give.
    assert [r.pop("access_url") for r in printed["data"]] == [None, None]
    assert all(
        r.pop("access_url").startswith("http://testserver/v1/links/") for r in served["data"]
    )
    assert printed == served
    assert len(printed["data"]) == 2


def test_search_with_filters_and_mode(filled: Path) -> None:
    only_notes = json.dumps({"type": "eq", "key": "filename", "value": "note.txt"})
    result = run(
        filled,
        "search",
        "free shipping",
        "--bucket",
        "handbook",
        "--filters",
        only_notes,
        "--mode",
        "lexical",
        "--json",
    )
    found: list[dict[str, Any]] = json.loads(result.stdout)["data"]
    assert [r["filename"] for r in found] == ["note.txt"]
    assert found[0]["scores"]["dense"] is None


def test_a_search_without_results_says_so(filled: Path) -> None:
    result = run(
        filled,
        "search",
        "refund",
        "--bucket",
        "handbook",
        "--filters",
        '{"type": "eq", "key": "filename", "value": "none.txt"}',
    )
    assert (result.exit_code, result.stdout) == (0, "No passages found.\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "refund", "--bucket", "nope"], "Error: no bucket 'nope'"),
        (["search", "refund", "--bucket", "handbook", "--filters", "{"], "Error: invalid search"),
        (["search", "x" * 4001, "--bucket", "handbook"], "Error: invalid search"),
    ],
)
def test_a_failed_search_exits_with_1(filled: Path, args: list[str], message: str) -> None:
    result = run(filled, *args)
    assert result.exit_code == 1
    assert result.stderr.startswith(message)


def test_invalid_settings_exit_with_3(data_dir: Path) -> None:
    result = run(data_dir, "buckets", "list", env={"CITEWELL_RETRIEVE__EMBEDDER": "nope"})
    assert result.exit_code == 3
    assert result.stderr.startswith("Error: invalid settings")


# buckets and sources -------------------------------------------------------------------------
# ask -----------------------------------------------------------------------------------------
def test_ask_prints_the_answer_with_its_markers_and_sources(filled: Path) -> None:
    result = run(filled, "ask", "When is a refund paid?", "--bucket", "handbook")
    assert result.exit_code == 0
    assert result.stdout == (
        "A refund is paid within thirty days of the request, to the card used for the purchase.[1]"
        "\n\nSources:\n[1] handbook.md (§ Refunds)\n"
    )


def test_ask_says_plainly_when_the_sources_do_not_answer(filled: Path) -> None:
    result = run(filled, "ask", "¿Quién fundó la empresa?", "--json")
    answer = json.loads(result.stdout)
    assert answer["text"] == "Las fuentes disponibles no responden a esta pregunta."
    assert (answer["grounding"], answer["declined"], answer["citations"]) == ("missing", True, [])


def test_ask_of_an_unknown_bucket_exits_with_1(filled: Path) -> None:
    result = run(filled, "ask", "refunds", "--bucket", "nowhere")
    assert result.exit_code == 1
    assert "nowhere" in result.stderr


def test_buckets_are_created_listed_and_deleted(data_dir: Path) -> None:
    created = run(data_dir, "buckets", "create", "notes", "--name", "My notes")
    slug, bucket_id, name = created.stdout.rstrip("\n").split("\t")
    assert (slug, name) == ("notes", "My notes")
    assert run(data_dir, "buckets", "create", "notes").stdout == created.stdout
    listing = json.loads(run(data_dir, "buckets", "list", "--json").stdout)
    assert [b["id"] for b in listing["data"]] == [bucket_id]
    assert listing["has_more"] is False
    assert run(data_dir, "buckets", "delete", "notes").stdout == f"deleted {bucket_id}\n"
    assert run(data_dir, "buckets", "list").stdout == ""
    missing = run(data_dir, "buckets", "delete", "notes")
    assert (missing.exit_code, missing.stderr) == (1, "Error: no bucket 'notes'\n")


def test_a_source_is_deleted_by_id(filled: Path) -> None:
    listed = json.loads(run(filled, "sources", "list", "--bucket", "handbook", "--json").stdout)
    source_id = listed["data"][0]["id"]
    assert run(filled, "sources", "delete", source_id).stdout == f"deleted {source_id}\n"
    assert source_id not in run(filled, "sources", "list", "--bucket", "handbook").stdout
    assert run(filled, "sources", "delete", source_id).exit_code == 1


def test_a_bucket_is_renamed_by_slug_and_name(data_dir: Path) -> None:
    bucket_id = run(data_dir, "buckets", "create", "notes").stdout.split("\t")[1]
    renamed = run(data_dir, "buckets", "rename", "notes", "--slug", "diary", "--name", "Diary")
    assert (renamed.exit_code, renamed.stdout) == (0, f"diary\t{bucket_id}\tDiary\n")
    assert run(data_dir, "buckets", "rename", bucket_id, "--name", "Log").stdout == (
        f"diary\t{bucket_id}\tLog\n"
    )
    run(data_dir, "buckets", "create", "notes")
    clash = run(data_dir, "buckets", "rename", "diary", "--slug", "notes")
    assert (clash.exit_code, clash.stderr) == (
        1,
        "Error: a bucket with slug 'notes' already exists\n",
    )


def test_an_exported_bucket_is_imported_again_with_its_versions(
    filled: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "handbook.md").write_bytes(HANDBOOK.replace(b"thirty", b"fourteen"))
    run(filled, "ingest", str(tmp_path / "handbook.md"), "--bucket", "handbook", "--acl", "hr")
    listing = ["sources", "list", "--bucket", "handbook", "--include-superseded", "--json"]
    before = json.loads(run(filled, *listing).stdout)["data"]
    monkeypatch.chdir(tmp_path)
    exported = run(filled, "export", "handbook")
    assert (exported.exit_code, exported.stdout) == (
        0,
        "exported 3 sources of handbook to handbook.citewell.zip\n",
    )
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []
    run(filled, "buckets", "delete", "handbook")
    imported = run(filled, "import", "handbook.citewell.zip")
    assert imported.exit_code == 0, imported.output
    assert imported.stdout.startswith("imported 3 sources into handbook (bkt_")
    after = json.loads(run(filled, *listing).stdout)["data"]
    kept = ("filename", "content_hash", "version", "acl", "metadata")
    assert [{k: s[k] for k in kept} for s in after] == [{k: s[k] for k in kept} for s in before]
    copy = run(filled, "import", "handbook.citewell.zip", "--bucket", "copy")
    assert copy.stdout.startswith("imported 3 sources into copy (bkt_")


def test_export_writes_the_file_named_by_output(filled: Path, tmp_path: Path) -> None:
    target = tmp_path / "out" / "backup.zip"
    target.parent.mkdir()
    assert run(filled, "export", "handbook", "-o", str(target)).exit_code == 0
    assert sorted(p.name for p in target.parent.iterdir()) == ["backup.zip"]
    missing = run(filled, "export", "handbook", "-o", str(tmp_path / "nowhere" / "x.zip"))
    assert missing.exit_code == 1
    assert missing.stderr.startswith(f"Error: cannot write {tmp_path / 'nowhere' / 'x.zip'}: ")


def test_importing_a_damaged_archive_exits_with_1_and_creates_nothing(
    data_dir: Path, tmp_path: Path
) -> None:
    damaged = tmp_path / "damaged.zip"
    damaged.write_bytes(b"not a zip")
    result = run(data_dir, "import", str(damaged))
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "Error: damaged.zip is not a valid bucket archive: not a zip file ("
    )
    assert run(data_dir, "buckets", "list").stdout == ""


def test_importing_onto_a_slug_in_use_exits_with_1(filled: Path, tmp_path: Path) -> None:
    archive = tmp_path / "handbook.zip"
    run(filled, "export", "handbook", "-o", str(archive))
    result = run(filled, "import", str(archive))
    assert (result.exit_code, result.stderr) == (
        1,
        "Error: a bucket with slug 'handbook' already exists\n",
    )


def test_the_data_dir_comes_from_the_environment(tmp_path: Path) -> None:
    env = {"CITEWELL_DATA_DIR": str(tmp_path / "from-env"), "CITEWELL_RETRIEVE__EMBEDDER": "use"}
    CliRunner().invoke(main, ["buckets", "create", "notes"], env=env)
    assert (tmp_path / "from-env" / "citewell.db").exists()


def test_serve_refuses_an_unknown_generator(data_dir: Path) -> None:
    result = run(data_dir, "serve", "--generator", "gpt-9")
    assert result.exit_code == 2
    assert "'gpt-9' is not one of" in result.output


def test_serve_refuses_to_listen_beyond_this_machine_without_an_operator_key(
    data_dir: Path,
) -> None:
    result = run(data_dir, "serve", "--host", "0.0.0.0")
    assert result.exit_code == 3
    assert "refusing to serve on 0.0.0.0 without CITEWELL_ADMIN_KEY" in result.output


def test_keys_are_created_listed_and_revoked_per_tenant(data_dir: Path) -> None:
    assert run(data_dir, "buckets", "create", "notes").exit_code == 0
    tenant = run(data_dir, "tenants", "create", "Acme")
    assert tenant.exit_code == 0, tenant.output
    acme = tenant.output.strip()
    assert acme.startswith("ten_")
    listed = run(data_dir, "tenants", "list").output.splitlines()
    assert listed == ["default\tDefault", f"{acme}\tAcme"]
    made = run(
        data_dir,
        *["keys", "create", "--permission", "search", "--permission", "ask"],
        *["--bucket", "notes", "--label", "hr", "--name", "portal", "--json"],
    )
    assert made.exit_code == 0, made.output
    key = json.loads(made.output)
    assert (key["permissions"], key["acl_labels"], key["name"]) == (
        ["ask", "search"],
        ["hr"],
        "portal",
    )
    assert key["secret"].startswith("cwk_") and len(key["bucket_ids"]) == 1
    assert run(data_dir, "keys", "list").output == f"{key['id']}\task,search\tportal\n"
    assert run(data_dir, "keys", "list", "--tenant", acme).output == ""
    foreign = run(
        data_dir, "keys", "create", "--permission", "ask", "--tenant", acme, "--bucket", "notes"
    )
    assert foreign.exit_code == 1 and "notes" in foreign.output  # another tenant's bucket
    assert run(data_dir, "keys", "revoke", key["id"]).output == f"revoked {key['id']}\n"
    assert "\trevoked " in run(data_dir, "keys", "list").output
    missing = run(data_dir, "keys", "revoke", "key_0000000000000000")
    assert missing.exit_code == 1 and "No API key found" in missing.output


def test_agents_are_created_listed_changed_and_deleted_as_the_http_api_sees_them(
    data_dir: Path,
) -> None:
    assert run(data_dir, "buckets", "create", "handbook").exit_code == 0
    made = run(
        data_dir,
        *["agents", "create", "handbook-bot", "--bucket", "handbook"],
        *["--set", "strict=true", "--set", "max_passages=4", "--set", "description=Handbook"],
        "--json",
    )
    assert made.exit_code == 0, made.output
    agent = json.loads(made.output)
    assert (agent["name"], agent["strict"], agent["max_passages"], agent["description"]) == (
        "handbook-bot",
        True,
        4,
        "Handbook",
    )
    (bucket_id,) = agent["bucket_ids"]
    assert bucket_id.startswith("bkt_")  # kept by id: renaming the bucket keeps the scope
    listed = run(data_dir, "agents", "list").output.splitlines()
    assert listed == [
        "citewell-agent\tconfigured\textractive\t*\t",
        f"handbook-bot\town\textractive\t{bucket_id}\tHandbook",
    ]
    settings = Settings(data_dir=data_dir, retrieve=RetrieveSettings(embedder="use"))
    with TestClient(create_app(settings)) as client:
        served = client.get("/v1/agents/handbook-bot").json()
    assert {k: served[k] for k in agent} == agent
    changed = run(data_dir, "agents", "update", "handbook-bot", "--set", "strict=false", "--json")
    assert changed.exit_code == 0, changed.output
    assert json.loads(changed.output) == {**agent, "strict": False}
    assert (
        run(data_dir, "agents", "delete", "handbook-bot").output == "deleted agent handbook-bot\n"
    )
    assert [
        line.split("\t")[0] for line in run(data_dir, "agents", "list").output.splitlines()
    ] == ["citewell-agent"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["create", "bot", "--set", "max_passages=0"], "invalid max_passages"),
        (["create", "bot", "--bucket", "nowhere"], "nowhere"),
        (["create", "bot", "--set", "generator=gpt-9"], "No generator named 'gpt-9'"),
        (["delete", "citewell-agent"], "configured by the server"),
        (["update", "ghost", "--set", "strict=true"], "No agent named 'ghost'"),
    ],
    ids=["invalid field", "unknown bucket", "unknown generator", "configured", "unknown agent"],
)
def test_a_refused_agent_change_exits_with_1(data_dir: Path, args: list[str], message: str) -> None:
    result = run(data_dir, "agents", *args)
    assert result.exit_code == 1, result.output
    assert message in result.output


def test_training_refuses_to_start_from_a_folder_that_holds_no_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["reader", "train", "--out", str(tmp_path / "run"), "--from", str(tmp_path)]
    )
    assert result.exit_code == 2, result.output
    assert "is neither shipped, base nor a run's folder" in result.output
    assert not (tmp_path / "run").exists()
