"""Citation markers in streamed model text: strip them, and remember where they stood.

A model asked to cite evidence sentences by number writes ``... 30 days [3].`` The text reaches
us in pieces cut anywhere (``... 30 days [`` then ``3].``), so ``MarkerStream`` holds back what
might still become a marker, and releases clean text as soon as it is certain:

    stream = MarkerStream(len(evidence.sentences))
    shown = stream.feed(piece)  # for every piece, as it arrives
    shown += stream.flush()     # once the model is done
    stream.markers              # (offset in the clean text, evidence number), in order

Accepted forms: ``[3]``, ``[3, 7]``, ``[3; 7]``, ``[3][7]``, ``[3] [7]``, ``[E3]``, ``【3】``,
``【3，7】`` (full-width digits and commas too). A marker is removed with the spaces before it, so
no double space remains; one that opens a line takes the spaces after it instead. Numbers that
name no evidence sentence are dropped but their marker is still removed. Brackets that hold
anything else (``[sic]``, ``[a]``, ``[1-2]``, JSON) are text and stay as written.

A marker's offset is the end of the text it follows, whitespace not counted: ``A. [1]\\nB``
cites at 2, right after "A.", never at the start of "B". Feeding a text whole or cut into any
pieces gives the same clean text and the same markers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Marker", "MarkerStream", "strip_markers"]

_DIGIT = "[0-9\uff10-\uff19]"
_ID = f"[Ee]?{_DIGIT}{{1,4}}"
_PARTIAL_ID = f"[Ee]?{_DIGIT}{{0,4}}"
_SEP = "[ \t]*[,;\uff0c\uff1b\u3001][ \t]*"
_BRACKETS = (("[", "]"), ("\u3010", "\u3011"))  # [ ], 【 】


def _marker(open_: str, close: str) -> str:
    return rf"{re.escape(open_)}[ \t]*{_ID}(?:{_SEP}{_ID})*[ \t]*{re.escape(close)}"


def _partial(open_: str) -> str:
    # Every prefix of a marker that lacks only its closing bracket, and nothing else.
    return (
        rf"{re.escape(open_)}[ \t]*"
        rf"(?:{_PARTIAL_ID}|{_ID}(?:{_SEP}{_ID})*(?:[ \t]*|{_SEP}{_PARTIAL_ID}))"
    )


_MARKER = re.compile("|".join(_marker(o, c) for o, c in _BRACKETS))
_PARTIAL = re.compile("|".join(_partial(o) for o, _ in _BRACKETS))
_NUMBER = re.compile(_DIGIT + "+")
_OPENERS = "".join(o for o, _ in _BRACKETS)
_NEXT_OPENER = re.compile(f"[{re.escape(_OPENERS)}]")
_SPACE = " \t"
_MAX_MARKER = 48
"""Longest text held back as a possible marker; a real one is far shorter."""


@dataclass(frozen=True, slots=True)
class Marker:
    """An evidence number cited at an offset of the clean text (code points)."""

    offset: int
    number: int


class MarkerStream:
    """Strips citation markers from text fed in pieces, for evidence numbered 1..``count``."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._pending = ""
        """Raw text received but not yet released."""
        self._clean_length = 0
        self._cited_end = 0
        """Where a marker found now would cite: after the last non-space character released."""
        self._line_start = True
        """Whether the released text is empty or ends a line: a marker here takes the spaces
        after it instead of those before it."""
        self._skip_spaces = False
        self._markers: list[Marker] = []
        self._seen: set[Marker] = set()

    @property
    def markers(self) -> tuple[Marker, ...]:
        """Every valid evidence number cited so far, in text order."""
        return tuple(self._markers)

    def feed(self, piece: str) -> str:
        """Take the next piece of raw text; return the clean text that is now certain."""
        self._pending += piece
        return self._drain(final=False)

    def flush(self) -> str:
        """The text still held back, once nothing more will come (an unfinished marker is text)."""
        return self._drain(final=True)

    def numbers_between(self, start: int, end: int, *, inclusive: bool = False) -> list[int]:
        """Numbers cited at offsets in [start, end) — or [start, end] — first citation first."""
        found = (
            m.number
            for m in self._markers
            if start <= m.offset and (m.offset < end or (inclusive and m.offset == end))
        )
        return list(dict.fromkeys(found))

    def _drain(self, *, final: bool) -> str:
        released: list[str] = []
        while self._pending:
            if self._skip_spaces:
                self._pending = self._pending.lstrip(_SPACE)
                if not self._pending:
                    break
                self._skip_spaces = False
            opener = _NEXT_OPENER.search(self._pending)
            if opener is None:
                # Trailing spaces wait: a marker may follow them and take them away.
                text = self._pending if final else self._pending.rstrip(_SPACE)
                released.append(self._release(text))
                self._pending = self._pending[len(text) :]
                break
            at = opener.start()
            before = self._pending[:at]
            marker = _MARKER.match(self._pending, at)
            if marker is not None:
                released.append(self._release(before.rstrip(_SPACE)))
                self._cite(marker.group())
                self._pending = self._pending[marker.end() :]
            elif not final and self._may_become_marker(at):
                released.append(self._release(before.rstrip(_SPACE)))
                self._pending = self._pending[len(before.rstrip(_SPACE)) :]
                break
            else:
                released.append(self._release(self._pending[: at + 1]))
                self._pending = self._pending[at + 1 :]
        return "".join(released)

    def _may_become_marker(self, at: int) -> bool:
        tail = self._pending[at:]
        return len(tail) <= _MAX_MARKER and _PARTIAL.fullmatch(tail) is not None

    def _release(self, text: str) -> str:
        if text:
            content = text.rstrip()
            if content:
                self._cited_end = self._clean_length + len(content)
            self._clean_length += len(text)
            self._line_start = text.endswith("\n")
        return text

    def _cite(self, marker: str) -> None:
        for digits in _NUMBER.findall(marker):
            number = int(digits)  # int() reads full-width digits too
            cited = Marker(self._cited_end, number)
            if 1 <= number <= self._count and cited not in self._seen:
                self._seen.add(cited)
                self._markers.append(cited)
        # A marker that opens the text or a line has no text before it to take spaces from; it
        # takes the spaces after it, or the line would start with a space.
        if self._line_start:
            self._skip_spaces = True


def strip_markers(text: str, count: int) -> tuple[str, tuple[Marker, ...]]:
    """The clean text of a whole reply, and its markers (``MarkerStream`` in one go)."""
    stream = MarkerStream(count)
    clean = stream.feed(text) + stream.flush()
    return clean, stream.markers
