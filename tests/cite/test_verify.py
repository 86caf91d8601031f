"""The default verifier: a cited range supports a claim when it states what the claim states."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jieba
import pytest

from citewell.cite.verify import CalibratedVerifier, features, quoted
from citewell.model import Agent

SOURCE = "Refunds are paid within thirty days of the request."
THRESHOLD = CalibratedVerifier().threshold(None)


@pytest.fixture(scope="module")
def verifier() -> CalibratedVerifier:
    return CalibratedVerifier()


def test_an_agent_with_no_threshold_keeps_what_the_verifier_was_calibrated_to_keep() -> None:
    from importlib import resources

    spec = json.loads(resources.files("citewell.cite").joinpath("verifier.json").read_text())
    assert Agent().support_threshold is None
    assert spec["threshold"] == THRESHOLD == 0.4
    assert {CalibratedVerifier().threshold(language) for language in ("en", "es", "zh")} == {0.4}


@pytest.mark.parametrize(
    "claim",
    [
        SOURCE,
        "Refunds are paid within 30 days of the request.",  # numbers agree by value
        "Refunds are paid within thirty days.",
    ],
)
def test_a_claim_the_source_states_is_supported(verifier: CalibratedVerifier, claim: str) -> None:
    assert verifier.support(claim, [SOURCE], language="en") >= THRESHOLD


@pytest.mark.parametrize(
    "claim",
    [
        "Refunds are paid within ninety days of the request.",  # numbers contradict
        "Refunds are paid within 60 days.",
        "Refunds are not paid within thirty days of the request.",  # negated
        "Dragons guard the storeroom.",
    ],
)
def test_a_claim_the_source_does_not_state_is_not(verifier: CalibratedVerifier, claim: str) -> None:
    assert verifier.support(claim, [SOURCE], language="en") < THRESHOLD


def test_a_verbatim_quote_is_supported_outright(verifier: CalibratedVerifier) -> None:
    assert verifier.support(SOURCE, [SOURCE], language="en") == 1.0


@pytest.mark.parametrize(
    ("claim", "cited"),
    [
        (  # a clause of the sentence, capitalised and closed with a full stop
            "The Summer Theatre was in operation from 1870 to 1939.",
            "Nearby, in Ogród Saski (the Saxon Garden), the Summer Theatre was in operation from "
            "1870 to 1939, and in the inter-war period, the theatre complex also included Momus.",
        ),
        (  # a comma dropped, straight quotes for curly ones
            'The Wojciech Bogusławski Theatre (1922–26) was the best example of "Polish '
            'monumental theatre".',
            "The Wojciech Bogusławski Theatre (1922–26), was the best example of “Polish "
            "monumental theatre”.",
        ),
        ("博物馆于1902年开放。", "博物馆于 1902 年开放，但直到1911年才完工。"),  # spaced otherwise
    ],
)
def test_a_quote_is_supported_outright_whatever_its_case_and_punctuation(
    verifier: CalibratedVerifier, claim: str, cited: str
) -> None:
    assert quoted(claim, cited)
    assert verifier.support(claim, [cited], language=None) == 1.0


@pytest.mark.parametrize(
    ("claim", "cited"),
    [
        ("It was 5 °C at noon.", "It was -5 °C at noon."),  # a sign is part of its number
        ("Catholics made up 56.", "Catholics made up 56.2%."),  # so is a decimal point
        ("Refunds are paid within days of the request.", SOURCE),  # a word left out
        ("Refunds are paid within thirty days of the request.", "Refunds are paid within thirty"),
        ("Refunds are paid within thirty days.", SOURCE),  # cut inside a clause
        ("The drug is safe.", "It is not true that the drug is safe."),
        ("Sky Digital于1998年推出。", "当Sky Digital于 1998 年推出的时候，这一新闻服务使用卫星。"),
        ("退款在三十天内支付。", "退款在申请后三十天内支付。"),
    ],
)
def test_a_claim_that_is_no_run_of_the_cited_words_is_judged(claim: str, cited: str) -> None:
    assert not quoted(claim, cited)


def test_several_cited_ranges_support_a_claim_together(verifier: CalibratedVerifier) -> None:
    cited = ["The shop opens at nine.", "It closes at six."]
    claim = "The shop opens at nine and closes at six."
    assert verifier.support(claim, cited, language="en") >= THRESHOLD
    assert verifier.support(claim, cited[:1], language="en") < THRESHOLD
    assert verifier.support("The shop closes at six.", [], language="en") == 0


def test_chinese_claims_are_matched_by_segmented_words(verifier: CalibratedVerifier) -> None:
    source = "退款在申请后三十天内支付。"
    assert verifier.support("退款在三十天内支付。", [source], language="zh") >= THRESHOLD
    assert verifier.support("恐龙守护着仓库。", [source], language="zh") < THRESHOLD
    assert verifier.support("退款不在三十天内支付。", [source], language="zh") < THRESHOLD
    assert verifier.support("退款在申请后九十天内支付。", [source], language="zh") < THRESHOLD


def test_scores_are_probabilities_and_deterministic(verifier: CalibratedVerifier) -> None:
    claim = "Refunds take thirty days."
    first = verifier.support(claim, [SOURCE], language="en")
    assert 0 < first < 1
    assert CalibratedVerifier().support(claim, [SOURCE], language="en") == first


def _xquad_claims(evaldata: Path, language: str) -> list[tuple[str, str, str]]:
    """(claim, its gold sentence, the closest other sentence of the article) for the questions
    of XQuAD's first development article; the claim is the gold sentence less a middle word,
    so that it is no verbatim quote."""
    data = json.loads((evaldata / "xquad_r" / f"{language}.json").read_text(encoding="utf-8"))
    article = data["data"][0]
    everything = [s for p in article["paragraphs"] for s in p["sentences"]]
    found: dict[str, tuple[str, str, str]] = {}
    for paragraph in article["paragraphs"]:
        for qa in paragraph["qas"]:
            answer: dict[str, Any] = qa["answers"][0]
            gold = next(
                s
                for s, (start, end) in zip(
                    paragraph["sentences"], paragraph["sentence_breaks"], strict=True
                )
                if start <= answer["answer_start"] < end
            )
            units = list(jieba.cut(gold)) if language == "zh" else gold.split()
            middle = len(units) // 2
            if units[middle] in answer["text"]:
                continue
            claim = ("" if language == "zh" else " ").join(units[:middle] + units[middle + 1 :])
            others = [s for s in everything if s != gold]
            wrong = max(others, key=lambda s: features(claim, [s], language=language)[0])
            found[gold] = (claim, gold, wrong)
    return list(found.values())


@pytest.mark.parametrize("language", ["en", "es", "zh"])
def test_a_real_claim_citing_a_wrong_sentence_of_its_article_is_caught(
    evaldata: Path, language: str, verifier: CalibratedVerifier
) -> None:
    claims = _xquad_claims(evaldata, language)
    assert len(claims) >= 10
    for claim, _, wrong in claims:
        assert verifier.support(claim, [wrong], language=language) < THRESHOLD, (claim, wrong)
    kept = sum(verifier.support(c, [gold], language=language) >= THRESHOLD for c, gold, _ in claims)
    assert kept >= 0.9 * len(claims)


def test_a_scifact_claim_citing_a_wrong_sentence_of_its_abstract_is_caught(
    evaldata: Path, verifier: CalibratedVerifier
) -> None:
    folder = evaldata / "scifact"
    with (folder / "claims_train.jsonl").open(encoding="utf-8") as lines:
        claims = [json.loads(line) for line in lines]
    claim = next(c for c in claims if c["evidence"])
    doc_id, rationales = next(iter(claim["evidence"].items()))
    used = {i for r in rationales for i in r["sentences"]}
    with (folder / "corpus.jsonl").open(encoding="utf-8") as lines:
        doc = next(d for d in map(json.loads, lines) if d["doc_id"] == int(doc_id))
    for i, sentence in enumerate(doc["sentences"]):
        if i not in used:
            assert verifier.support(claim["claim"], [sentence], language="en") < THRESHOLD
