"""Which judge picks the better sentence, per set, on the calibration part a card's sentence
choice is fitted on.

The card fits one choice per language (``citewell.read.training.choice``) over every set of
that language together; this prints, per (language, set), what word overlap's pick and the
reader's likeliest are each worth on the questions the card's decline rule lets through
(``choice.Pick.worth``: the share of the answer's sentences that answer, over the answerable
questions), and what the card's fitted choice is worth. A set where the two
judges disagree with the language's choice is one the choice is not fitted for.

    .venv/bin/python bench/sentence_choice.py                            # the shipped reader
    .venv/bin/python bench/sentence_choice.py --candidate runs/reader9   # a trained run's card
"""

from __future__ import annotations

import argparse
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

from citewell.config import Settings
from citewell.generate.extractive import word_pick
from citewell.model import DeclineRule, SentenceChoice
from citewell.read.blend import best_signals
from citewell.read.cross_encoder import CrossEncoderReader, for_language
from citewell.read.training.calibrate import GROUPS_PER_SET
from citewell.read.training.choice import Pick, picks, word_picks
from citewell.read.training.data import calibration_groups, per_set
from common import evaldata_dir, machine, reproduce_line, table
from reader import TRAINDATA, readers

WORD_OVERLAP = SentenceChoice()
READER = SentenceChoice(reader_first=0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--candidate", type=Path, help="a trained run's folder (else: shipped)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print(f"# the sentence choice per set — {machine()}")
    every = calibration_groups(TRAINDATA, evaldata_dir(), seed=0)
    groups = [g for g in per_set(every, GROUPS_PER_SET, 0) if g.task == "answers"]
    with tempfile.TemporaryDirectory() as folder:
        cards = readers(args.candidate, Path(folder))
        card = cards[args.candidate.name] if args.candidate else cards["shipped"]
        reader = CrossEncoderReader(args.threads, Settings().model_cache_dir, card)
        signals = [reader.signals("answers", g.first, g.candidates, g.contexts) for g in groups]
    words = word_picks(groups, word_pick)
    answerable, answers = card.blends["answerable"], card.blends["answers"]
    let_through = []
    for group, signal, word in zip(groups, signals, words, strict=True):
        rule = for_language(card.declines, group.language) or DeclineRule()
        answerability = float(answerable.scores(best_signals(signal))[0])
        let_through.append(rule.answers(answerability, worded=word.sure))
    scores = [answers.scores(signal) for signal in signals]
    by_set: dict[tuple[str, str], list[Pick]] = defaultdict(list)
    for group, score, kept, word in zip(groups, scores, let_through, words, strict=True):
        # A group at a time, so that which groups make a pick is ``picks``' to say.
        for pick in picks([group], [score], [kept], [word]):
            by_set[(group.language, group.dataset)].append(pick)
    rows = []
    for (language, dataset), chosen in sorted(by_set.items()):
        fitted = for_language(card.choices, language) or SentenceChoice()
        rows.append(
            [language, dataset, len(chosen)]
            + [np.mean([p.worth(c) for p in chosen]) for c in (WORD_OVERLAP, READER, fitted)]
        )
    header = ["language", "set", "questions", "word overlap's pick", "reader's likeliest"]
    print(table(rows, [*header, "the card's choice"]))
    print(reproduce_line())


if __name__ == "__main__":
    main()
