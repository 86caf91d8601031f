"""The answer engine: evidence → draft → claims, citations, verification, grounding."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from citewell.config import Settings
from citewell.engine import Engine
from citewell.errors import GeneratorUnavailable
from citewell.events import (
    CitedSentence,
    ClaimDone,
    Completed,
    Declined,
    Draft,
    Given,
    Question,
    Retrieved,
    TextDelta,
    TextPiece,
)
from citewell.library import Library
from citewell.model import Agent, Answer, Evidence, GroundingState, Page, Principal, Span
from tests.generate.samples import Doc, evidence

POLICY = (
    "# Refunds\n\nRefunds are paid within thirty days of the request. "
    "A receipt is required for every refund.\n\n"
    "# Opening hours\n\nThe shop opens at nine in the morning. It closes at six."
)
WARRANTY = "Every bicycle carries a two-year warranty on its frame."
LOCAL = Principal.local()


class Scripted:
    """A generator that writes whatever the test's function makes of the evidence; it stands
    in for a model, which judges whether the evidence answers, unless told otherwise."""

    name = "scripted"

    def __init__(
        self, script: Callable[[Evidence], Sequence[Draft]], *, judges_answerability: bool = True
    ) -> None:
        self.script = script
        self.judges_answerability = judges_answerability

    async def generate(self, evidence: Evidence, *, agent: Agent) -> AsyncIterator[Draft]:
        for draft in self.script(evidence):
            yield draft


def number(evidence: Evidence, words: str) -> int:
    """The evidence number of the sentence holding ``words``."""
    return next(s.number for s in evidence.sentences if words in s.text)


@pytest.fixture
def library(settings: Settings) -> Iterator[Library]:
    with Library.open(settings) as library:
        library.create_bucket("shop")
        library.ingest(POLICY.encode(), filename="policy.md", bucket="shop")
        library.ingest(WARRANTY.encode(), filename="warranty.txt", bucket="shop")
        yield library


def engine_with(library: Library, script: Callable[[Evidence], Sequence[Draft]]) -> Engine:
    engine = Engine.open(library)
    engine.generators["scripted"] = Scripted(script)
    return engine


def run(engine: Engine, question: str | Question, **agent: object) -> tuple[list[object], Answer]:
    """Stream an answer; returns every event and the final answer."""
    asked = question if isinstance(question, Question) else Question(question)
    chosen = Agent(**{"generator": "scripted", **agent})  # type: ignore[arg-type]

    async def collect() -> list[object]:
        return [e async for e in engine.stream(asked, agent=chosen, principal=LOCAL)]

    events = anyio.run(collect)
    completed = events[-1]
    assert isinstance(completed, Completed)
    return events, completed.answer


def cited(answer: Answer, library: Library) -> list[tuple[str, str, int]]:
    """(claim text, cited text, source_index) per citation, each checked against its source."""
    out = []
    for citation in answer.citations:
        source_text = library.store.source_text(citation.source_id)
        assert source_text[citation.span.start : citation.span.end] == citation.cited_text
        claim = answer.claims[citation.claim_index]
        out.append(
            (
                answer.text[claim.span.start : claim.span.end],
                citation.cited_text,
                citation.source_index,
            )
        )
    return out


def test_the_extractive_default_cites_the_sentence_it_quotes(library: Library) -> None:
    engine = Engine.open(library)
    answer = anyio.run(
        lambda: engine.ask(Question("How long do refunds take?"), agent=Agent(), principal=LOCAL)
    )
    assert answer.grounding is GroundingState.AVAILABLE
    assert cited(answer, library) == [
        (
            "Refunds are paid within thirty days of the request.",
            "Refunds are paid within thirty days of the request.",
            1,
        )
    ]
    assert answer.trace.cited_chunk_ids[0] in answer.trace.retrieved_chunk_ids


def test_markers_are_stripped_and_become_citations_even_streamed_by_the_character(
    library: Library,
) -> None:
    def script(evidence: Evidence) -> list[Draft]:
        refunds, opens = number(evidence, "thirty days"), number(evidence, "opens at nine")
        text = f"Refunds take thirty days [{refunds}]. The shop opens at nine [{opens}]."
        return [TextPiece(ch) for ch in text]

    events, answer = run(engine_with(library, script), "refunds and opening time")
    assert answer.text == "Refunds take thirty days. The shop opens at nine."
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == answer.text
    assert cited(answer, library) == [
        ("Refunds take thirty days.", "Refunds are paid within thirty days of the request.", 1),
        ("The shop opens at nine.", "The shop opens at nine in the morning.", 1),
    ]


def test_a_claim_done_follows_the_text_of_its_sentence(library: Library) -> None:
    def script(evidence: Evidence) -> list[Draft]:
        n = number(evidence, "thirty days")
        return [TextPiece(f"Refunds take thirty days [{n}]."), TextPiece(" A receipt is needed.")]

    events, answer = run(engine_with(library, script), "refunds")
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "Retrieved" and kinds[-1] == "Completed"
    first_claim = next(i for i, e in enumerate(events) if isinstance(e, ClaimDone))
    shown = "".join(e.text for e in events[:first_claim] if isinstance(e, TextDelta))
    assert shown.startswith("Refunds take thirty days.")


def test_an_uncited_sentence_is_aligned_and_never_inherits_a_neighbours_citation(
    library: Library,
) -> None:
    def script(evidence: Evidence) -> list[Draft]:
        n = number(evidence, "thirty days")
        return [
            TextPiece(f"Refunds take thirty days [{n}]. "),
            TextPiece("Every bicycle carries a two-year warranty on its frame. "),
            TextPiece("Dragons guard the storeroom at night."),
        ]

    _, answer = run(engine_with(library, script), "refunds and warranty")
    assert [c[:2] for c in cited(answer, library)] == [
        ("Refunds take thirty days.", "Refunds are paid within thirty days of the request."),
        (
            "Every bicycle carries a two-year warranty on its frame.",
            "Every bicycle carries a two-year warranty on its frame.",
        ),
    ]
    dragons = answer.claims[2]
    assert (
        answer.text[dragons.span.start : dragons.span.end]
        == "Dragons guard the storeroom at night."
    )
    assert (dragons.supported, dragons.needs_citation) == (False, True)
    assert [c.claim_index for c in answer.citations] == [0, 1]


def test_a_marker_naming_no_evidence_is_dropped_and_the_sentence_aligned_instead(
    library: Library,
) -> None:
    def script(evidence: Evidence) -> list[Draft]:
        return [TextPiece("Refunds take thirty days [999]. Dragons guard it [999].")]

    _, answer = run(engine_with(library, script), "refunds")
    assert answer.text == "Refunds take thirty days. Dragons guard it."
    assert [c[:2] for c in cited(answer, library)] == [
        ("Refunds take thirty days.", "Refunds are paid within thirty days of the request.")
    ]


def test_a_citation_that_does_not_support_its_claim_is_not_kept(library: Library) -> None:
    def script(evidence: Evidence) -> list[Draft]:
        n = number(evidence, "thirty days")
        return [CitedSentence("Refunds take ninety days.", (n,))]

    _, answer = run(engine_with(library, script), "refunds")
    assert answer.citations == ()
    assert answer.claims[0].supported is False
    assert answer.grounding is GroundingState.MISSING


def test_a_strict_agent_removes_unsupported_claims(library: Library) -> None:
    def script(evidence: Evidence) -> list[Draft]:
        n = number(evidence, "thirty days")
        return [
            CitedSentence("Refunds take thirty days.", (n,)),
            CitedSentence(" Dragons guard the storeroom at night.", ()),
        ]

    events, answer = run(engine_with(library, script), "refunds", strict=True)
    assert answer.text == "Refunds take thirty days."
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == answer.text


def test_a_strict_agent_declines_when_nothing_is_supported(library: Library) -> None:
    def script(evidence: Evidence) -> list[Draft]:
        return [TextPiece("Dragons guard the storeroom at night.")]

    _, answer = run(engine_with(library, script), "who guards the store?", strict=True)
    assert answer.text == "The available sources do not answer this question."
    assert (answer.declined, answer.grounding) == (True, GroundingState.MISSING)


def test_a_declining_generator_gets_a_plain_refusal_in_the_questions_language(
    library: Library,
) -> None:
    _, answer = run(engine_with(library, lambda e: [Declined()]), "¿Quién fundó la tienda?")
    assert answer.text == "Las fuentes disponibles no responden a esta pregunta."
    assert answer.claims[0].needs_citation is False
    assert (answer.declined, answer.grounding, answer.citations) == (
        True,
        GroundingState.MISSING,
        (),
    )


def test_an_agent_that_hides_sources_still_grounds_its_answer(library: Library) -> None:
    def script(evidence: Evidence) -> list[Draft]:
        return [CitedSentence(evidence.sentences[0].text, (1,))]

    _, answer = run(engine_with(library, script), "refunds", show_sources=False)
    assert answer.grounding is GroundingState.HIDDEN


def test_no_retrieval_means_no_grounding(library: Library) -> None:
    events, answer = run(engine_with(library, asked_anyway), Question("hello", retrieve=False))
    assert events[0] == Retrieved((), "hello")
    assert answer.grounding is GroundingState.NONE


def asked_anyway(evidence: Evidence) -> list[Draft]:
    raise AssertionError("a generator was asked to answer from no evidence")


@pytest.mark.parametrize(
    "question",
    [
        Question("How long do refunds take?", retrieve=False),
        Question("How long do refunds take?", bucket_ids=("empty",)),
        Question("How long do refunds take?", given=Given(())),
    ],
    ids=["no retrieval", "an empty bucket", "no given documents"],
)
def test_with_nothing_to_answer_from_no_generator_is_asked_and_the_answer_declines(
    library: Library, question: Question
) -> None:
    library.create_bucket("empty")
    _, answer = run(engine_with(library, asked_anyway), question)
    assert answer.declined and not answer.citations
    assert answer.text == "The available sources do not answer this question."


def test_sources_are_numbered_in_order_of_first_citation_up_to_the_agents_limit(
    library: Library,
) -> None:
    def script(evidence: Evidence) -> list[Draft]:
        warranty, refunds = number(evidence, "warranty"), number(evidence, "thirty days")
        return [
            CitedSentence("Every bicycle carries a two-year warranty on its frame.", (warranty,)),
            CitedSentence(" Refunds are paid within thirty days of the request.", (refunds,)),
        ]

    _, answer = run(engine_with(library, script), "warranty and refunds")
    assert [(s.source_index, s.source.filename) for s in answer.sources] == [
        (1, "warranty.txt"),
        (2, "policy.md"),
    ]
    _, limited = run(engine_with(library, script), "warranty and refunds", max_sources=1)
    assert [s.source.filename for s in limited.sources] == ["warranty.txt"]
    assert [c.claim_index for c in limited.citations] == [0]


def test_the_buckets_of_a_question_narrow_the_search(library: Library) -> None:
    library.create_bucket("empty")
    events, _ = run(engine_with(library, asked_anyway), Question("refunds", bucket_ids=("empty",)))
    assert events[0] == Retrieved((), "refunds")  # the library's other buckets hold refunds


@contextmanager
def essays(settings: Settings, documents: Path) -> Iterator[Library]:
    """A library whose bucket "essays" holds a five-page text PDF."""
    with Library.open(settings) as library:
        library.create_bucket("essays")
        pdf = documents / "pdf_text" / "multi_page.pdf"
        library.ingest(pdf.read_bytes(), filename="multi_page.pdf", bucket="essays")
        yield library


def quoting(words: str) -> Callable[[Evidence], Sequence[Draft]]:
    """A script that quotes the evidence sentence holding ``words``, citing it."""

    def script(evidence: Evidence) -> list[Draft]:
        sentence = next(s for s in evidence.sentences if words in s.text)
        return [CitedSentence(sentence.text, (sentence.number,))]

    return script


@pytest.mark.parametrize(
    ("words", "page"),
    [("Apple’s MacWrite", 2), ("LaTeX gained popularity", 3), ("from clunky typewriters to AI", 5)],
)
def test_a_citation_into_a_pdf_carries_the_page_its_sentence_is_printed_on(
    settings: Settings, documents: Path, words: str, page: int
) -> None:
    with essays(settings, documents) as library:
        _, answer = run(engine_with(library, quoting(words)), words)
        (citation,) = answer.citations
        assert words in citation.cited_text
        assert citation.page_number == page
        pages = library.store.source_pages(citation.source_id)
        assert pages[page - 1].span.start <= citation.span.start < pages[page - 1].span.end
        assert citation.page_label == pages[page - 1].label


def test_an_answer_crosses_the_store_once_for_each_bucket_and_each_sources_pages(
    settings: Settings, documents: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    words = "LaTeX gained popularity"
    with essays(settings, documents) as library:
        store = type(library.store)
        calls: list[str] = []
        for method in ("get_bucket", "source_pages"):
            read = getattr(store, method)
            monkeypatch.setattr(
                store,
                method,
                lambda self, *args, _read=read, _name=method, **kwargs: (
                    calls.append(_name) or _read(self, *args, **kwargs)
                ),
            )
        asked = Question(words, bucket_ids=("essays",))
        _, answer = run(engine_with(library, quoting(words)), asked)
    (citation,) = answer.citations
    assert citation.page_number == 3  # placed on its page, from the pages the search read
    assert sorted(calls) == ["get_bucket", "source_pages"]


def test_chinese_free_text_settles_into_one_claim_per_sentence(settings: Settings) -> None:
    policy = "退款在申请后三十天内支付。每次退款都需要收据。商店早上九点开门。"

    def script(evidence: Evidence) -> list[Draft]:
        refunds, opens = number(evidence, "三十天"), number(evidence, "九点")
        return [
            TextPiece(piece)
            for piece in ("退款三十天内支付【", f"{refunds}】。商店", f"九点开门[{opens}]。")
        ]

    with Library.open(settings) as library:
        library.create_bucket("shop")
        library.ingest(policy.encode(), filename="政策.txt", bucket="shop")
        _, answer = run(engine_with(library, script), "退款和开门时间")
        assert answer.text == "退款三十天内支付。商店九点开门。"
        assert cited(answer, library) == [
            ("退款三十天内支付。", "退款在申请后三十天内支付。", 1),
            ("商店九点开门。", "商店早上九点开门。", 1),
        ]


def test_a_list_marker_is_layout_not_part_of_the_claim(library: Library) -> None:
    def script(evidence: Evidence) -> list[Draft]:
        n = number(evidence, "thirty days")
        return [TextPiece(f"1. Refunds are paid within thirty days [{n}].\n2. Dragons guard it.")]

    _, answer = run(engine_with(library, script), "refunds")
    assert answer.text == "1. Refunds are paid within thirty days.\n2. Dragons guard it."
    claims = [answer.text[c.span.start : c.span.end] for c in answer.claims]
    assert claims == ["Refunds are paid within thirty days.", "Dragons guard it."]
    assert [c.supported for c in answer.claims] == [True, False]


def test_given_passages_are_the_evidence_and_nothing_is_retrieved(library: Library) -> None:
    doc = Doc(["Dragons guard the storeroom at night.", "They sleep by day."], filename="lore.txt")
    passages = evidence("who guards the storeroom?", [doc]).passages
    source_id = passages[0].source.id
    pages = {
        source_id: (
            Page(number=1, label="i", span=Span(start=0, end=38), width=600, height=800),
            Page(number=2, label="ii", span=Span(start=38, end=56), width=600, height=800),
        )
    }

    def script(evidence: Evidence) -> list[Draft]:
        return [CitedSentence("They sleep by day.", (number(evidence, "sleep"),))]

    asked = Question("when do the dragons sleep?", given=Given(passages, pages))
    events, answer = run(engine_with(library, script), asked)
    assert events[0] == Retrieved(passages, "when do the dragons sleep?")
    (citation,) = answer.citations
    assert (citation.source_id, citation.span, citation.cited_text) == (
        source_id,
        Span(start=38, end=56),
        "They sleep by day.",
    )
    assert (citation.page_number, citation.page_label) == (2, "ii")
    assert answer.grounding is GroundingState.AVAILABLE


def test_the_trace_records_every_judged_citation_kept_or_dropped(library: Library) -> None:
    def script(evidence: Evidence) -> list[Draft]:
        refunds = number(evidence, "thirty days")
        return [
            CitedSentence("Refunds are paid within thirty days.", (refunds,)),
            CitedSentence(" Refunds take ninety days.", (refunds,)),
        ]

    engine = engine_with(library, script)
    _, answer = run(engine, "refunds")
    cited_span = answer.citations[0].span
    assert [(v.claim_index, v.span, v.kept) for v in answer.trace.verdicts] == [
        (0, cited_span, True),
        (1, cited_span, False),
    ]
    assert answer.trace.verdicts[0].support == answer.citations[0].support
    assert answer.trace.verdicts[1].support < engine.verifier.threshold("en")


def test_claims_are_verified_off_the_event_loop(library: Library) -> None:
    started, released = threading.Event(), threading.Event()

    class Waiting:
        """A verifier that holds each verdict until a task on the event loop releases it."""

        name = "waiting"

        def support(self, claim: str, cited: Sequence[str], *, language: str | None) -> float:
            started.set()
            assert released.wait(timeout=30), "verification held up the event loop"
            return 1.0

        def threshold(self, language: str | None) -> float:
            return 0.5

    def script(evidence: Evidence) -> list[Draft]:
        return [CitedSentence("Refunds are paid within thirty days.", (1,))]

    engine = Engine(library, {"scripted": Scripted(script)}, Waiting())

    async def release() -> None:
        while not started.is_set():  # runs only while the loop is free
            await anyio.sleep(0.01)
        released.set()

    async def ask() -> Answer:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(release)
            agent = Agent(generator="scripted")
            return await engine.ask(Question("refunds"), agent=agent, principal=LOCAL)

    assert anyio.run(ask).claims[0].supported


def test_an_agent_judged_by_an_unconfigured_model_fails_naming_the_setting(
    library: Library,
) -> None:
    engine = engine_with(library, lambda evidence: [Declined()])
    with pytest.raises(GeneratorUnavailable, match="CITEWELL_GENERATE__OPENAI__BASE_URL"):
        run(engine, "refunds", verifier="openai-compatible")
