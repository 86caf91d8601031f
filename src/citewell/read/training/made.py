"""Groups made from answerable questions: questions their sentences no longer answer, and claims
their sentence no longer supports.

Only SQuAD 2.0 (en and es) has unanswerable questions, and only English has support pairs beyond
"question + answer", so the reader never learnt to decline in Chinese nor to tell a changed
number from the one its sentence states in Spanish. Both are made here the way SQuAD 2.0's were
written, in every language with answerable questions:

- *Answer removed*: the question against its paragraph without the sentences that hold the
  answer — a question about the paragraph's subject that its remaining sentences do not answer.
- *Swapped*: the question's number, or (en/es) its name, swapped for another from the same
  article that its paragraph never mentions, against the same paragraph: "When did the museum
  open in 1902?" becomes a question about 1911, which the paragraph does not answer.
- *Altered claims*: the answering sentence with its answer swapped for another answer of the
  same kind from the article (a number for a number, a name for a name), or negated; the sentence
  it came from does not support it.
- *Restated claims*, their supported twins (training only): the answering sentence as far as
  the clause that holds the answer, as a model restates its source. Without them every claim
  worded near its sentence that the reader saw was an altered one, and it learnt that such a
  claim is unsupported: runs 6 to 9 scored a model's near-quotes 0.09-0.28 ("The Summer
  Theatre was in operation from 1870 to 1939, ..." against the sentence that says so), below
  every threshold (docs/benchmarks.md).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence

from citewell.read.training.group import Group

__all__ = ["altered_claims", "restated_claim", "unanswerable_variants"]

ANSWER_REMOVED_RATE = 0.25
SWAPPED_RATE = 0.25
_NUMBER = re.compile(r"\d[\d.,]*\d|\d")
_NAME = re.compile(r"(?<=\s)[A-ZÁÉÍÓÚÑ][\wáéíóúñ]{2,}")
_NEGATIONS = {
    "en": [(" is ", " is not "), (" was ", " was not "), (" are ", " are not "),
           (" were ", " were not "), (" can ", " cannot "), (" will ", " will not ")],
    "es": [(" es ", " no es "), (" fue ", " no fue "), (" son ", " no son "),
           (" era ", " no era "), (" tiene ", " no tiene "), (" puede ", " no puede ")],
    "zh": [("是", "不是"), ("有", "没有")],
}  # fmt: skip


def unanswerable_variants(
    dataset: str,
    language: str,
    question: str,
    answers: Sequence[str],
    texts: Sequence[str],
    labels: Sequence[int],
    article: str,
    rng: random.Random,
) -> Iterator[Group]:
    """Unanswerable groups made from one answerable question of a paragraph (``texts``, with
    ``labels``) of an ``article`` (its whole text)."""
    if rng.random() < ANSWER_REMOVED_RATE:
        kept = [
            t
            for t, label in zip(texts, labels, strict=True)
            if not label and not any(a in t for a in answers)
        ]
        if len(kept) >= 2:
            yield Group("answers", dataset, language, question, kept, [0] * len(kept), False)
    if rng.random() < SWAPPED_RATE:
        swapped = _swapped_question(question, language, " ".join(texts), article, rng)
        if swapped:
            yield Group("answers", dataset, language, swapped, list(texts), [0] * len(texts), False)


def _swapped_question(
    question: str, language: str, paragraph: str, article: str, rng: random.Random
) -> str | None:
    """The question with a number (or, in en/es, a name) swapped for one the article holds and
    the paragraph does not; None where it has none to swap."""
    patterns = [_NUMBER] if language == "zh" else [_NUMBER, _NAME]
    for pattern in patterns:
        found = [m for m in pattern.finditer(question)]
        if not found:
            continue
        target = rng.choice(found)
        others = sorted(
            {
                m.group()
                for m in pattern.finditer(article)
                if m.group() not in paragraph and m.group() not in question
            }
        )
        if others:
            replacement = rng.choice(others)
            return question[: target.start()] + replacement + question[target.end() :]
    return None


def altered_claims(
    dataset: str,
    language: str,
    sentence: str,
    answer: str,
    article_answers: Sequence[str],
    rng: random.Random,
) -> Iterator[Group]:
    """Claims the answering ``sentence`` does not support: itself with its ``answer`` swapped for
    another of the same kind, and itself negated."""
    if answer in sentence:
        same_kind = [
            a
            for a in article_answers
            if a != answer and a not in sentence and answer not in a and _kind(a) == _kind(answer)
        ]
        if same_kind:
            altered = sentence.replace(answer, rng.choice(same_kind), 1)
            yield Group("supports", dataset, language, altered, [sentence], [0], False)
    negations = [(old, new) for old, new in _NEGATIONS.get(language, []) if old in sentence]
    if negations:
        old, new = rng.choice(negations)
        yield Group(
            "supports", dataset, language, sentence.replace(old, new, 1), [sentence], [0], False
        )


def restated_claim(dataset: str, language: str, sentence: str, answer: str) -> Group | None:
    """The answering ``sentence`` as far as the clause that holds the ``answer``, closed with a
    full stop (the whole sentence where that clause ends it): a claim the sentence supports,
    worded as near it as an altered claim is; None where the answer is not in it. Drawn with no
    randomness, so the groups made before it are drawn as they were."""
    separator, stop = ("，", "。") if language == "zh" else (", ", ".")
    at = sentence.find(answer)
    if at < 0:
        return None
    end = sentence.find(separator, at + len(answer))
    claim = sentence if end < 0 else sentence[:end].rstrip() + stop
    return Group("supports", dataset, language, claim, [sentence], [1], True)


def _kind(answer: str) -> str:
    if _NUMBER.search(answer):
        return "number"
    if answer[:1].isupper():
        return "name"
    return f"text{min(len(answer) // 4, 4)}"
