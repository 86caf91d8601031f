"""Answers in the browser: badges where the annotations say, the source panel on the cited page,
text that streams in, the grounding states, and offsets in code points for any script."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import (
    ANSWER_TEXT,
    LATEX,
    LATEX_PAGE,
    Server,
    answer_parts,
    ask,
    check_badges,
    screenshot,
    sign_in,
    stream_of,
)
from tests.browser.ui_server import HIDDEN, LOCAL, TYPIST, UNSUPPORTED
from tests.generate.llm_server import LlamaServer, llama_missing

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

UNANSWERED = "What is the boiling point of liquid nitrogen?"
REPO = Path(__file__).resolve().parents[2]

UNSUPPORTED_CLAIMS = """() => [...document.querySelectorAll("#answer-text .claim.unsupported")].map(
  (claim) => ({
    text: claim.textContent, start: +claim.dataset.start, end: +claim.dataset.end,
    flag: claim.nextElementSibling?.getAttribute("aria-label") ?? null,
  }))"""

# Where the page picture and the boxes over it are on the screen.
PAGE_PICTURE = """() => {
  const figure = document.querySelector("#source-pages figure");
  const rect = (node) => {
    const {x, y, width, height} = node.getBoundingClientRect();
    return {x, y, width, height};
  };
  const image = figure.querySelector("img");
  return {
    page: +figure.dataset.page,
    loaded: image.complete && image.naturalWidth > 0,
    image: rect(image),
    boxes: [...figure.querySelectorAll(".page-box")].map(rect),
  };
}"""


def test_each_badge_sits_right_after_the_claim_it_cites(
    page: Page, server: Server, essays: str
) -> None:
    sign_in(page, server)
    text, annotations, _ = answer_parts(ask(page, LATEX, bucket=essays))
    assert [a["page_number"] for a in annotations] == [LATEX_PAGE]
    assert annotations[0]["start_index"] > 0  # the list's bullet stands before the claim
    check_badges(page, text, annotations)
    expect(page.locator("#answer-status")).to_have_text("Answered from 1 source.")


def test_a_badge_opens_the_cited_page_with_the_cited_lines_boxed(
    page: Page, server: Server, essays: str
) -> None:
    sign_in(page, server)
    body = ask(page, LATEX, bucket=essays)
    _, [note], _ = answer_parts(body)
    badge = page.locator("#answer-text .badge")
    badge.click()

    panel = page.get_by_role("dialog", name=f"Source 1: {note['filename']}")
    expect(panel).to_be_visible()
    expect(page.locator("#source-title")).to_be_focused()
    expect(panel.locator("#source-where")).to_have_text(f"Cited on page {LATEX_PAGE}")
    expect(panel.locator("#source-passage mark")).to_have_text(note["cited_text"])
    page.wait_for_function("() => document.querySelector('#source-pages img')?.naturalWidth > 0")
    check_boxes(page.evaluate(PAGE_PICTURE), note["regions"][0])
    original = access_url(body, note["file_id"])
    link = panel.get_by_role("link", name=f"Open original at page {LATEX_PAGE}")
    expect(link).to_have_attribute("href", f"{original}#page={LATEX_PAGE}")
    opened = httpx.get(original, timeout=60)  # a signed link: no key needed
    assert (opened.status_code, opened.headers["content-type"]) == (200, "application/pdf")
    screenshot(page, "page-highlight")

    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    expect(badge).to_be_focused()


def check_boxes(shown: dict[str, Any], region: dict[str, Any]) -> None:
    """The picture is of the cited page, and each box lies on the picture exactly where the
    annotation's normalised box says (within a pixel)."""
    assert shown["page"] == region["page_number"] == LATEX_PAGE and shown["loaded"]
    image = shown["image"]
    assert len(shown["boxes"]) == len(region["boxes"]) > 0
    for box, expected in zip(shown["boxes"], region["boxes"], strict=True):
        assert box["x"] == pytest.approx(image["x"] + expected["nx0"] * image["width"], abs=1)
        assert box["y"] == pytest.approx(image["y"] + expected["ny0"] * image["height"], abs=1)
        right = image["x"] + expected["nx1"] * image["width"]
        bottom = image["y"] + expected["ny1"] * image["height"]
        assert box["x"] + box["width"] == pytest.approx(right, abs=1)
        assert box["y"] + box["height"] == pytest.approx(bottom, abs=1)
        assert image["x"] <= box["x"] and box["x"] + box["width"] <= image["x"] + image["width"]
        assert image["y"] <= box["y"] and box["y"] + box["height"] <= image["y"] + image["height"]


def access_url(body: str, file_id: str) -> str:
    """The signed link to the original that came with the search results of the stream."""
    for event in stream_of(body):
        item = event.get("item", {})
        if event["type"] == "response.output_item.done" and item["type"] == "file_search_call":
            links = {r["file_id"]: r["attributes"]["access_url"] for r in item["results"]}
            link: str = links[file_id]
            return link
    raise AssertionError("no search results in the stream")


def record_growth(page: Page) -> None:
    """Record the answer's length at every change while it is still being written."""
    page.evaluate(
        """() => {
          const answer = document.querySelector("#answer");
          const text = document.querySelector("#answer-text");
          window.lengths = [];
          new MutationObserver(() => {
            const busy = answer.getAttribute("aria-busy") === "true";
            if (busy) window.lengths.push(text.textContent.length);
          }).observe(text, {childList: true, subtree: true, characterData: true});
        }"""
    )


def check_growth(page: Page, text: str) -> None:
    """The answer showed at least three lengths on its way to ``text``, never shrinking."""
    lengths = page.evaluate("window.lengths")
    assert len(set(lengths)) >= 3 and lengths == sorted(lengths)
    assert 0 < lengths[0] < len(text)


def test_the_answer_shows_as_it_streams_and_flags_what_no_source_supports(
    page: Page, server: Server, essays: str
) -> None:
    sign_in(page, server)
    record_growth(page)
    text, annotations, _ = answer_parts(ask(page, LATEX, bucket=essays, agent=TYPIST))
    check_growth(page, text)
    check_badges(page, text, annotations)
    [flagged] = page.evaluate(UNSUPPORTED_CLAIMS)
    assert text[flagged["start"] : flagged["end"]] == flagged["text"] == UNSUPPORTED.strip()
    assert flagged["flag"] == "Not supported by your documents"


def test_a_real_local_model_s_answer_shows_as_the_model_writes_it(
    page: Page, server: Server, essays: str, local_model: LlamaServer | None
) -> None:
    """The typist's pace, from a real model: SmolLM2 on llama.cpp, token by token. (Whether it
    cites anything is the model's affair; the page shows what the stream says.)"""
    if local_model is None:
        pytest.skip(llama_missing() or "")
    sign_in(page, server)
    record_growth(page)
    text, annotations, _ = answer_parts(ask(page, LATEX, bucket=essays, agent=LOCAL))
    check_growth(page, text)
    assert page.evaluate(ANSWER_TEXT) == text
    assert page.locator("#answer-text .badge").count() == len(annotations)


def test_an_agent_that_hides_its_sources_shows_no_badge_and_no_panel(
    page: Page, server: Server, essays: str
) -> None:
    sign_in(page, server)
    text, annotations, completed = answer_parts(ask(page, LATEX, bucket=essays, agent=HIDDEN))
    assert completed["metadata"]["grounded_sources_state"] == "hidden" and not annotations
    assert page.evaluate(ANSWER_TEXT) == text
    expect(page.locator("#answer-text .badge")).to_have_count(0)
    expect(page.locator("#source-panel")).to_be_hidden()
    expect(page.locator("#grounding")).to_have_text(
        "This agent does not show its sources, so the answer comes without citations."
    )


def test_a_question_the_documents_do_not_answer_says_so(
    page: Page, server: Server, essays: str
) -> None:
    sign_in(page, server)
    _, annotations, completed = answer_parts(ask(page, UNANSWERED, bucket=essays))
    assert completed["metadata"]["grounded_sources_state"] == "missing" and not annotations
    expect(page.locator("#grounding")).to_have_text("Your documents do not answer this question.")
    expect(page.locator("#answer-text .badge")).to_have_count(0)


CHINESE_RULES = (
    "# 社区图书馆借阅规则\n\n"
    "𠮷田图书馆的读者每次最多可以借阅五本书，借期为三周。\n\n"  # 𠮷 lies outside the BMP
    "逾期归还的图书每天罚款一元。\n\n"
    "图书馆周一闭馆。\n"
)


QUESTIONS = {
    "es": "¿Durante cuánto tiempo se prestan los libros?",
    "zh": "读者每次最多可以借阅几本书？",
}


@pytest.mark.parametrize("language", ["es", "zh"])
def test_answers_in_spanish_and_chinese_are_cut_by_code_points(
    page: Page, server: Server, tmp_path: Path, language: str
) -> None:
    """In the Chinese answer a character outside the BMP comes first: offsets taken as UTF-16
    units would cut every claim one character off."""
    if language == "es":
        document = REPO / "src" / "citewell" / "demo" / "documents" / "biblioteca-prestamos.html"
    else:
        document = tmp_path / "借阅规则.md"
        document.write_text(CHINESE_RULES, encoding="utf-8")
    bucket = server.bucket_with(f"rules-{language}", document)
    sign_in(page, server)
    body = ask(page, QUESTIONS[language], bucket=bucket, agent=TYPIST)
    text, annotations, _ = answer_parts(body)
    check_badges(page, text, annotations)
    [flagged] = page.evaluate(UNSUPPORTED_CLAIMS)
    assert text[flagged["start"] : flagged["end"]] == flagged["text"] == UNSUPPORTED.strip()
    expect(page.locator("#answer-text")).to_have_attribute("lang", language)
