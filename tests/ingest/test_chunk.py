"""Chunking: sections, tables, pages, word budgets, and the text given to embedders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from citewell.ingest.base import BlockKind, DocumentBuilder, ParsedDocument
from citewell.ingest.chunk import chunk_document, chunk_text_for_embedding
from citewell.ingest.segment import sentence_spans
from citewell.language import count_words
from citewell.model import ChunkDraft, Span

H, P, ROW, REC = BlockKind.HEADING, BlockKind.PARAGRAPH, BlockKind.TABLE_ROW, BlockKind.RECORD


def _build(*blocks: tuple[BlockKind, str] | tuple[BlockKind, str, int]) -> ParsedDocument:
    builder = DocumentBuilder()
    for kind, text, *level in blocks:
        builder.add_block(kind, text, level=level[0] if level else None)
    return builder.build()


def _chunks(doc: ParsedDocument, max_words: int = 50) -> tuple[ChunkDraft, ...]:
    return chunk_document(doc, sentence_spans(doc.text, doc.blocks), max_words=max_words)


def _text(doc: ParsedDocument, chunk: ChunkDraft) -> str:
    return doc.text[chunk.span.start : chunk.span.end]


# -- sections --------------------------------------------------------------------------------


def test_heading_opens_its_chunk_and_is_its_last_heading() -> None:
    doc = _build(
        (P, "A preface before any heading."),
        (H, "Refunds", 1),
        (P, "Refunds are paid within 30 days."),
        (H, "Late returns", 2),
        (P, "Late returns get store credit."),
    )
    chunks = _chunks(doc)
    assert [_text(doc, c) for c in chunks] == [
        "A preface before any heading.",
        "Refunds\n\nRefunds are paid within 30 days.",
        "Late returns\n\nLate returns get store credit.",
    ]
    assert [c.heading_path for c in chunks] == [(), ("Refunds",), ("Refunds", "Late returns")]


def test_chunks_never_cross_a_change_of_section() -> None:
    doc = _build(
        (H, "One", 1),
        (P, "Short."),
        (H, "Two", 1),
        (P, "Also short."),
        (H, "Two point one", 2),
        (P, "Tiny."),
        (H, "Three", 1),
        (P, "Last."),
    )
    assert [_text(doc, c) for c in _chunks(doc, max_words=1000)] == [
        "One\n\nShort.",
        "Two\n\nAlso short.",
        "Two point one\n\nTiny.",
        "Three\n\nLast.",
    ]


def test_a_heading_directly_followed_by_a_sub_heading_shares_its_chunk() -> None:
    doc = _build((H, "Chapter 1", 1), (H, "Section 1.1", 2), (P, "Text of the section."))
    (chunk,) = _chunks(doc)
    assert _text(doc, chunk) == "Chapter 1\n\nSection 1.1\n\nText of the section."
    assert chunk.heading_path == ("Chapter 1", "Section 1.1")


def test_a_heading_without_content_before_a_sibling_is_a_chunk_of_its_own() -> None:
    doc = _build((H, "Empty", 1), (H, "Full", 1), (P, "Content."))
    assert [_text(doc, c) for c in _chunks(doc)] == ["Empty", "Full\n\nContent."]


def test_heading_path_uses_the_heading_with_its_whitespace_collapsed() -> None:
    doc = _build((H, "Terms  and\nconditions", 1), (P, "Read them."))
    assert _chunks(doc)[0].heading_path == ("Terms and conditions",)


# -- tables and records --------------------------------------------------------------------------


def test_table_rows_are_grouped_but_never_mixed_with_prose() -> None:
    doc = _build(
        (P, "Prices are listed below."),
        (ROW, "Item | Price"),
        (ROW, "Tea | 3.50"),
        (ROW, "Coffee | 4.00"),
        (P, "Prices include tax."),
    )
    assert [_text(doc, c) for c in _chunks(doc, max_words=1000)] == [
        "Prices are listed below.",
        "Item | Price\n\nTea | 3.50\n\nCoffee | 4.00",
        "Prices include tax.",
    ]


def test_a_heading_opens_the_chunk_of_the_table_under_it() -> None:
    doc = _build((H, "Prices", 1), (ROW, "Tea | 3.50"), (REC, "name: Coffee; price: 4.00"))
    (chunk,) = _chunks(doc)
    assert _text(doc, chunk) == "Prices\n\nTea | 3.50\n\nname: Coffee; price: 4.00"


def test_table_rows_split_between_chunks_at_the_word_budget() -> None:
    rows = [(ROW, f"row {i} | value {i}") for i in range(10)]  # 4 words each
    doc = _build(*rows)
    chunks = _chunks(doc, max_words=12)
    assert [len(c.sentences) for c in chunks] == [3, 3, 3, 1]


# -- sizes -------------------------------------------------------------------------------------


def test_paragraphs_are_packed_greedily_up_to_max_words() -> None:
    doc = _build(
        (P, "one two three four five"),
        (P, "six seven eight nine ten"),
        (P, "eleven twelve thirteen"),
    )
    chunks = _chunks(doc, max_words=10)
    assert [_text(doc, c) for c in chunks] == [
        "one two three four five\n\nsix seven eight nine ten",
        "eleven twelve thirteen",
    ]


def test_a_paragraph_that_does_not_fit_starts_a_new_chunk() -> None:
    doc = _build((P, "one two three four five six"), (P, "a b c d e f g"))
    assert [len(c.sentences) for c in _chunks(doc, max_words=10)] == [1, 1]


def test_a_long_paragraph_splits_at_sentence_boundaries() -> None:
    sentence = "This sentence has exactly seven words."
    doc = _build((P, " ".join([sentence] * 5)))
    chunks = _chunks(doc, max_words=15)
    assert [len(c.sentences) for c in chunks] == [2, 2, 1]
    for chunk in chunks:
        assert _text(doc, chunk) == " ".join([sentence] * len(chunk.sentences))


def test_a_single_oversize_sentence_is_a_chunk_of_its_own() -> None:
    doc = _build((P, "Short one. Long" + " word" * 30 + ". Another short one."))
    chunks = _chunks(doc, max_words=10)
    assert [len(c.sentences) for c in chunks] == [1, 1, 1]
    assert count_words(_text(doc, chunks[1])) == 31


def test_chinese_characters_count_as_half_a_word() -> None:
    sentence = "北京是中华人民共和国的首都。"  # 13 Han characters: 6.5 words
    doc = _build((P, sentence * 4))
    assert [len(c.sentences) for c in _chunks(doc, max_words=13)] == [2, 2]
    assert [len(c.sentences) for c in _chunks(doc, max_words=12)] == [1, 1, 1, 1]


def test_chunk_language_is_detected_from_its_own_text() -> None:
    doc = _build(
        (H, "English", 1),
        (P, "The store is open on all of the days of the week."),
        (H, "Español", 1),
        (P, "La tienda está abierta todos los días de la semana."),
        (H, "中文", 1),
        (P, "商店每周每天都开门。"),
    )
    assert [c.language for c in _chunks(doc)] == ["en", "es", "zh"]


# -- pages ---------------------------------------------------------------------------------------


def test_page_numbers_of_a_chunk_crossing_a_page_break() -> None:
    builder = DocumentBuilder()
    builder.start_page(1, width=612, height=792)
    builder.add_block(P, "First page only.")
    builder.add_block(P, "This paragraph starts on page one")
    builder.end_page()
    builder.start_page(2, width=612, height=792, label="ii")
    builder.extend_block(" and ends on page two.")
    builder.add_block(H, "Next section", level=1)
    builder.add_block(P, "On page two.")
    builder.end_page()
    doc = builder.build()
    chunks = _chunks(doc, max_words=10)
    assert [(_text(doc, c), c.page_numbers) for c in chunks] == [
        ("First page only.", (1,)),
        ("This paragraph starts on page one and ends on page two.", (1, 2)),
        ("Next section\n\nOn page two.", (2,)),
    ]


def test_no_page_numbers_without_pages() -> None:
    assert _chunks(_build((P, "No pages here.")))[0].page_numbers == ()


# -- contract ------------------------------------------------------------------------------------


def test_chunk_span_runs_from_its_first_to_its_last_sentence() -> None:
    doc = _build((P, "One. Two."), (P, "Three."))
    (chunk,) = _chunks(doc)
    assert chunk.span == Span(start=chunk.sentences[0].start, end=chunk.sentences[-1].end)
    assert chunk.sentences == sentence_spans(doc.text, doc.blocks)


def test_sentences_outside_every_block_are_refused() -> None:
    doc = _build((P, "Inside."))
    with pytest.raises(ValueError, match="inside one block"):
        chunk_document(doc, [Span(start=0, end=len(doc.text) + 1)], max_words=10)


def test_empty_document_has_no_chunks() -> None:
    assert _chunks(_build()) == ()


@pytest.mark.parametrize("language", ["en", "es", "zh"])
@pytest.mark.parametrize("max_words", [12, 60, 180])
def test_real_documents_chunk_every_sentence_once_within_budget(
    evaldata: Path, language: str, max_words: int
) -> None:
    data = json.loads((evaldata / "xquad_r" / f"{language}.json").read_text(encoding="utf-8"))
    builder = DocumentBuilder()
    for article in data["data"]:
        builder.add_block(H, article["title"], level=1)
        for paragraph in article["paragraphs"]:
            builder.add_block(P, paragraph["context"])
    doc = builder.build()
    sentences = sentence_spans(doc.text, doc.blocks)
    chunks = chunk_document(doc, sentences, max_words=max_words)
    assert tuple(s for c in chunks for s in c.sentences) == sentences
    assert all(a.span.end <= b.span.start for a, b in zip(chunks, chunks[1:], strict=False))
    for chunk in chunks:
        assert len(chunk.heading_path) == 1
        assert count_words(_text(doc, chunk)) <= max_words or len(chunk.sentences) == 1
    assert {c.language for c in chunks if len(_text(doc, c)) > 200} == {language}


# -- the text embedded -------------------------------------------------------------------------


def test_embedding_text_puts_the_section_before_the_chunk() -> None:
    text = chunk_text_for_embedding("Late returns get credit.", ("Refunds", "Late returns"))
    assert text == "Refunds > Late returns\nLate returns get credit."


def test_embedding_text_does_not_repeat_the_heading_the_chunk_opens_with() -> None:
    path = ("Refunds", "Late returns")
    assert chunk_text_for_embedding("Late returns\n\nGet credit.", path) == (
        "Refunds\nLate returns\n\nGet credit."
    )
    assert chunk_text_for_embedding("Refunds\n\nLate returns\n\nGet credit.", path) == (
        "Refunds\n\nLate returns\n\nGet credit."
    )


def test_embedding_text_repeats_a_heading_that_only_begins_the_first_sentence() -> None:
    text = chunk_text_for_embedding("Returns are free.", ("Returns",))
    assert text == "Returns\nReturns are free."


def test_embedding_text_without_headings_is_the_chunk_text() -> None:
    assert chunk_text_for_embedding("Just text.", ()) == "Just text."
