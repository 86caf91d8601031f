"""Sources that disagree, in the browser: each side of the disagreement badged in the list of
cited sources and in the source panel (docs/screenshots/conflicting-sources.png)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import Server, ask, screenshot, sign_in, ui_server
from tests.e2e.test_conflicting_sources import ANSWER, CURRENT, HANDBOOK, LEAFLET, OLDER, QUESTION

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CURRENT_BADGE = "Sources disagree: this one is current"
OLDER_BADGE = "Sources disagree: a later source says otherwise"


@pytest.fixture(scope="module")
def reading_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server that reads with the trained reader (disagreements are found as it reads), with
    a 2025 handbook and a 2023 leaflet in the bucket ``policies``."""
    reading = {"CITEWELL_READ__READER": "citewell-reader", "CITEWELL_READ__THREADS": "1"}
    with ui_server(tmp_path_factory.mktemp("ui-reading"), reading) as server:
        server.api("POST", "/v1/buckets", json={"slug": "policies"})
        for name, text, date in (
            ("leaflet-2023.md", LEAFLET, "2023-03-01"),
            ("handbook-2025.md", HANDBOOK, "2025-01-01"),
        ):
            server.api(
                "POST",
                "/v1/buckets/policies/sources",
                files={"file": (name, text.encode(), "text/markdown")},
                data={"effective_date": date},
            )
        yield server


def test_each_side_of_a_disagreement_is_badged_in_the_sources_and_the_panel(
    page: Page, reading_server: Server
) -> None:
    sign_in(page, reading_server)
    ask(page, QUESTION, bucket="policies")
    # Each cited sentence is followed by its badge, numbered by source.
    shown = ANSWER.replace(CURRENT, f"{CURRENT}1").replace(OLDER, f"{OLDER}2")
    expect(page.locator("#answer-text")).to_have_text(shown)
    sources = page.locator("#answer-sources li")
    expect(sources).to_have_count(2)
    expect(sources.nth(0).locator(".source-link")).to_have_text("handbook-2025.md")
    expect(sources.nth(0).locator(".conflict-badge")).to_have_text(CURRENT_BADGE)
    expect(sources.nth(1).locator(".source-link")).to_have_text("leaflet-2023.md")
    expect(sources.nth(1).locator(".conflict-badge")).to_have_text(OLDER_BADGE)

    page.locator("#answer-text .badge").nth(1).click()
    panel = page.get_by_role("dialog", name="Source 2: leaflet-2023.md")
    expect(panel.locator("#source-conflict")).to_have_text(OLDER_BADGE)
    screenshot(page, "conflicting-sources")
    page.locator("#answer-text .badge").nth(0).click()
    expect(page.locator("#source-conflict")).to_have_text(CURRENT_BADGE)
