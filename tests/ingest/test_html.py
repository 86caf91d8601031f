"""HTML: the readable text of the page, without its furniture, block by block."""

from __future__ import annotations

import codecs
from pathlib import Path

from citewell.config import IngestSettings
from citewell.ingest import parse
from citewell.ingest.base import BlockKind, ParsedDocument

LIMITS = IngestSettings()

PAGE = """<!DOCTYPE html>
<html><head><title>Plans  &amp; prices</title><style>p { color: red }</style>
<script>var hidden = "script text";</script></head>
<body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<header>Site banner</header>
<article>
  <header><h1>Our   plans</h1></header>
  <div>Every plan <b>includes</b>
     support.<p>Billing is<br>monthly.</p>Cancel any time.</div>
  <ul><li>Pro<ul><li>Priority support</li></ul></li><li><p>Free</p></li></ul>
  <h2>Prices</h2>
  <table>
    <thead><tr><th>Plan</th><th>Price</th><th>Seats</th></tr></thead>
    <tbody><tr><td>Pro</td><td>$20</td><td>5</td></tr>
           <tr><td colspan="2">Free</td><td>1</td></tr></tbody>
  </table>
  <pre>  line one
    line two</pre>
  <p hidden>Not shown</p>
  <aside>Related links</aside>
  <form><label>Email</label><input></form>
  <footer>Article footnote</footer>
</article>
<footer>Copyright</footer>
</body></html>"""


def _parse(data: bytes, name: str = "plans.html") -> ParsedDocument:
    return parse(data, filename=name, limits=LIMITS)


def _blocks(document: ParsedDocument) -> list[tuple[str, int | None, str]]:
    return [
        (b.kind.value, b.level, document.text[b.span.start : b.span.end]) for b in document.blocks
    ]


def test_page_furniture_is_skipped_and_blocks_follow_the_document() -> None:
    document = _parse(PAGE.encode())
    assert _blocks(document) == [
        ("heading", 1, "Our plans"),
        ("paragraph", None, "Every plan includes support."),
        ("paragraph", None, "Billing is monthly."),
        ("paragraph", None, "Cancel any time."),
        ("list_item", None, "Pro"),
        ("list_item", None, "Priority support"),
        ("list_item", None, "Free"),
        ("heading", 2, "Prices"),
        ("table_row", None, "Plan: Pro; Price: $20; Seats: 5"),
        ("table_row", None, "Plan: Free; Seats: 1"),
        ("code", None, "line one\n    line two"),
        ("paragraph", None, "Article footnote"),
    ]
    assert document.blocks[-1].heading_path == ("Our plans", "Prices")
    for absent in (
        "Home",
        "Site banner",
        "script text",
        "color",
        "Not shown",
        "Related",
        "Email",
        "Copyright",
    ):
        assert absent not in document.text


def test_title_comes_from_the_title_element_else_the_first_h1() -> None:
    assert _parse(PAGE.encode()).title == "Plans & prices"
    assert _parse(b"<html><body><h2>Sub</h2><h1>Main</h1></body></html>").title == "Main"


def test_a_table_without_header_cells_uses_its_first_row_as_header() -> None:
    document = _parse(
        b"<table><tr><td>Plan</td><td>Price</td></tr><tr><td>Pro</td><td>$20</td></tr></table>"
    )
    assert document.text == "Plan: Pro; Price: $20"


def test_meta_charset_decides_the_encoding() -> None:
    data = '<html><head><meta charset="iso-8859-1"></head><body><p>Café señor</p></body></html>'
    assert _parse(data.encode("latin-1")).text == "Café señor"


def test_a_byte_order_mark_beats_the_meta_charset() -> None:
    data = '<html><head><meta charset="iso-8859-1"></head><body><p>中文 niño</p></body></html>'
    assert _parse(codecs.BOM_UTF16_LE + data.encode("utf-16-le")).text == "中文 niño"


def test_undecodable_bytes_are_replaced_not_refused() -> None:
    assert _parse(b"<p>bad \xff byte</p>").text == "bad \ufffd byte"


def test_english_and_spanish_paragraphs_of_a_real_page(documents: Path) -> None:
    path = documents / "docx_html" / "unstructured_eng_spa_mult.html"
    document = _parse(path.read_bytes(), path.name)
    assert [b.kind for b in document.blocks] == [BlockKind.PARAGRAPH] * 5
    texts = [document.text[b.span.start : b.span.end] for b in document.blocks]
    assert all(text == " ".join(text.split()) for text in texts)  # whitespace collapsed
    assert texts[0].startswith(
        "All human beings are born free and equal in dignity and rights. They are endowed"
    )
    assert texts[4] == (
        '"Todos los seres humanos nacen libres e iguales en dignidad y derechos y, dotados como '
        "están de razón y conciencia, deben comportarse fraternalmente los unos con los otros. "
        "Todos los seres humanos nacen libres e iguales en dignidad y derechos y, dotados como "
        'están de razón y conciencia, deben comportarse fraternalmente los unos con los otros."'
    )
    assert document.title is None
