"""`citewell ingest` of a file read with OCR: stored like any other, its pages counted."""

from __future__ import annotations

from pathlib import Path

import pytest

import citewell.cli.sources as cli
from tests.test_cli import run


def test_ingesting_an_image_reads_it_with_ocr_and_counts_its_pages(
    tmp_path: Path, documents: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted: list[tuple[str, int, int]] = []
    tell = cli._PageProgress.__call__

    def recording(bar: cli._PageProgress, done: int, total: int) -> None:
        counted.append((bar._name, done, total))
        tell(bar, done, total)

    monkeypatch.setattr(cli._PageProgress, "__call__", recording)
    poster = documents / "images" / "easyocr_english.png"
    note = tmp_path / "note.txt"
    note.write_text("No OCR for plain text.")
    result = run(tmp_path / "data", "ingest", str(poster), str(note), "--bucket", "posters")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].startswith(f"{poster}: created (src_")
    assert counted == [("easyocr_english.png", 0, 1), ("easyocr_english.png", 1, 1)]
    found = run(tmp_path / "data", "search", "coronavirus infection", "--bucket", "posters")
    assert "easyocr_english.png" in found.stdout
