"""The reader's calibration questions read as the engine serves them: the articles they come
from, and an answerability that decides as the engine decides, whatever the threshold."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import anyio
import pytest

from citewell.config import ReadSettings, RetrieveSettings, Settings
from citewell.engine import Engine
from citewell.evaluate.loaders import DataSet
from citewell.events import Question
from citewell.library import LOCAL, Library
from citewell.model import Agent
from citewell.read.cross_encoder import CrossEncoderReader
from citewell.read.training.data import calibration_titles
from citewell.read.training.group import article_part
from citewell.read.verifier import ReaderVerifier
from citewell.served_reads import YEAR, ServedStore, calibration_sets

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sets(evaldata: Path) -> list[DataSet]:
    return calibration_sets(evaldata.parent / "traindata", evaldata)


def test_the_calibration_questions_are_of_calibration_articles_asked_over_all_of_a_sets(
    sets: list[DataSet], evaldata: Path
) -> None:
    names = ["squad2", "squad2-es", "xquad-en", "xquad-es", "xquad-zh", "cmrc2018", "drcd"]
    assert [data.name for data in sets] == [*names, "clapnq", "zh-unanswerable"]
    *articles, records, made = sets
    calibrating = calibration_titles(evaldata.parent / "traindata", evaldata)
    for data in articles:
        assert data.cases and all(case.article in calibrating for case in data.cases)
    # ClapNQ's records calibrate by their ids, as in the reader's data: none is held out.
    assert records.cases and all(article_part(f"id:{c.id}") == "calibration" for c in records.cases)
    for data in (*articles, records):
        asked_over = {f for case in data.cases for f in case.documents}
        assert len(data.documents) > len(asked_over), data.name  # distractors: the other articles
    for data in (sets[0], sets[1], records):  # unanswerable questions too
        assert {case.answerable for case in data.cases} == {True, False}
    assert {c.language for d in sets for c in d.cases} == {"en", "es", "zh"}


def test_chinese_questions_are_made_unanswerable_by_a_year_their_article_never_mentions(
    sets: list[DataSet],
) -> None:
    *stored, made = sets
    asked = {case.id: (data, case) for data in stored for case in data.cases}
    assert len(made.cases) >= 30 and not made.documents  # asked over the sets' own buckets
    for case in made.cases:
        data, original = asked[case.id.removesuffix("-swapped")]
        assert original.language == "zh" and original.answerable and not case.answerable
        assert (case.bucket, case.documents, case.article) == (
            original.bucket,
            original.documents,
            original.article,
        )
        # The same question but for one year, which its article never mentions.
        assert YEAR.split(case.question) == YEAR.split(original.question)
        years = zip(YEAR.findall(original.question), YEAR.findall(case.question), strict=True)
        [(_, swapped)] = [(year, other) for year, other in years if other != year]
        assert swapped not in data.text(original.bucket, original.evidence[0].filename)
    # "X.25" and "Internet2" keep their numbers: only a year before 年 is swapped.
    assert YEAR.findall("X.25和2001年") == ["2001"] and not YEAR.findall("Internet2年")
    assert {case.bucket for case in made.cases} == {"xquad-zh", "cmrc2018", "drcd"}


def test_a_served_answerability_decides_as_the_engine_does_under_any_threshold(
    sets: list[DataSet], tmp_path: Path
) -> None:
    few = [data.select(limit=10) for data in sets[:2]]
    settings = Settings(
        data_dir=tmp_path / "unused",
        retrieve=RetrieveSettings(threads=1),
        read=ReadSettings(reader="citewell-reader", threads=1),
    )
    reader = CrossEncoderReader(1, settings.model_cache_dir)
    with ServedStore(settings, few, per_set=10, report=lambda line: None) as store:
        asked = store.asked(reader)
        picks = store.picks(reader)
    assert [a.language for a in asked] == ["en"] * 10 + ["es"] * 10  # none asks two things
    assert [a.answerable for a in asked] == [c.answerable for d in few for c in d.cases]
    # The same articles in a store of the test's own, each question answered by the engine.
    with Library.open(settings.model_copy(update={"data_dir": tmp_path / "data"})) as library:
        for data in few:
            for document in data.documents.values():
                library.create_bucket(document.bucket)
                library.ingest(
                    document.text.encode(), filename=document.filename, bucket=document.bucket
                )
        engine = Engine(library, {}, ReaderVerifier(reader), reader=reader)
        for threshold in (0.3, 0.5, 0.7):
            answered = []
            for case in (c for d in few for c in d.cases):
                agent = Agent(bucket_ids=(case.bucket,), answerable_threshold=threshold)
                question = Question(case.question)
                ask = partial(engine.evidence, question, agent=agent, principal=LOCAL)
                answered.append(engine.read(anyio.run(ask), agent).reading[0].answered)
            assert answered == [a.answerability >= threshold for a in asked], threshold
    assert len({round(a.answerability, 3) for a in asked}) > 10  # a score, not a verdict
    # The sentence choice is fitted on the answerable questions the reader's own rule answers,
    # where a gold sentence is among the evidence: both judges' picks, and which are right.
    let_through = [
        a
        for a in asked
        if a.answerable
        and reader.decline_rule(a.language).answers(a.answerability, worded=a.worded)
    ]
    assert 0 < len(picks) <= len(let_through)
    assert all(p.gold and p.language in ("en", "es") for p in picks)
    assert sum(p.read[0] in p.gold for p in picks) > len(picks) / 2  # the reader mostly right
