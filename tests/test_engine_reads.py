"""The engine with the trained reader: it reads the evidence before any generator, answers each
part of a question it finds answered, declines by the agent's threshold before a generator can
guess, keeps what it read in the trace, and verifies citations with the reader's support head."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from citewell.config import ReadSettings, RetrieveSettings, Settings
from citewell.engine import Engine
from citewell.events import Completed, Draft, Question, Retrieved, TextPiece
from citewell.library import Library
from citewell.model import Agent, Answer, Evidence, GroundingState, Principal
from citewell.read.cross_encoder import ReaderCard
from citewell.read.verifier import ReaderVerifier
from tests.test_engine import Scripted, number

pytestmark = pytest.mark.slow

HANDBOOK = (
    "# Membership\n\nMembership costs forty euros a year. Students pay fifteen euros.\n\n"
    "# Opening hours\n\nThe workshop opens at five in the evening on weekdays. "
    "On Saturdays it is open from ten to four.\n\n"
    "# Refunds\n\nA membership is refunded in full within fourteen days of payment."
)
GUIDE = (
    "# What to bring\n\nBefore your first visit, please bring the following:\n\n"
    "- your membership card\n- a bicycle that is clean enough to work on\n- closed shoes\n\n"
    "# Lost cards\n\nA lost membership card is replaced for five euros at the front desk.\n"
)
LOCAL = Principal.local()


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("data"),
        retrieve=RetrieveSettings(embedder="use", threads=1),
        read=ReadSettings(reader="citewell-reader", threads=1),
    )
    with Library.open(settings) as library:
        library.create_bucket("handbook")
        library.ingest(HANDBOOK.encode(), filename="handbook.md", bucket="handbook")
        library.create_bucket("guide")
        library.ingest(GUIDE.encode(), filename="guide.md", bucket="guide")
        yield library


@pytest.fixture(scope="module")
def engine(library: Library) -> Engine:
    return Engine.open(library)


def ask(engine: Engine, question: str, **policy: object) -> tuple[list[object], Answer]:
    agent = Agent(**policy)  # type: ignore[arg-type]

    async def collect() -> list[object]:
        return [e async for e in engine.stream(Question(question), agent=agent, principal=LOCAL)]

    events = anyio.run(collect)
    completed = events[-1]
    assert isinstance(completed, Completed)
    return events, completed.answer


def test_the_engine_reads_with_the_trained_reader_and_verifies_with_its_support_head(
    engine: Engine,
) -> None:
    assert engine.reader is not None and engine.reader.trained
    assert isinstance(engine.verifier, ReaderVerifier)


def test_a_lists_lead_in_is_answered_with_its_items_each_cited(engine: Engine) -> None:
    # Markdown's bullets are dropped from the canonical text; each item is a block of its own.
    _, answer = ask(engine, "What should I bring on my first visit?", bucket_ids=("guide",))
    items = [
        "your membership card",
        "a bicycle that is clean enough to work on",
        "closed shoes",
    ]
    assert answer.text == "\n".join(
        ["Before your first visit, please bring the following:", *items]
    )
    assert [c.cited_text for c in answer.citations] == [
        "Before your first visit, please bring the following:",
        *items,
    ]


def test_each_part_of_a_question_is_answered_by_its_own_cited_sentence(engine: Engine) -> None:
    events, answer = ask(
        engine,
        "How much does membership cost and when does the workshop open?",
        answerable_threshold=0.0,  # every part answered: which sentence is the reader's choice
    )
    assert answer.text == (
        "Membership costs forty euros a year. "
        "The workshop opens at five in the evening on weekdays."
    )
    assert [c.cited_text for c in answer.citations] == [
        "Membership costs forty euros a year.",
        "The workshop opens at five in the evening on weekdays.",
    ]
    parts = answer.trace.question_parts  # "How much does membership cost?", "When does ...?"
    assert len(parts) == 2 and all(p.answered for p in parts)
    # What was read is kept with its scores, best first within each part; the passages the
    # stream announced are the ones the answer holds, best-read first.
    read = answer.trace.read_sentences
    assert {r.part for r in read} == {0, 1}
    for part in (0, 1):
        scores = [r.answers for r in read if r.part == part]
        assert scores == sorted(scores, reverse=True)
        assert len(scores) <= engine.library.settings.read.candidates
    assert set(answer.trace.cited_chunk_ids) <= {r.chunk_id for r in read}
    assert events[0] == Retrieved(answer.passages, answer.question)


def test_below_the_threshold_the_reader_declines_before_a_generator_that_cannot_judge(
    engine: Engine,
) -> None:
    asked: list[str] = []

    def guessing(evidence: Evidence) -> list[Draft]:
        asked.append(evidence.question)
        return [TextPiece(f"Membership costs forty euros [{number(evidence, 'forty')}].")]

    engine.generators["guessing"] = Scripted(guessing, judges_answerability=False)
    _, answer = ask(
        engine, "How much does membership cost?", generator="guessing", answerable_threshold=1.0
    )
    assert asked == []
    assert answer.declined and answer.grounding is GroundingState.MISSING
    assert answer.text == "The available sources do not answer this question."
    (part,) = answer.trace.question_parts
    assert not part.answered and part.answerable < 1.0

    _, answered = ask(
        engine, "How much does membership cost?", generator="guessing", answerable_threshold=0.0
    )
    assert asked == ["How much does membership cost?"] and not answered.declined


def test_a_generator_that_judges_decides_itself_unless_the_agent_leaves_it_to_the_reader(
    engine: Engine,
) -> None:
    seen: list[Evidence] = []

    def model(evidence: Evidence) -> list[Draft]:
        seen.append(evidence)
        return [TextPiece(f"Membership costs forty euros [{number(evidence, 'forty')}].")]

    engine.generators["model"] = Scripted(model)
    question = "How much does membership cost?"
    _, answer = ask(engine, question, generator="model", answerable_threshold=1.0)
    # The reader found the part unanswered, and says so in the trace; the model answered.
    assert [p.answered for p in answer.trace.question_parts] == [False]
    assert answer.text == "Membership costs forty euros."
    assert [c.cited_text for c in answer.citations] == ["Membership costs forty euros a year."]
    # It got the evidence best-read first: the membership passage before the others.
    (evidence,) = seen
    assert "forty euros" in evidence.passages[0].chunk.text

    _, vetoed = ask(
        engine, question, generator="model", answerable_threshold=1.0, declined_by="reader"
    )
    assert len(seen) == 1 and vetoed.declined


def test_the_extractive_generator_left_to_decide_still_answers_only_what_the_reader_found(
    engine: Engine,
) -> None:
    question = "How much does membership cost?"
    _, answer = ask(engine, question, answerable_threshold=1.0, declined_by="generator")
    assert answer.declined  # it copies what the reader found answered; here, nothing


def test_without_a_threshold_of_its_own_an_agent_declines_at_the_readers_card(
    engine: Engine,
) -> None:
    assert engine.reader is not None
    rule = engine.reader.decline_rule("en")
    _, answer = ask(engine, "How much does membership cost?")
    (part,) = answer.trace.question_parts
    assert part.answered == rule.answers(part.answerable, worded=True)  # word overlap answers it
    _, stricter = ask(engine, "How much does membership cost?", answerable_threshold=1.0)
    (strict_part,) = stricter.trace.question_parts
    # Declined at the agent's own threshold, after reading further: more sentences, never less.
    assert strict_part.answerable >= part.answerable and not strict_part.answered
    assert stricter.declined


def test_a_citation_that_contradicts_its_claim_is_dropped_by_the_reader(engine: Engine) -> None:
    def claims(evidence: Evidence) -> list[Draft]:
        costs = number(evidence, "forty euros")
        return [
            TextPiece(f"Membership costs forty euros a year [{costs}]. "),
            TextPiece(f"The workshop is closed on Saturdays [{number(evidence, 'Saturdays')}]."),
        ]

    engine.generators["claiming"] = Scripted(claims)
    _, answer = ask(
        engine, "What does membership cost, and is it open on Saturdays?", generator="claiming"
    )
    kept, dropped = answer.claims
    assert kept.supported and not dropped.supported
    assert [c.cited_text for c in answer.citations] == ["Membership costs forty euros a year."]
    verdicts = {v.claim_index: v for v in answer.trace.verdicts}
    assert verdicts[0].support == 1.0  # quoted verbatim: supported without reading
    assert verdicts[1].support < engine.verifier.threshold("en") and not verdicts[1].kept


def test_a_models_paraphrase_keeps_its_citation_at_the_threshold_of_the_readers_card(
    engine: Engine,
) -> None:
    def claims(evidence: Evidence) -> list[Draft]:
        refunds = number(evidence, "refunded in full")
        return [TextPiece(f"Memberships are fully refundable for fourteen days [{refunds}]. ")]

    engine.generators["paraphrasing"] = Scripted(claims)
    question = "Can I get my membership refunded?"
    _, answer = ask(engine, question, generator="paraphrasing", bucket_ids=("handbook",))
    (verdict,) = answer.trace.verdicts
    threshold = engine.verifier.threshold("en")
    assert threshold == ReaderCard.shipped().supports["en"]
    assert threshold <= verdict.support < 0.4 and verdict.kept
    assert [c.cited_text for c in answer.citations] == [
        "A membership is refunded in full within fourteen days of payment."
    ]
    # At 0.4, the lexical verifier's threshold, the reader would drop it, and with it the answer.
    _, stricter = ask(
        engine, question, generator="paraphrasing", bucket_ids=("handbook",), support_threshold=0.4
    )
    assert not stricter.citations and stricter.declined


def test_a_claim_that_changes_a_number_of_its_source_is_unsupported_outright(
    engine: Engine,
) -> None:
    def claims(evidence: Evidence) -> list[Draft]:
        refunds = number(evidence, "refunded in full")
        return [
            TextPiece(
                f"A membership is refunded in full within thirty days of payment [{refunds}]. "
            )
        ]

    engine.generators["miscounting"] = Scripted(claims)
    _, answer = ask(
        engine,
        "Can I get my membership refunded?",
        generator="miscounting",
        bucket_ids=("handbook",),
    )
    (verdict,) = answer.trace.verdicts
    assert verdict.support == 0.0 and not verdict.kept
    assert answer.declined


def test_a_models_marker_on_the_wrong_sentence_is_re_pointed_to_the_one_that_states_it(
    engine: Engine,
) -> None:
    def claims(evidence: Evidence) -> list[Draft]:
        wrong = number(evidence, "refunded in full")
        return [TextPiece(f"Membership costs forty euros a year [{wrong}]. ")]

    engine.generators["misciting"] = Scripted(claims)
    _, answer = ask(
        engine, "How much is membership?", generator="misciting", bucket_ids=("handbook",)
    )
    assert [c.cited_text for c in answer.citations] == ["Membership costs forty euros a year."]
    assert answer.claims[0].supported and not answer.declined
    dropped, kept = answer.trace.verdicts  # the model's sentence judged first, then the aligned
    assert not dropped.kept and dropped.span != kept.span
    assert kept.kept and kept.support == 1.0  # quoted verbatim
