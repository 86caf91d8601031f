"""The numbers a text states, spelt one way, so that a claim and its source can be compared.

A claim that changes "30 days" into "60 days" shares every word with its source but one, and
that one decides: verification and alignment require every number of a claim to stand in the
cited text. "1,000", "1.000" and "1000" are one number; so are "thirty" and "30", and "treinta".
Words that are numbers only sometimes ("one", "una", Chinese 一 inside 一些) are not read.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["numbers", "without_numbers"]

_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")

_UNITS = (
    "two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty",
    "dos tres cuatro cinco seis siete ocho nueve diez once doce trece catorce quince "
    "dieciséis diecisiete dieciocho diecinueve veinte",
)
"""Number words from 2 to 20, English then Spanish."""
_TENS = (
    "thirty forty fifty sixty seventy eighty ninety",
    "treinta cuarenta cincuenta sesenta setenta ochenta noventa",
)
"""Number words from 30 to 90 in tens."""
_SCALES = {
    "hundred": 100,
    "thousand": 1000,
    "million": 10**6,
    "billion": 10**9,
    "cien": 100,
    "mil": 1000,
    "millón": 10**6,
    "millones": 10**6,
}


def _word_values() -> dict[str, int]:
    values = dict(_SCALES)
    for words in _UNITS:
        values.update((word, n) for n, word in enumerate(words.split(), start=2))
    for words in _TENS:
        values.update((word, 10 * n) for n, word in enumerate(words.split(), start=3))
    return values


_VALUE_OF_WORD = _word_values()
_NUMBER_WORD = re.compile(
    r"\b(?:" + "|".join(sorted(_VALUE_OF_WORD, key=len, reverse=True)) + r")\b", re.IGNORECASE
)


def numbers(text: str) -> frozenset[str]:
    """Every number ``text`` states, in digits: "1,000" → "1000", "2,5" → "2.5", "thirty" → "30"."""
    found = {_normal(match) for match in _DIGITS.findall(text)}
    found.update(str(_VALUE_OF_WORD[m.group().casefold()]) for m in _NUMBER_WORD.finditer(text))
    return frozenset(found)


def without_numbers(text: str) -> str:
    """``text`` with every number it states blanked out, for comparing the words around them."""
    return _NUMBER_WORD.sub(" ", _DIGITS.sub(" ", text))


def _normal(written: str) -> str:
    digits = "".join(str(unicodedata.digit(c)) if c.isdigit() else c for c in written)
    parts = re.split(r"[.,]", digits)
    if len(parts) > 1 and all(len(p) == 3 for p in parts[1:]):
        return "".join(parts)  # thousands separators
    return ".".join(parts) if len(parts) == 2 else "".join(parts)
