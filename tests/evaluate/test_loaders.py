"""Each loader on the real development files: counts, and gold ranges that index the texts."""

from __future__ import annotations

from pathlib import Path

import pytest

from citewell.evaluate.loaders import LOADERS, DataSet, load
from citewell.read.training.group import article_part


def read(evaldata: Path, name: str) -> DataSet:
    return load(name, evaldata / LOADERS[name][0])


# name → (questions, answerable, documents)
COUNTS = {
    "xquad": (3 * 366, 3 * 366, 45),
    "squad2": (2513, 2513 - 1335, 6),
    "squad2-es": (2461, 2461 - 1160, 12),
    "cmrc2018": (1002, 1002, 256),
    "drcd": (3524, 3524, 383),
    "clapnq": (102 + 84, 102, 186),
    "hotpotqa": (156, 156, 1535),
    "multipart": (3 * 179, 3 * 179, 45),
    "scifact": (807, 505, 5183),
    "rgb": (78 + 24 + 78, 78 + 24, 4530),
    # Planted (XQuAD: up to 3 short values in each of 15 articles per language; SQuAD 2.0: 3 in
    # each of 6; RGB: 27 + 27), then XQuAD's ordinary questions.
    "conflicts": (88 + 40 + 72 + 3 * 366, 88 + 40 + 72 + 3 * 366, 445),
}


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_loader_reads_every_question_and_every_gold_range_indexes_its_document(
    evaldata: Path, name: str
) -> None:
    data = read(evaldata, name)
    questions, answerable, documents = COUNTS[name]
    assert len(data.cases) == questions
    assert sum(c.answerable for c in data.cases) == answerable
    assert len(data.documents) == documents
    for case in data.cases:
        assert case.answerable or not case.evidence
        for evidence in case.evidence:
            text = data.text(case.bucket, evidence.filename)
            assert text[evidence.start : evidence.end] == evidence.text
        assert all((case.bucket, f) in data.documents for f in case.documents)


def test_a_planted_older_copy_differs_from_its_article_only_where_the_answer_was(
    evaldata: Path,
) -> None:
    data = read(evaldata, "conflicts")
    planted = [c for c in data.cases if c.conflict and c.bucket.startswith("conflicts-xquad")]
    assert {c.language for c in planted} == {"en", "es", "zh"}
    for case in planted:
        current, older = case.conflict or ("", "")
        article, copy = data.documents[(case.bucket, current)], data.documents[(case.bucket, older)]
        assert (article.effective_date, copy.effective_date) == ("2024-01-01", "2021-01-01")
        gold, replaced = case.evidence[0], case.evidence[-1]
        assert replaced.filename == older and gold.text != replaced.text
        # The copy is the gold paragraph with the other value where the answer stood.
        before, after = copy.text[: replaced.start], copy.text[replaced.end :]
        assert f"{before}{gold.text}{after}" in article.text
    # One planted question per article in each bucket: no other copy contradicts the article.
    buckets = [(c.bucket, c.documents[0]) for c in planted]
    assert len(buckets) == len(set(buckets))


def test_rgb_counterfactuals_are_a_current_and_an_older_document(evaldata: Path) -> None:
    data = read(evaldata, "conflicts")
    case = next(c for c in data.cases if c.id == "rgb-en-fact-6")
    current, older = (data.documents[(case.bucket, name)] for name in case.conflict or ())
    assert case.answers == ("Ashleigh Barty",)
    assert "Ashleigh Barty defeated Karolína Plíšková" in current.text
    assert "Simona Halep defeated Karolína Plíšková" in older.text
    assert (current.effective_date, older.effective_date) == ("2024-01-01", "2021-01-01")


def test_a_limited_conflicts_run_has_planted_and_ordinary_questions_in_each_language(
    evaldata: Path,
) -> None:
    data = read(evaldata, "conflicts").select(limit=4)
    for language in ("en", "es", "zh"):
        cases = [c for c in data.cases if c.language == language]
        assert len(cases) == 4
        assert any(c.conflict for c in cases) and any(c.conflict is None for c in cases)


def test_xquad_keeps_each_language_in_its_own_bucket(evaldata: Path) -> None:
    data = read(evaldata, "xquad")
    assert {c.language: c.bucket for c in data.cases} == {
        "en": "xquad-en",
        "es": "xquad-es",
        "zh": "xquad-zh",
    }


def test_squad_format_cases_name_their_article_for_splits_by_article(evaldata: Path) -> None:
    data = read(evaldata, "xquad")
    articles: dict[str, list[str]] = {c.language: [] for c in data.cases}
    for case in data.cases:
        if case.article not in articles[case.language]:
            articles[case.language].append(case.article)
    assert articles["en"][:3] == [
        "Warsaw",
        "Computational_complexity_theory",
        "Sky_(United_Kingdom)",
    ]
    assert articles["es"] == articles["zh"] == articles["en"]  # parallel translations
    assert len(articles["en"]) == 15


def test_squad2_gold_answer_is_an_exact_range_of_the_article(evaldata: Path) -> None:
    data = read(evaldata, "squad2")
    case = next(c for c in data.cases if c.evidence)
    evidence = case.evidence[0]
    assert evidence.text in case.answers
    assert data.text("squad2", evidence.filename)[evidence.start : evidence.end] == evidence.text
    assert not any(c.evidence or c.answers for c in data.cases if not c.answerable)


def test_cmrc2018_keeps_misplaced_answers_as_answers_but_not_as_evidence(evaldata: Path) -> None:
    data = read(evaldata, "cmrc2018")
    assert sum(1 for c in data.cases if not c.evidence) == 5
    assert all(c.answers for c in data.cases)


def test_clapnq_evidence_is_the_selected_sentences(evaldata: Path) -> None:
    data = read(evaldata, "clapnq")
    case = next(c for c in data.cases if c.id == "-1218875241352839456")
    assert case.answerable
    assert any(
        "Russian Blues should not be confused with British Blues" in e.text for e in case.evidence
    )


def test_hotpotqa_narrows_supporting_paragraphs_to_labelled_sentences(evaldata: Path) -> None:
    data = read(evaldata, "hotpotqa")
    case = next(c for c in data.cases if c.id == "5a8c7595554299585d9e36b6")
    assert case.answers == ("Chief of Protocol",)
    assert len(case.documents) == 10
    assert any(e.text.startswith("As an adult, she was named") for e in case.evidence)


def test_scifact_rationale_is_an_abstract_sentence(evaldata: Path) -> None:
    data = read(evaldata, "scifact")
    case = next(c for c in data.cases if c.id == "2")
    assert case.answerable and case.answers == ()
    assert [e.filename for e in case.evidence] == ["13734012.txt"]
    assert not next(c for c in data.cases if c.id == "0").answerable


def test_rgb_asks_each_noise_query_again_against_negatives_only(evaldata: Path) -> None:
    data = read(evaldata, "rgb")
    negative = [c for c in data.cases if c.bucket == "rgb-negative"]
    assert len(negative) == 78 and not any(c.answerable for c in negative)
    negatives = {f for c in negative for f in c.documents}
    assert {f for b, f in data.documents if b == "rgb-negative"} == negatives


def test_select_keeps_first_cases_per_language_and_only_their_documents(evaldata: Path) -> None:
    data = read(evaldata, "xquad").select(limit=2)
    assert [c.language for c in data.cases] == ["en", "en", "es", "es", "zh", "zh"]
    assert {b for b, _ in data.documents} == {"xquad-en", "xquad-es", "xquad-zh"}
    assert len(data.documents) == 3
    only = read(evaldata, "xquad").select(language="es")
    assert {c.language for c in only.cases} == {"es"} and len(only.documents) == 15


def test_a_squad_es_article_is_split_by_its_english_originals_title(evaldata: Path) -> None:
    spanish = read(evaldata, "squad2-es")
    english = {c.id: c.article for c in read(evaldata, "xquad").cases if c.language == "en"}
    # "Ley Europea" is European_Union_law, so it falls on that article's side of every split.
    (law,) = {c.article for c in spanish.cases if c.documents[0] == "03-Ley-Europea.txt"}
    assert law == "European_Union_law"
    shared = [c for c in spanish.cases if c.id in english]
    assert shared and all(c.article == english[c.id] for c in shared)
    articles = {c.article for c in spanish.cases}
    held = {c.article for c in spanish.cases if c.held_out}
    assert held == {a for a in articles if article_part(a) == "validation"}
    assert (len(articles), len(held)) == (12, 6)


def test_the_held_out_half_is_the_readers_validation_and_tune_the_other_half(
    evaldata: Path,
) -> None:
    data = read(evaldata, "multipart")
    held, tune = data.select(articles="held-out"), data.select(articles="tune")
    assert len(held.cases) + len(tune.cases) == len(data.cases) == 537
    assert (len(held.cases), len(tune.cases)) == (321, 216)  # 9 and 6 of XQuAD's 15 articles
    assert all(article_part(c.article) == "validation" for c in held.cases)
    assert not any(article_part(c.article) == "validation" for c in tune.cases)
    languages: dict[str, set[str]] = {}
    for case in held.cases:  # a translated question falls on its original's side
        languages.setdefault(case.id, set()).add(case.language)
    assert all(found == {"en", "es", "zh"} for found in languages.values())
    assert held.documents == data.documents  # asked against every article, as a library holds
    limited = data.select(articles="held-out", limit=2)
    assert [c.id for c in limited.cases] == [c.id for c in held.cases if c.language == "en"][:2] + [
        c.id for c in held.cases if c.language == "es"
    ][:2] + [c.id for c in held.cases if c.language == "zh"][:2]


def test_a_multipart_question_asks_two_of_an_article_s_questions_as_a_person_would(
    evaldata: Path,
) -> None:
    data = read(evaldata, "multipart")
    single = {(c.id, c.language): c for c in read(evaldata, "xquad").cases}
    first = next(c for c in data.cases if c.language == "en")
    one, two = (single[(i, "en")] for i in first.id.split("+"))

    assert (
        first.question
        == "What is the Saxon Garden in Polish? And what was Warsaw's population in 1901?"
    )
    assert first.question == f"{one.question} And w{two.question[1:]}"
    assert first.parts == (one.evidence, two.evidence)
    assert first.evidence == one.evidence + two.evidence
    assert one.article == two.article and first.bucket == "xquad-en"
    asked = {c.language: c.question for c in data.cases if c.id == first.id}
    assert (
        asked["es"]
        == "¿Cómo se llama al Jardín Sajón en polaco? ¿Y cuál era la población de Varsovia en 1901?"
    )
    assert asked["zh"].count("？") == 2 and "另外，" in asked["zh"]
    for case in data.cases:  # two parts, never answered by the same words
        (a, *_), (b, *_) = case.parts
        assert a.filename != b.filename or a.end <= b.start or b.end <= a.start
