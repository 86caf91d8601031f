"""The registry: media-type detection, the size and emptiness guards, and error mapping."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

import citewell.ingest as ingest
from citewell.config import IngestSettings
from citewell.errors import FileTooLarge, ParseError, UnsupportedFormat
from citewell.ingest import (
    PARSERS,
    SCAN_PARSERS,
    SUPPORTED_MEDIA_TYPES,
    detect_media_type,
    parse,
    read_limited,
)
from citewell.ingest.base import ParsedDocument
from tests.ingest.samples import PageSpec, Run, make_pdf

LIMITS = IngestSettings()
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def _zip(member: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as package:
        package.writestr(member, "<x/>")
    return buffer.getvalue()


def test_supported_media_types_are_the_sorted_registry() -> None:
    assert SUPPORTED_MEDIA_TYPES == tuple(sorted(PARSERS))
    assert SUPPORTED_MEDIA_TYPES == (
        "application/json",
        "application/pdf",
        DOCX,
        "application/x-ndjson",
        "image/jpeg",
        "image/png",
        "image/tiff",
        "image/webp",
        "text/csv",
        "text/html",
        "text/markdown",
        "text/plain",
        "text/tab-separated-values",
    )
    for kind, parser in PARSERS.items():
        assert kind in parser.media_types


@pytest.mark.parametrize(
    ("data", "filename", "expected"),
    [
        (b"%PDF-1.7\n...", "notes.txt", "application/pdf"),
        (_zip("word/document.xml"), "upload.bin", DOCX),
        (b"\xef\xbb\xbf  <!DOCTYPE html><p>x", "page.txt", "text/html"),
        (b"<HTML><body>x", "page", "text/html"),
        (b"\x89PNG\r\n\x1a\n....", "scan.pdf", "image/png"),
        (b"\xff\xd8\xff\xe0....", "photo", "image/jpeg"),
        (b"II*\x00....", "scan", "image/tiff"),
        (b"MM\x00*....", "scan", "image/tiff"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "pic", "image/webp"),
        (b"# Title", "README.md", "text/markdown"),
        (b"# Title", "notes.MARKDOWN", "text/markdown"),
        (b"a,b", "data.csv", "text/csv"),
        (b"a\tb", "data.tsv", "text/tab-separated-values"),
        (b"{}", "data.json", "application/json"),
        (b"{}", "data.jsonl", "application/x-ndjson"),
        (b"{}", "data.ndjson", "application/x-ndjson"),
        (b"<p>x</p>", "page.htm", "text/html"),
        (b"x", "server.log", "text/plain"),
        (b"x", "a.text", "text/plain"),
        (_zip("other.xml"), "archive.docx", DOCX),  # the parser will say what is missing
        ("plain words, ñ".encode(), "no-extension", "text/plain"),
        ("\ufefftext".encode("utf-16"), "no-extension", "text/plain"),
    ],
)
def test_magic_bytes_then_extension_then_utf8_decide_the_type(
    data: bytes, filename: str, expected: str
) -> None:
    assert detect_media_type(data, filename) == expected


def test_binary_of_unknown_kind_is_unsupported_and_named() -> None:
    with pytest.raises(UnsupportedFormat, match=r"^blob\.bin: cannot tell what kind of file"):
        detect_media_type(b"\x00\x01\xfe\xff" * 100, "blob.bin")


def test_images_need_ocr() -> None:
    with pytest.raises(UnsupportedFormat, match=r"^scan\.png: an image can only be read with OCR"):
        parse(b"\x89PNG\r\n\x1a\n" + b"\0" * 64, filename="scan.png", limits=LIMITS)


def test_scan_parsers_are_the_registered_parsers_of_pdf_and_images() -> None:
    assert sorted(SCAN_PARSERS) == [
        "application/pdf",
        "image/jpeg",
        "image/png",
        "image/tiff",
        "image/webp",
    ]
    assert all(PARSERS[kind] is parser for kind, parser in SCAN_PARSERS.items())


def test_an_unknown_media_type_is_unsupported() -> None:
    with pytest.raises(UnsupportedFormat, match=r"^x\.odt \(application/vnd\.oasis"):
        parse(
            b"x",
            filename="x.odt",
            limits=LIMITS,
            media_type="application/vnd.oasis.opendocument.text",
        )


def test_a_given_media_type_wins_and_parameters_are_ignored() -> None:
    document = parse(
        b"# Not a heading", filename="x.md", limits=LIMITS, media_type="Text/Plain; charset=utf-8"
    )
    assert document.text == "# Not a heading"


def test_an_empty_file_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match=r"^empty\.pdf is empty$"):
        parse(b"", filename="empty.pdf", limits=LIMITS)


def test_a_file_of_whitespace_contains_no_text() -> None:
    with pytest.raises(ParseError, match=r"^blank\.txt contains no text$"):
        parse(b" \n\t\n", filename="blank.txt", limits=LIMITS)


def test_a_file_over_max_file_bytes_is_too_large_before_parsing() -> None:
    with pytest.raises(
        FileTooLarge,
        match=r"^big\.txt has 11 bytes; the limit is 10 \(CITEWELL_INGEST__MAX_FILE_BYTES\)$",
    ) as info:
        parse(b"x" * 11, filename="big.txt", limits=IngestSettings(max_file_bytes=10))
    assert info.value.filename == "big.txt"


def test_read_limited_refuses_a_huge_file_by_its_size_without_reading_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    huge = tmp_path / "huge.pdf"
    with huge.open("wb") as file:  # sparse: 500 MB on paper, nothing on disk
        file.truncate(500 * 1024 * 1024)

    def no_reading(*args: object, **kwargs: object) -> None:
        raise AssertionError("the file was opened")

    monkeypatch.setattr(Path, "open", no_reading)
    with pytest.raises(
        FileTooLarge, match=r"^huge\.pdf has 524,288,000 bytes; the limit is 209,715,200"
    ):
        read_limited(huge, IngestSettings())


def test_read_limited_returns_the_bytes_of_a_file_within_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "ok.txt"
    path.write_bytes(b"0123456789")
    assert read_limited(path, IngestSettings(max_file_bytes=10)) == b"0123456789"
    with pytest.raises(FileTooLarge):
        read_limited(path, IngestSettings(max_file_bytes=9))


class _Failing:
    media_types = ("text/plain",)

    def __init__(self, error: Exception) -> None:
        self.error = error

    def parse(self, data: bytes, *, filename: str, limits: IngestSettings) -> ParsedDocument:
        raise self.error


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (zipfile.BadZipFile("Bad CRC-32"), "f.txt is a damaged ZIP package (Bad CRC-32)"),
        (EOFError(), "f.txt is truncated"),
        (KeyError("word/_rels"), "f.txt is missing a part it refers to ('word/_rels')"),
        (SyntaxError("unclosed tag"), "f.txt holds malformed XML (unclosed tag)"),
        (RecursionError(), "f.txt is nested too deeply to read"),
        (ValueError("odd"), "f.txt could not be read as text/plain (odd)"),
        (RuntimeError(), "f.txt could not be read as text/plain"),
    ],
)
def test_library_failures_become_parse_errors_naming_the_file(
    monkeypatch: pytest.MonkeyPatch, error: Exception, message: str
) -> None:
    monkeypatch.setitem(ingest.PARSERS, "text/plain", _Failing(error))
    with pytest.raises(ParseError) as info:
        parse(b"x", filename="f.txt", limits=LIMITS)
    assert info.value.message == message
    assert info.value.filename == "f.txt"
    assert info.value.__cause__ is error


@pytest.mark.parametrize(("kind", "meaning"), ingest._FOREIGN_ERRORS)
def test_every_entry_of_the_error_table_is_applied(
    monkeypatch: pytest.MonkeyPatch, kind: type[Exception], meaning: str
) -> None:
    monkeypatch.setitem(ingest.PARSERS, "text/plain", _Failing(kind("detail")))
    with pytest.raises(ParseError) as info:
        parse(b"x", filename="f.txt", limits=LIMITS)
    assert info.value.message.startswith(f"f.txt {meaning}")


def test_ingest_errors_of_the_parsers_pass_through_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    error = FileTooLarge("f.txt has too much", filename="f.txt")
    monkeypatch.setitem(ingest.PARSERS, "text/plain", _Failing(error))
    with pytest.raises(FileTooLarge) as info:
        parse(b"x", filename="f.txt", limits=LIMITS)
    assert info.value is error


def test_parse_detects_the_type_when_none_is_given() -> None:
    data = make_pdf([PageSpec([Run("Hello from a PDF.", 72, 700)])])
    document = parse(data, filename="upload", limits=LIMITS)
    assert document.text == "Hello from a PDF."
    assert document.pages[0].number == 1
