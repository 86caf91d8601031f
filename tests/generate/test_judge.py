"""The chat-model verifier, against a fake chat-completions server and a real local one.

The fake (a Starlette app over loopback) answers with the reply the test sets and records what
it was sent; the real one is llama-cpp-python's server with SmolLM2-135M (``make llm``), marked
slow. A 135M model is no judge: the real tests check the mechanics, not its verdicts.
"""

from __future__ import annotations

import logging
import math
import socket
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from citewell.cite.verify import CalibratedVerifier
from citewell.config import CiteSettings, GenerateSettings, OpenAICompatibleSettings, Settings
from citewell.engine import Engine
from citewell.errors import GeneratorUnavailable
from citewell.events import CitedSentence, Draft, Question
from citewell.generate.judge import QUESTION, SYSTEM, ChatJudge
from citewell.library import Library
from citewell.model import Agent, Answer, Evidence, GroundingState, Principal
from tests.generate.llm_server import LlamaServer, llama_missing, llama_server, serve_asgi

PASSAGE = "Refunds are paid within thirty days of the request."
CLAIM = "A refund arrives within a month."


# The fake server ---------------------------------------------------------------------------------


@dataclass
class Reply:
    """What the fake judge answers: its text, and the top first tokens with probabilities."""

    content: str = "Yes"
    top: Sequence[tuple[str, float]] | None = None
    """(token, probability); None: the reply carries no logprobs."""
    status: int = 200
    stall: float = 0.0


@dataclass
class FakeJudge:
    """Answers every request with ``reply(request body)`` and records each request."""

    reply: Callable[[dict[str, Any]], Reply] = lambda body: Reply()
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self._chat, methods=["POST"])])

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        scripted = self.reply(body)
        if scripted.stall:
            await anyio.sleep(scripted.stall)
        if scripted.status != 200:
            error = {"message": "the model crashed", "type": "server_error"}
            return JSONResponse({"error": error}, status_code=scripted.status)
        return JSONResponse(_completion(scripted))


def _completion(scripted: Reply) -> dict[str, Any]:
    logprobs = None
    if scripted.top is not None:
        top = [{"token": t, "logprob": math.log(p), "bytes": None} for t, p in scripted.top]
        logprobs = {"content": [{**top[0], "top_logprobs": top}], "refusal": None}
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": scripted.content},
        "finish_reason": "length",
        "logprobs": logprobs,
    }
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "judge-model",
        "choices": [choice],
        "usage": {"prompt_tokens": 40, "completion_tokens": 1, "total_tokens": 41},
    }


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[FakeJudge, str]]:
    fake = FakeJudge()
    with serve_asgi(fake.app()) as url:
        yield fake, f"{url}/v1"


@pytest.fixture
def fake(served: tuple[FakeJudge, str]) -> FakeJudge:
    fake = served[0]
    fake.reply, fake.requests, fake.headers = (lambda body: Reply()), [], []
    return fake


@pytest.fixture
def base_url(served: tuple[FakeJudge, str]) -> str:
    return served[1]


def configured(
    settings: Settings, base_url: str | None, *, timeout: float = 2.0, **openai: Any
) -> Settings:
    return settings.model_copy(
        update={
            "generate": GenerateSettings(
                openai=OpenAICompatibleSettings(base_url=base_url, **openai), connect_timeout=1.0
            ),
            "cite": CiteSettings(judge_timeout=timeout),
        }
    )


def judge(settings: Settings, base_url: str | None, model: str | None = "judge-model") -> ChatJudge:
    return ChatJudge(configured(settings, base_url), model, fallback=CalibratedVerifier())


def calibrated(claim: str = CLAIM, passage: str = PASSAGE) -> float:
    return CalibratedVerifier().support(claim, [passage], language="en")


# The score ---------------------------------------------------------------------------------------


def test_the_question_asks_for_yes_or_no_with_the_top_logprobs(
    fake: FakeJudge, base_url: str, settings: Settings
) -> None:
    judge(settings, base_url).support(CLAIM, [PASSAGE, "A receipt is required."], language="en")
    [body] = fake.requests
    assert body["messages"] == [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": QUESTION.format(passage=f"{PASSAGE} A receipt is required.", claim=CLAIM),
        },
    ]
    assert (body["model"], body["logprobs"], body["top_logprobs"]) == ("judge-model", True, 20)
    assert (body["temperature"], body["max_tokens"]) == (0.0, 2)
    assert "authorization" not in fake.headers[0]  # no key configured, none from the environment


def test_the_configured_key_is_sent(fake: FakeJudge, base_url: str, settings: Settings) -> None:
    chosen = configured(settings, base_url, api_key="sk-judge-123")
    ChatJudge(chosen, "judge-model", fallback=CalibratedVerifier()).support(
        CLAIM, [PASSAGE], language="en"
    )
    assert fake.headers[0]["authorization"] == "Bearer sk-judge-123"


@pytest.mark.parametrize(
    ("top", "expected"),
    [
        # yes-like 0.3 + 0.1, no-like 0.2: the other tokens do not count
        ([("Yes", 0.3), ("The", 0.35), ("No", 0.2), (" yes", 0.1), ("Y", 0.05)], 0.4 / 0.6),
        ([("NO", 0.6), ("Sí", 0.2), ("no.", 0.1)], 0.2 / 0.9),
        ([("是", 0.45), ("否", 0.15), ("不是", 0.3)], 0.45 / 0.9),
        ([("No", 0.9), ("yes", 1e-6)], 1e-6 / (0.9 + 1e-6)),
    ],
)
def test_support_is_the_share_of_yes_in_the_yes_and_no_probability(
    fake: FakeJudge,
    base_url: str,
    settings: Settings,
    top: list[tuple[str, float]],
    expected: float,
) -> None:
    fake.reply = lambda body: Reply(content=top[0][0], top=top)
    assert judge(settings, base_url).support(CLAIM, [PASSAGE], language="en") == pytest.approx(
        expected, rel=1e-9
    )


@pytest.mark.parametrize(
    ("content", "expected"), [("Yes.", 1.0), (" yes, it does", 1.0), ("No", 0.0), ("否", 0.0)]
)
def test_without_logprobs_the_first_word_decides(
    fake: FakeJudge, base_url: str, settings: Settings, content: str, expected: float
) -> None:
    fake.reply = lambda body: Reply(content=content, top=None)
    assert judge(settings, base_url).support(CLAIM, [PASSAGE], language="en") == expected


def test_logprobs_without_yes_or_no_leave_the_first_word_to_decide(
    fake: FakeJudge, base_url: str, settings: Settings
) -> None:
    fake.reply = lambda body: Reply(content="No", top=[("Nope", 0.7), ("Maybe", 0.2)])
    assert judge(settings, base_url).support(CLAIM, [PASSAGE], language="en") == 0.0


def test_a_reply_that_is_neither_yes_nor_no_gets_the_calibrated_score(
    fake: FakeJudge, base_url: str, settings: Settings
) -> None:
    fake.reply = lambda body: Reply(content="Perhaps", top=[("Perhaps", 0.9)])
    assert judge(settings, base_url).support(CLAIM, [PASSAGE], language="en") == calibrated()


def test_a_verbatim_quote_is_supported_without_asking(
    fake: FakeJudge, base_url: str, settings: Settings
) -> None:
    score = judge(settings, base_url).support(
        "refunds are paid  within thirty days of the request", [PASSAGE], language="en"
    )
    assert (score, fake.requests) == (1.0, [])
    assert judge(settings, base_url).support(CLAIM, [" "], language="en") == 0.0
    assert fake.requests == []


# When the judge fails -----------------------------------------------------------------------------


@pytest.mark.parametrize("scripted", [Reply(status=500), Reply(stall=5.0)], ids=["500", "slow"])
def test_a_failing_or_silent_judge_gets_the_calibrated_score_and_a_warning(
    fake: FakeJudge,
    base_url: str,
    settings: Settings,
    scripted: Reply,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake.reply = lambda body: scripted
    with caplog.at_level(logging.WARNING, logger="citewell.generate.judge"):
        score = judge(settings, base_url).support(CLAIM, [PASSAGE], language="en")
    assert score == calibrated()
    assert len(fake.requests) == 1  # no retry: the calibrated score stands in at once
    [record] = caplog.records
    assert "the calibrated score stands in" in record.getMessage()
    assert base_url in record.getMessage()


def test_a_judge_that_cannot_be_reached_gets_the_calibrated_score(settings: Settings) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    chosen = judge(settings, f"http://127.0.0.1:{port}/v1")
    assert chosen.support(CLAIM, [PASSAGE], language="en") == calibrated()


def test_an_unconfigured_judge_names_the_setting_to_set(settings: Settings) -> None:
    with pytest.raises(GeneratorUnavailable, match="CITEWELL_GENERATE__OPENAI__BASE_URL"):
        judge(settings, None)
    with pytest.raises(GeneratorUnavailable, match="CITEWELL_GENERATE__OPENAI__MODEL"):
        judge(settings, "http://127.0.0.1:9/v1", model=None)


# Through the engine -------------------------------------------------------------------------------

POLICY = (
    "# Refunds\n\nRefunds are paid within thirty days of the request. "
    "A receipt is required for every refund.\n\n"
    "# Opening hours\n\nThe shop opens at nine in the morning. It closes at six."
)
LOCAL = Principal.local()


class Paraphrase:
    """A generator that restates two evidence sentences in its own words, citing each."""

    name = "paraphrase"
    judges_answerability = True

    async def generate(self, evidence: Evidence, *, agent: Agent) -> AsyncIterator[Draft]:
        def number(words: str) -> int:
            return next(s.number for s in evidence.sentences if words in s.text)

        yield CitedSentence("Refunds are paid within thirty days.", (number("thirty days"),))
        yield CitedSentence(" Every refund requires a receipt.", (number("receipt"),))


def answer(
    settings: Settings, base_url: str, *, model: str = "judge-model", **agent: Any
) -> Answer:
    """The paraphrase's answer to "refunds", with the judge at ``base_url`` serving ``model``."""
    with Library.open(configured(settings, base_url, timeout=60.0, model=model)) as library:
        library.create_bucket("shop")
        library.ingest(POLICY.encode(), filename="policy.md", bucket="shop")
        engine = Engine.open(library)
        engine.generators["paraphrase"] = Paraphrase()
        chosen = Agent(generator="paraphrase", **agent)

        async def ask() -> Answer:
            return await engine.ask(Question("refunds"), agent=chosen, principal=LOCAL)

        return anyio.run(ask)


def test_an_agent_judged_by_the_model_drops_the_citation_it_says_no_to(
    fake: FakeJudge, base_url: str, settings: Settings
) -> None:
    def reply(body: dict[str, Any]) -> Reply:
        if "receipt" in body["messages"][-1]["content"]:
            return Reply(content="No", top=[("No", 0.8), ("Yes", 0.2)])
        return Reply(content="Yes", top=[("Yes", 0.9), ("No", 0.1)])

    fake.reply = reply
    calibrated_answer = answer(settings, base_url)
    assert fake.requests == []  # the calibrated verifier asks no model
    assert [c.supported for c in calibrated_answer.claims] == [True, True]

    judged = answer(settings, base_url, verifier="openai-compatible")
    assert [c.supported for c in judged.claims] == [True, False]
    [kept] = judged.citations
    assert (kept.claim_index, kept.cited_text, kept.support) == (
        0,
        "Refunds are paid within thirty days of the request.",
        0.9,
    )
    assert [(v.claim_index, v.support, v.kept) for v in judged.trace.verdicts] == [
        (0, 0.9, True),
        (1, 0.2, False),
    ]
    assert judged.grounding is GroundingState.AVAILABLE
    assert {b["model"] for b in fake.requests} == {"judge-model"}


def test_a_strict_agent_judged_by_the_model_removes_the_claim_asking_once(
    fake: FakeJudge, base_url: str, settings: Settings
) -> None:
    def reply(body: dict[str, Any]) -> Reply:
        said = "No" if "receipt" in body["messages"][-1]["content"] else "Yes"
        return Reply(content=said, top=[(said, 1.0)])

    fake.reply = reply
    judged = answer(settings, base_url, verifier="openai-compatible", strict=True)
    assert judged.text == "Refunds are paid within thirty days."
    assert len(fake.requests) == 2  # each claim judged once, though checked before it is shown


def test_the_agents_model_is_the_judge(fake: FakeJudge, base_url: str, settings: Settings) -> None:
    answer(settings, base_url, verifier="openai-compatible", model="agent-model")
    assert {b["model"] for b in fake.requests} == {"agent-model"}


def test_a_judge_that_is_down_leaves_the_answer_as_the_calibrated_verifier_makes_it(
    fake: FakeJudge, base_url: str, settings: Settings
) -> None:
    fake.reply = lambda body: Reply(status=503)
    judged = answer(settings, base_url, verifier="openai-compatible")
    expected = answer(settings, base_url)
    assert [(c.cited_text, c.support) for c in judged.citations] == [
        (c.cited_text, c.support) for c in expected.citations
    ]


# Against a real local server (llama-cpp-python + SmolLM2-135M) ------------------------------------


class NoFallback:
    """Fails the test if the judge gives no verdict of its own."""

    name = "no-fallback"

    def support(self, claim: str, cited: Sequence[str], *, language: str | None) -> float:
        raise AssertionError(f"the judge gave no verdict on {claim!r}")


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    reason = llama_missing()
    if reason:
        pytest.skip(reason)
    with llama_server() as server:
        yield server


def real_judge(settings: Settings, llama: LlamaServer) -> ChatJudge:
    chosen = configured(settings, llama.base_url, timeout=60.0)
    return ChatJudge(chosen, llama.model, fallback=NoFallback())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("claim", "passage", "language"),
    [
        (CLAIM, PASSAGE, "en"),
        ("Refunds take ninety days.", PASSAGE, "en"),
        (
            "El reembolso llega en un mes.",
            "Los reembolsos se pagan en un plazo de treinta días.",
            "es",
        ),
        ("退款在一个月内到账。", "退款在申请后三十天内支付。", "zh"),
    ],
)
def test_a_real_model_gives_a_probability_read_from_its_logprobs(
    llama: LlamaServer, settings: Settings, claim: str, passage: str, language: str
) -> None:
    score = real_judge(settings, llama).support(claim, [passage], language=language)
    # Neither the fallback (it would fail) nor a bare yes or no: both words among the top tokens.
    assert 0.0 < score < 1.0


@pytest.mark.slow
def test_a_real_model_judges_an_answers_citations_through_the_engine(
    llama: LlamaServer, settings: Settings
) -> None:
    judged = answer(settings, llama.base_url, model=llama.model, verifier="openai-compatible")
    threshold = real_judge(settings, llama).threshold("en")  # even odds: the agent sets none
    assert [v.claim_index for v in judged.trace.verdicts] == [0, 1]
    for verdict in judged.trace.verdicts:
        assert 0.0 < verdict.support < 1.0  # the model's own P(yes), not the calibrated score
        assert verdict.kept is (verdict.support >= threshold)
    kept = [v.support for v in judged.trace.verdicts if v.kept]
    assert [c.support for c in judged.citations] == kept
