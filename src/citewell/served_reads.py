"""The reader's calibration questions read as the engine serves them, to fit its decline rule
and its sentence choice on.

Rules fitted on the calibration part's groups (each question against its own paragraph's
sentences) are fitted on what the engine never reads. The engine reads the passages search
retrieves for a question, word overlap's five best sentences among them, two first
(``citewell.rerank``), and answerable questions score higher read that way: fitted on groups to
decline 38.8 % of English unanswerable calibration questions, run 12's rule declined none of SQuAD
2.0's held-out ones end to end; fitted on the calibration articles read this way, the shipped
reader's declined 0.271 of the held-out English ones as served, against 0.147 (docs/benchmarks.md,
fifteenth and sixteenth sessions). And a sentence choice fitted on groups put the reader's
likeliest first in English for runs 9, 11 and 12 and for run 3 fitted again, and lost XQuAD's
held-out answers each time, where the choice fitted as served keeps word overlap's pick first.

So the calibration articles (``read.training.data.calibration_titles``) of SQuAD 2.0's dev half,
SQuAD-es, XQuAD en, es and zh, CMRC 2018 and DRCD, and ClapNQ's calibration records (people's own
questions, where SQuAD's were written to a paragraph), are stored here, each set in a bucket of
its own with all its articles, as a person's bucket holds more than the document that answers;
and the engine retrieves (``Engine.evidence``) and reads (``Engine.read``) each of their
questions. SQuAD 2.0's train part is left out: its calibration articles (Beyoncé, IPod) hold no
unanswerable question, and three times as many answerable ones as the others together, so
English's share of false refusals would be spent on one article's questions.

No Chinese set has an unanswerable question, so Chinese ones are made, as SQuAD 2.0's were
written and as the reader's training makes them (``read.training.made``): an answerable question
with its year swapped for one its article never mentions, from another article of its set
("1345 年华沙的人口是多少？" for 1931), asked over the same bucket. A year for a year only: a
number swapped wherever it stands makes "X.25" "X.1985" and "1935 年" "3,000,000 年", questions
no one asks.
"""

from __future__ import annotations

import dataclasses
import random
import re
import tempfile
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import TypeVar

import anyio

from citewell.config import Settings
from citewell.engine import Engine
from citewell.evaluate.loaders import Case, DataSet, load
from citewell.events import Question
from citewell.generate.extractive import ExtractiveGenerator
from citewell.library import LOCAL, Library
from citewell.model import Agent, Evidence, Span
from citewell.read import Reader
from citewell.read.training.choice import Pick
from citewell.read.training.data import calibration_titles
from citewell.read.training.decline import Asked
from citewell.read.training.group import article_part
from citewell.read.verifier import ReaderVerifier

__all__ = ["PER_SET", "ServedStore", "calibration_sets", "held_out_sets"]

T = TypeVar("T")

PER_SET = 400
"""Calibration questions read per set: SQuAD 2.0's calibration article has 373."""
FIRST_ONLY = 0.0
"""An agent's threshold under which the engine's first reading of a part always stands."""
READ_ON = 1.0
"""One under which it always reads on, to the part's every candidate."""
YEAR = re.compile(r"(?<![A-Za-z0-9.])[12]\d{3}(?=\s?年)")
"""A year in a Chinese question or article, not a number within a name ("X.25", "Internet2")."""


def calibration_sets(traindata: Path, evaldata: Path) -> list[DataSet]:
    """The sets read to fit the decline rule and the sentence choice, each with its calibration
    articles' questions (the answerable and the unanswerable) and all its articles; then the
    Chinese questions made unanswerable from them."""
    calibrating = calibration_titles(traindata, evaldata)

    def calibrates(case: Case) -> bool:
        if case.article:
            return case.article in calibrating
        return article_part(f"id:{case.id}") == "calibration"  # a record, as the reader's data

    return _with_made([_only(data, calibrates) for data in _served_sets(evaldata)])


def held_out_sets(evaldata: Path) -> list[DataSet]:
    """The same sets with their held-out half's questions (``evaluate.holdout``), to measure
    what calibration fits; then the Chinese questions made unanswerable from them."""
    return _with_made([_only(data, lambda case: case.held_out) for data in _served_sets(evaldata)])


def _served_sets(evaldata: Path) -> list[DataSet]:
    """SQuAD 2.0's dev half, SQuAD-es, XQuAD en, es and zh, CMRC 2018, DRCD and ClapNQ, whole."""
    xquad = load("xquad", evaldata / "xquad")
    return [
        load("squad2", evaldata / "squad_v2_dev_half"),
        load("squad2-es", evaldata / "squad_es_v2"),
        *(
            dataclasses.replace(xquad.select(language=language), name=f"xquad-{language}")
            for language in ("en", "es", "zh")
        ),
        load("cmrc2018", evaldata / "cmrc2018"),
        load("drcd", evaldata / "drcd"),
        load("clapnq", evaldata / "clapnq"),
    ]


def _only(data: DataSet, kept: Callable[[Case], bool]) -> DataSet:
    return dataclasses.replace(data, cases=[case for case in data.cases if kept(case)])


def _with_made(sets: list[DataSet]) -> list[DataSet]:
    """``sets`` and, after them, a set of Chinese questions that no article of their bucket
    answers: each answerable Chinese question that names a year, the year swapped for one that
    another article of its set holds and its own never mentions (the articles are stored with
    their own sets)."""
    made = DataSet("zh-unanswerable")
    for data in sets:
        years = sorted({y for doc in data.documents.values() for y in YEAR.findall(doc.text)})
        for case in data.cases:
            named = list(YEAR.finditer(case.question))
            if case.language != "zh" or not case.answerable or not case.evidence or not named:
                continue
            article = data.text(case.bucket, case.evidence[0].filename)
            others = [year for year in years if year not in article]
            if not others:
                continue
            rng = random.Random(case.id)  # the same question made on every machine
            year = rng.choice(named)
            question = (
                f"{case.question[: year.start()]}{rng.choice(others)}{case.question[year.end() :]}"
            )
            made.cases.append(
                dataclasses.replace(
                    case,
                    id=f"{case.id}-swapped",
                    question=question,
                    answers=(),
                    evidence=(),
                    answerable=False,
                )
            )
    return [*sets, made]


class ServedStore:
    """The sets' articles in a store of their own (a temporary folder, with ``settings``'
    embedder and models), their first ``per_set`` questions each read as the engine with a
    given reader serves them."""

    def __init__(
        self,
        settings: Settings,
        sets: Sequence[DataSet],
        *,
        per_set: int = PER_SET,
        report: Callable[[str], None] = print,
    ) -> None:
        self._settings = settings
        self._sets = sets
        self._per_set = per_set
        self._report = report
        self._opened = ExitStack()

    def __enter__(self) -> ServedStore:
        folder = Path(self._opened.enter_context(tempfile.TemporaryDirectory()))
        stored = self._settings.model_copy(update={"data_dir": folder})
        self._library = self._opened.enter_context(Library.open(stored))
        for data in self._sets:
            for document in data.documents.values():
                self._library.create_bucket(document.bucket)
                self._library.ingest(
                    document.text.encode(), filename=document.filename, bucket=document.bucket
                )
            self._report(f"  {data.name}: {len(data.documents)} articles stored")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._opened.close()

    def asked(self, reader: Reader) -> list[Asked]:
        """Each question that asks one thing, as the decline rule decides on it."""
        return self._each("for the decline rule", reader, _asked)

    def picks(self, reader: Reader) -> list[Pick]:
        """Each answerable question that asks one thing and that ``reader``'s own decline rule
        answers, with a gold sentence among its evidence: what word overlap and the reader pick
        to answer it with."""
        return self._each("for the sentence choice", reader, _pick)

    def _each(
        self, purpose: str, reader: Reader, read: Callable[[Engine, Case], T | None]
    ) -> list[T]:
        engine = Engine(self._library, {}, ReaderVerifier(reader), reader=reader)
        found: list[T] = []
        for data in self._sets:
            cases = data.cases[: self._per_set]
            found += [one for one in (read(engine, case) for case in cases) if one is not None]
            self._report(f"  {data.name}: {len(cases)} questions read {purpose}")
        return found


def _evidence(engine: Engine, case: Case, agent: Agent) -> Evidence:
    """The question's evidence as the engine retrieves it for the agent."""
    return anyio.run(
        partial(engine.evidence, Question(case.question), agent=agent, principal=LOCAL)
    )


def _asked(engine: Engine, case: Case) -> Asked | None:
    """The question as the decline rule decides on it; None if it asks more than one thing, or
    search finds nothing to read.

    The engine reads a part's two best distinct statements first, and all its candidates only
    where those leave it unanswered: a rule answers the part where either reading reaches its
    threshold, so the answerability it decides on is the greater of the two. Both are read here,
    each under a threshold that makes it the one that counts, so that the rule is fitted without
    knowing itself."""
    agent = Agent(bucket_ids=(case.bucket,), answerable_threshold=FIRST_ONLY)
    evidence = _evidence(engine, case, agent)
    first = engine.read(evidence, agent).reading
    if len(first) != 1:
        return None
    whole = engine.read(evidence, agent.model_copy(update={"answerable_threshold": READ_ON}))
    worded = ExtractiveGenerator().word_choice(evidence, first[0].text).sure
    return Asked(
        evidence.language or case.language,
        case.answerable,
        max(first[0].answerable, whole.reading[0].answerable),
        worded,
        case.bucket,  # its set's
    )


def _pick(engine: Engine, case: Case) -> Pick | None:
    """What word overlap and the reader answer the question with, read by the reader's own
    rule as the engine reads it; None where it is unanswerable, asks more than one thing, is
    declined, or no evidence sentence holds its gold answer."""
    if not case.answerable:
        return None
    agent = Agent(bucket_ids=(case.bucket,))
    read = engine.read(_evidence(engine, case, agent), agent)
    if len(read.reading) != 1 or not read.reading[0].answered:
        return None
    gold = frozenset(
        index
        for index, sentence in enumerate(read.sentences)
        for e in case.evidence
        if e.filename == read.passages[sentence.passage_index].source.filename
        and sentence.span.overlaps(Span(start=e.start, end=e.end))
    )
    if not gold:
        return None
    part = read.reading[0]
    number, score = part.answers[0]
    word = ExtractiveGenerator().word_choice(read, part.text)
    return Pick(read.language or case.language, word, (number - 1, score), gold)
