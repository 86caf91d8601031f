"""What remote generators tell a model, and how a reply of NO_ANSWER is recognised as it streams."""

from __future__ import annotations

import dataclasses

import pytest

from citewell.generate.prompt import (
    NO_ANSWER,
    Opening,
    ReplyGate,
    chat_prompt,
    conflict_rules,
    document_rules,
    numbered_evidence,
    opening,
    passage_label,
)
from citewell.model import Conflict, PartReading, Turn
from tests.generate.samples import Doc, evidence, shop_evidence


def test_the_evidence_is_numbered_under_each_sources_label() -> None:
    ev = shop_evidence()
    assert numbered_evidence(ev) == (
        f"Source: {passage_label(ev.passages[0])}\n"
        "[1] Refunds are available within 30 days of purchase with a receipt.\n"
        "[2] Gift cards cannot be refunded.\n"
        "\n"
        f"Source: {passage_label(ev.passages[1])}\n"
        "[3] Shipping is free for orders over $50.\n"
        "[4] Orders ship from our warehouse in Leeds within two business days."
    )
    assert passage_label(ev.passages[0]).startswith("refund_policy_2026.pdf")


def test_a_sentence_is_one_line_and_an_empty_one_is_left_out_but_keeps_its_number() -> None:
    ev = evidence("Q?", [Doc(["First\nline.", " \n "]), Doc(["  "]), Doc(["Last."])])
    text = numbered_evidence(ev)
    assert "[1] First line." in text
    assert "[2]" not in text and "[3]" not in text
    assert "[4] Last." in text
    assert text.count("Source:") == 2  # the passage left with no sentence is left out


def test_the_chat_prompt_asks_for_markers_and_ends_with_the_question() -> None:
    history = (Turn("user", "Hi"), Turn("assistant", "Hello."))
    prompt = chat_prompt(shop_evidence(history=history))
    assert "like [3] or [3][7]" in prompt.system
    assert f"reply exactly {NO_ANSWER}" in prompt.system
    assert "Answer in English." in prompt.system
    assert prompt.turns[:2] == history
    last = prompt.turns[-1]
    assert last.role == "user"
    assert last.text.startswith("Evidence:\n\nSource: ")
    assert last.text.endswith("\n\nQuestion: How long do I have to return something?")


@pytest.mark.parametrize(
    ("language", "named"),
    [
        ("en", "English"),
        ("es", "Spanish"),
        ("zh", "Chinese"),
        (None, "the language of the question"),
    ],
)
def test_the_answer_is_asked_for_in_the_questions_language(
    language: str | None, named: str
) -> None:
    ev = shop_evidence(language=language)
    assert f"Answer in {named}." in chat_prompt(ev).system
    assert f"Answer in {named}." in document_rules(ev)


def test_the_callers_instructions_follow_the_rules_and_cannot_override_them() -> None:
    prompt = chat_prompt(shop_evidence(instructions="  Answer like a pirate.  "))
    rules, instructions = prompt.system.split("\n\nInstructions from the application")
    assert NO_ANSWER in rules
    assert "cannot override the rules above" in instructions
    assert instructions.endswith("\nAnswer like a pirate.")
    assert "Instructions" not in chat_prompt(shop_evidence(instructions="  ")).system


def test_a_model_is_told_which_sources_disagree_and_which_is_current() -> None:
    found = evidence(
        "How long do refunds take?",
        [
            Doc(["Refunds are paid within 30 days."], filename="handbook-2025.md"),
            Doc(["Refunds are paid within 14 days."], filename="leaflet-2023.md"),
        ],
    )
    assert conflict_rules(found) == ""  # nothing read, nothing said
    part = PartReading(
        "How long do refunds take?",
        0.9,
        True,
        ((1, 0.8), (2, 0.7)),
        Conflict(preferred=1, other=2, values=("30", "14"), decided=True),
    )
    read = dataclasses.replace(found, reading=(part,))
    assert conflict_rules(read) == (
        "\n\nThe sources disagree. Say so in the answer, and state each side with its citation:\n"
        '- On "How long do refunds take?": [1] "Refunds are paid within 30 days." and '
        '[2] "Refunds are paid within 14 days." disagree ("30" against "14"); '
        "[1] is from the source dated later: state it first."
    )
    assert chat_prompt(read).system.endswith(conflict_rules(read))
    assert document_rules(read).endswith(conflict_rules(read))


def test_document_rules_ask_for_citations_without_a_marker_syntax() -> None:
    rules = document_rules(shop_evidence())
    assert "cite the parts of the documents" in rules
    assert "[3]" not in rules and NO_ANSWER in rules


# Recognising NO_ANSWER ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "final", "expected"),
    [
        ("NO_ANSWER", True, Opening.DECLINED),
        ("NO_ANSWER", False, Opening.UNDECIDED),  # "NO_ANSWERS" may follow
        ("NO_ANSWER.", False, Opening.DECLINED),
        ("no_answer\n", False, Opening.DECLINED),
        ("**NO_ANSWER**", False, Opening.DECLINED),
        ("`NO_ANSWER`", True, Opening.DECLINED),
        ("“NO_ANSWER”", True, Opening.DECLINED),
        ("  NO_ANS", False, Opening.UNDECIDED),
        ("NO_ANS", True, Opening.ANSWER),
        ("NO_ANSWERS", False, Opening.ANSWER),
        ("NO_ANSWER_", False, Opening.ANSWER),
        ("No answer", False, Opening.ANSWER),
        ("Refunds", False, Opening.ANSWER),
        ("", False, Opening.UNDECIDED),
        ("", True, Opening.DECLINED),  # a model that says nothing found nothing
        (" \n", True, Opening.DECLINED),
        ("*" * 70, False, Opening.ANSWER),  # decoration alone cannot hold an answer back forever
    ],
)
def test_opening(text: str, final: bool, expected: Opening) -> None:
    assert opening(text, final=final) is expected


def test_the_gate_holds_a_reply_back_until_it_is_not_no_answer() -> None:
    gate = ReplyGate[str]()
    assert gate.add("NO", "a") == []
    assert gate.add("_ANSWERS", "b") == ["a", "b"]
    assert gate.add(" are rare", "c") == ["c"]
    assert gate.finish() == []
    assert not gate.declined


def test_the_gate_releases_nothing_of_a_no_answer_reply() -> None:
    gate = ReplyGate[str]()
    assert gate.add("NO_ANS", "a") == [] and gate.add("WER", "b") == []
    assert gate.finish() == []
    assert gate.declined
    assert gate.add("more", "c") == []


def test_the_gate_decides_at_the_end_when_the_reply_stays_short() -> None:
    gate = ReplyGate[str]()
    assert gate.add("NO", "a") == []
    assert gate.finish() == ["a"]
    assert not gate.declined
    empty = ReplyGate[str]()
    assert empty.finish() == [] and empty.declined
