"""The reader's training and validation groups, made from open-licensed data only.

A ``Group`` is one question (or claim) with its candidate sentences and which of them answer
(or support) it. Groups come from:

- SQuAD-format sets (SQuAD 2.0 train part and dev half, SQuAD-es 2.0, XQuAD en/es/zh, CMRC 2018
  trial, DRCD dev): the sentences of the question's paragraph; a sentence answers if it holds a
  gold answer. Unanswerable questions have no answering sentence. Hard negatives from the rest of
  the article: the sentences sharing the most words with the question that hold no answer.
- ClapNQ: the passage's sentences; the annotators' selected sentences answer; the unanswerable
  file's passages answer nothing.
- HotpotQA (distractor setting): the supporting facts answer; the other sentences do not.
- Support: a claim made of a question and its gold answer is supported by the answering
  sentence and not by its neighbours, nor when the answer is swapped for another question's;
  SNLI's premise supports its hypothesis when the label is entailment.

Articles fall in three parts, whole. Validation is kept apart by article: an
article is validation when it is in the held-out half (``citewell.evaluate.holdout``), which
bench/answers.py reports on, so it never reports on an article the reader was trained on. A
fifth of the other articles is calibration (``article_part``; for the SQuAD-format sets, which
have few articles, ``group.calibration_articles``): the network never trains on them, and the
blend of its logit with word overlap and e5's cosine, and the decline threshold, are fit on them
(``citewell.read.training.calibrate``), so neither is tuned on validation nor on what the
network has memorised. SQuAD-es articles are keyed by the English title of
the same article (their questions keep SQuAD's ids), and XQuAD's translations share their
English article's title, so no translation of a validation article is trained on. SNLI's test
part is validation; SciFact (CC BY-NC) only measures (``scifact_groups``), never trains.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from citewell.evaluate.holdout import article_key, english_titles, held_out, salted_hash
from citewell.model import Span
from citewell.read.training.documents import cuad_groups, mtrag_groups
from citewell.read.training.group import (
    MAX_CANDIDATES,
    Group,
    Part,
    Task,
    article_part,
    calibration_articles,
    sentences,
    words,
)
from citewell.read.training.made import altered_claims, restated_claim, unanswerable_variants

UNTITLED_SALT = "citewell-reader-untitled"
UNTITLED_SHARE = 2
"""One question in this many is read with no title (training and calibration): as the engine
reads a plain-text source, which has no title or heading to give its sentences. Titled only,
the reader learnt to lean on the title: SQuAD 2.0's answerable AUC fell from 0.881 to 0.831
read untitled, and the decline rule was fitted on answerability as titled sentences get it."""

TRAINING_ONLY = ("squad2-train", "cmrc2018-train")
"""Sets of the training data: their articles never validate (a fifth of them calibrate)."""

__all__ = [
    "Group",
    "Part",
    "Task",
    "article_part",
    "calibration_groups",
    "calibration_titles",
    "hotpotqa_answer_groups",
    "per_set",
    "scifact_groups",
    "training_groups",
    "validation_groups",
]


def training_groups(traindata: Path, evaldata: Path, seed: int) -> list[Group]:
    """Every training group, in a fixed order for a seed."""
    rng = random.Random(seed)
    groups = [_as_read(g) for g in _all_groups(traindata, evaldata, rng, "training")]
    groups.extend(_snli(traindata / "snli_subset", "dev", "training"))
    return groups


def calibration_groups(traindata: Path, evaldata: Path, seed: int) -> list[Group]:
    """The calibration groups: whole paragraphs, and claims, of articles never trained on."""
    rng = random.Random(seed)
    groups = [_as_read(g) for g in _all_groups(traindata, evaldata, rng, "calibration")]
    groups.extend(_snli(traindata / "snli_subset", "dev", "calibration"))
    return groups


def validation_groups(evaldata: Path, traindata: Path) -> list[Group]:
    """The validation groups: whole paragraphs, no candidate dropped."""
    rng = random.Random(0)
    groups = list(_all_groups(traindata, evaldata, rng, "validation"))
    groups.extend(_snli(traindata / "snli_subset", "test", "validation"))
    return groups


def per_set(
    groups: Sequence[Group], count: int, seed: int, caps: Mapping[str, int] | None = None
) -> list[Group]:
    """The first ``count`` groups (all, for 0) of each (task, set), in a seeded order; a set
    named in ``caps`` gives at most that many of each of its tasks."""
    by_set: dict[tuple[str, str], list[Group]] = {}
    for group in groups:
        by_set.setdefault((group.task, group.dataset), []).append(group)
    rng = random.Random(seed)
    kept = []
    for key in sorted(by_set):
        chosen = list(by_set[key])
        rng.shuffle(chosen)
        limit = (caps or {}).get(key[1], count)
        kept.extend(chosen[:limit] if limit else chosen)
    return kept


def _as_read(group: Group) -> Group:
    """The group as the engine would read it: a share of questions with no title
    (``UNTITLED_SHARE``). Validation stays titled, so its figures compare across runs; bench/
    reader.py --untitled reads it untitled."""
    if group.task != "answers" or salted_hash(UNTITLED_SALT, group.first) % UNTITLED_SHARE:
        return group
    return dataclasses.replace(group, contexts=[])


def calibration_titles(traindata: Path, evaldata: Path) -> frozenset[str]:
    """The SQuAD-format articles (by split key: the English title where there is one) that
    calibrate, in every set that has them (``group.calibration_articles``)."""
    return _calibrating(_squad_sets(traindata, evaldata))


def _all_groups(traindata: Path, evaldata: Path, rng: random.Random, part: Part) -> Iterator[Group]:
    squad_sets = _squad_sets(traindata, evaldata)
    calibrating = _calibrating(squad_sets)
    for dataset, language, articles in squad_sets:
        for title, article in articles:
            if _squad_part(dataset, title, calibrating) == part:
                yield from _squad_article(dataset, language, article, rng, part)
    yield from _clapnq(evaldata / "clapnq", rng, part)
    yield from _hotpotqa(evaldata / "hotpotqa", part)
    yield from cuad_groups(traindata / "cuad", part, rng)
    yield from mtrag_groups(traindata / "mtrag", part)


_Articles = list[tuple[str, dict[str, Any]]]


def _squad_sets(traindata: Path, evaldata: Path) -> list[tuple[str, str, _Articles]]:
    """(set, language, its (split key, article) pairs) of every SQuAD-format set."""
    english = english_titles(evaldata)
    return [
        (dataset, language, list(_articles(path, english)))
        for dataset, language, path in _squad_files(traindata, evaldata)
    ]


def _validated(dataset: str, title: str) -> bool:
    return dataset not in TRAINING_ONLY and held_out(title)


def _calibrating(squad_sets: Sequence[tuple[str, str, _Articles]]) -> frozenset[str]:
    return calibration_articles(
        {
            dataset: [title for title, _ in articles if not _validated(dataset, title)]
            for dataset, _, articles in squad_sets
        }
    )


def _squad_part(dataset: str, title: str, calibrating: frozenset[str]) -> Part:
    if _validated(dataset, title):
        return "validation"
    return "calibration" if title in calibrating else "training"


def _squad_files(traindata: Path, evaldata: Path) -> list[tuple[str, str, Path]]:
    return [
        ("squad2-train", "en", traindata / "squad2_train_first10" / "train-v2.0.json"),
        ("cmrc2018-train", "zh", traindata / "cmrc2018_train" / "cmrc2018_train.json"),
        ("squad2", "en", _one(evaldata / "squad_v2_dev_half", "dev-v2.0*.json")),
        ("squad2-es", "es", _one(evaldata / "squad_es_v2", "dev-v2.0-es*.json")),
        ("xquad-en", "en", evaldata / "xquad" / "xquad.en.json"),
        ("xquad-es", "es", evaldata / "xquad" / "xquad.es.json"),
        ("xquad-zh", "zh", evaldata / "xquad" / "xquad.zh.json"),
        ("cmrc2018", "zh", evaldata / "cmrc2018" / "cmrc2018_trial.json"),
        ("drcd", "zh", evaldata / "drcd" / "DRCD_dev.json"),
    ]


def _one(folder: Path, pattern: str) -> Path:
    return sorted(folder.glob(pattern))[0]


def _read(path: Path) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["data"]
    return data


def _articles(path: Path, english: dict[str, str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(split key, article): the English title where a question id knows it, else its own."""
    for number, article in enumerate(_read(path)):
        yield article_key(article, english, article.get("title") or str(number)), article


def _squad_article(
    dataset: str,
    language: str,
    article: dict[str, Any],
    rng: random.Random,
    part: Part,
) -> Iterator[Group]:
    """The groups of an article's paragraphs, in the context of its title; hard negatives come
    from the rest of the article. Outside validation each answerable
    question also makes unanswerable ones (``made``); in every part a share of them makes support
    claims, the altered ones among them."""
    title = " ".join(str(article.get("title") or "").replace("_", " ").split())
    paragraphs = [(p, sentences(p["context"])) for p in article["paragraphs"]]
    pool = [p["context"][s.start : s.end] for p, spans in paragraphs for s in spans]
    whole = " ".join(p["context"] for p in article["paragraphs"])
    article_answers = sorted(
        {a["text"] for p in article["paragraphs"] for q in p["qas"] for a in q["answers"][:1]}
    )
    for paragraph, spans in paragraphs:
        context = paragraph["context"]
        texts = [context[s.start : s.end] for s in spans]
        for qa in paragraph["qas"]:
            if not qa["question"].strip():
                continue  # CMRC 2018 has a few questions with no text
            impossible = bool(qa.get("is_impossible"))
            answers = [] if impossible else [a for a in qa["answers"] if a["text"]]
            labels = [int(_holds(s, answers, context)) for s in spans]
            if not impossible and not any(labels):
                continue  # an answer that does not lie where it says
            group = Group("answers", dataset, language, qa["question"], texts, labels, any(labels))
            made: list[Group] = []
            if part != "validation" and answers:
                made.extend(
                    unanswerable_variants(
                        dataset,
                        language,
                        qa["question"],
                        [a["text"] for a in answers],
                        texts,
                        labels,
                        whole,
                        rng,
                    )
                )
            for found in [group, *made]:
                trimmed = _trimmed(found, pool, rng) if part == "training" else found
                yield trimmed.titled(title)
            if answers and rng.random() < 0.3:
                yield from _claims(dataset, language, qa, answers, paragraph, texts, labels, rng)
                right = next(t for t, label in zip(texts, labels, strict=True) if label)
                yield from altered_claims(
                    dataset, language, right, answers[0]["text"], article_answers, rng
                )
                # The twins teach; they are not what a verifier is asked (a quote is settled
                # before any reading), and as easy positives they would lift every support
                # figure and move the support threshold the calibration part chooses.
                restated = restated_claim(dataset, language, right, answers[0]["text"])
                if restated is not None and part == "training":
                    yield restated


def _holds(sentence: Span, answers: Sequence[dict[str, Any]], context: str) -> bool:
    for answer in answers:
        start = answer["answer_start"]
        end = start + len(answer["text"])
        if context[start:end] == answer["text"] and sentence.start <= start < sentence.end:
            return True
    return False


def _trimmed(group: Group, pool: Sequence[str], rng: random.Random) -> Group:
    """At most ``MAX_CANDIDATES``: the answering ones, then the others sharing most words with
    the question, from the paragraph and the rest of its article."""
    asked = words(group.first)
    right = [c for c, label in zip(group.candidates, group.labels, strict=True) if label]
    wrong = [c for c, label in zip(group.candidates, group.labels, strict=True) if not label]
    others = [c for c in pool if c not in group.candidates]
    hard = sorted(rng.sample(others, min(len(others), 40)), key=lambda c: -len(asked & words(c)))
    negatives = list(dict.fromkeys([*wrong, *hard[:3]]))
    negatives.sort(key=lambda c: -len(asked & words(c)))
    keep = negatives[: MAX_CANDIDATES - len(right)]
    candidates = right + keep
    labels = [1] * len(right) + [0] * len(keep)
    order = list(range(len(candidates)))
    rng.shuffle(order)
    return Group(
        group.task,
        group.dataset,
        group.language,
        group.first,
        [candidates[i] for i in order],
        [labels[i] for i in order],
        group.answerable,
    )


def _claims(
    dataset: str,
    language: str,
    qa: dict[str, Any],
    answers: Sequence[dict[str, Any]],
    paragraph: dict[str, Any],
    texts: Sequence[str],
    labels: Sequence[int],
    rng: random.Random,
) -> Iterator[Group]:
    """Support groups: "question answer" is supported by the answering sentence only, and a
    claim with another question's answer is supported by nothing."""
    answer = answers[0]["text"]
    claim = f"{qa['question']} {answer}"
    right = [t for t, label in zip(texts, labels, strict=True) if label][:1]
    wrong = [t for t, label in zip(texts, labels, strict=True) if not label]
    spans = right + rng.sample(wrong, min(len(wrong), 2))
    yield Group("supports", dataset, language, claim, spans, [1] + [0] * (len(spans) - 1))
    others = [
        a["text"]
        for q in paragraph["qas"]
        for a in q["answers"][:1]
        if a["text"] and a["text"] not in right[0] and answer not in a["text"]
    ]
    if others:
        swapped = f"{qa['question']} {rng.choice(others)}"
        yield Group("supports", dataset, language, swapped, right, [0], answerable=False)


def _clapnq(folder: Path, rng: random.Random, part: Part) -> Iterator[Group]:
    for kind in ("answerable", "unanswerable"):
        for line in _one(folder, f"clapnq_dev_{kind}.jsonl").read_text().splitlines():
            record = json.loads(line)
            if article_part(f"id:{record['id']}") != part:
                continue
            text = record["passages"][0]["text"].strip()
            spans = sentences(text)
            texts = [text[s.start : s.end] for s in spans]
            selected = [
                s.strip() for o in record["output"] for s in o.get("selected_sentences") or []
            ]
            answered = any(o["answer"] for o in record["output"])
            labels = [int(answered and any(_overlaps(t, s) for s in selected)) for t in texts]
            if answered and not any(labels):
                continue
            group = Group("answers", "clapnq", "en", record["input"], texts, labels, answered)
            title = record["passages"][0].get("title", "")
            yield (_trimmed(group, [], rng) if part == "training" else group).titled(title)


def _overlaps(sentence: str, selected: str) -> bool:
    return bool(selected) and (selected in sentence or sentence in selected)


def _hotpotqa(folder: Path, part: Part) -> Iterator[Group]:
    for path in sorted(folder.glob("hotpot_dev_distractor*.json")):
        for record in json.loads(path.read_text()):
            if article_part(f"id:{record['_id']}") != part:
                continue
            facts = {(title, index) for title, index in record["supporting_facts"]}
            texts, labels, titles = [], [], []
            for title, lines in record["context"]:
                for index, line in enumerate(lines):
                    if line.strip():
                        texts.append(line.strip())
                        labels.append(int((title, index) in facts))
                        titles.append(title)
            if any(labels):
                question = record["question"]
                yield Group("answers", "hotpotqa", "en", question, texts, labels, contexts=titles)


def _snli(folder: Path, file_part: str, part: Part) -> Iterator[Group]:
    """SNLI's ``file_part`` ("dev" or "test") pairs in ``part``: the test part validates; the
    dev part's premises are split between training and calibration."""
    for line in (folder / f"snli_1.0_{file_part}.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["gold_label"] == "-":
            continue
        if part != "validation" and article_part(record["sentence1"], validated=False) != part:
            continue
        entailed = record["gold_label"] == "entailment"
        yield Group(
            "supports",
            "snli",
            "en",
            record["sentence2"],
            [record["sentence1"]],
            [int(entailed)],
            entailed,
        )


def hotpotqa_answer_groups(evaldata: Path) -> list[Group]:
    """HotpotQA's validation questions in IRCoT's file (156 with two supporting paragraphs each,
    the 17 of the sentence-labelled file among them): every sentence of the ten paragraphs; the
    ones that answer lie in a supporting paragraph and hold a gold answer. Yes/no questions, whose
    answer no sentence holds, are left out. Measurement only: the shipped reader was trained
    without these questions (their training half is the next run's to learn from)."""
    groups = []
    path = evaldata / "hotpotqa" / "hotpotqa_dev_subsampled_500_ircot.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if article_part(f"id:{record['question_id']}") != "validation":
            continue
        answers = [a.casefold() for a in record["answers_objects"][0]["spans"]]
        texts, labels, titles = [], [], []
        for paragraph in record["contexts"]:
            text = paragraph["paragraph_text"]
            for span in sentences(text):
                sentence = text[span.start : span.end].strip()
                holds = any(a in sentence.casefold() for a in answers)
                texts.append(sentence)
                labels.append(int(paragraph["is_supporting"] and holds))
                titles.append(paragraph["title"])
        if any(labels) and not {"yes", "no"} & set(answers):
            question = record["question_text"]
            groups.append(
                Group("answers", "hotpotqa-answer", "en", question, texts, labels, contexts=titles)
            )
    return groups


def scifact_groups(evaldata: Path) -> list[Group]:
    """SciFact's train claims against the sentences of the abstracts they cite: rationale
    sentences support. Measurement only (CC BY-NC): never in ``training_groups``."""
    folder = evaldata / "scifact"
    corpus = {}
    for line in (folder / "corpus.jsonl").read_text().splitlines():
        record = json.loads(line)
        corpus[record["doc_id"]] = [s.strip() for s in record["sentences"]]
    groups = []
    for line in (folder / "claims_train.jsonl").read_text().splitlines():
        record = json.loads(line)
        rationale = {
            (int(doc), index)
            for doc, found in record["evidence"].items()
            for part in found
            for index in part["sentences"]
        }
        texts, labels = [], []
        for doc in record["cited_doc_ids"]:
            for index, sentence in enumerate(corpus.get(doc, [])):
                texts.append(sentence)
                labels.append(int((doc, index) in rationale))
        if texts:
            groups.append(
                Group("supports", "scifact", "en", record["claim"], texts, labels, any(labels))
            )
    return groups
