"""The ``anthropic`` generator: the Messages API writes the answer and cites through its citations.

Each evidence passage goes to the model as one custom-content document, one text block per
evidence sentence, with citations enabled, so a ``content_block_location`` citation (document,
blocks ``[start, end)``) names evidence sentences exactly:

    {"type": "document", "title": "handbook.pdf (p. 4)", "citations": {"enabled": true},
     "source": {"type": "content", "content": [{"type": "text", "text": "<sentence 1>"}, ...]}}

The reply streams as text blocks; each block becomes one ``CitedSentence`` when it completes,
citing the evidence its ``citations_delta`` events named (none for connective text, which the
engine aligns or leaves uncited). A block of whitespace alone goes in front of the next block. A
reply of ``NO_ANSWER`` becomes ``Declined``.

The request carries no ``temperature``: the API version the SDK sends (2026-10-21) rejects it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import anthropic
from anthropic.types import (
    CitationContentBlockLocation,
    CitationsDelta,
    DocumentBlockParam,
    MessageParam,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    TextBlock,
    TextBlockParam,
    TextDelta,
)

from citewell.config import GenerateSettings
from citewell.errors import GeneratorError, GeneratorTimeout, GeneratorUnavailable
from citewell.events import CitedSentence, Declined, Draft
from citewell.generate.prompt import ReplyGate, by_passage, document_rules, one_line, passage_label
from citewell.generate.remote import (
    STATUS_ERRORS,
    TRANSPORT_ERRORS,
    Failure,
    FailureTable,
    Remote,
    endpoint_of,
    required,
    timeout,
    tls_context,
    translated,
)
from citewell.model import Agent, Evidence

__all__ = ["ERRORS", "AnthropicGenerator", "Documents"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
_MAX_TITLE = 200
"""Longest document title sent (the API limits titles; a label past this is cut)."""

ERRORS: FailureTable = {
    **STATUS_ERRORS,
    **TRANSPORT_ERRORS,
    # An error event in a stream that began with 200: the SDK raises a plain APIStatusError.
    "overloaded_error": Failure(GeneratorUnavailable, "is overloaded"),
    "rate_limit_error": Failure(GeneratorUnavailable, "is rate-limiting requests"),
    "api_error": Failure(GeneratorUnavailable, "failed with a server error"),
    "timeout_error": Failure(GeneratorTimeout, "timed out"),
    anthropic.APITimeoutError: Failure(GeneratorTimeout, "did not answer in time"),
    anthropic.APIConnectionError: Failure(GeneratorUnavailable, "could not be reached"),
    anthropic.AuthenticationError: Failure(GeneratorUnavailable, "refused the API key"),
    anthropic.PermissionDeniedError: Failure(GeneratorUnavailable, "refused the request"),
    anthropic.PaymentRequiredError: Failure(GeneratorUnavailable, "refused the request (billing)"),
    anthropic.NotFoundError: Failure(GeneratorUnavailable, "does not serve this model or path"),
    anthropic.RateLimitError: Failure(GeneratorUnavailable, "is rate-limiting requests"),
    anthropic.RequestTimeoutError: Failure(GeneratorTimeout, "timed out"),
    anthropic.GatewayTimeoutError: Failure(GeneratorTimeout, "timed out"),
    anthropic.DeadlineExceededError: Failure(GeneratorTimeout, "timed out"),
    anthropic.OverloadedError: Failure(GeneratorUnavailable, "is overloaded"),
    anthropic.InternalServerError: Failure(GeneratorUnavailable, "failed with a server error"),
    anthropic.APIStatusError: Failure(GeneratorError, "rejected the request"),
    anthropic.APIResponseValidationError: Failure(GeneratorError, "sent an unreadable reply"),
    anthropic.APIError: Failure(GeneratorError, "failed"),
    anthropic.AnthropicError: Failure(GeneratorError, "failed"),
}
"""The Anthropic SDK's failures as citewell errors (tests/generate/test_remote.py checks all)."""

MID_STREAM_ERRORS: FailureTable = {
    **ERRORS,
    anthropic.APITimeoutError: Failure(GeneratorTimeout, "stopped answering mid-stream"),
    anthropic.APIConnectionError: Failure(GeneratorUnavailable, "broke the connection mid-stream"),
}
"""Once the stream has begun: since 2.17 the SDK wraps a timeout or a broken connection while
reading the stream as it wraps one before the reply (older releases let httpx2's own through,
which ``TRANSPORT_ERRORS`` names)."""

SERVICE = "the Anthropic Messages API"


@dataclass(frozen=True, slots=True)
class Documents:
    """The evidence as document blocks, and which evidence sentence each content block is."""

    blocks: tuple[DocumentBlockParam, ...]
    numbers: tuple[tuple[int, ...], ...]
    """``numbers[document_index][block_index]``: the evidence number of that content block."""

    @classmethod
    def of(cls, evidence: Evidence) -> Documents:
        blocks: list[DocumentBlockParam] = []
        numbers: list[tuple[int, ...]] = []
        for passage, sentences in by_passage(evidence):
            content: list[TextBlockParam] = [
                {"type": "text", "text": one_line(s.text)} for s in sentences
            ]
            blocks.append(
                {
                    "type": "document",
                    "source": {"type": "content", "content": content},
                    "title": passage_label(passage)[:_MAX_TITLE],
                    "citations": {"enabled": True},
                }
            )
            numbers.append(tuple(s.number for s in sentences))
        return cls(tuple(blocks), tuple(numbers))

    def cited(self, location: CitationContentBlockLocation) -> tuple[int, ...]:
        """The evidence numbers a citation names; none if it names blocks that were not sent."""
        if not 0 <= location.document_index < len(self.numbers):
            return ()
        document = self.numbers[location.document_index]
        start, end = location.start_block_index, location.end_block_index
        if not 0 <= start < end <= len(document):
            return ()
        return document[start:end]


@dataclass
class _Block:
    """A text block of the reply as it streams."""

    text: str = ""
    numbers: list[int] = field(default_factory=list)

    def cite(self, numbers: Sequence[int]) -> None:
        self.numbers.extend(n for n in numbers if n not in self.numbers)


class AnthropicGenerator:
    """Streams a cited answer from the Messages API; configured on first use."""

    name = "anthropic"
    judges_answerability = True  # told to reply NO_ANSWER when the evidence does not answer

    def __init__(self, settings: GenerateSettings) -> None:
        self.settings = settings

    async def generate(self, evidence: Evidence, *, agent: Agent) -> AsyncIterator[Draft]:
        documents = Documents.of(evidence)
        settings = self.settings.anthropic
        key = required(settings.api_key, self.name, "generate", "anthropic", "api_key")
        model = required(
            agent.model or settings.model,
            self.name,
            *("generate", "anthropic", "model"),
            otherwise="give the agent a model",
        )
        base_url = settings.base_url or DEFAULT_BASE_URL
        gate = ReplyGate[CitedSentence]()
        blocks: dict[int, _Block] = {}
        carried = ""  # whitespace-only blocks, waiting for the next block
        remote = Remote(SERVICE, endpoint_of(base_url), key)
        with translated(ERRORS, remote):
            async with self._client(base_url, key) as client:
                stream = await client.messages.create(
                    model=model,
                    max_tokens=self.settings.max_tokens,
                    system=document_rules(evidence),
                    messages=_messages(evidence, documents),
                    stream=True,
                )
                with translated(MID_STREAM_ERRORS, remote):
                    async with stream:
                        async for event in stream:
                            if isinstance(event, RawContentBlockStartEvent):
                                if isinstance(event.content_block, TextBlock):
                                    block = blocks[event.index] = _Block(event.content_block.text)
                                    for citation in event.content_block.citations or ():
                                        if isinstance(citation, CitationContentBlockLocation):
                                            block.cite(documents.cited(citation))
                            elif isinstance(event, RawContentBlockDeltaEvent):
                                block = blocks.get(event.index) or _Block()
                                if isinstance(event.delta, TextDelta):
                                    block.text += event.delta.text
                                elif isinstance(event.delta, CitationsDelta):
                                    citation = event.delta.citation
                                    if isinstance(citation, CitationContentBlockLocation):
                                        block.cite(documents.cited(citation))
                            elif isinstance(event, RawContentBlockStopEvent):
                                done = blocks.pop(event.index, None)
                                if done is None:  # not a text block (thinking, tool use)
                                    continue
                                if not done.text.strip():
                                    carried += done.text
                                    continue
                                sentence = CitedSentence(carried + done.text, tuple(done.numbers))
                                carried = ""
                                for draft in gate.add(sentence.text, sentence):
                                    yield draft
                                if gate.declined:
                                    break  # closing the stream stops the model
        for draft in gate.finish():
            yield draft
        if gate.declined:
            yield Declined()

    def _client(self, base_url: str, key: str) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            api_key=key,
            base_url=base_url,
            timeout=timeout(self.settings),
            max_retries=self.settings.max_retries,
            http_client=anthropic.DefaultAsyncHttpxClient(verify=tls_context()),
        )


def _messages(evidence: Evidence, documents: Documents) -> list[MessageParam]:
    """The earlier turns as text, then the documents and the question in one user turn."""
    messages: list[MessageParam] = []
    for turn in evidence.history:
        if turn.text.strip():
            if turn.role == "user":
                messages.append({"role": "user", "content": turn.text})
            else:
                messages.append({"role": "assistant", "content": turn.text})
    question: TextBlockParam = {"type": "text", "text": evidence.question}
    messages.append({"role": "user", "content": [*documents.blocks, question]})
    return messages
