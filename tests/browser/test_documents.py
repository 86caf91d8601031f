"""Documents in the browser: a bucket made, files chosen or dropped and followed until they are
read, then asked about; and the search tab's ranked passages."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import (
    LATEX,
    LATEX_PAGE,
    Server,
    answer_parts,
    ask,
    check_badges,
    screenshot,
    sign_in,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# Every state the upload rows left, and every status they showed, in order: the records keep
# each old state and each text node put in, so none is missed however fast they pass.
WATCH_UPLOADS = """() => {
  window.uploads = {left: [], statuses: []};
  new MutationObserver((records) => {
    for (const record of records) {
      if (record.type === "attributes") window.uploads.left.push(record.oldValue);
      for (const node of record.addedNodes) {
        if (node.nodeType === Node.TEXT_NODE) window.uploads.statuses.push(node.data);
      }
    }
  }).observe(document.querySelector("#uploads"), {
    subtree: true, childList: true, attributeOldValue: true, attributeFilter: ["data-state"],
  });
}"""


def create_bucket(page: Page, slug: str) -> None:
    page.get_by_label("New bucket").fill(slug)
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_label("Bucket", exact=True)).to_have_value(slug)


def test_a_chosen_pdf_is_uploaded_read_then_cited(
    page: Page, server: Server, documents: Path
) -> None:
    sign_in(page, server)
    create_bucket(page, "chosen")
    expect(page.locator("#library-empty")).to_have_text(
        "Nothing in this bucket yet. Drop files here to add them."
    )
    page.evaluate(WATCH_UPLOADS)
    page.locator("#files").set_input_files(documents / "pdf_text" / "multi_page.pdf")
    row = page.locator("#uploads li")
    expect(row).to_have_attribute("data-state", "ready")
    expect(row.locator(".status")).to_have_text("Ready, 5 pages")
    states = [*page.evaluate("window.uploads.left"), "ready"]
    assert without_repeats(states) == ["waiting", "uploading", "reading", "ready"]
    expect(page.locator("#sources li .name")).to_have_text("multi_page.pdf")
    expect(page.locator("#sources li .details")).to_have_text("5 pages")

    text, annotations, _ = answer_parts(ask(page, LATEX, bucket="chosen"))
    assert [a["page_number"] for a in annotations] == [LATEX_PAGE]
    check_badges(page, text, annotations)
    screenshot(page, "answer-with-sources")


def test_a_scan_shows_its_pages_being_read(page: Page, server: Server, documents: Path) -> None:
    sign_in(page, server)
    create_bucket(page, "scans")
    page.evaluate(WATCH_UPLOADS)
    page.locator("#files").set_input_files(documents / "pdf_scanned" / "docling_ocr_test.pdf")
    row = page.locator("#uploads li")
    expect(row).to_have_attribute("data-state", "ready")
    expect(row.locator(".status")).to_have_text("Ready, 1 page")
    statuses = page.evaluate("window.uploads.statuses")
    assert "Reading pages: 0 of 1 done" in statuses


def test_a_dropped_file_is_added(page: Page, server: Server) -> None:
    sign_in(page, server)
    create_bucket(page, "dropped")
    dropped = page.evaluate_handle(
        """() => {
          const transfer = new DataTransfer();
          const note = "# Tea garden\\n\\nThe tea garden opens at nine every morning.\\n";
          transfer.items.add(new File([note], "tea.md", {type: "text/markdown"}));
          return transfer;
        }"""
    )
    page.locator("#drop").dispatch_event("drop", {"dataTransfer": dropped})
    expect(page.locator("#uploads li")).to_have_attribute("data-state", "ready")
    expect(page.locator("#sources li .name")).to_have_text("tea.md")


def test_search_lists_ranked_passages_without_an_answer(
    page: Page, server: Server, essays: str
) -> None:
    sign_in(page, server)
    page.get_by_label("Bucket", exact=True).select_option(essays)
    page.get_by_role("tab", name="Search").click()
    page.get_by_label("Find passages").fill("LaTeX academics scientists")
    page.get_by_role("button", name="Search", exact=True).click()
    results = page.locator("#results .result")
    expect(results.first).to_be_visible()
    expect(results.first.locator(".label")).to_have_text(f"multi_page.pdf (p. {LATEX_PAGE})")
    expect(results.first.locator("mark")).to_contain_text("LaTeX gained popularity")
    scores = [float(score.split()[-1]) for score in results.locator(".score").all_text_contents()]
    assert scores == sorted(scores, reverse=True) and len(scores) > 1
    expect(page.locator("#answer")).to_be_hidden()


def without_repeats(values: list[str]) -> list[str]:
    return [v for i, v in enumerate(values) if i == 0 or values[i - 1] != v]
