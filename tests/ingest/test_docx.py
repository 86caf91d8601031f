"""DOCX: the body in document order, headings from styles, and a package checked before opening."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import pytest

from citewell.config import IngestSettings
from citewell.errors import FileTooLarge, ParseError
from citewell.ingest import parse
from citewell.ingest.base import BlockKind, ParsedDocument
from tests.ingest.samples import make_docx

LIMITS = IngestSettings()
DOCX_FILES = ("word_sample", "lorem_ipsum", "unit_test_headers")


def _parse(
    data: bytes, name: str = "report.docx", limits: IngestSettings = LIMITS
) -> ParsedDocument:
    return parse(data, filename=name, limits=limits)


def _blocks(document: ParsedDocument) -> list[tuple[str, int | None, str]]:
    return [
        (b.kind.value, b.level, document.text[b.span.start : b.span.end]) for b in document.blocks
    ]


def _reference_headings(path: Path) -> list[tuple[int, str]]:
    """Headings of docling's Markdown rendering: (number of '#', text)."""
    found = re.findall(r"^(#+) (.+)$", path.read_text(), flags=re.MULTILINE)
    return [(len(marks), text.strip()) for marks, text in found]


@pytest.mark.parametrize("name", DOCX_FILES)
def test_headings_match_the_reference_in_text_level_and_order(documents: Path, name: str) -> None:
    path = documents / "docx_html" / f"{name}.docx"
    document = _parse(path.read_bytes(), path.name)
    headings = [
        (b.level, document.text[b.span.start : b.span.end])
        for b in document.blocks
        if b.kind is BlockKind.HEADING
    ]
    assert headings == _reference_headings(documents / "groundtruth_docling" / f"{name}.docx.md")


def test_paragraphs_lists_and_tables_interleave_in_document_order(documents: Path) -> None:
    path = documents / "docx_html" / "word_sample.docx"
    document = _parse(path.read_bytes(), path.name)
    blocks = _blocks(document)
    assert blocks[:3] == [
        ("paragraph", None, "Summer activities"),  # Subtitle style: not a heading
        ("heading", 1, "Swimming in the lake"),
        ("paragraph", None, "Duck"),
    ]
    table_start = blocks.index(
        ("paragraph", None, "Here are some interesting things a respectful duck could eat:")
    )
    assert blocks[table_start + 1 : table_start + 5] == [
        ("table_row", None, "Leaves; Food: Ash, Elm, Maple; Calories per portion: 50"),
        (
            "table_row",
            None,
            "Berries; Food: Blueberry, Strawberry, Cranberry; Calories per portion: 150",
        ),
        ("table_row", None, "Grain; Food: Corn, Buckwheat, Barley; Calories per portion: 200"),
        ("paragraph", None, "And let’s add another list in the end:"),
    ]
    assert blocks[-3:] == [
        ("list_item", None, "Leaves"),
        ("list_item", None, "Berries"),
        ("list_item", None, "Grain"),
    ]
    assert document.title == "Swimming in the lake"
    rows = [b for b in document.blocks if b.kind is BlockKind.TABLE_ROW]
    assert rows[0].heading_path == ("Swimming in the lake", "Let’s swim!", "Let’s eat")


def test_plain_paragraphs_of_a_real_document(documents: Path) -> None:
    path = documents / "docx_html" / "lorem_ipsum.docx"
    document = _parse(path.read_bytes(), path.name)
    reference = (documents / "groundtruth_docling" / "lorem_ipsum.docx.md").read_text()
    assert document.text == reference.strip()
    assert {b.kind for b in document.blocks} == {BlockKind.PARAGRAPH}


def test_styles_numbering_and_a_header_row_in_a_built_document() -> None:
    def build(doc):  # type: ignore[no-untyped-def]
        doc.core_properties.title = "Core title"
        doc.add_heading("Guide", level=0)  # the "Title" style
        doc.add_heading("Install", level=1)
        doc.add_paragraph("Run   the\tinstaller.")
        doc.add_paragraph("First step", style="List Number")
        doc.add_paragraph("Second step", style="List Bullet")
        table = doc.add_table(rows=3, cols=2)
        for row, cells in zip(
            table.rows, [("Plan", "Price"), ("Pro", "$20"), ("Free", "")], strict=False
        ):
            for cell, text in zip(row.cells, cells, strict=False):
                cell.text = text
        doc.add_heading("Use", level=2)

    document = _parse(make_docx(build))
    assert _blocks(document) == [
        ("heading", 1, "Guide"),
        ("heading", 2, "Install"),
        ("paragraph", None, "Run the installer."),
        ("list_item", None, "First step"),
        ("list_item", None, "Second step"),
        ("table_row", None, "Plan: Pro; Price: $20"),
        ("table_row", None, "Plan: Free"),
        ("heading", 3, "Use"),
    ]
    assert document.blocks[-1].heading_path == ("Guide", "Install")
    assert document.title == "Core title"


def test_a_file_that_is_not_a_zip_is_refused_by_name() -> None:
    with pytest.raises(ParseError, match=r"report\.docx is not a Word document: it is not a ZIP"):
        _parse(b"PK\x03\x04 but not really a zip" * 10)


def test_a_zip_without_a_word_body_is_refused() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as package:
        package.writestr("word/other.xml", "<x/>")
    with pytest.raises(
        ParseError, match=r"report\.docx is not a Word document: it has no word/document\.xml"
    ):
        _parse(buffer.getvalue())


def _bomb(size: int) -> bytes:
    """A DOCX-shaped zip whose body inflates to ``size`` zero bytes, written in streaming."""
    buffer = io.BytesIO()
    chunk = b"\0" * (1 << 20)
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as package:
        package.writestr("[Content_Types].xml", "<Types/>")
        with package.open("word/document.xml", "w", force_zip64=True) as member:
            for _ in range(size // len(chunk)):
                member.write(chunk)
    return buffer.getvalue()


def test_a_zip_bomb_is_refused_before_anything_is_inflated() -> None:
    data = _bomb(64 << 20)  # 64 MB of zeros deflate to about 64 KB: a ratio near 1000
    assert len(data) < 200_000
    with pytest.raises(
        ParseError, match=r"report\.docx looks like a zip bomb: word/document\.xml inflates"
    ):
        _parse(data)


def test_a_package_that_unpacks_over_the_limit_is_too_large() -> None:
    small = IngestSettings(max_unpacked_bytes=1 << 20)
    with pytest.raises(
        FileTooLarge,
        match=r"report\.docx has 2,097,160 bytes when unpacked; the limit is 1,048,576 "
        r"\(CITEWELL_INGEST__MAX_UNPACKED_BYTES\)",
    ):
        _parse(_bomb(2 << 20), limits=small)


def test_a_damaged_body_becomes_a_parse_error_naming_the_file(documents: Path) -> None:
    source = zipfile.ZipFile(documents / "docx_html" / "lorem_ipsum.docx")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as package:
        for item in source.infolist():
            body = source.read(item)
            if item.filename == "word/document.xml":
                body = body[: len(body) // 2]  # cut in the middle of the XML
            package.writestr(item, body)
    with pytest.raises(ParseError, match=r"^report\.docx holds malformed XML"):
        _parse(buffer.getvalue())
