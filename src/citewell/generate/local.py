"""The ``local`` generator: a GGUF model run in this process by llama.cpp, no service needed.

    pip install 'citewell[local]'
    CITEWELL_GENERATE__LOCAL__MODEL_PATH=/models/qwen2.5-1.5b-instruct-q4_k_m.gguf \\
        citewell serve --generator local

The model reads the same prompt as a remote chat model (``prompt.chat_prompt``: numbered
evidence sentences, cite ``[3]``), and its reply streams out as ``TextPiece`` drafts that the
engine parses, attributes and verifies as it does a remote model's. One thing differs: the model
samples under a grammar (``grammar.citation_grammar``) that lets a bracket open only a marker
naming an evidence number of this request, so it cannot cite what does not exist.

The model loads on the first answer and stays loaded, shared by every generator of the process
with the same settings. llama.cpp runs one answer at a time on a model, so answers take turns;
besides the one being written, at most ``queue`` may wait, and a request beyond them is refused
at once (``GeneratorBusy``, HTTP 429) before anything of its answer is sent.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, cast

import anyio
import anyio.to_thread

from citewell.config import GenerateSettings, LocalSettings
from citewell.errors import GeneratorBusy, GeneratorError, GeneratorUnavailable
from citewell.events import Declined, Draft, TextPiece
from citewell.generate.grammar import citation_grammar
from citewell.generate.prompt import ReplyGate, by_passage, chat_prompt
from citewell.generate.remote import required
from citewell.model import Agent, Evidence

if TYPE_CHECKING:
    from llama_cpp import Llama
    from llama_cpp.llama_types import (
        ChatCompletionRequestMessage,
        CreateChatCompletionStreamResponse,
    )

__all__ = ["LocalGenerator", "LocalModel", "local_model"]

GGUF_MAGIC = b"GGUF"
"""The first bytes of every GGUF file."""


class LocalModel:
    """One GGUF model of this process: loaded on first use, written with by one answer at a time.

    ``place`` counts the answers being written or waiting; ``turn`` is held by the one answer
    the model is writing.
    """

    def __init__(self, settings: LocalSettings) -> None:
        self.settings = settings
        self._llama: Llama | None = None
        self._turn = anyio.Lock()
        self._count = threading.Lock()
        self._held = 0

    @property
    def capacity(self) -> int:
        """Answers held at once: the one being written and those waiting."""
        return 1 + self.settings.queue

    @contextmanager
    def place(self) -> Iterator[None]:
        with self._count:
            if self._held >= self.capacity:
                raise GeneratorBusy(
                    f"The local model is writing an answer and {self.settings.queue} more "
                    "are waiting for it; retry in a moment."
                )
            self._held += 1
        try:
            yield
        finally:
            with self._count:
                self._held -= 1

    async def complete(
        self, messages: list[ChatCompletionRequestMessage], grammar: str, max_tokens: int
    ) -> AsyncGenerator[str, None]:
        """The reply's text as the model writes it, once it is this answer's turn.

        Each token is computed in a worker thread; closing the iterator stops the model.
        """
        async with self._turn:
            llama = await anyio.to_thread.run_sync(self._load)
            chunks = await anyio.to_thread.run_sync(
                lambda: _stream(llama, messages, grammar, max_tokens)
            )
            try:
                while (chunk := await anyio.to_thread.run_sync(next, chunks, None)) is not None:
                    for choice in chunk["choices"]:
                        text = choice["delta"].get("content")
                        if isinstance(text, str) and text:
                            yield text
            finally:
                chunks.close()

    def close(self) -> None:
        """Free the model's memory; it loads again on the next answer."""
        if self._llama is not None:
            self._llama.close()
            self._llama = None

    def _load(self) -> Llama:
        """The model, read from its file the first time (the caller holds the turn)."""
        if self._llama is not None:
            return self._llama
        configured = self.settings.model_path
        setting = ("generate", "local", "model_path")
        path = Path(required(str(configured) if configured else None, "local", *setting))
        try:
            with path.open("rb") as file:
                magic = file.read(len(GGUF_MAGIC))
        except OSError as exc:
            raise GeneratorUnavailable(f"The local model {path} cannot be read: {exc}") from None
        if magic != GGUF_MAGIC:
            raise GeneratorUnavailable(f"The local model {path} is not a GGUF file.")
        try:
            from llama_cpp import Llama
        except ImportError:
            raise GeneratorUnavailable(
                "The local generator needs llama-cpp-python: pip install 'citewell[local]'."
            ) from None
        threads = self.settings.threads
        try:
            self._llama = Llama(
                model_path=str(path),
                n_ctx=self.settings.context,
                n_threads=threads,
                n_threads_batch=threads,
                verbose=False,
            )
        except ValueError as exc:  # llama-cpp-python's only sign that llama.cpp refused it
            raise GeneratorUnavailable(f"The local model {path} does not load: {exc}") from None
        return self._llama


def _stream(
    llama: Llama, messages: list[ChatCompletionRequestMessage], grammar: str, max_tokens: int
) -> Generator[CreateChatCompletionStreamResponse, None, None]:
    from llama_cpp.llama_grammar import LlamaGrammar

    try:
        chunks = llama.create_chat_completion(
            messages,
            stream=True,
            grammar=LlamaGrammar.from_string(grammar, verbose=False),
            temperature=0.0,  # greedy: the same evidence gives the same answer
            max_tokens=max_tokens,
            seed=0,
        )
    except ValueError as exc:  # the prompt does not fit the context window
        raise GeneratorError(
            f"The local model cannot take this evidence: {exc}. Raise generate.local.context "
            "or give the agent fewer passages."
        ) from None
    # stream=True: a generator of chunks, which closing stops
    return cast("Generator[CreateChatCompletionStreamResponse, None, None]", chunks)


_MODELS: dict[LocalSettings, LocalModel] = {}
_MODELS_LOCK = threading.Lock()


def local_model(settings: LocalSettings) -> LocalModel:
    """The process's model for these settings: every generator configured alike shares it."""
    with _MODELS_LOCK:
        return _MODELS.setdefault(settings, LocalModel(settings))


@atexit.register
def _close_models() -> None:
    """Free the models while llama.cpp is still there to free them (not at interpreter exit)."""
    for model in _MODELS.values():
        model.close()


class LocalGenerator:
    """Streams an answer from a GGUF model in this process, citing under a grammar."""

    name = "local"
    judges_answerability = True  # told to reply NO_ANSWER when the evidence does not answer

    def __init__(self, settings: GenerateSettings) -> None:
        self.settings = settings
        self.model = local_model(settings.local)

    def place(self) -> AbstractContextManager[None]:
        return self.model.place()

    async def generate(self, evidence: Evidence, *, agent: Agent) -> AsyncIterator[Draft]:
        groups = by_passage(evidence)
        numbers = [s.number for _, sentences in groups for s in sentences]
        gate = ReplyGate[TextPiece]()
        reply = self.model.complete(
            cast("list[ChatCompletionRequestMessage]", chat_prompt(evidence).messages()),
            citation_grammar(numbers),
            self.settings.max_tokens,
        )
        opened = ""  # a marker the model has begun and not yet closed
        try:
            async for text in reply:
                text, opened = _until_open_marker(opened + text)
                if not text:
                    continue
                for piece in gate.add(text, TextPiece(text)):
                    yield piece
                if gate.declined:
                    break
        finally:
            await reply.aclose()
        # A reply that ends inside a marker was cut at max_tokens: under the grammar a "[" only
        # opens a marker, so what follows it is half a citation, not text; it is left out.
        for piece in gate.finish():
            yield piece
        if gate.declined:
            yield Declined()


def _until_open_marker(text: str) -> tuple[str, str]:
    """``text`` split before a marker it opens and does not close, if any (the grammar's
    markers hold no other bracket)."""
    start = text.rfind("[")
    if start < 0 or "]" in text[start:]:
        return text, ""
    return text[:start], text[start:]
