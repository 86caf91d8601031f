"""The sentence choice fitted as the engine reads, beside the card's, fitted on whole paragraphs.

`citewell reader calibrate` fits a card's sentence choice (word overlap's pick, the reader's
likeliest, or both; ``read.training.choice``) on the calibration part's articles: each
question against its own paragraph's sentences. The engine reads otherwise: the passages search
retrieves for the question, word overlap's five best sentences among all of them, two read
first. Runs 9 and 11 were fitted "the reader's likeliest first" in English on paragraphs, and
lost XQuAD's held-out answers end to end with it (docs/benchmarks.md, fourteenth session).

This program reads the calibration articles' questions the engine's way — the tuning half's
articles of XQuAD en/es/zh and SQuAD 2.0 in a store, each question retrieved and read
(``rerank.read_evidence``) — keeps those its reader lets through with a gold sentence among the
evidence, and fits the choice on them by the card's own rule (``choice.fit_choices``); then says
what each choice is worth on the held-out half read the same way. Nothing is trained or
calibrated on the held-out half.

    .venv/bin/python bench/engine_choice.py                              # the shipped reader
    .venv/bin/python bench/engine_choice.py --candidate runs/reader11    # a trained run too
    .venv/bin/python bench/engine_choice.py --limit 60                   # 60 a set and half
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from answers import (
    agent_for,
    evidence_for,
    load,
    named_reader,
    precise,
    prepare_store,
    run_reader,
)
from citewell.config import ReadSettings
from citewell.evaluate.loaders import Case
from citewell.generate.extractive import ExtractiveGenerator
from citewell.library import Library
from citewell.model import Evidence, SentenceChoice
from citewell.read import Reader
from citewell.read.training.choice import Pick, fit_choices
from citewell.read.training.data import calibration_titles
from citewell.rerank import read_evidence
from common import evaldata_dir, machine, mean, reproduce_line, table

SETS = ("xquad-en", "xquad-es", "xquad-zh", "squad2")
"""Sets whose questions name their article by the title the reader's parts are keyed on."""
WORD_FIRST = SentenceChoice()
READER_FIRST = SentenceChoice(reader_first=0.0, both=0.0)


def pick(case: Case, evidence: Evidence, reader: Reader, read: ReadSettings) -> Pick | None:
    """What the two judges answer the question with, read as the engine reads it; None where
    the reader declines it, or no evidence sentence holds its gold answer."""
    found = read_evidence(
        evidence, reader, candidates=read.candidates, read_first=read.read_first, conflicts=False
    )
    if len(found.reading) != 1 or not found.reading[0].answered:
        return None
    part = found.reading[0]
    gold = frozenset(
        index
        for index, sentence in enumerate(found.sentences)
        if precise(case, (found.passages[sentence.passage_index].source.filename, sentence.span))
    )
    if not gold:
        return None
    word = ExtractiveGenerator().word_choice(found, part.text)
    number, score = part.answers[0]
    return Pick(found.language or "en", word, (number - 1, score), gold)


def engine_reads(
    sets: Sequence[str], split: str, runs: dict[str, Path | None], limit: int, *, answerable: bool
) -> Iterator[tuple[str, Case, Evidence, Reader]]:
    """(reader's label, question, its evidence, the reader) for each reader (the shipped one for
    None, else a trained run's) over the first ``limit`` questions of each set's ``split`` (only
    answerable ones with gold evidence, where ``answerable``): on the tuning half, of the
    reader's calibration articles only."""
    calibrating = calibration_titles(evaldata_dir().parent / "traindata", evaldata_dir())
    for name in sets:
        data = load(evaldata_dir(), name).split(split)
        data.items = [
            case
            for case in data.items
            if (not answerable or (case.answerable and case.evidence))
            and (split != "tune" or case.article in calibrating)
        ][:limit]
        settings = prepare_store(data, "e5-small", 1, 0)
        evidence = evidence_for(data, settings, agent_for(0))
        with Library.open(settings) as library, tempfile.TemporaryDirectory() as folder:
            for label, run in runs.items():
                reader = (
                    named_reader(library, "citewell-reader")
                    if run is None
                    else run_reader(library, run, Path(folder))
                )
                for case, found in zip(data.items, evidence, strict=True):
                    yield label, case, found, reader
        print(f"  {name} ({split}): {len(data.items)} questions")


def readers_to_compare(
    program: str, doc: str | None, limit: int
) -> tuple[dict[str, Path | None], int]:
    """The command line shared by the engine-read benches: the shipped reader, and a trained
    run's beside it (``--candidate``); and the questions per set and half."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--candidate", type=Path, help="a trained run's folder, beside")
    parser.add_argument("--limit", type=int, default=limit, help="questions per set and half")
    args = parser.parse_args()
    print(f"# bench/{program} — {time.strftime('%Y-%m-%d')} — {machine()}")
    runs: dict[str, Path | None] = {"shipped": None}
    if args.candidate is not None:
        runs[args.candidate.name] = args.candidate
    return runs, args.limit


def picks_by_reader(split: str, runs: dict[str, Path | None], limit: int) -> dict[str, list[Pick]]:
    """Each reader's picks over the first ``limit`` answerable questions of each set's
    ``split`` (``engine_reads``)."""
    picks: dict[str, list[Pick]] = {label: [] for label in runs}
    read = ReadSettings()
    for label, case, found, reader in engine_reads(SETS, split, runs, limit, answerable=True):
        chosen = pick(case, found, reader, read)
        if chosen is not None:
            picks[label].append(chosen)
    return picks


def worth_rows(
    label: str, picks: Sequence[Pick], choices: dict[str, SentenceChoice]
) -> list[list[object]]:
    rows: list[list[object]] = []
    for language in sorted({p.language for p in picks}):
        mine = [p for p in picks if p.language == language]
        fitted = choices.get(language, choices.get("*", WORD_FIRST))
        rows.append(
            [
                label,
                language,
                len(mine),
                mean([p.worth(WORD_FIRST) for p in mine]),
                mean([p.worth(READER_FIRST) for p in mine]),
                mean([p.worth(fitted) for p in mine]),
                f"{fitted.reader_first} / {fitted.both}",
            ]
        )
    return rows


def main() -> None:
    runs, limit = readers_to_compare("engine_choice.py", __doc__, 200)
    started = time.perf_counter()
    tuning = picks_by_reader("tune", runs, limit)
    held = picks_by_reader("held-out", runs, limit)
    header = [
        "reader",
        "language",
        "questions",
        "word first",
        "reader first",
        "fitted",
        "fitted choice",
    ]
    for label in runs:
        choices, _ = fit_choices(tuning[label])
        print(f"\n{label}: fitted on the calibration articles, read as the engine reads")
        print(table(worth_rows("calibration", tuning[label], choices), header))
        print(table(worth_rows("held-out", held[label], choices), header))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    print(reproduce_line())


if __name__ == "__main__":
    main()
