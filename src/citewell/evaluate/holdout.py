"""The held-out half: the development sets' articles that no one here tunes or trains on.

An article is held out by a hash of its key (its title; a record's id where a set has none), the
same way in every set, so that a translation falls on its original's side. The reader validates
on this half and trains and calibrates on the other (``citewell.read.training``);
bench/answers.py reports on it and tunes on the other; ``citewell eval --articles held-out`` asks
only its questions.
"""

from __future__ import annotations

import hashlib

__all__ = ["HOLD_OUT_SALT", "held_out"]

HOLD_OUT_SALT = "citewell-answers-holdout"


def held_out(key: str) -> bool:
    """Whether the article (title, or record id) is in the held-out half."""
    return int(hashlib.sha256(f"{HOLD_OUT_SALT}:{key}".encode()).hexdigest(), 16) % 2 == 1
