"""The anthropic generator, against a fake Messages API that streams the real event shapes.

The fake (a Starlette app over loopback) sends exactly the SSE events of the Messages API with
citations (reference/wire-formats.md C.5): ``message_start``, ``content_block_start``,
``content_block_delta`` (``text_delta``, ``citations_delta``), ``content_block_stop``, ``ping``,
``message_delta``, ``message_stop``, and ``error``; and records what the generator sent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from citewell.cite.verify import CalibratedVerifier
from citewell.config import AnthropicSettings, GenerateSettings, Settings
from citewell.engine import Engine
from citewell.errors import GeneratorError, GeneratorTimeout, GeneratorUnavailable
from citewell.events import CitedSentence, Completed, Declined, Draft, Question, TextDelta
from citewell.generate import GENERATORS
from citewell.generate.anthropic import AnthropicGenerator, Documents
from citewell.generate.prompt import passage_label
from citewell.library import Library
from citewell.model import Agent, Evidence, Principal, Turn
from tests.generate.llm_server import serve_asgi
from tests.generate.samples import Doc, evidence, shop_evidence

KEY = "sk-ant-test-0123456789abcdef"
LOCAL = Principal.local()

# The fake server ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cite:
    """A content_block_location citation: document, blocks [start, end)."""

    document: int
    start: int
    end: int


@dataclass(frozen=True)
class Block:
    text: str
    cites: Sequence[Cite | dict[str, Any]] = ()
    """Sent as citations_delta events (dicts as they are: other citation types)."""
    cites_first: bool = False
    """Send the citations before the text (captured streams do both)."""
    on_start: Sequence[Cite] = ()
    """Citations already present in content_block_start."""


@dataclass
class Reply:
    blocks: Sequence[Block] = ()
    status: int = 200
    body: dict[str, Any] | None = None
    stall_before: float = 0.0
    stall_after: int | None = None
    """Hang after this many blocks."""
    error: dict[str, Any] | None = None
    """An ``error`` event after the blocks, instead of the end of the message."""


Script = Callable[[dict[str, Any]], Reply]


@dataclass
class FakeMessages:
    replies: list[Reply | Script] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/messages", self._messages, methods=["POST"])])

    async def _messages(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        scripted = self.replies[min(len(self.requests), len(self.replies)) - 1]
        reply = scripted(body) if callable(scripted) else scripted
        if reply.stall_before:
            await asyncio.sleep(reply.stall_before)
        if reply.status != 200:
            return JSONResponse(reply.body or {}, status_code=reply.status)
        return StreamingResponse(_events(reply, body["model"]), media_type="text/event-stream")


def _event(data: dict[str, Any]) -> str:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"


def _citation(cite: Cite | dict[str, Any]) -> dict[str, Any]:
    if isinstance(cite, dict):
        return cite
    return {
        "type": "content_block_location",
        "cited_text": "(the cited blocks)",
        "document_index": cite.document,
        "document_title": "a title",
        "start_block_index": cite.start,
        "end_block_index": cite.end,
    }


async def _events(reply: Reply, model: str) -> AsyncIterator[str]:
    message: dict[str, Any] = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": model,
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 50, "output_tokens": 1},
    }
    yield _event({"type": "message_start", "message": message})
    for index, block in enumerate(reply.blocks):
        if reply.stall_after is not None and index >= reply.stall_after:
            await asyncio.sleep(30)
        start: dict[str, Any] = {"type": "text", "text": ""}
        if block.cites or block.on_start:
            start["citations"] = [_citation(c) for c in block.on_start]
        yield _event({"type": "content_block_start", "index": index, "content_block": start})
        yield _event({"type": "ping"})
        half = len(block.text) // 2
        texts = [
            {"type": "text_delta", "text": part}
            for part in (block.text[:half], block.text[half:])
            if part
        ]
        cites = [{"type": "citations_delta", "citation": _citation(c)} for c in block.cites]
        for delta in [*cites, *texts] if block.cites_first else [*texts, *cites]:
            yield _event({"type": "content_block_delta", "index": index, "delta": delta})
        yield _event({"type": "content_block_stop", "index": index})
    if reply.error is not None:
        yield _event({"type": "error", "error": reply.error})
        return
    delta = {"stop_reason": "end_turn", "stop_sequence": None}
    yield _event({"type": "message_delta", "delta": delta, "usage": {"output_tokens": 15}})
    yield _event({"type": "message_stop"})


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[FakeMessages, str]]:
    messages = FakeMessages()
    with serve_asgi(messages.app()) as url:
        yield messages, url


@pytest.fixture
def api(fake: tuple[FakeMessages, str]) -> FakeMessages:
    api = fake[0]
    api.replies, api.requests, api.headers = [Reply([Block("Hello.")])], [], []
    return api


@pytest.fixture
def base_url(fake: tuple[FakeMessages, str]) -> str:
    return fake[1]


def generator(base_url: str | None, **anthropic: Any) -> AnthropicGenerator:
    settings = GenerateSettings(
        anthropic=AnthropicSettings(
            base_url=base_url, **{"api_key": KEY, "model": "claude-test", **anthropic}
        ),
        timeout=2.0,
        connect_timeout=1.0,
        max_retries=0,
        max_tokens=300,
    )
    return AnthropicGenerator(settings)


def drafts(gen: AnthropicGenerator, ev: Evidence, **agent: Any) -> list[Draft]:
    async def collect() -> list[Draft]:
        return [d async for d in gen.generate(ev, agent=Agent(**agent))]

    return anyio.run(collect)


# What is sent -------------------------------------------------------------------------------------


def test_each_passage_is_a_document_with_one_content_block_per_sentence(
    api: FakeMessages, base_url: str
) -> None:
    ev = shop_evidence()
    drafts(generator(base_url), ev)
    [sent] = api.requests
    assert sent["model"] == "claude-test"
    assert sent["max_tokens"] == 300
    assert sent["stream"] is True
    assert "temperature" not in sent  # API version 2026-10-21 rejects it
    [message] = sent["messages"]
    assert message["role"] == "user"
    *documents, question = message["content"]
    assert question == {"type": "text", "text": "How long do I have to return something?"}
    assert documents == [
        {
            "type": "document",
            "source": {
                "type": "content",
                "content": [
                    {
                        "type": "text",
                        "text": "Refunds are available within 30 days of purchase with a receipt.",
                    },
                    {"type": "text", "text": "Gift cards cannot be refunded."},
                ],
            },
            "title": "refund_policy_2026.pdf (p. 4)",
            "citations": {"enabled": True},
        },
        {
            "type": "document",
            "source": {
                "type": "content",
                "content": [
                    {"type": "text", "text": "Shipping is free for orders over $50."},
                    {
                        "type": "text",
                        "text": "Orders ship from our warehouse in Leeds within two business days.",
                    },
                ],
            },
            "title": passage_label(ev.passages[1]),  # the label's form: tests/cite/test_locator
            "citations": {"enabled": True},
        },
    ]


def test_the_system_prompt_holds_the_rules_and_the_callers_instructions(
    api: FakeMessages, base_url: str
) -> None:
    drafts(generator(base_url), shop_evidence(instructions="Be brief."))
    system = api.requests[0]["system"]
    assert "NO_ANSWER" in system and "documents" in system
    assert "[3]" not in system  # no marker syntax: the citations API cites
    assert system.endswith("Be brief.")


def test_the_key_goes_as_the_sdk_sends_it(api: FakeMessages, base_url: str) -> None:
    drafts(generator(base_url), shop_evidence())
    headers = api.headers[0]
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["anthropic-version"]


def test_the_agents_model_overrides_the_configured_one(api: FakeMessages, base_url: str) -> None:
    drafts(generator(base_url), shop_evidence(), model="claude-agent")
    assert api.requests[0]["model"] == "claude-agent"


def test_earlier_turns_come_before_the_documents(api: FakeMessages, base_url: str) -> None:
    history = (Turn("user", "Hi"), Turn("assistant", "Hello!"), Turn("user", " "))
    drafts(generator(base_url), shop_evidence(history=history))
    messages = api.requests[0]["messages"]
    assert [(m["role"], m["content"]) for m in messages[:2]] == [
        ("user", "Hi"),
        ("assistant", "Hello!"),
    ]
    assert messages[2]["content"][0]["type"] == "document"


def test_sentences_without_text_are_not_sent_and_keep_the_numbering() -> None:
    ev = evidence("Q?", [Doc(["First one.", "  ", "Third one."]), Doc(["Fourth one."])])
    documents = Documents.of(ev)
    assert documents.numbers == ((1, 3), (4,))
    source: Any = documents.blocks[0]["source"]
    texts = [block["text"] for block in source["content"]]
    assert texts == ["First one.", "Third one."]


# What comes back ----------------------------------------------------------------------------------


def test_content_block_locations_map_back_to_evidence_numbers(
    api: FakeMessages, base_url: str
) -> None:
    api.replies = [
        Reply(
            [
                Block("According to the policy, "),
                Block("refunds are available for 30 days", [Cite(0, 0, 1)]),
                Block(", and ", []),
                Block("shipping is free over $50 from Leeds", [Cite(1, 0, 2)], cites_first=True),
                Block(". Gift cards are excluded.", on_start=[Cite(0, 1, 2)]),
            ]
        )
    ]
    assert drafts(generator(base_url), shop_evidence()) == [
        CitedSentence("According to the policy, ", ()),
        CitedSentence("refunds are available for 30 days", (1,)),
        CitedSentence(", and ", ()),
        CitedSentence("shipping is free over $50 from Leeds", (3, 4)),
        CitedSentence(". Gift cards are excluded.", (2,)),
    ]


def test_citations_to_blocks_or_documents_never_sent_are_dropped(
    api: FakeMessages, base_url: str
) -> None:
    char_location = {
        "type": "char_location",
        "cited_text": "Refunds",
        "document_index": 0,
        "document_title": None,
        "start_char_index": 0,
        "end_char_index": 7,
    }
    cites: list[Cite | dict[str, Any]] = [
        *(Cite(2, 0, 1), Cite(0, 1, 3), Cite(1, 1, 1), Cite(1, -1, 1), char_location)
    ]
    api.replies = [Reply([Block("Refunds take 30 days.", [*cites, Cite(1, 1, 2), Cite(1, 1, 2)])])]
    assert drafts(generator(base_url), shop_evidence()) == [
        CitedSentence("Refunds take 30 days.", (4,))
    ]


def test_a_whitespace_block_goes_in_front_of_the_next(api: FakeMessages, base_url: str) -> None:
    api.replies = [
        Reply([Block("Refunds take 30 days.", [Cite(0, 0, 1)]), Block("\n\n"), Block("Yes.")])
    ]
    assert drafts(generator(base_url), shop_evidence()) == [
        CitedSentence("Refunds take 30 days.", (1,)),
        CitedSentence("\n\nYes.", ()),
    ]


@pytest.mark.parametrize(
    "blocks",
    [[Block("NO_ANSWER")], [Block("NO_"), Block("ANSWER")], [Block("`NO_ANSWER`")], []],
)
def test_a_reply_of_no_answer_declines(
    api: FakeMessages, base_url: str, blocks: list[Block]
) -> None:
    api.replies = [Reply(blocks)]
    assert drafts(generator(base_url), shop_evidence()) == [Declined()]


# Settings -----------------------------------------------------------------------------------------


def test_an_unset_key_names_its_environment_variable(base_url: str) -> None:
    with pytest.raises(GeneratorUnavailable, match="CITEWELL_GENERATE__ANTHROPIC__API_KEY"):
        drafts(generator(base_url, api_key=None), shop_evidence())


def test_an_unset_model_names_its_environment_variable(base_url: str) -> None:
    with pytest.raises(GeneratorUnavailable, match="CITEWELL_GENERATE__ANTHROPIC__MODEL"):
        drafts(generator(base_url, model=None), shop_evidence())


# Errors -------------------------------------------------------------------------------------------


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_1"}


@pytest.mark.parametrize(
    ("status", "kind", "error", "words"),
    [
        (401, "authentication_error", GeneratorUnavailable, "refused the API key"),
        (403, "permission_error", GeneratorUnavailable, "refused the request"),
        (404, "not_found_error", GeneratorUnavailable, "does not serve this model"),
        (429, "rate_limit_error", GeneratorUnavailable, "rate-limiting"),
        (500, "api_error", GeneratorUnavailable, "server error"),
        (529, "overloaded_error", GeneratorUnavailable, "overloaded"),
        (504, "timeout_error", GeneratorTimeout, "timed out"),
        (400, "invalid_request_error", GeneratorError, "rejected the request"),
    ],
)
def test_http_errors_become_generator_errors_that_never_show_the_key(
    api: FakeMessages,
    base_url: str,
    status: int,
    kind: str,
    error: type[GeneratorError],
    words: str,
) -> None:
    api.replies = [Reply(status=status, body=_error(kind, f"invalid x-api-key {KEY}"))]
    with pytest.raises(error) as raised:
        drafts(generator(base_url), shop_evidence())
    assert type(raised.value) is error
    message = str(raised.value)
    assert KEY not in message and words in message and f"HTTP {status}" in message
    assert base_url in message


def test_an_error_event_mid_stream_is_judged_by_its_type(api: FakeMessages, base_url: str) -> None:
    api.replies = [
        Reply([Block("Refunds")], error={"type": "overloaded_error", "message": "Overloaded"})
    ]
    with pytest.raises(GeneratorUnavailable, match="is overloaded \\(Overloaded\\)"):
        drafts(generator(base_url), shop_evidence())


def test_a_silent_server_times_out(api: FakeMessages, base_url: str) -> None:
    api.replies = [Reply([Block("late")], stall_before=3.0)]
    # Had it waited out the stall, the reply would have come: the error is the timeout's.
    with pytest.raises(GeneratorTimeout, match="did not answer in time"):
        drafts(generator(base_url), shop_evidence())


def test_a_server_that_stops_mid_stream_times_out(api: FakeMessages, base_url: str) -> None:
    api.replies = [Reply([Block("Refunds", [Cite(0, 0, 1)]), Block("more")], stall_after=1)]
    received: list[Draft] = []

    async def collect() -> None:
        async for draft in generator(base_url).generate(shop_evidence(), agent=Agent()):
            received.append(draft)

    with pytest.raises(GeneratorTimeout, match="mid-stream"):
        anyio.run(collect)
    # The block that completed before the stall was passed on at once: the answer streams.
    assert received == [CitedSentence("Refunds", (1,))]


def test_a_closed_port_is_unavailable() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(GeneratorUnavailable, match="could not be reached") as raised:
        drafts(generator(f"http://127.0.0.1:{port}"), shop_evidence())
    assert KEY not in str(raised.value)


# Through the engine -------------------------------------------------------------------------------

POLICY = (
    "# Refunds\n\nRefunds are paid within thirty days of the request. "
    "A receipt is required for every refund.\n\n"
    "# Opening hours\n\nThe shop opens at nine in the morning. It closes at six."
)


def _locate(body: dict[str, Any], words: str) -> Cite:
    """Where the fake model finds ``words`` among the documents it was sent."""
    documents = [b for b in body["messages"][-1]["content"] if b["type"] == "document"]
    for d, document in enumerate(documents):
        for b, block in enumerate(document["source"]["content"]):
            if words in block["text"]:
                return Cite(d, b, b + 1)
    raise AssertionError(words)


def test_through_the_engine_citations_quote_the_source_exactly(
    api: FakeMessages, base_url: str, settings: Settings
) -> None:
    def script(body: dict[str, Any]) -> Reply:
        return Reply(
            [
                Block("Refunds are paid within thirty days", [_locate(body, "thirty days")]),
                Block(". "),
                Block("The shop opens at nine.", [_locate(body, "opens at nine"), Cite(9, 0, 1)]),
            ]
        )

    api.replies = [script]
    configured = settings.model_copy(
        update={"generate": generator(base_url).settings.model_copy(update={"max_retries": 0})}
    )
    with Library.open(configured) as library:
        library.create_bucket("shop")
        library.ingest(POLICY.encode(), filename="policy.md", bucket="shop")
        registered = GENERATORS["anthropic"](configured)  # as Engine.open registers it
        engine = Engine(library, {registered.name: registered}, CalibratedVerifier())

        async def collect() -> list[object]:
            question = Question("How long do refunds take, and when does the shop open?")
            agent = Agent(generator="anthropic")
            return [e async for e in engine.stream(question, agent=agent, principal=LOCAL)]

        events = anyio.run(collect)
        completed = events[-1]
        assert isinstance(completed, Completed)
        answer = completed.answer
        assert answer.text == "".join(e.text for e in events if isinstance(e, TextDelta))
        assert answer.text == "Refunds are paid within thirty days. The shop opens at nine."
        assert [c.cited_text for c in answer.citations] == [
            "Refunds are paid within thirty days of the request.",
            "The shop opens at nine in the morning.",
        ]
        for citation in answer.citations:
            text = library.store.source_text(citation.source_id)
            assert text[citation.span.start : citation.span.end] == citation.cited_text
