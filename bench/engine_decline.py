"""The decline rule fitted as the engine reads, beside the card's, fitted on groups.

`citewell reader calibrate` fits a card's decline rule (``decline.fit_decline_rules``: the most
unanswerable questions declined at a false refusal of at most 8 %) on the calibration part's
groups: each question against its paragraph's sentences, with made unanswerable questions and
contracts beside them. The engine reads otherwise — the passages search retrieves, word
overlap's five best sentences among them, two read first — and answerable questions score higher
so read: run 12's rule, fitted at 7.8 % false refusal on English groups, declined none of SQuAD
2.0's held-out unanswerable questions end to end, at a false refusal of 0.000.

This program reads the calibration articles' questions, answerable and unanswerable, of SQuAD
2.0, SQuAD-es and XQuAD en/es (``data.calibration_titles``) the engine's way, fits the rule on
them by the card's own aim, and says what the card's rule and the fitted one decline on the
held-out half read the same way. Chinese has no unanswerable question on the calibration
articles (XQuAD zh), so it keeps the card's rule. Nothing is fitted on the held-out half.

    .venv/bin/python bench/engine_decline.py --candidate runs/reader12   # a trained run
    .venv/bin/python bench/engine_decline.py --limit 60                  # 60 a set and half
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from citewell.config import ReadSettings
from citewell.generate.extractive import ExtractiveGenerator
from citewell.model import DeclineRule
from citewell.read.training.decline import fit_decline_rules
from citewell.rerank import read_evidence
from common import mean, reproduce_line, table
from engine_choice import engine_reads, readers_to_compare

SETS = ("squad2", "squad2-es", "xquad-en", "xquad-es")
"""Sets whose questions name their article by the title the reader's parts are keyed on, and
whose languages have unanswerable questions on the calibration articles."""


@dataclass(frozen=True)
class Read:
    """One single-part question as the engine read it."""

    language: str
    answerable: bool
    answerability: float
    worded: bool
    """Whether word overlap would answer it (the rule's lower threshold applies)."""
    answered: bool
    """Whether the reader's own card let it through."""


def reads_by_reader(split: str, runs: dict[str, Path | None], limit: int) -> dict[str, list[Read]]:
    """Each reader's reads of the first ``limit`` questions of each set's ``split``
    (``engine_choice.engine_reads``), answerable and unanswerable."""
    reads: dict[str, list[Read]] = {label: [] for label in runs}
    read = ReadSettings()
    for label, case, found, reader in engine_reads(SETS, split, runs, limit, answerable=False):
        reading = read_evidence(
            found, reader, candidates=read.candidates, read_first=read.read_first, conflicts=False
        ).reading
        if len(reading) != 1:
            continue
        part = reading[0]
        word = ExtractiveGenerator().word_choice(found, part.text)
        reads[label].append(
            Read(found.language or "en", case.answerable, part.answerable, word.sure, part.answered)
        )
    return reads


def rows(label: str, reads: list[Read], fitted: dict[str, DeclineRule]) -> list[list[object]]:
    found: list[list[object]] = []
    for language in sorted({r.language for r in reads}):
        mine = [r for r in reads if r.language == language]
        rule = fitted.get(language)
        answerable = [r for r in mine if r.answerable]
        unanswerable = [r for r in mine if not r.answerable]

        def declines(r: Read, rule: DeclineRule | None = rule) -> bool:
            return (
                not r.answered
                if rule is None
                else not rule.answers(r.answerability, worded=r.worded)
            )

        found.append(
            [
                label,
                language,
                len(answerable),
                len(unanswerable),
                mean([float(not r.answered) for r in unanswerable]),
                mean([float(not r.answered) for r in answerable]),
                mean([float(declines(r)) for r in unanswerable]),
                mean([float(declines(r)) for r in answerable]),
                "-" if rule is None else f"{rule.worded:.4f} / {rule.unworded:.4f}",
            ]
        )
    return found


def main() -> None:
    runs, limit = readers_to_compare("engine_decline.py", __doc__, 400)
    started = time.perf_counter()
    tuning = reads_by_reader("tune", runs, limit)
    held = reads_by_reader("held-out", runs, limit)
    header = [
        "reader",
        "language",
        "answerable",
        "unanswerable",
        "card: refusal",
        "card: false refusal",
        "fitted: refusal",
        "fitted: false refusal",
        "fitted rule (worded / unworded)",
    ]
    for label in runs:
        mine = tuning[label]
        fitted, _ = fit_decline_rules(
            [r.answerability for r in mine],
            [r.answerable for r in mine],
            [r.worded for r in mine],
            [r.language for r in mine],
        )
        fitted.pop("*", None)
        print(f"\n{label}: the rule fitted on the calibration articles, read as the engine reads")
        print(
            table(rows("calibration", mine, fitted) + rows("held-out", held[label], fitted), header)
        )
    print(f"\n({time.perf_counter() - started:.0f} s)")
    print(reproduce_line())


if __name__ == "__main__":
    main()
