"""Markdown: readable text without markup, structure as blocks, tables as self-describing rows."""

from __future__ import annotations

from pathlib import Path

from citewell.config import IngestSettings
from citewell.ingest import parse
from citewell.ingest.base import BlockKind, ParsedDocument

LIMITS = IngestSettings()

SAMPLE = """\
# Pricing *guide*

Plans are billed [monthly](https://example.com/billing) and ![a chart of prices](chart.png)
shown with `code` &amp; entities.

## Plans

- The **Pro** plan
- The Free plan
  continues here

> Quoted advice.

| Plan | Price | Seats |
|------|-------|------:|
| Pro  | $20   | 5     |
| Free |       | 1     |

```python
print("hi")
```

# Second *top* heading
"""


def _parse(source: str, name: str = "guide.md") -> ParsedDocument:
    return parse(source.encode(), filename=name, limits=LIMITS)


def _blocks(document: ParsedDocument) -> list[tuple[str, int | None, tuple[str, ...], str]]:
    return [
        (b.kind.value, b.level, b.heading_path, document.text[b.span.start : b.span.end])
        for b in document.blocks
    ]


def test_markup_is_removed_and_structure_becomes_blocks() -> None:
    document = _parse(SAMPLE)
    assert _blocks(document) == [
        ("heading", 1, (), "Pricing guide"),
        (
            "paragraph",
            None,
            ("Pricing guide",),
            "Plans are billed monthly and a chart of prices\nshown with code & entities.",
        ),
        ("heading", 2, ("Pricing guide",), "Plans"),
        ("list_item", None, ("Pricing guide", "Plans"), "The Pro plan"),
        ("list_item", None, ("Pricing guide", "Plans"), "The Free plan\ncontinues here"),
        ("paragraph", None, ("Pricing guide", "Plans"), "Quoted advice."),
        ("table_row", None, ("Pricing guide", "Plans"), "Plan: Pro; Price: $20; Seats: 5"),
        ("table_row", None, ("Pricing guide", "Plans"), "Plan: Free; Seats: 1"),
        ("code", None, ("Pricing guide", "Plans"), 'print("hi")'),
        ("heading", 1, (), "Second top heading"),
    ]
    assert "https://" not in document.text and "#" not in document.text


def test_title_is_the_first_level_one_heading() -> None:
    assert _parse("intro\n\n## Sub\n\n# Real title\n\n# Later").title == "Real title"
    assert _parse("just text").title is None


def test_raw_html_keeps_its_text_only() -> None:
    document = _parse("<div>Raw <b>HTML</b> block</div>\n<!-- a comment -->\n")
    assert document.text == "Raw HTML block"


def test_a_real_markdown_file_keeps_its_headings_and_table(documents: Path) -> None:
    path = documents / "groundtruth_docling" / "word_sample.docx.md"
    document = parse(path.read_bytes(), filename=path.name, limits=LIMITS)
    headings = [
        (b.level, document.text[b.span.start : b.span.end])
        for b in document.blocks
        if b.kind is BlockKind.HEADING
    ]
    assert headings == [(1, "Swimming in the lake"), (2, "Let’s swim!"), (3, "Let’s eat")]
    rows = [
        document.text[b.span.start : b.span.end]
        for b in document.blocks
        if b.kind is BlockKind.TABLE_ROW
    ]
    assert rows == [
        "Leaves; Food: Ash, Elm, Maple; Calories per portion: 50",
        "Berries; Food: Blueberry, Strawberry, Cranberry; Calories per portion: 150",
        "Grain; Food: Corn, Buckwheat, Barley; Calories per portion: 200",
    ]
    items = [b for b in document.blocks if b.kind is BlockKind.LIST_ITEM]
    assert len(items) == 9
    assert "<!-- image -->" not in document.text
