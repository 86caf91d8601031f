"""Two versions of a policy that disagree, as a newcomer keeps them: a 2025 handbook and a 2023
leaflet in one bucket, each with its effective date. Asked over HTTP with the official SDKs, the
answer says that the sources disagree, states the current one first and cites both; each
citation and search result says which side it is on; a question both answer alike is answered
plainly, from the current one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.e2e.test_server import launched, read_line

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

HANDBOOK = (
    "# Staff handbook 2025\n\n## Refunds\n\n"
    "Refunds are accepted within 30 days with a receipt. Gift cards never expire.\n\n"
    "## Parking\n\nStaff park in the north lot.\n"
)
LEAFLET = (
    "# Customer leaflet 2023\n\n## Refunds\n\n"
    "Refunds are accepted within 14 days with a receipt. Gift cards never expire.\n\n"
    "## Delivery\n\nDelivery is free above 50 euros.\n"
)
QUESTION = "How many days do I have to return an item for a refund?"
CURRENT = "Refunds are accepted within 30 days with a receipt."
OLDER = "Refunds are accepted within 14 days with a receipt."
ANSWER = (
    f"The sources disagree. According to Staff handbook 2025 (2025-01-01): {CURRENT} "
    f"According to Customer leaflet 2023 (2023-03-01): {OLDER}"
)


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("conflicts")
    reading = {"CITEWELL_READ__READER": "citewell-reader", "CITEWELL_READ__THREADS": "1"}
    with launched(folder / "data", "--port", "0", log=folder / "log", env=reading) as up:
        url = read_line(up.stdout).rsplit(" ", 1)[1]
        assert httpx.post(f"{url}/v1/buckets", json={"slug": "policies"}).status_code == 201
        for name, text, date in (
            ("leaflet-2023.md", LEAFLET, "2023-03-01"),
            ("handbook-2025.md", HANDBOOK, "2025-01-01"),
        ):
            uploaded = httpx.post(
                f"{url}/v1/buckets/policies/sources",
                files={"file": (name, text.encode(), "text/markdown")},
                data={"effective_date": date},
                timeout=120,
            )
            assert uploaded.status_code == 201, uploaded.text
        yield url


@pytest.fixture(scope="module")
def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)


def sides(results: list[Any]) -> dict[str, str | None]:
    """Which side of the disagreement each result's file is on (None: on none)."""
    found: dict[str, str | None] = {}
    for result in results:
        side = result.attributes.get("conflict_side")
        assert result.attributes.get("conflict") is (True if side else None)
        found[result.filename] = found.get(result.filename) or side
    return found


def test_the_answer_states_both_sides_the_current_first_each_cited(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model="citewell-agent", input=QUESTION, include=["file_search_call.results"]
    )
    assert response.output_text == ANSWER
    message = next(item for item in response.output if item.type == "message")
    annotations = message.content[0].annotations
    assert [
        (a.filename, a.model_extra["cited_text"], a.model_extra["conflict_side"])
        for a in annotations
    ] == [
        ("handbook-2025.md", CURRENT, "current"),
        ("leaflet-2023.md", OLDER, "older"),
    ]
    assert response.metadata["grounded_sources_state"] == "available"
    search = next(item for item in response.output if item.type == "file_search_call")
    assert sides(search.results) == {"handbook-2025.md": "current", "leaflet-2023.md": "older"}


def test_streamed_the_results_say_the_sides_before_the_answer_begins(
    client: openai.OpenAI,
) -> None:
    with client.responses.create(
        model="citewell-agent",
        input=QUESTION,
        include=["file_search_call.results"],
        stream=True,
    ) as stream:
        events = list(stream)
    kinds = [event.type for event in events]
    searched = next(
        e
        for e in events
        if e.type == "response.output_item.done" and e.item.type == "file_search_call"
    )
    assert kinds.index("response.output_item.done") < kinds.index("response.output_text.delta")
    assert sides(searched.item.results) == {
        "handbook-2025.md": "current",
        "leaflet-2023.md": "older",
    }
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == ANSWER == events[-1].response.output_text


def test_chat_completions_say_it_in_the_same_words(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model="citewell-agent", messages=[{"role": "user", "content": QUESTION}]
    )
    message = completion.choices[0].message
    assert message.content == (
        f"{ANSWER}\n\nSources:\n[1] handbook-2025.md (§ Refunds)\n[2] leaflet-2023.md (§ Refunds)"
    )
    assert [
        (a.url_citation.title, a.url_citation.model_extra["conflict_side"])
        for a in message.annotations
    ] == [("handbook-2025.md", "current"), ("leaflet-2023.md", "older")]


def test_messages_cite_the_current_source_first(url: str) -> None:
    client = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0, timeout=120)
    message = client.messages.create(
        model="citewell-agent",
        max_tokens=512,
        messages=[{"role": "user", "content": QUESTION}],
    )
    assert "".join(block.text for block in message.content) == ANSWER
    quoted = [
        (c.cited_text, c.model_extra["conflict_side"])
        for block in message.content
        for c in block.citations or ()
    ]
    assert quoted == [(CURRENT, "current"), (OLDER, "older")]


def test_a_question_both_sources_answer_alike_is_answered_plainly_from_the_current(
    client: openai.OpenAI,
) -> None:
    response = client.responses.create(
        model="citewell-agent", input="Do gift cards expire?", include=["file_search_call.results"]
    )
    assert response.output_text == "Gift cards never expire."
    message = next(item for item in response.output if item.type == "message")
    # Both say it word for word: the current one is cited.
    assert [a.filename for a in message.content[0].annotations] == ["handbook-2025.md"]
    search = next(item for item in response.output if item.type == "file_search_call")
    assert set(sides(search.results).values()) == {None}
