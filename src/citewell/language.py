"""Which language a text is in, for the three languages citewell is tuned for.

Used to pick a stemmer for BM25 and to report a source's main language. The guess is cheap and
deliberately simple: Han characters mean Chinese; otherwise the share of Spanish and English
function words decides. Anything else is reported as None and indexed without stemming.

Also counts words across scripts, so that chunk sizes mean the same in Chinese and in English,
and negation cues ("not", "nunca", "不"), which the verifier and the finder of disagreements
between sources read alike.
"""

from __future__ import annotations

import re

__all__ = ["count_negations", "count_words", "detect_language", "is_cjk"]

# Han ideographs: extension A, the unified block, compatibility ideographs, and extensions B-H
# (beyond the BMP: rare characters of names and places, still Chinese text).
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")
_WORD = re.compile(r"[^\W\d_]+")
_ALNUM = re.compile(r"[^\W_]")

HAN_WORD_WEIGHT = 0.5
"""How much of a word one Han character counts for: a Chinese word is about two characters."""

_SPANISH = frozenset(
    "el la los las un una unos unas y o de del al en con por para que se su sus es son fue "
    "está están como más pero sin sobre entre también lo le les ya muy este esta estos estas "
    "ese esa hay donde cuando quien cual qué cómo".split()
)
_ENGLISH = frozenset(
    "the a an and or of to in on at by for with from that this these those is are was were be "
    "been it its as but not which who what when where how there their they he she his her".split()
)


def is_cjk(char: str) -> bool:
    """Whether one character is a Han ideograph."""
    return _HAN.match(char) is not None


def count_words(text: str) -> float:
    """Words in ``text``: whitespace-separated tokens holding a letter or digit, plus half a word
    per Han character (Chinese is written without spaces)."""
    han = len(_HAN.findall(text))
    rest = _HAN.sub(" ", text) if han else text
    tokens = sum(1 for token in rest.split() if _ALNUM.search(token))
    return tokens + HAN_WORD_WEIGHT * han


def detect_language(text: str) -> str | None:
    """Guess 'en', 'es' or 'zh' for a text; None when nothing decides."""
    sample = text[:20_000]
    han = len(_HAN.findall(sample))
    words = [w.lower() for w in _WORD.findall(sample)]
    if han and han >= len(words) * 0.5:
        return "zh"
    if not words:
        return None
    spanish = sum(w in _SPANISH for w in words) + 2 * sum(c in "ñ¿¡" for c in sample)
    english = sum(w in _ENGLISH for w in words)
    if max(spanish, english) < max(1, len(words) // 50):
        return None
    return "es" if spanish > english else "en"


_NEGATION_WORDS = frozenset(
    "not no never cannot none nor neither nobody nothing nunca jamás jamas ni ningún ninguna "
    "ninguno nada nadie tampoco".split()
)
_NEGATION_WORD = re.compile(r"\w+(?:n't)?", re.IGNORECASE)
_ZH_NEGATION = re.compile(r"(?:没有|不|没|未|非|无|别)")
_ZH_NOT_NEGATION = re.compile(r"非常|不过|不仅|不但|无论|不同|并非常|除非|是非|无数|不断")
"""Words that hold a negation character without negating ("very", "however", "whether")."""


def count_negations(text: str) -> int:
    """How many negation cues (en, es, zh) the text holds."""
    count: int = sum(
        w.casefold() in _NEGATION_WORDS or w.casefold().endswith("n't")
        for w in _NEGATION_WORD.findall(text)
    )
    if any(is_cjk(c) for c in text):
        count += len(_ZH_NEGATION.findall(_ZH_NOT_NEGATION.sub("", text)))
    return count
