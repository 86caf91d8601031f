"""A chat model as the verifier: asked whether the cited text supports the claim, yes or no.

``ChatJudge`` asks the OpenAI-compatible ``/v1/chat/completions`` endpoint the ``openai-compatible``
generator uses (``generate.openai``: base URL, key) for the agent's model (else
``generate.openai.model``), one request per candidate citation:

    system: You check whether a claim is fully supported by a passage. Reply with only yes or no.
    user:   Passage: <cited text>  Claim: <claim>  Does the passage support the claim? Answer
            yes or no.

with ``logprobs`` and ``top_logprobs`` requested. The support score is P(yes): the probability
mass of the yes-like first tokens ("Yes", " yes", "YES", "sí", "是"…) over that of the yes-like
and no-like ones ("No", "否", "不是"…) among the top tokens. The prompt is English for every
language; the Spanish and Chinese words count in case the model answers in the claim's language.
A server that sends no logprobs is read by the reply's first word: 1.0 for yes, 0.0 for no.

When the judge gives no verdict — the request failed or timed out, or the reply is neither yes nor
no — the ``fallback`` verifier's score stands in (the engine passes its calibrated verifier); a
failed request is logged as a warning. A judge that is down should neither fail answers (it
checks citations; it makes none) nor decide every citation alike: 0 would strip every citation
from every answer, 1 would keep unverified ones. With the fallback, an answer is verified as
well as it would have been without the judge. A missing base URL or model is different, since no
request could ever succeed: constructing the judge raises ``GeneratorUnavailable`` naming the
setting.

Like ``CalibratedVerifier``, a claim the cited text says word for word (``cite.verify.quoted``)
is supported outright, and costs no request. The client is synchronous, like the ``Verifier``
protocol: the engine attributes claims in a worker thread, so a slow judge never holds up the
event loop.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import httpx2
import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
from openai.types.chat.chat_completion_token_logprob import ChatCompletionTokenLogprob

from citewell.cite.verify import Verifier, settled_support
from citewell.config import Settings
from citewell.errors import GeneratorError
from citewell.generate.openai_compat import ERRORS, SERVICE
from citewell.generate.remote import (
    Remote,
    endpoint_of,
    required,
    secret,
    tls_context,
    translated,
)

__all__ = ["QUESTION", "SYSTEM", "ChatJudge"]

logger = logging.getLogger(__name__)

SYSTEM = "You check whether a claim is fully supported by a passage. Reply with only yes or no."
QUESTION = (
    "Passage: {passage}\n\nClaim: {claim}\n\nDoes the passage support the claim? Answer yes or no."
)

_YES = frozenset({"yes", "sí", "si", "是", "对"})
_NO = frozenset({"no", "否", "不", "不是"})
_TOP_LOGPROBS = 20
"""The most the OpenAI API (and vLLM's default limit) allows."""
_MAX_TOKENS = 2
"""Room for the blank token some models write before their first word."""


class ChatJudge:
    """P(yes) of a chat model asked whether the cited texts support the claim."""

    name = "openai-compatible"

    def __init__(self, settings: Settings, model: str | None, *, fallback: Verifier) -> None:
        """``model``: the agent's; None asks for ``generate.openai.model``."""
        openai_settings = settings.generate.openai
        base_url = required(openai_settings.base_url, self.name, "generate", "openai", "base_url")
        self.model = required(
            model or openai_settings.model,
            self.name,
            *("generate", "openai", "model"),
            otherwise="give the agent a model",
        )
        self._key = secret(openai_settings.api_key)
        self._remote = Remote(SERVICE, endpoint_of(base_url), self._key)
        self._base_url = base_url
        self._timeout = httpx2.Timeout(
            settings.cite.judge_timeout, connect=settings.generate.connect_timeout
        )
        self._fallback = fallback

    def support(self, claim: str, cited: Sequence[str], *, language: str | None) -> float:
        settled = settled_support(claim, cited)
        if settled is not None:
            return settled
        passage = " ".join(cited)
        try:
            verdict = _support_from_reply(self._ask(claim, passage))
        except GeneratorError as exc:
            logger.warning(
                "citation judge failed; the %s score stands in: %s",
                self._fallback.name,
                exc.message,
            )
            verdict = None
        if verdict is None:
            return self._fallback.support(claim, cited, language=language)
        return verdict

    def threshold(self, language: str | None) -> float:
        """Even odds: kept where the model's "yes" is the likelier word (where the judge was
        measured, docs/benchmarks.md, "An LLM verifier")."""
        return 0.5

    def _ask(self, claim: str, passage: str) -> ChatCompletion:
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": QUESTION.format(passage=passage, claim=claim)},
        ]
        with translated(ERRORS, self._remote), self._client() as client:
            return client.chat.completions.create(
                model=self.model,
                messages=messages,
                temperature=0.0,
                max_tokens=_MAX_TOKENS,
                logprobs=True,
                top_logprobs=_TOP_LOGPROBS,
                # Exactly the configured key, or none: never one from the environment.
                extra_headers={
                    "Authorization": f"Bearer {self._key}" if self._key else openai.omit
                },
            )

    def _client(self) -> openai.OpenAI:
        """A client for one request: nothing is shared between the worker threads that call
        ``support``, and no connection outlives its request (a generator's lasts one answer)."""
        return openai.OpenAI(
            base_url=self._base_url,
            api_key=self._key or "unused",  # the SDK insists on one; the header is omitted
            timeout=self._timeout,
            max_retries=0,  # the fallback answers at once; a retry would only delay the answer
            http_client=openai.DefaultHttpxClient(verify=tls_context()),
        )


def _support_from_reply(completion: ChatCompletion) -> float | None:
    """P(yes) from the reply's first word; None when it is neither yes nor no."""
    if not completion.choices:
        return None
    choice = completion.choices[0]
    tokens = choice.logprobs.content if choice.logprobs is not None else None
    first = next((t for t in tokens or () if t.token.strip()), None)
    if first is not None and (from_logprobs := _p_yes(first)) is not None:
        return from_logprobs
    words = (choice.message.content or "").split()
    said = _said_yes(words[0]) if words else None
    return None if said is None else float(said)


def _p_yes(token: ChatCompletionTokenLogprob) -> float | None:
    """The share of yes in the yes and no probability mass among the top tokens at ``token``."""
    top = [(t.token, t.logprob) for t in token.top_logprobs] or [(token.token, token.logprob)]
    yes = no = 0.0
    for word, logprob in top:
        said = _said_yes(word)
        if said is True:
            yes += math.exp(logprob)
        elif said is False:
            no += math.exp(logprob)
    return yes / (yes + no) if yes + no > 0 else None


def _said_yes(word: str) -> bool | None:
    """True for a spelling of yes, False for one of no, None for any other word."""
    folded = word.strip().strip(".,!:;。，！：").casefold()
    if folded in _YES:
        return True
    if folded in _NO:
        return False
    return None
