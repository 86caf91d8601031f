"""The held-out half: the development sets' articles that no one here tunes or trains on.

An article is held out by a hash of its key (its title; a record's id where a set has none), the
same way in every set, so that a translation falls on its original's side: a translated
article's key is its English original's title (``english_titles``). The reader validates
on this half and trains and calibrates on the other (``citewell.read.training``);
bench/answers.py reports on it and tunes on the other; ``citewell eval --articles held-out`` asks
only its questions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["HOLD_OUT_SALT", "article_key", "english_titles", "held_out", "salted_hash"]

HOLD_OUT_SALT = "citewell-answers-holdout"


def held_out(key: str) -> bool:
    """Whether the article (title, or record id) is in the held-out half."""
    return salted_hash(HOLD_OUT_SALT, key) % 2 == 1


def salted_hash(salt: str, key: str) -> int:
    """A key's place in a split drawn with ``salt``: the same on every machine and run (the
    reader's calibration part is drawn this way from the other half)."""
    return int(hashlib.sha256(f"{salt}:{key}".encode()).hexdigest(), 16)


def english_titles(evaldata: Path) -> dict[str, str]:
    """Question id → the title of its English article, from the English SQuAD-format sets
    (SQuAD 2.0's development half, XQuAD en): the key a translation with the same question ids
    (SQuAD-es) is split by, so that "Ley Europea" falls where European_Union_law does."""
    titles = {}
    for path in (
        *sorted((evaldata / "squad_v2_dev_half").glob("dev-v2.0*.json"))[:1],
        evaldata / "xquad" / "xquad.en.json",
    ):
        if not path.is_file():
            continue
        for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    titles[str(qa["id"])] = article["title"]
    return titles


def article_key(article: Mapping[str, Any], english: Mapping[str, str], title: str) -> str:
    """The key a SQuAD-format ``article`` is split by: the English title that one of its
    question ids has in ``english`` (``english_titles``), else its own ``title``."""
    ids = (str(qa["id"]) for p in article["paragraphs"] for qa in p["qas"])
    return next((english[i] for i in ids if i in english), title)
