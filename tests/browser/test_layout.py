"""The UI on a phone's width, and with the keyboard alone."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import LATEX, Server, ask, screenshot, sign_in
from tests.browser.ui_server import TYPIST

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

OVERFLOW = "() => document.scrollingElement.scrollWidth - window.innerWidth"


@pytest.mark.parametrize("width", [375, 360])
def test_nothing_overflows_a_phone_screen(
    page: Page, server: Server, essays: str, width: int
) -> None:
    page.set_viewport_size({"width": width, "height": 812})
    sign_in(page, server)
    assert page.evaluate(OVERFLOW) <= 0
    ask(page, LATEX, bucket=essays, agent=TYPIST)
    assert page.evaluate(OVERFLOW) <= 0
    if width == 375:
        screenshot(page, "phone-answer")
    page.locator("#answer-text .badge").click()
    page.wait_for_function("() => document.querySelector('#source-pages img')?.naturalWidth > 0")
    assert page.evaluate(OVERFLOW) <= 0
    page.get_by_role("button", name="Close the source").click()
    page.get_by_role("tab", name="Search").click()
    page.get_by_label("Find passages").fill("typewriter")
    page.get_by_label("Find passages").press("Enter")
    expect(page.locator("#results .result").first).to_be_visible()
    assert page.evaluate(OVERFLOW) <= 0


def test_tabs_answers_and_sources_work_from_the_keyboard(
    page: Page, server: Server, essays: str
) -> None:
    sign_in(page, server)
    page.get_by_label("Bucket", exact=True).select_option(essays)
    ask_tab = page.get_by_role("tab", name="Ask")
    search_tab = page.get_by_role("tab", name="Search")
    ask_tab.focus()
    page.keyboard.press("ArrowRight")
    expect(search_tab).to_be_focused()
    expect(search_tab).to_have_attribute("aria-selected", "true")
    expect(page.get_by_role("tabpanel", name="Search")).to_be_visible()
    page.keyboard.press("Home")
    expect(ask_tab).to_have_attribute("aria-selected", "true")
    expect(search_tab).to_have_attribute("tabindex", "-1")  # one Tab stop for the tab list

    question = page.get_by_label("Your question")
    question.focus()
    page.keyboard.type(LATEX)
    page.keyboard.press("Enter")
    badge = page.locator("#answer-text .badge")
    expect(badge).to_have_count(1)
    expect(page.locator("#answer")).to_have_attribute("aria-busy", "false")
    tab_until_focused(page, "#answer-text .badge")
    page.keyboard.press("Enter")
    expect(page.locator("#source-title")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.locator("#source-panel")).to_be_hidden()
    expect(badge).to_be_focused()


def tab_until_focused(page: Page, selector: str, most: int = 20) -> None:
    """Press Tab until the element matching ``selector`` has the focus, as a person would."""
    for _ in range(most):
        page.keyboard.press("Tab")
        if page.evaluate(f"() => document.activeElement.matches({selector!r})"):
            return
    raise AssertionError(f"{selector} was not reached in {most} presses of Tab")
