"""Which sentences of a passage best match a query."""

from __future__ import annotations

import math

import pytest

from citewell.model import Chunk, Span
from citewell.retrieve.sentences import rank_sentences


def chunk(text: str, language: str, offset: int = 100) -> Chunk:
    """A chunk at ``offset`` in its source whose sentences are its lines."""
    spans, start = [], 0
    for line in text.split("\n"):
        spans.append(Span(start=offset + start, end=offset + start + len(line)))
        start += len(line) + 1
    return Chunk(
        id="chk_1",
        source_id="src_1",
        index=0,
        span=Span(start=offset, end=offset + len(text)),
        text=text,
        sentences=tuple(spans),
        language=language,
    )


def test_the_sentence_with_the_rare_query_word_ranks_first() -> None:
    passage = chunk(
        "Our store opens at nine.\nRefunds are possible within 30 days.\nOur store closes at six.",
        "en",
    )
    ranked = rank_sentences("when does the store give refunds", passage)
    # Query terms: when, doe, store, give, refund. "store" is in two sentences, "refund" in one,
    # the rest in none: weights log(1 + 4/3), log 3 and log 5 (three times).
    total = math.log(1 + 4 / 3) + math.log(3) + 3 * math.log(5)
    assert ranked == [
        (Span(start=125, end=161), pytest.approx(math.log(3) / total)),
        (Span(start=100, end=124), pytest.approx(math.log(1 + 4 / 3) / total)),
        (Span(start=162, end=186), pytest.approx(math.log(1 + 4 / 3) / total)),
    ]


def test_stems_meet_across_word_forms() -> None:
    passage = chunk("El museo abre a las nueve.\nLos reembolsos se tramitan en 30 días.", "es")
    assert rank_sentences("¿cómo pido un reembolso?", passage)[0][0] == Span(start=127, end=165)


def test_chinese_query_words_are_found_inside_unsegmented_sentences() -> None:
    passage = chunk("商店九点开门。\n购买后三十天内可以退款。\n商店六点关门。", "zh", offset=0)
    ranked = rank_sentences("退款期限是多久", passage)  # terms: 退款, 期限, 多久
    total = math.log(3) + 2 * math.log(5)
    assert ranked == [
        (Span(start=8, end=20), pytest.approx(math.log(3) / total)),
        (Span(start=0, end=7), 0.0),
        (Span(start=21, end=28), 0.0),
    ]


def test_on_a_tie_the_sentence_beats_the_heading_that_names_its_topic() -> None:
    passage = chunk("Refunds\nRefunds are paid within thirty days.", "en", offset=0)
    ranked = rank_sentences("refunds", passage)
    assert [span for span, _ in ranked] == [Span(start=8, end=44), Span(start=0, end=7)]
    assert ranked[0][1] == ranked[1][1] > 0


def test_a_query_sharing_nothing_scores_every_sentence_zero_in_text_order() -> None:
    passage = chunk("Alpha.\nBeta.", "en", offset=0)
    assert rank_sentences("gamma", passage) == [
        (Span(start=0, end=6), 0.0),
        (Span(start=7, end=12), 0.0),
    ]
