"""The ``openai-compatible`` generator: any ``/v1/chat/completions`` endpoint writes the answer.

vLLM, Ollama, a llama.cpp server or OpenAI itself, given a base URL, a model and (if it wants
one) a key. The model reads the evidence as numbered sentences and cites them inline, ``[3]``
(``prompt.chat_prompt``); its reply streams out as ``TextPiece`` drafts, and the engine parses,
checks and strips the markers. A reply of ``NO_ANSWER`` becomes ``Declined``: the first pieces of
a reply are held back until it is clear it is not that.

    CITEWELL_GENERATE__OPENAI__BASE_URL=http://127.0.0.1:11434/v1 \\
    CITEWELL_GENERATE__OPENAI__MODEL=qwen2.5:7b-instruct citewell serve

The request sends ``max_tokens`` (which every compatible server reads; llama.cpp's ignores
``max_completion_tokens``) and the configured ``temperature``. Only the configured key is ever
sent: the SDK's own environment variables (``OPENAI_API_KEY``, ``OPENAI_CUSTOM_HEADERS``) cannot
put another key on a request to this server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import cast

import openai
from openai.types.chat import ChatCompletionChunk, ChatCompletionMessageParam

from citewell.config import GenerateSettings
from citewell.errors import GeneratorError, GeneratorTimeout, GeneratorUnavailable
from citewell.events import Declined, Draft, TextPiece
from citewell.generate.prompt import ReplyGate, chat_prompt
from citewell.generate.remote import (
    STATUS_ERRORS,
    TRANSPORT_ERRORS,
    Failure,
    FailureTable,
    Remote,
    endpoint_of,
    required,
    secret,
    timeout,
    tls_context,
    translated,
)
from citewell.model import Agent, Evidence

__all__ = ["ERRORS", "OpenAICompatibleGenerator"]

ERRORS: FailureTable = {
    **STATUS_ERRORS,
    **TRANSPORT_ERRORS,
    openai.APITimeoutError: Failure(GeneratorTimeout, "did not answer in time"),
    openai.APIConnectionError: Failure(GeneratorUnavailable, "could not be reached"),
    openai.AuthenticationError: Failure(GeneratorUnavailable, "refused the API key"),
    openai.PermissionDeniedError: Failure(GeneratorUnavailable, "refused the request"),
    openai.NotFoundError: Failure(GeneratorUnavailable, "does not serve this model or path"),
    openai.RateLimitError: Failure(GeneratorUnavailable, "is rate-limiting or out of quota"),
    openai.InternalServerError: Failure(GeneratorUnavailable, "failed with a server error"),
    openai.APIStatusError: Failure(GeneratorError, "rejected the request"),
    openai.APIResponseValidationError: Failure(GeneratorError, "sent an unreadable reply"),
    openai.APIError: Failure(GeneratorError, "failed"),  # an error object inside the stream
    openai.OpenAIError: Failure(GeneratorError, "failed"),
}
"""The OpenAI SDK's failures as citewell errors (tests/generate/test_remote.py proves it whole)."""

SERVICE = "the OpenAI-compatible API"


@dataclass(frozen=True, slots=True)
class _Target:
    base_url: str
    key: str | None
    model: str


class OpenAICompatibleGenerator:
    """Streams an answer from a chat-completions endpoint; configured on first use."""

    name = "openai-compatible"
    judges_answerability = True  # told to reply NO_ANSWER when the evidence does not answer

    def __init__(self, settings: GenerateSettings) -> None:
        self.settings = settings

    async def generate(self, evidence: Evidence, *, agent: Agent) -> AsyncIterator[Draft]:
        target = self._target(agent)
        remote = Remote(SERVICE, endpoint_of(target.base_url), target.key)
        gate = ReplyGate[TextPiece]()
        messages = cast("list[ChatCompletionMessageParam]", chat_prompt(evidence).messages())
        with translated(ERRORS, remote):
            async with self._client(target) as client:
                stream = await client.chat.completions.create(
                    model=target.model,
                    messages=messages,
                    stream=True,
                    temperature=self.settings.openai.temperature,
                    max_tokens=self.settings.max_tokens,
                    # Exactly the configured key, or none: never one from the environment.
                    extra_headers={
                        "Authorization": f"Bearer {target.key}" if target.key else openai.omit
                    },
                )
                finished = False
                async with stream:
                    async for chunk in stream:
                        text = _content(chunk)
                        if text:
                            for piece in gate.add(text, TextPiece(text)):
                                yield piece
                        if gate.declined:
                            break  # closing the stream stops the model
                        finished = finished or any(c.finish_reason for c in chunk.choices)
                if not (finished or gate.declined):
                    # A server that fails mid-answer (llama.cpp past its context window) just
                    # ends the stream: an empty or cut answer must not pass for a whole one.
                    raise GeneratorError(
                        f"The stream from {remote.service} at {remote.endpoint} ended before the "
                        "model finished."
                    )
        for piece in gate.finish():
            yield piece
        if gate.declined:
            yield Declined()

    def _target(self, agent: Agent) -> _Target:
        """Where to send the request; ``GeneratorUnavailable`` naming what is not configured."""
        settings = self.settings.openai
        base_url = required(settings.base_url, self.name, "generate", "openai", "base_url")
        model = required(
            agent.model or settings.model,
            self.name,
            *("generate", "openai", "model"),
            otherwise="give the agent a model",
        )
        return _Target(base_url=base_url, key=secret(settings.api_key), model=model)

    def _client(self, target: _Target) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=target.base_url,
            # The SDK insists on a key; without one, the header is omitted on each request.
            api_key=target.key or "unused",
            timeout=timeout(self.settings),
            max_retries=self.settings.max_retries,
            http_client=openai.DefaultAsyncHttpxClient(verify=tls_context()),
        )


def _content(chunk: ChatCompletionChunk) -> str:
    """The answer text a chunk adds (the usage chunk and role-only deltas add none)."""
    for choice in chunk.choices or ():
        if choice.index == 0 and choice.delta is not None:
            return choice.delta.content or ""
    return ""
