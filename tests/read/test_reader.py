"""The shipped reader, for real: it finds the answering sentence in each language, scores an
unrelated one below its decline threshold, computes what torch computes, and falls back to word
overlap (saying so) when its model cannot be built."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from citewell.config import ReadSettings, Settings
from citewell.embed.e5 import E5Small
from citewell.encoder import (
    E5Weights,
    EncoderSession,
    MeanPooling,
    Recipe,
    Tokenizer,
    cached_model,
)
from citewell.errors import ConfigError
from citewell.generate.extractive import word_pick
from citewell.language import detect_language
from citewell.model import DeclineRule, SentenceChoice
from citewell.read import open_reader
from citewell.read.cross_encoder import CrossEncoderReader, ReaderCard, reader_recipe
from citewell.read.lexical import LexicalReader
from citewell.read.pairs import pair_ids
from citewell.read.training.data import Group, validation_groups
from citewell.read.training.net import ReaderNet
from citewell.read.verifier import ReaderVerifier, states_another_number

pytestmark = pytest.mark.slow

TRAINED = ReadSettings(reader="citewell-reader", threads=1)
"""The suite reads by word overlap unless a test asks for the trained reader (conftest.py)."""


@pytest.fixture(scope="module")
def reader() -> CrossEncoderReader:
    return CrossEncoderReader(1, Settings().model_cache_dir)


@pytest.fixture(scope="module")
def held_out(evaldata: Path) -> list[Group]:
    return validation_groups(evaldata, evaldata.parent / "traindata")


def first_questions(groups: list[Group], dataset: str, count: int) -> list[Group]:
    answerable = [g for g in groups if g.dataset == dataset and any(g.labels)]
    return answerable[:count]


@pytest.mark.parametrize("dataset", ["xquad-en", "xquad-es", "xquad-zh"])
def test_the_answering_sentence_outranks_its_neighbours(
    reader: CrossEncoderReader, held_out: list[Group], dataset: str
) -> None:
    # Articles the reader was never trained on; the first 20 questions, not chosen ones.
    found = 0
    questions = first_questions(held_out, dataset, 20)
    for group in questions:
        scores = reader.score_answers(group.first, group.candidates)
        found += group.labels[int(np.argmax(scores))]
    assert found >= 16, f"{found} of {len(questions)}"


@pytest.mark.parametrize(
    "question, answer, unrelated",
    [
        (
            "How long is the refund window?",
            "Members can return any part for a full refund within 30 days of purchase.",
            "The workshop repairs brakes and gears on Saturday mornings.",
        ),
        (
            "¿Cuánto dura el plazo de devolución?",
            "Los socios pueden devolver cualquier pieza con reembolso completo en 30 días.",
            "El taller repara frenos y cambios los sábados por la mañana.",
        ),
        (
            "退款期限是多长时间？",
            "会员在购买后三十天内可以退回任何零件并获得全额退款。",
            "工作坊在周六上午修理刹车和变速器。",
        ),
    ],
    ids=["en", "es", "zh"],
)
def test_an_unrelated_sentence_scores_below_the_decline_threshold(
    reader: CrossEncoderReader, question: str, answer: str, unrelated: str
) -> None:
    answers, other = reader.score_answers(question, [answer, unrelated])
    assert answers > other
    unanswered = reader.answerability(question, [unrelated])
    assert not reader.decline_rule(detect_language(question)).answers(unanswered, worded=True)
    # A clear rise: the smallest is Spanish's, 0.14 (0.16 with the build before the outlier
    # channels were taken apart; the two builds are as far from fp32's logit, either side).
    assert reader.answerability(question, [answer, unrelated]) > unanswered + 0.12


def test_sentences_from_other_articles_do_not_answer(
    reader: CrossEncoderReader, held_out: list[Group]
) -> None:
    questions = first_questions(held_out, "xquad-en", 20)
    rng = random.Random(0)
    declined = 0
    for group in questions:
        others = [c for g in questions if g.first != group.first for c in g.candidates]
        others = [c for c in others if c not in group.candidates]
        read = rng.sample(others, 10)
        answerability = reader.answerability(group.first, read)
        # The rule's lower threshold where word overlap would answer from them too, as in
        # the engine (``rerank``).
        worded = word_pick(group.first, read, title=None).sure
        declined += not reader.decline_rule("en").answers(answerability, worded=worded)
    assert declined >= 17, f"{declined} of {len(questions)}"


def test_support_needs_the_claimed_fact(reader: CrossEncoderReader) -> None:
    span = "Members can return any part for a full refund within 30 days of purchase."
    held, changed = (
        reader.score_support("Parts can be returned for a refund within 30 days.", [span]),
        reader.score_support("Parts can be returned for a refund within 90 days.", [span]),
    )
    assert held[0] > 0.5 > changed[0]


def test_onnxruntime_scores_as_torch_does(
    reader: CrossEncoderReader, weights: E5Weights, tokenizer: Tokenizer
) -> None:
    card = ReaderCard.shipped()
    delta = card.read_delta()
    net = ReaderNet(
        weights, layers=card.layers, adapted=len(delta.adapted), rank=card.fields["rank"]
    )
    net.load_delta(delta)
    question = "How long is the refund window?"
    spans = [
        "Members can return any part for a full refund within 30 days of purchase.",
        "The workshop repairs brakes and gears on Saturday mornings.",
    ]
    with torch.no_grad():
        expected = []
        for span in spans:
            tokens = torch.tensor([pair_ids(tokenizer, question, span, card.limits)])
            mask = torch.ones_like(tokens, dtype=torch.float32)
            expected.append(torch.sigmoid(net.upper(net.lower(tokens, mask), mask))[0, 0].item())
    logits = reader.signals("answers", question, spans)[:, 0]
    np.testing.assert_allclose(1 / (1 + np.exp(-logits)), expected, atol=0.05)


def test_with_its_outlier_channels_apart_the_int7_build_is_far_closer_to_fp32(
    held_out: list[Group], weights: E5Weights, tokenizer: Tokenizer, tmp_path: Path
) -> None:
    card = ReaderCard.shipped()
    shipped = reader_recipe(card, card.read_delta())
    builds = {
        "shipped": shipped,
        "all int8": dataclasses.replace(shipped, name="all-int8", fp32_channels={}),
        "fp32": dataclasses.replace(shipped, name="fp32", precision="fp32"),
    }
    groups = first_questions(held_out, "xquad-en", 6) + first_questions(held_out, "xquad-zh", 6)
    pairs = [
        pair_ids(tokenizer, g.first, sentence, card.limits, context)
        for g in groups
        for sentence, context in zip(
            g.candidates, g.contexts or [""] * len(g.candidates), strict=True
        )
    ]
    probability = {}
    for name, recipe in builds.items():
        model = cached_model(recipe, weights, tmp_path)
        session = EncoderSession(model, weights.word_embeddings, threads=1, batch_tokens=0)
        probability[name] = 1 / (1 + np.exp(-session.run(pairs)[:, 0]))
    moved = {name: np.abs(probability[name] - probability["fp32"]).mean() for name in builds}
    assert moved["shipped"] < moved["all int8"] / 2


def test_scores_blend_the_network_with_word_overlap_and_e5s_cosine(
    reader: CrossEncoderReader,
) -> None:
    question = "How long is the refund window?"
    spans = [
        "Members can return any part for a full refund within 30 days of purchase.",
        "The workshop repairs brakes and gears on Saturday mornings.",
    ]
    signals = reader.signals("answers", question, spans)
    assert signals.shape == (2, 3)
    assert signals[0, 1] > signals[1, 1]  # more of the question's words
    assert signals[0, 2] > signals[1, 2]  # nearer in e5's space
    blends = ReaderCard.shipped().blends
    assert all(weight > 0 for weight in blends["answers"].weights)
    np.testing.assert_allclose(
        reader.score_answers(question, spans), blends["answers"].scores(signals)
    )
    best = np.array([[signals[:, 0].max(), signals[:, 1].max(), signals[:, 2].max()]])
    assert reader.answerability(question, spans) == pytest.approx(
        float(blends["answerable"].scores(best)[0])
    )


def test_contexts_are_one_per_candidate(reader: CrossEncoderReader) -> None:
    with pytest.raises(ValueError, match="1 contexts for 2 candidates"):
        reader.signals("answers", "When?", ["In 1902.", "In May."], ["Museum"])


def test_a_sentence_read_before_for_another_question_scores_as_if_read_first(
    reader: CrossEncoderReader,
) -> None:
    # Its e5 vector is remembered across questions: a remembered one must be the one computed.
    sentences = ["Refunds are accepted within 30 days with a receipt.", "Gift cards never expire."]
    reader.signals("answers", "Do gift cards expire?", sentences)
    fresh = CrossEncoderReader(1, Settings().model_cache_dir)
    question = "What is the refund window?"
    remembered = reader.signals("answers", question, sentences)
    np.testing.assert_array_equal(remembered, fresh.signals("answers", question, sentences))


def test_no_candidates_no_scores(reader: CrossEncoderReader) -> None:
    assert reader.score_answers("anything?", []).shape == (0,)
    assert reader.answerability("anything?", []) == 0.0
    assert reader.signals("supports", "anything", []).shape == (0, 3)


def test_word_overlap_answers_with_its_best_sentence() -> None:
    lexical = LexicalReader()
    question = "How long is the refund window?"
    sentences = ["The refund window is 30 days.", "Brakes are repaired on Saturdays."]
    scores = lexical.score_answers(question, sentences)
    assert scores[0] > scores[1]
    assert lexical.answerability(question, sentences) == pytest.approx(float(scores[0]))
    assert lexical.answerability(question, []) == 0.0


def test_the_default_reader_is_the_trained_one(tmp_path: Path) -> None:
    assert ReadSettings.model_fields["reader"].default == "citewell-reader"
    reader = open_reader(Settings(model_cache_dir=tmp_path, read=TRAINED))
    assert isinstance(reader, CrossEncoderReader) and reader.trained
    assert isinstance(open_reader(Settings(read={"reader": "lexical"})), LexicalReader)


def test_the_reader_embeds_with_the_librarys_e5_and_reads_as_with_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedded: list[str] = []
    compute = E5Small._embed_query

    def counted(e5: E5Small, text: str) -> np.ndarray:
        embedded.append(text)
        return compute(e5, text)

    monkeypatch.setattr(E5Small, "_embed_query", counted)
    settings = Settings(model_cache_dir=tmp_path, read=TRAINED)
    library_e5 = E5Small(1, tmp_path)
    question = "What is the refund window?"
    library_e5.embed_query(question)  # the search embeds the question first
    sentences = ["Refunds are accepted within 30 days with a receipt.", "Gift cards never expire."]
    shared = open_reader(settings, library_e5).signals("answers", question, sentences)
    assert embedded == [question]  # once, to search and to read
    own = open_reader(settings).signals("answers", question, sentences)
    assert embedded == [question, question]
    np.testing.assert_array_equal(shared, own)
    other_build = E5Small(1, tmp_path, recipe=Recipe("e5-small-2layers", 2, MeanPooling(), "fp32"))
    not_shared = open_reader(settings, other_build).signals("answers", question, sentences)
    np.testing.assert_array_equal(not_shared, own)  # cosines of another build are not weighed


def test_a_pair_read_once_is_not_read_again_when_more_sentences_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    passes: list[str] = []
    run = CrossEncoderReader._logits

    def counted(reader: CrossEncoderReader, first: str, seconds: Any, *rest: Any) -> np.ndarray:
        passes.extend(seconds)
        return run(reader, first, seconds, *rest)

    monkeypatch.setattr(CrossEncoderReader, "_logits", counted)
    question = "What is the refund window?"
    sentences = [
        "Refunds are accepted within 30 days with a receipt.",
        "Gift cards never expire.",
        "The shop opens at nine.",
    ]
    reader = CrossEncoderReader(1, tmp_path)
    first = reader.signals("answers", question, sentences[:2])
    reader.answerability(question, sentences[:2])
    assert passes == sentences[:2]  # scored, then asked whether they answer: one pass each
    more = reader.signals("answers", question, sentences)
    assert passes == sentences
    np.testing.assert_array_equal(more[:2], first)
    assert not first.flags.writeable and not more.flags.writeable  # remembered rows are shared
    fresh = CrossEncoderReader(1, tmp_path).signals("answers", question, sentences)
    np.testing.assert_array_equal(more, fresh)


def test_a_damaged_delta_falls_back_to_word_overlap_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shipped = ReaderCard.shipped()
    damaged = ReaderCard(**{**shipped.__dict__, "sha256": "0" * 64})
    monkeypatch.setattr(ReaderCard, "shipped", classmethod(lambda cls: damaged))
    with pytest.raises(ConfigError, match="not the 000"):
        CrossEncoderReader(1, tmp_path).build()
    reader = open_reader(Settings(model_cache_dir=tmp_path, read=TRAINED))
    assert isinstance(reader, LexicalReader) and not reader.trained
    assert "reading by word overlap instead" in capsys.readouterr().err


def test_the_cards_sentence_choice_is_its_languages_else_the_one_for_any_language(
    tmp_path: Path,
) -> None:
    shipped = ReaderCard.shipped()
    assert {"en", "es", "zh", "*"} <= set(shipped.choices)
    chinese, other = SentenceChoice(reader_first=0.6), SentenceChoice(both=0.3)
    card = ReaderCard(**{**shipped.__dict__, "choices": {"zh": chinese, "*": other}})
    reader = CrossEncoderReader(1, tmp_path, card)
    assert reader.sentence_choice("zh") == chinese
    assert reader.sentence_choice("fr") == other
    assert reader.sentence_choice(None) == other
    bare = CrossEncoderReader(1, tmp_path, ReaderCard(**{**shipped.__dict__, "choices": {}}))
    assert bare.sentence_choice("en") == SentenceChoice()


def test_the_cards_decline_rule_is_its_languages_else_the_one_for_any_language(
    tmp_path: Path,
) -> None:
    shipped = ReaderCard.shipped()
    assert {"en", "es", "zh", "*"} <= set(shipped.declines)
    assert all(rule.worded <= rule.unworded for rule in shipped.declines.values())
    english, other = DeclineRule(worded=0.2, unworded=0.4), DeclineRule.single(0.3)
    card = ReaderCard(**{**shipped.__dict__, "declines": {"en": english, "*": other}})
    reader = CrossEncoderReader(1, tmp_path, card)
    assert reader.decline_rule("en") == english
    assert reader.decline_rule("zh") == other
    assert reader.decline_rule(None) == other
    bare = CrossEncoderReader(1, tmp_path, ReaderCard(**{**shipped.__dict__, "declines": {}}))
    assert bare.decline_rule("en") == DeclineRule()


def test_the_cards_support_threshold_is_its_languages_else_the_one_for_any_language(
    tmp_path: Path,
) -> None:
    shipped = ReaderCard.shipped()
    assert {"en", "es", "zh", "*"} <= set(shipped.supports)
    figures = shipped.fields["calibration"]["support_figures"]
    assert all(shipped.supports[k] == figures[k]["threshold"] for k in shipped.supports)
    card = ReaderCard(**{**shipped.__dict__, "supports": {"zh": 0.25, "*": 0.15}})
    verifier = ReaderVerifier(CrossEncoderReader(1, tmp_path, card))
    assert verifier.threshold("zh") == 0.25
    assert verifier.threshold("fr") == verifier.threshold(None) == 0.15
    bare = CrossEncoderReader(1, tmp_path, ReaderCard(**{**shipped.__dict__, "supports": {}}))
    assert bare.support_threshold("en") == 0.5  # the network's logit alone: even odds


@pytest.mark.parametrize(
    ("claim", "cited", "another"),
    [
        ("Refunds take thirty days.", ["Refunds are paid within 30 days."], False),
        ("Refunds take sixty days.", ["Refunds are paid within 30 days."], True),
        ("Los reembolsos tardan treinta días.", ["Se reembolsa en 30 días."], False),
        ("退款需要60天。", ["退款在30天内支付。"], True),
        ("In 1990 it had 25 shops.", ["It opened in 1990.", "By then it had 25 shops."], False),
        ("Refunds are paid quickly.", ["Refunds are paid within 30 days."], False),
    ],
)
def test_a_claim_states_another_number_only_where_no_cited_text_states_it(
    claim: str, cited: list[str], another: bool
) -> None:
    assert states_another_number(claim, cited) is another
