"""Masking personal data in what an answer shows: e-mail addresses, card numbers, phone numbers.

    redact("Write to ana@example.com.", {"email"})  ->  "Write to ███████████████."

Each character of a match becomes ``MASK``, so a masked text is exactly as long as the original
and every offset into it (claims, citations, sentence ranges) still holds. An agent whose policy
names kinds (``Agent.redact``) has them masked in the evidence it reads, before anything is
generated: the answer, its cited text and the search results it shows can then only hold the
masked form, also when they stream.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from citewell.model import Passage, Redaction

__all__ = ["MASK", "redact", "redact_passage"]

MASK = "█"

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", re.UNICODE)
_CARD = re.compile(r"(?<!\d)\d(?:[ -]?\d){12,18}(?!\d)")
_PHONE = re.compile(r"(?<![\w+(])(?:\+|\()?\d[\d ().-]{7,}\d(?!\w)")


def _luhn(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char) * (2 if position % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def _is_card(match: re.Match[str]) -> bool:
    """13-19 digits that pass the Luhn check: the shape of every payment card number."""
    return _luhn(re.sub(r"\D", "", match.group()))


def _is_phone(match: re.Match[str]) -> bool:
    """9 to 15 digits (E.164 allows 15; national numbers with their area code have 9 or more),
    which keeps dates such as 2026-11-30 (8 digits) apart."""
    return 9 <= len(re.sub(r"\D", "", match.group())) <= 15


_KINDS: dict[str, tuple[re.Pattern[str], Callable[[re.Match[str]], bool]]] = {
    "email": (_EMAIL, lambda _: True),
    "card_number": (_CARD, _is_card),
    "phone": (_PHONE, _is_phone),
}


def redact(text: str, kinds: Iterable[Redaction]) -> str:
    """``text`` with every match of the kinds masked, character for character."""
    # Cards first: a card number also has the shape of a phone number.
    for kind in sorted(set(kinds), key=("card_number", "email", "phone").index):
        pattern, accept = _KINDS[kind]
        text = pattern.sub(_masker(accept), text)
    return text


def _masker(accept: Callable[[re.Match[str]], bool]) -> Callable[[re.Match[str]], str]:
    return lambda m: MASK * len(m.group()) if accept(m) else m.group()


def redact_passage(passage: Passage, kinds: Iterable[Redaction]) -> Passage:
    """The passage with its text and its best sentences masked (ranges unchanged)."""
    kinds = tuple(kinds)
    chunk = passage.chunk.model_copy(update={"text": redact(passage.chunk.text, kinds)})
    sentences = tuple(
        s.model_copy(update={"text": redact(s.text, kinds)}) for s in passage.sentences
    )
    return passage.model_copy(update={"chunk": chunk, "sentences": sentences})
