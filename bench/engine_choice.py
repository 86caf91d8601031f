"""The card's sentence choice on held-out questions read as the engine serves them.

`citewell reader calibrate` fits a card's sentence choice (word overlap's pick, the reader's
likeliest, or both; ``read.training.choice``) on the calibration articles' answerable questions
read as the engine serves them (``citewell.served_reads``: the passages search retrieves, word
overlap's five best sentences among them, two read first) that the reader's own decline rule
lets through. Fitted instead on each question against its own paragraph's sentences, it put the
reader's likeliest first in English for runs 9, 11 and 12, which then lost XQuAD's held-out
answers (docs/benchmarks.md, fourteenth session).

This program reads the calibration half and the held-out half of the same sets (SQuAD 2.0,
SQuAD-es, XQuAD en/es/zh, CMRC 2018, DRCD, ClapNQ) the same way, fits the choice on the
calibration half by the card's own rule (``choice.fit_choices``) and says what word overlap's
pick first, the reader's likeliest first, the fitted choice and the card's are worth on each
half: the share of an answer's sentences that answer. Nothing is fitted on the held-out half.

    .venv/bin/python bench/engine_choice.py                              # the shipped reader
    .venv/bin/python bench/engine_choice.py --candidate runs/reader12    # a trained run too
    .venv/bin/python bench/engine_choice.py --limit 60                   # 60 a set and half
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from citewell.model import SentenceChoice
from citewell.read import Reader
from citewell.read.training.choice import Pick, fit_choices
from citewell.served_reads import ServedStore
from common import mean, reproduce_line, table
from engine_decline import readers_to_compare, served_by_reader

WORD_FIRST = SentenceChoice()
READER_FIRST = SentenceChoice(reader_first=0.0, both=0.0)


def worth_rows(
    half: str, picks: Sequence[Pick], card: Reader, fitted: dict[str, SentenceChoice]
) -> list[list[object]]:
    rows: list[list[object]] = []
    for language in sorted({p.language for p in picks}):
        mine = [p for p in picks if p.language == language]
        choice = fitted.get(language, fitted.get("*", WORD_FIRST))
        rows.append(
            [
                half,
                language,
                len(mine),
                mean([p.worth(WORD_FIRST) for p in mine]),
                mean([p.worth(READER_FIRST) for p in mine]),
                mean([p.worth(choice) for p in mine]),
                f"{choice.reader_first} / {choice.both}",
                mean([p.worth(card.sentence_choice(language)) for p in mine]),
            ]
        )
    return rows


def main() -> None:
    runs, limit = readers_to_compare("engine_choice.py", __doc__, 200)
    started = time.perf_counter()
    header = [
        "reader",
        "half",
        "language",
        "questions",
        "word first",
        "reader first",
        "fitted",
        "fitted choice",
        "card",
    ]
    found: list[list[object]] = []
    for label, reader, picks in served_by_reader(runs, limit, ServedStore.picks):
        fitted, _ = fit_choices(picks["calibration"])
        for half, mine in picks.items():
            found += [[label, *row] for row in worth_rows(half, mine, reader, fitted)]
    print(table(found, header))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    print(reproduce_line())


if __name__ == "__main__":
    main()
