"""The rendered text: flat or marked, with or without the sources appendix, offsets exact."""

from __future__ import annotations

import pytest

from citewell.model import Answer, GroundingState
from citewell.render.common import AnswerOptions, TextBuilder, appendix_text, count_tokens, layout
from tests.render.conftest import FIRST, SECOND, TEXT, make_answer


def options(**overrides: object) -> AnswerOptions:
    return AnswerOptions(id="x", model="citewell-agent", created_at=0, **overrides)  # type: ignore[arg-type]


def claims(text: str, starts_ends: list[tuple[int, int]]) -> list[str]:
    return [text[start:end] for start, end in starts_ends]


def test_native_text_stays_flat_and_each_citation_covers_its_claim(answer: Answer) -> None:
    rendered = layout(answer, options())
    assert rendered.text == TEXT
    assert [(a.start, a.end, a.citation.source_index) for a in rendered.anchors] == [
        (0, len(FIRST), 1),
        (len(FIRST) + 1, len(TEXT), 1),
        (len(FIRST) + 1, len(TEXT), 2),
    ]


def test_legacy_markers_follow_each_claim_and_shift_later_offsets(answer: Answer) -> None:
    rendered = layout(answer, options(citation_compat="legacy"))
    assert rendered.text == f"{FIRST}[1] {SECOND}[1][2]"
    spans = [(a.start, a.end) for a in rendered.anchors]
    assert claims(rendered.text, spans) == [FIRST, SECOND, SECOND]
    assert spans[1] == (len(FIRST) + 4, len(FIRST) + 4 + len(SECOND))


def test_the_appendix_lists_each_source_with_where_it_is_cited(answer: Answer) -> None:
    appendix = "\n\nSources:\n[1] refund_policy_2026.pdf (p. 4)\n[2] warranty.md (§ Warranty)"
    assert appendix_text(answer, options(sources_appendix="include")) == appendix
    rendered = layout(answer, options(sources_appendix="include"))
    assert rendered.text == TEXT + appendix
    assert [(a.start, a.end) for a in rendered.anchors] == [
        (a.start, a.end) for a in layout(answer, options()).anchors
    ]


@pytest.mark.parametrize("compat", ["native", "legacy"])
def test_a_hidden_answer_shows_no_marker_citation_or_appendix(compat: str) -> None:
    hidden = make_answer(GroundingState.HIDDEN)
    rendered = layout(
        hidden,
        options(citation_compat=compat, sources_appendix="include", show_sources=False),
    )
    assert (rendered.text, rendered.anchors) == (TEXT, ())


def test_the_builder_holds_legacy_text_back_until_its_claim_is_done(answer: Answer) -> None:
    builder = TextBuilder(legacy=True, show_sources=True)
    assert builder.add(FIRST) == ""
    piece, anchors = builder.claim(answer.claims[0].span, answer.citations[:1])
    assert (piece, [(a.start, a.end) for a in anchors]) == (f"{FIRST}[1]", [(0, len(FIRST))])
    assert builder.add(f" {SECOND}") == ""
    assert builder.finish("\n\nSources:") == f" {SECOND}\n\nSources:"


def test_tokens_are_words_marks_and_cjk_characters() -> None:
    assert count_tokens("Refunds take 30 days.") == 5
    assert count_tokens("退款需要三十天") == 7
    assert count_tokens(None) == 0
