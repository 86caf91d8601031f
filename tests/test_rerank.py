"""Reading the evidence before an answer is written: a question's parts, the candidates read for
each, and the passages reordered by what the reader found (word overlap stands in for the
trained reader here; tests/test_engine_reads.py reads with the trained one)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pytest

from citewell.model import Conflict, DeclineRule, PartReading, SentenceChoice
from citewell.read.base import Scores
from citewell.read.lexical import LexicalReader
from citewell.rerank import context_of, question_parts, read_evidence
from tests.generate.samples import Doc, evidence


@pytest.mark.parametrize(
    "question, parts",
    [
        ("What is our refund policy?", ("What is our refund policy?",)),
        (
            "How much does a membership cost and when is the workshop open?",
            ("How much does a membership cost?", "When is the workshop open?"),
        ),
        (
            "What is the refund window, and do gift cards expire?",
            ("What is the refund window?", "Do gift cards expire?"),
        ),
        ("When was it built? And who built it?", ("When was it built?", "Who built it?")),
        ("¿Cuándo nació? ¿Y dónde murió?", ("¿Cuándo nació?", "¿Dónde murió?")),
        ("¿Qué cuesta y cuándo abre?", ("¿Qué cuesta?", "¿Cuándo abre?")),
        ("他是谁？另外，他在哪里出生？", ("他是谁？", "他在哪里出生？")),
        ("他是谁，另外他在哪里出生？", ("他是谁？", "他在哪里出生？")),
        ("包是怎样路由的另外，DECnet变成了什么", ("包是怎样路由的", "DECnet变成了什么")),
        ("包是怎样路由的另外，DECnet变成了什么？", ("包是怎样路由的？", "DECnet变成了什么？")),
        (
            "Name a cause of immunodeficiency. And which molecule is present during sleep?",
            ("Name a cause of immunodeficiency.", "Which molecule is present during sleep?"),
        ),
        (
            "Dos diferencias entre X.25 y ARPANET ¿Y qué es Internet2?",
            ("Dos diferencias entre X.25 y ARPANET?", "¿Qué es Internet2?"),
        ),
    ],
)
def test_a_question_is_split_where_a_second_question_begins(
    question: str, parts: tuple[str, ...]
) -> None:
    assert question_parts(question) == parts


@pytest.mark.parametrize(
    "question",
    [
        "Who are Tom and Jerry?",
        "Is the frame made of steel and aluminium?",
        "¿Quiénes son Tom y Jerry?",
        "Hi? What is the refund window?",  # a greeting asks nothing of the sources
        "汤姆和杰瑞是谁？",
        "Who were Dr. and Mrs. Smith?",
        "Dime, ¿qué es Internet2?",
        "另外，他在哪里出生？",
    ],
)
def test_and_between_two_things_asked_about_is_not_a_second_question(question: str) -> None:
    assert question_parts(question) == (question,)


SHOP = [
    Doc(["Warranty", "Every frame carries a two-year warranty."], headings=("Warranty",)),
    Doc(
        ["Opening hours", "The shop opens at nine.", "It closes at six."],
        headings=("Opening hours",),
    ),
    Doc(["Membership costs forty euros a year.", "Students pay fifteen."]),
]


def test_each_part_reads_its_best_candidates_and_the_best_read_passage_comes_first() -> None:
    asked = evidence("When does the shop open and how much does membership cost?", SHOP)
    read = read_evidence(asked, LexicalReader(), candidates=2, threshold=0.5)

    # Retrieved warranty, hours, membership; read: membership (0.58), hours (0.53), warranty.
    assert [p.chunk.id for p in read.passages] == ["src_0002:0", "src_0001:0", "src_0000:0"]
    opens, costs = read.reading
    assert (opens.text, costs.text) == (
        "When does the shop open?",
        "How much does membership cost?",
    )

    def texts(part: PartReading) -> list[str]:
        return [read.sentences[number - 1].text for number, _ in part.answers]

    # Two candidates each, best first, ties in retrieval order; headings are never read.
    assert texts(opens) == ["The shop opens at nine.", "Every frame carries a two-year warranty."]
    assert texts(costs) == [
        "Membership costs forty euros a year.",
        "Every frame carries a two-year warranty.",
    ]
    assert opens.answered and costs.answered
    assert opens.answerable == opens.answers[0][1]


def test_a_part_below_the_threshold_is_not_answered() -> None:
    asked = evidence("When does the shop open? And who founded it?", SHOP)
    opens, founded = read_evidence(asked, LexicalReader(), candidates=3, threshold=0.5).reading
    assert opens.answered
    assert not founded.answered and founded.answerable < 0.5


class ChoosingReader(LexicalReader):
    """Word overlap's scores, with a card that trusts the reader first in Spanish."""

    def sentence_choice(self, language: str | None) -> SentenceChoice:
        return SentenceChoice(reader_first=0.4) if language == "es" else SentenceChoice()


def test_the_evidence_read_carries_the_readers_sentence_choice_for_its_language() -> None:
    spanish = evidence("¿Cuándo abre la tienda?", SHOP, language="es")
    english = evidence("When does the shop open?", SHOP, language="en")
    reader = ChoosingReader()
    assert read_evidence(spanish, reader, candidates=2, threshold=0.5).choice == SentenceChoice(
        reader_first=0.4
    )
    assert read_evidence(english, reader, candidates=2, threshold=0.5).choice == SentenceChoice()


class RuledReader(LexicalReader):
    """Word overlap's scores, with a card that needs less of a part word overlap answers too."""

    def decline_rule(self, language: str | None) -> DeclineRule:
        return DeclineRule(worded=0.3, unworded=0.99)


TIMES = [
    Doc(["The shop opens at 9:00 and closes at 18:00."], filename="shop.md"),
    Doc(["The old bridge opened in 1901."], filename="old-bridge.md"),
    Doc(["The new bridge opened in 1950."], filename="new-bridge.md"),
]


def test_without_a_threshold_the_readers_rule_asks_whether_word_overlap_answers_too() -> None:
    # Word overlap answers the first part with a time; the second, two sources answer alike, and
    # its choice between them would be a guess: it declines.
    asked = evidence("When does the shop open, and when did the bridge open?", TIMES)
    opens, bridge = read_evidence(asked, RuledReader(), candidates=3).reading
    assert opens.answered and opens.answerable < 0.99
    assert not bridge.answered and bridge.answerable >= 0.3
    ruled = read_evidence(asked, RuledReader(), candidates=3, threshold=0.25).reading
    assert [part.answered for part in ruled] == [True, True]  # the agent's own threshold


class CountingReader(LexicalReader):
    """Word overlap's scores, remembering every sentence it was asked to score."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[str] = []

    def score_answers(
        self, question: str, sentences: Sequence[str], contexts: Sequence[str] = ()
    ) -> Scores:
        self.read.extend(sentences)
        return super().score_answers(question, sentences, contexts)

    def answerability(
        self, question: str, sentences: Sequence[str], contexts: Sequence[str] = ()
    ) -> float:
        return float(LexicalReader.score_answers(self, question, sentences).max(initial=0.0))


LEAFLETS = [
    Doc([said], filename=f"leaflet-{n}.md")
    for n, said in enumerate(
        [
            "The museum welcomes school groups on weekdays.",
            "The museum shop sells postcards and books.",
            "The museum café serves lunch.",
            "The museum garden is free to visit.",
        ]
    )
] + [Doc(["The museum opens at ten on Sundays."], filename="hours.md")]


def test_the_rest_of_the_candidates_are_read_only_where_the_first_leave_the_part_unanswered() -> (
    None
):
    answered = CountingReader()
    asked = evidence("When does the museum open on Sundays?", LEAFLETS)
    (part,) = read_evidence(asked, answered, candidates=4, read_first=2, threshold=0.5).reading
    assert part.answered and len(part.answers) == 2
    assert len(answered.read) == 2 and answered.read[0] == "The museum opens at ten on Sundays."
    declined = CountingReader()
    asked = evidence("Who founded the museum?", LEAFLETS)
    (part,) = read_evidence(asked, declined, candidates=4, read_first=2, threshold=0.9).reading
    assert not part.answered and len(part.answers) == 4  # read further before declining
    assert declined.read[:2] == declined.read[2:4]  # the first two again, with the next two
    assert len(declined.read) == 6


VOLUNTEERS = "The workshop on Saturdays is run by volunteers."


def test_the_first_stage_reads_distinct_statements_not_one_twice() -> None:
    paragraph = [VOLUNTEERS, "On Saturdays it opens at nine."]
    reader = CountingReader()
    asked = evidence(
        "When does the workshop open on Saturdays?",
        [Doc(paragraph, filename="hours.md"), Doc(paragraph, filename="newsletter.md")],
    )
    (part,) = read_evidence(asked, reader, candidates=4, read_first=2, threshold=0.5).reading
    assert reader.read == paragraph  # the newsletter's copy of the first is not read
    assert part.answered and part.conflict is None


def test_a_part_whose_candidates_another_source_contradicts_is_read_all_at_once() -> None:
    current = Doc([VOLUNTEERS, "On Saturdays it opens at nine."], filename="hours.md")
    older = Doc([VOLUNTEERS, "On Saturdays it opens at ten."], filename="hours-2021.md")
    reader = CountingReader()
    asked = evidence("When does the workshop open on Saturdays?", [current, older])
    (part,) = read_evidence(asked, reader, candidates=4, read_first=2, threshold=0.5).reading
    assert sorted(reader.read) == sorted([*current.sentences, *older.sentences])
    assert part.conflict is not None and part.conflict.values == ("nine", "ten")


def test_a_part_two_dated_sources_answer_differently_carries_their_conflict() -> None:
    leaflet = Doc(
        ["Warranty", "Every frame carries a three-year warranty."],
        headings=("Warranty",),
        filename="leaflet-2023.md",
        effective_date=dt.date(2023, 3, 1),
    )
    handbook = Doc(
        ["Every frame carries a two-year warranty.", "Gift cards never expire."],
        filename="handbook-2025.md",
        effective_date=dt.date(2025, 1, 1),
    )
    asked = evidence(
        "How long is the warranty on a frame? And do gift cards expire?", [leaflet, handbook]
    )
    read = read_evidence(asked, LexicalReader(), candidates=3, threshold=0.5)
    warranty, gift_cards = read.reading
    assert gift_cards.conflict is None  # the other sentences it read do not answer it
    # Numbered as the reordered evidence numbers them: the current handbook's sentence first.
    sentence = {s.number: s.text for s in read.sentences}
    conflict = warranty.conflict
    assert isinstance(conflict, Conflict) and conflict.decided
    assert sentence[conflict.preferred] == "Every frame carries a two-year warranty."
    assert sentence[conflict.other] == "Every frame carries a three-year warranty."
    assert conflict.values == ("two", "three")
    unread = read_evidence(asked, LexicalReader(), candidates=3, threshold=0.5, conflicts=False)
    assert [part.conflict for part in unread.reading] == [None, None]


def test_a_source_denying_what_another_states_is_a_conflict() -> None:
    leaflet = Doc(
        ["Dogs are not allowed in the workshop."],
        filename="leaflet-2023.md",
        effective_date=dt.date(2023, 3, 1),
    )
    handbook = Doc(
        ["Dogs are allowed in the workshop.", "Gift cards never expire."],
        filename="handbook-2025.md",
        effective_date=dt.date(2025, 1, 1),
    )
    asked = evidence("Are dogs allowed in the workshop?", [leaflet, handbook])
    (part,) = read_evidence(asked, LexicalReader(), candidates=3, threshold=0.5).reading
    assert part.conflict is not None and part.conflict.decided
    assert part.conflict.values == ("allowed", "not allowed")


def test_evidence_of_headings_only_is_left_unread() -> None:
    asked = evidence("What are the hours?", [Doc(["Opening hours"], headings=("Opening hours",))])
    assert read_evidence(asked, LexicalReader(), candidates=3, threshold=0.5) == asked


def test_a_sentence_is_read_in_its_sources_title_and_its_sections_headings() -> None:
    asked = evidence(
        "What is the refund window?",
        [
            Doc(
                ["Refunds are paid within 14 days."],
                title="Handbook",
                headings=("Handbook", "Refunds"),
            ),
            Doc(["Shipping is free."]),
        ],
    )
    refunds, shipping = asked.sentences
    assert context_of(asked, refunds) == "Handbook: Refunds"  # the title said once
    assert context_of(asked, shipping) == ""
