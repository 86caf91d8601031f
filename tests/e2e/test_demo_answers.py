"""What a newcomer asks of the demo bucket, over HTTP with the official SDKs, answered with the
trained reader as `citewell serve --demo` answers by default: a question the handbook answers in
other words, one it does not answer at all, and two questions asked as one (of the demo bucket,
and of a document sent with the request)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest

from tests.e2e.test_server import launched, read_line

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REFUSAL = "The available sources do not answer this question."
HANDBOOK = Path(__file__).resolve().parents[2] / "src/citewell/demo/documents/bike-coop-handbook.md"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("demo")
    reading = {"CITEWELL_READ__READER": "citewell-reader", "CITEWELL_READ__THREADS": "1"}
    with launched(folder / "data", "--demo", "--port", "0", log=folder / "log", env=reading) as up:
        assert read_line(up.stdout) == "demo bucket 'demo': 4 documents"
        yield read_line(up.stdout).rsplit(" ", 1)[1]


@pytest.fixture(scope="module")
def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)


def section(title: str) -> str:
    """The text of one section of the handbook, its heading excluded."""
    text = HANDBOOK.read_text("utf-8")
    start = text.index(f"## {title}\n") + len(f"## {title}\n")
    end = text.find("\n## ", start)
    return text[start : end if end >= 0 else None]


def cited(response: object) -> list[tuple[str, str]]:
    """(answer sentence, cited filename) per citation of a Responses answer."""
    message = next(item for item in response.output if item.type == "message")  # type: ignore[attr-defined]
    part = message.content[0]
    return [(part.text, a.filename) for a in part.annotations]


def test_the_refund_policy_is_answered_from_the_handbooks_refunds_section(
    client: openai.OpenAI,
) -> None:
    response = client.responses.create(model="citewell-agent", input="What is our refund policy?")
    assert response.output_text != REFUSAL
    assert response.output_text.split(". ")[0] in section("Refunds")
    assert {filename for _, filename in cited(response)} == {"bike-coop-handbook.md"}


def test_a_question_the_documents_do_not_answer_is_declined_without_a_citation(
    client: openai.OpenAI,
) -> None:
    response = client.responses.create(model="citewell-agent", input="Who is the CEO of the co-op?")
    assert response.output_text == REFUSAL
    assert cited(response) == []


def test_two_questions_asked_as_one_are_both_answered_each_with_its_citation(
    client: openai.OpenAI,
) -> None:
    completion = client.chat.completions.create(
        model="citewell-agent",
        messages=[
            {
                "role": "user",
                "content": "How much does a membership cost and when is the workshop open?",
            }
        ],
    )
    message = completion.choices[0].message
    answer, _ = message.content.split("\n\nSources:")  # the footer Chat clients show
    price, *hours = answer.split("\n")  # a table's rows are said a line each
    assert price == (
        "Membership costs 40 euros a year, or 15 euros for students and people on a low income."
    )
    assert hours[:3] == [  # the opening-hours table, each row as ingest reads it
        "Day: Tuesday; Open: 17:00; Close: 21:00; Mechanic on duty: yes",
        "Day: Thursday; Open: 17:00; Close: 21:00; Mechanic on duty: yes",
        "Day: Saturday; Open: 10:00; Close: 16:00; Mechanic on duty: no",
    ]
    assert all(line in section("Opening hours") for line in hours[3:])  # the Saturday note
    assert len(message.annotations) == 1 + len(hours)  # every line cites its own


SHOP_POLICY = (
    "Refunds: you may return any item within 30 days of purchase for a full refund. "
    "Gift cards: gift cards never expire and can be spent in the shop or online. "
    "Shipping: orders above fifty euros ship free."
)
PLAIN_FACTS = (  # the newcomer's document of the issue that asked for this
    "The grass is green. The sky is blue. Refunds are accepted within 30 days with a receipt. "
    "Gift cards never expire."
)


def ask_about(url: str, document: str, question: str) -> anthropic.types.Message:
    """A question about a plain-text document sent with it, over the Messages API."""
    client = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0, timeout=120)
    return client.messages.create(
        model="citewell-agent",
        max_tokens=512,
        messages=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": document},
                        "title": "Shop policy",
                        "citations": {"enabled": True},
                    },
                    {"type": "text", "text": question},
                ],
            }
        ],
    )


@pytest.mark.parametrize(
    ("document", "quoted"),
    [
        (
            SHOP_POLICY,
            [
                "Refunds: you may return any item within 30 days of purchase for a full refund.",
                "Gift cards: gift cards never expire and can be spent in the shop or online.",
            ],
        ),
        (
            PLAIN_FACTS,
            ["Refunds are accepted within 30 days with a receipt.", "Gift cards never expire."],
        ),
    ],
    ids=["shop-policy", "plain-facts"],
)
def test_two_questions_about_a_document_sent_with_the_request_are_both_answered(
    url: str, document: str, quoted: list[str]
) -> None:
    message = ask_about(url, document, "What is the refund window, and do gift cards expire?")
    cited = [c.cited_text.strip() for block in message.content for c in block.citations or ()]
    assert cited == quoted


def test_a_part_the_document_does_not_answer_is_said_unanswered_after_the_others_answer(
    url: str,
) -> None:
    message = ask_about(url, PLAIN_FACTS, "What is the refund window, and who owns the shop?")
    blocks = [
        (block.text, [c.cited_text for c in block.citations or ()]) for block in message.content
    ]
    assert blocks == [
        (
            "Refunds are accepted within 30 days with a receipt.",
            ["Refunds are accepted within 30 days with a receipt."],
        ),
        (" The available sources do not answer “Who owns the shop?”", []),
    ]
