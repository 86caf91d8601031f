"""The held-out half: the development sets' articles that no one here tunes or trains on.

An article is held out by a hash of its key (its title; a record's id where a set has none), the
same way in every set, so that a translation falls on its original's side. The reader validates
on this half and trains and calibrates on the other (``citewell.read.training``);
bench/answers.py reports on it and tunes on the other; ``citewell eval --articles held-out`` asks
only its questions.
"""

from __future__ import annotations

import hashlib

__all__ = ["HOLD_OUT_SALT", "held_out", "salted_hash"]

HOLD_OUT_SALT = "citewell-answers-holdout"


def held_out(key: str) -> bool:
    """Whether the article (title, or record id) is in the held-out half."""
    return salted_hash(HOLD_OUT_SALT, key) % 2 == 1


def salted_hash(salt: str, key: str) -> int:
    """A key's place in a split drawn with ``salt``: the same on every machine and run (the
    reader's calibration part is drawn this way from the other half)."""
    return int(hashlib.sha256(f"{salt}:{key}".encode()).hexdigest(), 16)
