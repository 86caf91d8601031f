"""Lists in the evidence: a sentence ending with a colon introduces the blocks of one sentence
that follow it, while they end alike."""

from __future__ import annotations

from citewell.generate.lists import list_items
from tests.generate.samples import Doc, evidence

BRING = Doc(
    [
        "Before your first visit, please bring the following:",
        "your membership card",
        "a bicycle that is clean enough to work on",
        "closed shoes",
    ],
    separator="\n\n",
)


def test_a_lead_in_introduces_the_blocks_that_follow_it() -> None:
    assert list_items(evidence("What should I bring?", [BRING]), 0, most=8) == (1, 2, 3)


def test_a_sentence_without_a_colon_introduces_nothing() -> None:
    assert list_items(evidence("What should I bring?", [BRING]), 1, most=8) == ()


def test_the_paragraph_after_a_list_ends_otherwise_and_is_not_an_item() -> None:
    after = Doc([*BRING.sentences, "Lost cards are replaced at the front desk."], separator="\n\n")
    assert list_items(evidence("What should I bring?", [after]), 0, most=8) == (1, 2, 3)


def test_items_that_are_sentences_end_alike_and_so_are_read_as_items() -> None:
    steps = Doc(
        ["To book the stand:", "Ask a mechanic.", "Write your name on the board.", "Then wait"],
        separator="\n\n",
    )
    assert list_items(evidence("How do I book the stand?", [steps]), 0, most=8) == (1, 2)


def test_sentences_of_one_paragraph_are_not_items() -> None:
    prose = Doc(BRING.sentences)  # joined by spaces: one paragraph
    assert list_items(evidence("What should I bring?", [prose]), 0, most=8) == ()


def test_a_list_in_another_passage_is_not_this_lead_ins() -> None:
    lead = Doc(BRING.sentences[:1])
    items = Doc(BRING.sentences[1:], separator="\n\n", filename="other.md")
    assert list_items(evidence("What should I bring?", [lead, items]), 0, most=8) == ()


def test_a_list_longer_than_can_be_said_is_not_read_as_the_answer() -> None:
    assert list_items(evidence("What should I bring?", [BRING]), 0, most=2) == ()
