"""Sentences of a canonical text, as exact code-point ranges, found block by block.

blingfire splits English, Spanish and Chinese well and reports offsets in code points (its Python
wrapper maps UTF-8 byte offsets back to ``str`` indices; tests pin this for emoji, combining marks,
CJK and line breaks). We keep only where it *starts* sentences, as break points inside a block,
then mend the few cases it gets wrong with the small rules below. Because the block is cut at
break points and each piece is only trimmed of whitespace, no text is ever lost and sentences
can never overlap or cross a block.

Blocks that are not prose are not split by blingfire: a heading, a table row or a record is one
sentence; a code block is one sentence per line. Any sentence is capped at
``MAX_SENTENCE_CHARS``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from itertools import pairwise

import blingfire

from citewell.ingest.base import Block, BlockKind
from citewell.model import Span

__all__ = ["MAX_SENTENCE_CHARS", "sentence_spans"]

MAX_SENTENCE_CHARS = 1000
"""Longest sentence, in code points (about 150 English words or one chunk's worth).

A sentence is the unit of citation and of support checking. Text without sentence punctuation
(a PDF page of bullet fragments, a run-on OCR block, a long table cell) would otherwise become one
unbounded "sentence": a citation that highlights a whole page and an input too long for a
verifier. Longer runs are cut at the last whitespace or clause comma before the cap.
"""

_ONE_SENTENCE = frozenset({BlockKind.HEADING, BlockKind.TABLE_ROW, BlockKind.RECORD})

# Punctuation that closes a quotation or bracket and so belongs to the sentence before a break.
# blingfire puts a break *before* it in Chinese ("你好。”然后" -> "你好。" | "”然后").
_CLOSERS = "”’」』）》〉】〕〗)]}»"
# Straight quotes can open as well as close: they close only when glued to the terminal mark.
_AMBIGUOUS_CLOSERS = "\"'"
_TERMINALS = ".!?。！？…"
_TITLE_CLOSERS = "》〉"
_CLAUSE_MARKS = "，、；：,;:"  # a sentence never starts with one; a run-on one is cut after one

# Abbreviations after which blingfire sometimes breaks although the sentence goes on. Lowercase,
# without the final period.
_TITLES = frozenset(
    "mr mrs ms dr prof rev mt gen col capt lt sgt gov sen rep hon messrs fr "
    "sr sra srta sres dra lic ing arq profa dña sto sta mons gral av avda".split()
)
"""Precede a name; never end a sentence."""
_BEFORE_NUMBER = frozenset(
    "p pp pág págs pag núm nº no nos art arts cap caps fig figs vol vols ed sec tel ch chap eq "
    "ref refs".split()
)
"""Precede a number ("pág. 12"); may end a sentence otherwise ("No.")."""
_NEVER_FINAL = frozenset("e.g i.e cf vs viz approx aprox ej".split())
"""Introduce what follows ("e.g. Paris", "p. ej. el gato")."""
_NOT_SENTENCE_END = (
    _TITLES | _BEFORE_NUMBER | _NEVER_FINAL | frozenset("al jr st ud uds vd vds".split())
)
"""Words after which a period and a capital do not prove a sentence end ("et al. Smith",
"St. Louis" where St. may also be a street ending a sentence)."""

_VIEW = 32  # characters looked back for an abbreviation: all of them are much shorter
_NUMBER = re.compile(r"(?:\d|[IVXLC]{2,}\b)")  # not "I": "No. I think so."
_ENUMERATOR = re.compile(r"(?:\d{1,3}|[A-Za-z]|[ivxlc]{1,5}|[IVXLC]{1,5})[.)]")
# "word. Next": a period after a plain word of two or more letters, then an uppercase letter
# (possibly after an opening mark). blingfire misses some of these ("back. Wait... what?",
# "vote. Rev. Paul", "1600 mm. Sin embargo", "etc. Luego").
_WORD_PERIOD_CAPITAL = re.compile(r"(?<![\w.])([^\W\d_]{2,})\.\s+(?=[¿¡\"'“‘«(\[]*[^\W\d_])")
_BLANK_LINE = re.compile(r"\n[^\S\n]*\n\s*")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def sentence_spans(text: str, blocks: Sequence[Block]) -> tuple[Span, ...]:
    """The sentences of ``text``, block by block, as trimmed, ordered, non-overlapping ranges.

    Every non-blank block yields at least one sentence and every non-whitespace character of a
    block lies in exactly one sentence. Blocks must be in order and must not overlap.
    """
    spans: list[Span] = []
    for block in blocks:
        start, end = block.span.start, block.span.end
        piece = text[start:end]
        if piece.isspace() or not piece:
            continue
        for a, b in _pieces(piece, _breaks(piece, block.kind)):
            spans.append(Span(start=start + a, end=start + b))
    return tuple(spans)


def _breaks(piece: str, kind: BlockKind) -> list[int]:
    """Where sentences start inside one block (positions in ``piece``, the first excluded)."""
    if kind in _ONE_SENTENCE:
        return []
    if kind is BlockKind.CODE:
        return [m.end() for m in re.finditer("\n", piece)]
    breaks = _blingfire_breaks(piece)
    breaks = [m for b in breaks if (m := _past_closing_marks(piece, b)) is not None]
    breaks = [b for b in breaks if not _continues_after_abbreviation(piece, b)]
    # A blank line inside a block separates paragraphs that a parser left together.
    blank_lines = (m.end() for m in _BLANK_LINE.finditer(piece))
    breaks = sorted({*breaks, *_missed_breaks(piece), *blank_lines})
    return _drop_enumerator_breaks(piece, breaks)


def _blingfire_breaks(piece: str) -> list[int]:
    # A lone surrogate cannot be encoded to UTF-8; a replacement of the same length keeps offsets.
    safe = _SURROGATE.sub("\ufffd", piece)
    _, offsets = blingfire.text_to_sentences_and_offsets(safe)
    return [start for start, _ in offsets[1:]]


def _past_closing_marks(piece: str, b: int) -> int | None:
    """Move a break past the closing marks that end the sentence before it; None to drop it.

    blingfire breaks *before* a closing quote or bracket in Chinese ("你好。”然后" becomes
    "你好。" | "”然后"). The marks, and a full stop after them ("！」。"), belong to the sentence
    before. If the marks close a book title (《真的吗？》) or a clause mark follows them
    ("『鸟！』，求救者"), the exclamation was inside the sentence and there is no break at all.
    """
    start = b
    while b < len(piece) and _closes(piece[b - 1], piece[b]):
        b += 1
    if b == start:
        return b
    if b < len(piece) and piece[b] in _CLAUSE_MARKS:
        return None
    if any(mark in piece[start:b] for mark in _TITLE_CLOSERS) and piece[b - 1] not in _TERMINALS:
        return None
    return b


def _closes(previous: str, char: str) -> bool:
    """Whether ``char`` still closes the sentence that ``previous`` belongs to the end of."""
    if previous not in _TERMINALS + _CLOSERS + _AMBIGUOUS_CLOSERS:
        return False
    if char in _AMBIGUOUS_CLOSERS:
        return previous in _TERMINALS
    return char in _CLOSERS or (char in _TERMINALS and previous not in _TERMINALS)


def _continues_after_abbreviation(piece: str, b: int) -> bool:
    """Whether a break follows an abbreviation that the next words continue ("pág. 12")."""
    token = _last_token(piece, b).lstrip("([¿¡\"'“‘«").lower()
    if not token.endswith("."):
        return False
    token = token[:-1]
    if token in _TITLES or token in _NEVER_FINAL:
        return True
    return token in _BEFORE_NUMBER and _NUMBER.match(piece, b) is not None


def _last_token(piece: str, b: int) -> str:
    """The whitespace-delimited token before position ``b``, if short enough to be in view."""
    window = max(0, b - _VIEW)
    head = piece[window:b].rstrip()
    token = head.rsplit(maxsplit=1)[-1] if head else ""
    if window > 0 and len(token) == len(head):
        return ""  # the token may go on before the view: too long to be an abbreviation
    return token


def _missed_breaks(piece: str) -> Iterable[int]:
    """Breaks after "word." followed by a capitalised word, where the word is no abbreviation."""
    for match in _WORD_PERIOD_CAPITAL.finditer(piece):
        word = match.group(1)
        if word.isupper() or word.lower() in _NOT_SENTENCE_END:
            continue  # an acronym ("EE. UU.", "U.N.") or an abbreviation: trust blingfire
        following = piece[match.end() : match.end() + 8].lstrip("¿¡\"'“‘«([")
        if following[:1].isupper():
            yield match.end()


def _drop_enumerator_breaks(piece: str, breaks: list[int]) -> list[int]:
    """Join a list marker that blingfire cut off ("1." | "The parties agree.") to its sentence."""
    kept: list[int] = []
    previous = 0
    for b in breaks:
        if _ENUMERATOR.fullmatch(piece[previous:b].strip()):
            continue
        kept.append(b)
        previous = b
    return kept


def _pieces(piece: str, breaks: list[int]) -> Iterable[tuple[int, int]]:
    """Cut ``piece`` at ``breaks``, trim each part, cap its length and skip blank parts."""
    for a, b in pairwise([0, *breaks, len(piece)]):
        part = piece[a:b]
        stripped = part.strip()
        if not stripped:
            continue
        start = a + len(part) - len(part.lstrip())
        yield from _capped(piece, start, start + len(stripped))


def _capped(piece: str, start: int, end: int) -> Iterable[tuple[int, int]]:
    """Split a trimmed range longer than MAX_SENTENCE_CHARS into trimmed parts under the cap."""
    while end - start > MAX_SENTENCE_CHARS:
        cut = _cut_point(piece, start, start + MAX_SENTENCE_CHARS)
        yield start, start + len(piece[start:cut].rstrip())
        start = cut
        while piece[start].isspace():  # stops before ``end``: the range ends trimmed
            start += 1
    yield start, end


def _cut_point(piece: str, start: int, limit: int) -> int:
    """Where to cut a run-on range: after its last space or clause comma before ``limit``.

    Without either (a long CJK or unbroken run), cut at the limit, stepping back over combining
    marks so that no mark is separated from its base character.
    """
    for i in range(limit, start, -1):  # ``start`` is not a space, so no part is blank
        if piece[i].isspace() or piece[i - 1] in _CLAUSE_MARKS:
            return i
    cut = limit
    while cut > start + 1 and unicodedata.combining(piece[cut]):
        cut -= 1
    return cut
