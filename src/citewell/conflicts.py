"""Sources that disagree: two sentences of different sources that say the same thing with a
different value ("within 30 days" against "within 14 days").

A conflict is anchored on a sentence that answers one part of the question, never found across
the whole evidence alone: two sources may give different figures for different things. Two sentences
conflict when they are the same sentence but for a few words (most of their words, in order, are
shared), and what differs holds a value on both sides — a number, a date, a name — or is denied
by one of them ("allowed" against "not allowed"): the wording of one sentence changed around the
same words is not a disagreement, nor are two sources that give the same value, nor one source
repeating itself.

Of the two, the source with the later ``effective_date`` is preferred (the current rule); with
no date on either, or the same date, neither is: the answer says the sources disagree without
choosing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache

from citewell.generate.answer_types import AnswerType, carries
from citewell.language import count_negations
from citewell.model import Conflict, Evidence, EvidenceSentence, Source

__all__ = ["differing_values", "find_conflict", "one_statement"]

SHARED = 0.6
"""Least share of their words two sentences hold in common, in order, to be one statement."""

_TOKEN = re.compile(r"[\u3400-\u9fff]|[^\W_]+(?:[.,:/][^\W_]+)*")
"""A word, a number with its separators ("17:00", "1,200"), or one Chinese character."""
_VALUE = re.compile(r"\d|[\u3400-\u9fff]|(?<![\w'])[A-ZÁÉÍÓÚÑÜ]")
"""What makes a differing stretch a value: a digit, a name's capital, or Chinese text (whose
values are not marked by case); or a number in words (``carries``)."""


def find_conflict(evidence: Evidence, answers: Sequence[int]) -> Conflict | None:
    """The first conflict of a part's best answers (evidence numbers, best first) with any
    sentence of another source in the evidence: the same statement with another value. The
    other side is looked for among all the evidence, not only among what was read as an answer:
    a reader may find one version a much likelier answer than the other."""
    for number in answers:
        first = evidence.sentences[number - 1]
        for second in evidence.sentences:
            a, b = _source(evidence, first), _source(evidence, second)
            if a.id == b.id:
                continue  # a source repeating itself (or two versions of one) is not a conflict
            values = differing_values(first.text, second.text)
            if values is None:
                continue
            if _dated_after(b, a):
                return Conflict(second.number, first.number, (values[1], values[0]), True)
            return Conflict(first.number, second.number, values, _dated_after(a, b))
    return None


def differing_values(first: str, second: str) -> tuple[str, str] | None:
    """What two sentences say differently, (first's, second's), when they are one statement
    with a different value or one denies it; None when they share too little, differ in no
    value, or agree."""
    a, b = _words(first), _words(second)
    matcher = _one_statement(a, b)
    if matcher is None:
        return None
    changed = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    if not changed:
        return None
    # From the first change to the last: "30 days" against "two weeks" is one value.
    start_a, end_a, start_b, end_b = changed[0][1], changed[-1][2], changed[0][3], changed[-1][4]
    said_a = _stretch(first, a.tokens, start_a, end_a)
    said_b = _stretch(second, b.tokens, start_b, end_b)
    if _is_value(said_a) and _is_value(said_b):
        return said_a, said_b
    if count_negations(said_a) != count_negations(said_b):
        # One denies what the other states: "allowed" against "not allowed", the word it
        # negates (the next one, shared) included.
        end_a, end_b = min(end_a + 1, len(a.tokens)), min(end_b + 1, len(b.tokens))
        return _stretch(first, a.tokens, start_a, end_a), _stretch(second, b.tokens, start_b, end_b)
    return None


def one_statement(first: str, second: str) -> bool:
    """Whether two sentences are one statement, the same or with another value: most of their
    words shared, in order."""
    return _one_statement(_words(first), _words(second)) is not None


@dataclass(frozen=True, eq=False)
class _Words:
    """A sentence's tokens, as written and casefolded, and its distinct words."""

    tokens: tuple[re.Match[str], ...]
    folded: tuple[str, ...]
    distinct: frozenset[str]


@lru_cache(maxsize=4096)
def _words(text: str) -> _Words:
    """Remembered: a part's candidates are each compared with every sentence of the evidence."""
    tokens = tuple(_TOKEN.finditer(text))
    folded = tuple(t.group().casefold() for t in tokens)
    return _Words(tokens, folded, frozenset(folded))


def _one_statement(a: _Words, b: _Words) -> SequenceMatcher[str] | None:
    """How the two sentences' words match, when they are one statement."""
    if not a.folded or not b.folded:
        return None
    least = SHARED * max(len(a.folded), len(b.folded))
    # A bound on the words shared in order: each word in common, and each repeat of a word of
    # the one that repeats fewer. Most pairs of a part's evidence fail this cheaper test.
    repeats = min(len(a.folded) - len(a.distinct), len(b.folded) - len(b.distinct))
    if len(a.distinct & b.distinct) + repeats < least:
        return None
    matcher = SequenceMatcher(None, a.folded, b.folded, autojunk=False)
    shared = sum(block.size for block in matcher.get_matching_blocks())
    return matcher if shared >= least else None


def _is_value(said: str) -> bool:
    return bool(_VALUE.search(said)) or carries(said, AnswerType.NUMBER, "")


def _stretch(text: str, tokens: Sequence[re.Match[str]], start: int, end: int) -> str:
    """The text of tokens ``start`` to ``end`` (exclusive), as the sentence writes it."""
    if start >= end:
        return ""
    return text[tokens[start].start() : tokens[end - 1].end()]


def _source(evidence: Evidence, sentence: EvidenceSentence) -> Source:
    return evidence.passages[sentence.passage_index].source


def _dated_after(one: Source, other: Source) -> bool:
    """Whether ``one`` took effect after ``other`` (both dated)."""
    if one.effective_date is None or other.effective_date is None:
        return False
    return one.effective_date > other.effective_date
