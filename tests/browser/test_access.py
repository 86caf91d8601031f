"""Signing in and out, keys the server refuses or limits, and the empty state of a new tenant."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import ADMIN, Server, choose_bucket, screenshot, sign_in

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

KEY_ITEM = "citewell.key"


def test_the_key_lives_in_this_tab_only_and_signing_out_forgets_it(
    page: Page, server: Server
) -> None:
    sign_in(page, server)
    expect(page.locator("#account-text")).to_have_text("Signed in with an API key")
    assert page.evaluate(f"sessionStorage.getItem('{KEY_ITEM}')") == ADMIN
    assert page.evaluate("localStorage.length") == 0
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API key")).to_be_visible()
    expect(page.locator("#workspace")).to_be_hidden()
    assert page.evaluate(f"sessionStorage.getItem('{KEY_ITEM}')") is None


def test_a_key_the_server_does_not_know_is_refused_with_its_reason(
    page: Page, server: Server
) -> None:
    page.goto(server.url)
    expect(page.locator("#sign-in-error")).to_be_hidden()  # needing a key is no error
    page.get_by_label("API key").fill("cwk_unknown_key")
    page.get_by_role("button", name="Sign in").click()
    error = page.get_by_role("alert").filter(has_text="That key was not accepted")
    expect(error).to_be_visible()
    expect(page.locator("#workspace")).to_be_hidden()
    assert page.evaluate(f"sessionStorage.getItem('{KEY_ITEM}')") is None


def test_a_key_without_the_ask_permission_is_refused_in_plain_words(
    page: Page, server: Server, essays: str
) -> None:
    sign_in(page, server, server.key("search"))
    choose_bucket(page, essays)
    page.get_by_label("Your question").fill("Who patented the typewriter?")
    page.get_by_role("button", name="Ask", exact=True).click()
    refusal = page.locator("#answer-error")
    expect(refusal).to_have_text(
        "This API key may not ask for answers: it lacks the 'ask' permission."
    )
    expect(refusal).to_have_attribute("role", "alert")
    expect(page.locator("#answer")).to_be_hidden()
    screenshot(page, "error")


def test_a_new_tenant_sees_the_empty_state(page: Page, server: Server) -> None:
    tenant = server.api("POST", "/v1/tenants", json={"name": "Newcomers"})
    sign_in(page, server, server.key("ask", "search", "ingest", "manage", tenant_id=tenant["id"]))
    expect(page.locator("#library-empty")).to_have_text(
        "No buckets yet. Create one, then drop files into it."
    )
    expect(page.get_by_label("Bucket", exact=True)).to_be_disabled()
    expect(page.locator("#ask-intro")).to_be_visible()
    screenshot(page, "empty-state")
