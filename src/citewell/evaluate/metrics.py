"""The figures of an evaluation run, each with a 95% confidence interval.

Proportions (hit rate, citation precision, completeness, refusals, gold answer contained) get a
Wilson score interval; the mean token F1 gets a percentile bootstrap (seeded, so a report is
reproducible). Citation precision counts citations, not questions: its interval treats the
citations as independent, which understates it when one answer's citations succeed or fail
together.
"""

from __future__ import annotations

import math
import random
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from citewell.cite.writer import PART_REFUSED
from citewell.evaluate.loaders import Case, Evidence

__all__ = [
    "Cited",
    "Figure",
    "Outcome",
    "bootstrap_mean",
    "figures",
    "supported",
    "token_f1",
    "wilson",
]

Z95 = 1.959963984540054


@dataclass(frozen=True, slots=True)
class Figure:
    """A proportion or a mean over ``n`` items, with its 95% interval; ``value`` is None for n=0."""

    value: float | None
    low: float | None
    high: float | None
    n: int

    def as_dict(self) -> dict[str, float | int | None]:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n}


def wilson(successes: int, n: int, z: float = Z95) -> Figure:
    """``successes``/``n`` with its Wilson score interval."""
    if n == 0:
        return Figure(None, None, None, 0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Figure(p, max(0.0, centre - half), min(1.0, centre + half), n)


def bootstrap_mean(values: Sequence[float], resamples: int = 2000, seed: int = 0) -> Figure:
    """The mean with a 95% percentile-bootstrap interval."""
    if not values:
        return Figure(None, None, None, 0)
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    low = means[int(0.025 * resamples)]
    high = means[min(resamples - 1, math.ceil(0.975 * resamples) - 1)]
    return Figure(sum(values) / n, low, high, n)


@dataclass(frozen=True, slots=True)
class Cited:
    """One citation as the wire gave it: the claim's range of the answer text, and the cited
    range of a source (``start``/``end`` None when the surface names no range)."""

    claim_start: int
    claim_end: int
    filename: str
    start: int | None
    end: int | None
    cited_text: str
    verified: bool = True
    """Whether the server's verifier kept it (every citation on the wire was kept)."""
    support: float | None = None
    """The verifier's score for it, where the wire gives one (citewell's annotations do)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the server answered to one case."""

    text: str
    citations: tuple[Cited, ...]
    declined: bool
    retrieved: tuple[tuple[str, str], ...] | None
    """(file name, passage text) of each retrieved result; None if the surface shows none."""
    ms: float
    error: str | None = None
    conflict_sides: tuple[tuple[str, str], ...] | None = None
    """(file name, side) of each retrieved result on one side of a disagreement between sources
    (``current``, ``older``, ``undated``); None if the surface shows no results."""


def supported(case: Case, cited: Cited) -> bool:
    """Whether a citation points at gold evidence (its range overlaps one, in the same file);
    judged by the verifier where the case has no gold evidence ranges."""
    if not case.evidence:
        return cited.verified
    return any(_overlaps(e, cited) for e in case.evidence)


def _overlaps(evidence: Evidence, cited: Cited) -> bool:
    if evidence.filename != cited.filename:
        return False
    if cited.start is None or cited.end is None:
        return bool(cited.cited_text) and cited.cited_text in evidence.text
    return cited.start < evidence.end and evidence.start < cited.end


def hit(case: Case, outcome: Outcome) -> bool:
    """Whether some retrieved passage holds gold evidence (the whole range, or its first 200
    characters for long evidence split across passages)."""
    assert outcome.retrieved is not None
    for evidence in case.evidence:
        needle = evidence.text[:200]
        if any(f == evidence.filename and needle in text for f, text in outcome.retrieved):
            return True
    return False


_SENTENCE = re.compile(r"[^\s][^.!?。！？\n]*(?:[.!?。！？]+|$)", re.MULTILINE)


def claims(text: str) -> list[tuple[int, int]]:
    """The sentences of an answer, as ranges: the claims that need a citation."""
    return [(m.start(), m.end()) for m in _SENTENCE.finditer(text) if m.group().strip()]


def _normal(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return "".join(" " if unicodedata.category(c)[0] in "PS" else c for c in text)


def tokens(text: str) -> list[str]:
    """Words, lower-cased without punctuation; CJK characters one token each."""
    out: list[str] = []
    for word in _normal(text).split():
        out.extend(re.findall(r"[\u3400-\u9fff\uf900-\ufaff]|[^\u3400-\u9fff\uf900-\ufaff]+", word))
    return out


def token_f1(answer: str, gold: str) -> float:
    got, want = tokens(answer), tokens(gold)
    if not got or not want:
        return float(got == want)
    common = 0
    remaining = list(want)
    for token in got:
        if token in remaining:
            remaining.remove(token)
            common += 1
    if not common:
        return 0.0
    precision, recall = common / len(got), common / len(want)
    return 2 * precision * recall / (precision + recall)


def contains(answer: str, golds: Iterable[str]) -> bool:
    normal = _normal(answer)
    return any(
        _normal(g).strip() and " ".join(_normal(g).split()) in " ".join(normal.split())
        for g in golds
    )


def figures(pairs: Sequence[tuple[Case, Outcome]], refusals: Sequence[str]) -> dict[str, Figure]:
    """Every figure over the given (case, outcome) pairs. ``refusals`` are the server's refusal
    sentences: they, and what it says of a part it does not answer, are removed from an answer
    before its claims are counted."""
    answerable = [(c, o) for c, o in pairs if c.answerable and o.error is None]
    unanswerable = [(c, o) for c, o in pairs if not c.answerable and o.error is None]
    answered = [(c, o) for c, o in answerable if not o.declined]
    with_retrieval = [(c, o) for c, o in answerable if o.retrieved is not None and c.evidence]
    cited = [(c, x) for c, o in answered for x in o.citations]
    total_claims = valid_claims = 0
    for case, outcome in answered:
        text = outcome.text
        for refusal in refusals:
            text = text.replace(refusal, " " * len(refusal))
        text = PART_REFUSED.sub(lambda said: " " * len(said.group()), text)
        for start, end in claims(text):
            total_claims += 1
            valid_claims += any(
                x.claim_start < end and start < x.claim_end and supported(case, x)
                for x in outcome.citations
            )
    with_answers = [(c, o) for c, o in answerable if c.answers]
    in_parts = [(c, o) for c, o in answerable if c.parts]
    f1 = [
        0.0 if o.declined else max(token_f1(o.text, g) for g in c.answers) for c, o in with_answers
    ]
    return {
        "retrieval_hit_rate": wilson(
            sum(hit(c, o) for c, o in with_retrieval), len(with_retrieval)
        ),
        "citation_precision": wilson(sum(supported(c, x) for c, x in cited), len(cited)),
        "citation_completeness": wilson(valid_claims, total_claims),
        "refusal_unanswerable": wilson(sum(o.declined for _, o in unanswerable), len(unanswerable)),
        "false_refusal": wilson(sum(o.declined for _, o in answerable), len(answerable)),
        "contains_gold": wilson(
            sum(not o.declined and contains(o.text, c.answers) for c, o in with_answers),
            len(with_answers),
        ),
        "token_f1": bootstrap_mean(f1),
        "every_part_cited": wilson(
            sum(not o.declined and _every_part_cited(c, o) for c, o in in_parts), len(in_parts)
        ),
        **_conflict_figures(pairs),
    }


def _conflict_figures(pairs: Sequence[tuple[Case, Outcome]]) -> dict[str, Figure]:
    """Of the questions whose sources disagree: the disagreement flagged on both of its
    documents, and, of those answered, the current one cited first (a declined answer cites
    no side: it is counted by ``false_refusal``); of the others, a disagreement claimed."""
    shown = [(c, o) for c, o in pairs if o.error is None and o.conflict_sides is not None]
    planted = [(c, o) for c, o in shown if c.conflict is not None]
    answered = [(c, o) for c, o in planted if not o.declined]
    ordinary = [(c, o) for c, o in shown if c.conflict is None and c.answerable]

    def flagged(case: Case, outcome: Outcome) -> bool:
        assert case.conflict is not None and outcome.conflict_sides is not None
        return set(case.conflict) <= {name for name, _ in outcome.conflict_sides}

    def current_first(case: Case, outcome: Outcome) -> bool:
        assert case.conflict is not None
        return bool(outcome.citations) and outcome.citations[0].filename == case.conflict[0]

    return {
        "conflict_flagged": wilson(sum(flagged(c, o) for c, o in planted), len(planted)),
        "current_cited_first": wilson(sum(current_first(c, o) for c, o in answered), len(answered)),
        "false_conflict": wilson(sum(bool(o.conflict_sides) for _, o in ordinary), len(ordinary)),
    }


def _every_part_cited(case: Case, outcome: Outcome) -> bool:
    """Whether some citation of the answer points at each part's gold evidence."""
    return all(any(_overlaps(e, x) for e in part for x in outcome.citations) for part in case.parts)


FIGURES = (
    "retrieval_hit_rate",
    "citation_precision",
    "citation_completeness",
    "refusal_unanswerable",
    "false_refusal",
    "contains_gold",
    "token_f1",
    "every_part_cited",
    "conflict_flagged",
    "current_cited_first",
    "false_conflict",
)
