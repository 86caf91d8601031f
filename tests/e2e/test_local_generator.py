"""A real server answering with the local generator (SmolLM2-135M in process), streamed over
HTTP to the official OpenAI SDK: ``citewell serve --generator local`` in a subprocess."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from citewell.evaluate.runner import serving
from tests.generate.local_model import local_missing, smollm2

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.local_model]

POLICY = (
    "# Refunds\n\nRefunds are available within 30 days of purchase with a receipt. "
    "Gift cards cannot be refunded.\n\n# Shipping\n\nShipping is free for orders over $50.\n"
)
MARKER = re.compile(r"[\[【]\s*\d+")


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    reason = local_missing()
    if reason:
        pytest.skip(reason)
    env = {
        **os.environ,
        "CITEWELL_GENERATE__LOCAL__MODEL_PATH": str(smollm2()),
        "CITEWELL_GENERATE__LOCAL__THREADS": "1",
        "CITEWELL_GENERATE__MAX_TOKENS": "64",
        "CITEWELL_RETRIEVE__EMBEDDER": "use",
        "CITEWELL_RETRIEVE__THREADS": "1",
    }
    with serving(Path(tmp_path_factory.mktemp("data")), generator="local", env=env) as url:
        with httpx.Client(base_url=url, timeout=120) as client:
            client.post("/v1/buckets", json={"slug": "shop"}).raise_for_status()
            files = {"file": ("policy.md", POLICY.encode(), "text/markdown")}
            client.post("/v1/buckets/shop/sources", files=files).raise_for_status()
        yield url


def test_a_chat_completion_streams_from_the_local_model(url: str) -> None:
    sdk = openai.OpenAI(api_key="k", base_url=f"{url}/v1", max_retries=0, timeout=300)
    stream = sdk.chat.completions.create(
        model="citewell-agent",
        messages=[{"role": "user", "content": "How long do I have to ask for a refund?"}],
        stream=True,
    )
    contents, finish = [], None
    for chunk in stream:
        for choice in chunk.choices:
            if choice.delta.content:
                contents.append(choice.delta.content)
            finish = choice.finish_reason or finish
    text = "".join(contents)
    assert finish == "stop"
    assert len(contents) >= 2, contents  # it streamed, in pieces
    assert text.strip()
    assert not MARKER.search(text), text  # the engine took the model's markers out


def test_the_same_question_unstreamed_gives_the_same_text(url: str) -> None:
    sdk = openai.OpenAI(api_key="k", base_url=f"{url}/v1", max_retries=0, timeout=300)
    question = [{"role": "user", "content": "How long do I have to ask for a refund?"}]
    whole = sdk.chat.completions.create(model="citewell-agent", messages=question)  # type: ignore[arg-type]
    streamed = sdk.chat.completions.create(
        model="citewell-agent",
        messages=question,  # type: ignore[arg-type]
        stream=True,
    )
    text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
    assert whole.choices[0].message.content == text
