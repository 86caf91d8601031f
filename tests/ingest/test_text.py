"""Plain text: the canonical text is the file itself, so its offsets are offsets into the file."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from citewell.config import IngestSettings
from citewell.errors import ParseError
from citewell.ingest import parse
from citewell.ingest.base import BlockKind, ParsedDocument
from citewell.ingest.text import split_paragraphs

LIMITS = IngestSettings()


def _parse(data: bytes, name: str = "notes.txt") -> ParsedDocument:
    return parse(data, filename=name, limits=LIMITS)


def test_canonical_text_is_the_normalised_file_without_its_outer_whitespace() -> None:
    raw = (
        "\r\n  \tFirst  paragraph,\r\nsame paragraph.\r\n \t\r\n\r\n"
        "Second one\rwith a CR.\n\n\n  Third. \n\n"
    )
    document = _parse(raw.encode())
    expected = raw.replace("\r\n", "\n").replace("\r", "\n").strip()
    assert document.text == expected
    assert [document.text[b.span.start : b.span.end] for b in document.blocks] == [
        "First  paragraph,\nsame paragraph.",
        "Second one\nwith a CR.",
        "Third.",
    ]
    assert {block.kind for block in document.blocks} == {BlockKind.PARAGRAPH}


def test_separators_between_paragraphs_are_kept_exactly() -> None:
    document = _parse(b"one\n \t \n\t two\n\n\n\nthree")
    assert document.text == "one\n \t \n\t two\n\n\n\nthree"
    assert [(b.span.start, b.span.end) for b in document.blocks] == [(0, 3), (10, 13), (17, 22)]


def test_split_paragraphs_concatenates_back_to_its_input() -> None:
    for text in ["", "a", "a\n\nb", "  a\n \n b  \n\n", "a\nb\n\n\n\n\nc\n \n"]:
        assert "".join(sep + part for sep, part in split_paragraphs(text)) == text


def test_a_long_whitespace_run_without_blank_lines_is_split_in_linear_time() -> None:
    # A backtracking pattern would take minutes on this; the scanner takes milliseconds.
    text = "a" + " " * 2_000_000 + "b"
    assert list(split_paragraphs(text)) == [("", text)]


@pytest.mark.parametrize(
    ("bom", "codec"),
    [
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
        (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
    ],
)
def test_byte_order_marks_choose_the_encoding_and_are_dropped(bom: bytes, codec: str) -> None:
    document = _parse(bom + "Ni\u00f1o \u4e2d\u6587\r\n".encode(codec))
    assert document.text == "Ni\u00f1o \u4e2d\u6587"


def test_invalid_utf8_names_the_file_and_the_offset_of_the_first_bad_byte() -> None:
    with pytest.raises(ParseError, match=r"notes\.txt is not valid UTF-8 .*offset 6\b") as info:
        _parse(b"caf\xc3\xa9 \xff more")
    assert info.value.filename == "notes.txt"


def test_text_with_nul_bytes_is_refused_as_binary() -> None:
    with pytest.raises(ParseError, match=r"notes\.txt looks binary"):
        _parse(b"abc\x00def")


def test_a_real_text_file_reads_back_exactly(documents: Path) -> None:
    path = documents / "pdf_scanned" / "ocrmypdf_linn.groundtruth.txt"
    raw = path.read_bytes()
    document = _parse(raw, path.name)
    assert document.text == raw.decode().replace("\r\n", "\n").strip()
    assert document.text.startswith("The LinnSequencer\n32 Track MIDI Sequence Recorder")
    assert document.pages == ()
