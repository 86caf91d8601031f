"""Whether a cited range supports the claim that cites it.

``Verifier`` scores (claim, cited text) in [0, 1]; the engine keeps a citation only when the
score reaches the agent's ``support_threshold``, else the verifier's own ``threshold`` for the
claim's language. ``CalibratedVerifier`` is the default, and needs no model download: a
logistic model over agreement cues between the claim and the cited text
(``FEATURES``), whose weights ship in ``verifier.json``. ``scripts/train_verifier.py`` fits them on
the development split of the evaluation data, and docs/benchmarks.md ("Citation verification")
reports how well it separates supported from unsupported citations, per language.

The cues: the share of the claim's content words found in the cited text, the same share weighted
towards long (specific) words, the share of the claim's word pairs found in the same order, whether
the claim's numbers agree with the cited text by value ("30" and "thirty"; a claim that changes
"30 days" into "60 days" shares every word but one, and that one decides), whether its names
(capitalised words, Chinese person and place names) are there, whether one side negates what the
other does not, and how long the claim is beside the cited text. A claim the cited text says
word for word, whatever its case and punctuation, is supported outright (``quoted``).
"""

from __future__ import annotations

import functools
import json
import math
import re
import unicodedata
from collections.abc import Sequence
from importlib import resources
from typing import Protocol

from citewell.analysis import terms
from citewell.cite.numbers import numbers, without_numbers
from citewell.language import count_negations, is_cjk

__all__ = ["FEATURES", "CalibratedVerifier", "Verifier", "features", "quoted", "settled_support"]

FEATURES = (
    "content_share",
    "weighted_share",
    "pair_share",
    "numbers_agree",
    "numbers_missing",
    "names_missing",
    "negation_added",
    "negation_dropped",
    "length_ratio",
)
"""The cues ``features`` computes, in order; ``verifier.json`` holds one weight for each."""


class Verifier(Protocol):
    name: str

    def support(self, claim: str, cited: Sequence[str], *, language: str | None) -> float:
        """How well the cited texts, together, support the claim: 0 (not at all) to 1."""
        ...

    def threshold(self, language: str | None) -> float:
        """The least ``support`` at which a citation is kept, where its agent sets none: the
        point this verifier was calibrated at for the language (None: unknown)."""
        ...


class CalibratedVerifier:
    """P(the cited texts support the claim), from a logistic model over ``FEATURES``.

    The score is calibrated on the development split: about as many supported as unsupported
    pairs, so 0.5 is the point where support becomes the likelier reading.
    """

    name = "calibrated"

    def __init__(self) -> None:
        self._model = _model()

    def support(self, claim: str, cited: Sequence[str], *, language: str | None) -> float:
        settled = settled_support(claim, cited)
        if settled is not None:
            return settled
        return self._model.probability(features(claim, cited, language=language))

    def threshold(self, language: str | None) -> float:
        """The one ``verifier.json`` was chosen at, for every language."""
        return self._model.threshold


def settled_support(claim: str, cited: Sequence[str]) -> float | None:
    """The support every verifier gives without judging: 0 with no claim or nothing cited, 1
    for a claim the cited text says word for word (``quoted``); None when it must be judged."""
    evidence = " ".join(cited)
    if not evidence.strip() or not claim.strip():
        return 0.0
    if quoted(claim, evidence):
        return 1.0
    return None


def quoted(claim: str, evidence: str) -> bool:
    """Whether the claim's words are a run of the evidence's words, in the same order, whatever
    their case and the punctuation between them, that begins and ends where the evidence's own
    clauses do (at its start or end, or at a punctuation mark). A model quoting its source
    rarely copies it character for character: it opens a clause with a capital ("The Summer
    Theatre was in operation from 1870 to 1939." out of "…, the Summer Theatre was in operation
    from 1870 to 1939, and …"), closes it with a full stop, drops a comma; the support head,
    which reads meaning, scored such quotes as low as 0.09 (docs/benchmarks.md). A run cut
    inside a clause is no quote: "Refunds are paid within thirty days." leaves out "of the
    request", and "The drug is safe." out of "It is not true that the drug is safe." reverses
    it; those are judged."""
    words = [word for word, _ in _clauses(claim)]
    if not words:
        return False
    found = _clauses(evidence)
    for start in range(len(found) - len(words) + 1):
        run = found[start : start + len(words)]
        begins = start == 0 or found[start - 1][1]
        if begins and run[-1][1] and [word for word, _ in run] == words:
            return True
    return False


_SIGNS = frozenset("+-−")
"""Kept as part of a word: "-5 °C" is not "5 °C"."""


def _clauses(text: str) -> list[tuple[str, bool]]:
    """The text's words, case-folded, each with whether a clause ends after it (a punctuation
    mark or symbol follows, or the text ends). Each Han character is a word, as Chinese puts no
    space between words and a quote may add or drop one around a Latin name or a number."""
    words: list[tuple[str, bool]] = []
    word = ""

    def close(ends: bool) -> None:
        nonlocal word
        if word:
            words.append((word, False))
            word = ""
        if ends and words:
            words[-1] = (words[-1][0], True)

    normal = unicodedata.normalize("NFKC", text).casefold()
    for at, char in enumerate(normal):
        inside_number = char in ".," and word[-1:].isdigit() and normal[at + 1 : at + 2].isdigit()
        if is_cjk(char):
            close(False)
            words.append((char, False))
        elif inside_number or char in _SIGNS or unicodedata.category(char)[0] not in "PSZ":
            word += char  # "56.2" is one number, not 56 and then 2
        else:
            close(unicodedata.category(char)[0] != "Z")
    close(True)
    return words


def features(claim: str, cited: Sequence[str], *, language: str | None) -> tuple[float, ...]:
    """The values of ``FEATURES`` for a claim and the texts it cites."""
    evidence = " ".join(cited)
    claim_terms = terms(without_numbers(claim), language)
    evidence_terms = terms(evidence, language)
    evidence_set = set(evidence_terms)
    words = set(claim_terms)

    def found(term: str) -> bool:
        return term in evidence_set or (is_cjk(term[0]) and term in evidence)

    hits = {t for t in words if found(t)}
    content_share = len(hits) / len(words) if words else 0.0
    weighted_share = sum(len(t) for t in hits) / sum(len(t) for t in words) if words else 0.0
    pairs = set(zip(claim_terms, claim_terms[1:], strict=False))
    evidence_pairs = set(zip(evidence_terms, evidence_terms[1:], strict=False))
    pair_share = len(pairs & evidence_pairs) / len(pairs) if pairs else content_share
    stated = numbers(claim)
    missing = stated - numbers(evidence)
    names = _names(claim, language)
    folded = evidence.casefold()
    names_missing = sum(name not in folded for name in names) / len(names) if names else 0.0
    claim_negations = count_negations(claim)
    evidence_negations = count_negations(evidence)
    length_ratio = min(len(claim_terms) / max(len(evidence_terms), 1), 2.0)
    return (
        content_share,
        weighted_share,
        pair_share,
        float(bool(stated) and not missing),
        float(bool(missing)),
        names_missing,
        float(claim_negations > evidence_negations),
        float(claim_negations < evidence_negations),
        length_ratio,
    )


class _Logistic:
    def __init__(self, spec: dict[str, object]) -> None:
        if spec["features"] != list(FEATURES):
            raise RuntimeError("verifier.json was trained on other features; retrain it")
        self._mean = [float(v) for v in spec["mean"]]  # type: ignore[attr-defined]
        self._scale = [float(v) for v in spec["scale"]]  # type: ignore[attr-defined]
        self._weights = [float(v) for v in spec["weights"]]  # type: ignore[attr-defined]
        self._bias = float(spec["bias"])  # type: ignore[arg-type]
        self.threshold = float(spec["threshold"])  # type: ignore[arg-type]

    def probability(self, values: Sequence[float]) -> float:
        z = self._bias + sum(
            w * (v - m) / s
            for w, v, m, s in zip(self._weights, values, self._mean, self._scale, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-z))


@functools.cache
def _model() -> _Logistic:
    text = resources.files("citewell.cite").joinpath("verifier.json").read_text(encoding="utf-8")
    return _Logistic(json.loads(text))


_LATIN_NAME = re.compile(r"(?<![\w'])[A-ZÀ-ÖØ-Þ][\w'’-]*\w")
_ZH_NAME_TAGS = frozenset({"nr", "nrt", "nrfg", "ns", "nt", "nz"})


def _names(text: str, language: str | None) -> set[str]:
    """Names the text mentions, casefolded: capitalised words past the first word, and for
    Chinese, jieba's person, place and organisation names."""
    found = {m.group().casefold() for m in _LATIN_NAME.finditer(text) if m.start() > 0}
    if any(is_cjk(c) for c in text):
        import jieba.posseg

        found.update(w.word for w in jieba.posseg.cut(text) if w.flag in _ZH_NAME_TAGS)
    return found
