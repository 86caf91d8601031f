"""The reader's calibration questions read as the engine serves them, to fit its decline rule on.

A rule fitted on the calibration part's groups (each question against its own paragraph's
sentences) is fitted on what the engine never reads. The engine reads the passages search
retrieves for a question, word overlap's five best sentences among them, two first
(``citewell.rerank``), and answerable questions score higher read that way: fitted on groups to
decline 38.8 % of English unanswerable calibration questions, run 12's rule declined none of SQuAD
2.0's held-out ones end to end; fitted on the calibration articles read this way, the shipped
reader's declined 0.261 of them, against 0.090, at a false refusal of 0.024 (docs/benchmarks.md,
fifteenth session).

So the calibration articles (``read.training.data.calibration_titles``) of the evaluation sets
that have unanswerable questions on them, and of the same languages' others — SQuAD 2.0's dev
half, SQuAD-es, XQuAD en and es — and ClapNQ's calibration records (people's own questions,
where SQuAD's were written to a paragraph) are stored here, each set in a bucket of its own with
all its articles, as a person's bucket holds more than the document that answers; and the
engine retrieves (``Engine.evidence``) and reads (``Engine.read``) each of their questions.
SQuAD 2.0's train part is left out: its calibration articles (Beyoncé, IPod) hold no
unanswerable question, and three times as many answerable ones as the others together, so
English's share of false refusals would be spent on one article's questions.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import anyio

from citewell.config import Settings
from citewell.engine import Engine
from citewell.evaluate.loaders import Case, DataSet, load
from citewell.events import Question
from citewell.generate.extractive import ExtractiveGenerator
from citewell.library import LOCAL, Library
from citewell.model import Agent
from citewell.read import Reader
from citewell.read.training.data import calibration_titles
from citewell.read.training.decline import Asked
from citewell.read.training.group import article_part
from citewell.read.verifier import ReaderVerifier

__all__ = ["PER_SET", "calibration_sets", "decline_sets", "served_reads"]

PER_SET = 400
"""Calibration questions read per set: SQuAD 2.0's calibration article has 373."""
FIRST_ONLY = 0.0
"""An agent's threshold under which the engine's first reading of a part always stands."""
READ_ON = 1.0
"""One under which it always reads on, to the part's every candidate."""


def calibration_sets(traindata: Path, evaldata: Path) -> list[DataSet]:
    """The sets read for the decline rule, each with its calibration articles' questions (the
    answerable and the unanswerable) and all its articles."""
    calibrating = calibration_titles(traindata, evaldata)

    def calibrates(case: Case) -> bool:
        if case.article:
            return case.article in calibrating
        return article_part(f"id:{case.id}") == "calibration"  # a record, as the reader's data

    return [
        dataclasses.replace(data, cases=[c for c in data.cases if calibrates(c)])
        for data in decline_sets(evaldata)
    ]


def decline_sets(evaldata: Path) -> list[DataSet]:
    """SQuAD 2.0's dev half, SQuAD-es, XQuAD en and es, and ClapNQ, whole."""
    xquad = load("xquad", evaldata / "xquad")
    return [
        load("squad2", evaldata / "squad_v2_dev_half"),
        load("squad2-es", evaldata / "squad_es_v2"),
        dataclasses.replace(xquad.select(language="en"), name="xquad-en"),
        dataclasses.replace(xquad.select(language="es"), name="xquad-es"),
        load("clapnq", evaldata / "clapnq"),
    ]


def served_reads(
    settings: Settings,
    sets: Sequence[DataSet],
    reader: Reader,
    *,
    per_set: int = PER_SET,
    report: Callable[[str], None] = print,
) -> list[Asked]:
    """The first ``per_set`` questions of each set that ask one thing, as the engine with
    ``reader`` reads them over a store of the sets' articles (in a folder of its own, with
    ``settings``' embedder and models)."""
    with tempfile.TemporaryDirectory() as folder:
        stored = settings.model_copy(update={"data_dir": Path(folder)})
        with Library.open(stored) as library:
            for data in sets:
                for document in data.documents.values():
                    library.create_bucket(document.bucket)
                    library.ingest(
                        document.text.encode(), filename=document.filename, bucket=document.bucket
                    )
                report(f"  {data.name}: {len(data.documents)} articles stored")
            engine = Engine(library, {}, ReaderVerifier(reader), reader=reader)
            asked = []
            for data in sets:
                read = [_asked(engine, case) for case in data.cases[:per_set]]
                asked += [one for one in read if one is not None]
                report(f"  {data.name}: {len(read)} questions read")
            return asked


def _asked(engine: Engine, case: Case) -> Asked | None:
    """The question as the decline rule decides on it; None if it asks more than one thing, or
    search finds nothing to read.

    The engine reads a part's two best distinct statements first, and all its candidates only
    where those leave it unanswered: a rule answers the part where either reading reaches its
    threshold, so the answerability it decides on is the greater of the two. Both are read here,
    each under a threshold that makes it the one that counts, so that the rule is fitted without
    knowing itself."""
    agent = Agent(bucket_ids=(case.bucket,), answerable_threshold=FIRST_ONLY)
    ask = partial(engine.evidence, Question(case.question), agent=agent, principal=LOCAL)
    evidence = anyio.run(ask)
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
    )
