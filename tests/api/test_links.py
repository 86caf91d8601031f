"""Signed access links: they open exactly the original, without a key, only while their key may."""

from __future__ import annotations

import base64
import json
import stat
import string
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from citewell.api import create_app
from citewell.config import LinkSettings, Settings
from citewell.links import SECRET_FILE, LinkRefused, LinkSigner, Refusal
from citewell.model import Permission, Principal
from tests.api.conftest import ADMIN, assert_error, auth, make_key, search, upload

NOTE = b"The workshop closes at six on Fridays."
QUERY = "Who patented the typewriter in 1868?"
BASE64URL = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"


@pytest.fixture
def pdf(documents: Path) -> bytes:
    return (documents / "pdf_text" / "multi_page.pdf").read_bytes()


@pytest.fixture
def shelf(keyed: TestClient, pdf: bytes) -> dict[str, str]:
    """Source ids by file name: the PDF in bucket 'docs', a note in bucket 'notes'."""
    keyed.headers.update(auth(ADMIN))
    ids = {}
    for bucket, filename, data in (("docs", "multi_page.pdf", pdf), ("notes", "note.txt", NOTE)):
        assert keyed.post("/v1/buckets", json={"slug": bucket}).status_code == 201
        ids[filename] = upload(keyed, bucket, filename, data).json()["source"]["id"]
    keyed.headers.pop("authorization")  # links are opened without one
    return ids


def searched_link(client: TestClient, token: str, bucket: str = "docs") -> str:
    """The access_url of the best result of a search with this key."""
    found = client.post(
        "/v1/search", json={"query": QUERY, "buckets": [bucket]}, headers=auth(token)
    )
    assert found.status_code == 200, found.text
    url: str = found.json()["data"][0]["access_url"]
    return url


def signer_of(client: TestClient) -> LinkSigner:
    signer: LinkSigner = client.app.state.links  # type: ignore[attr-defined]
    return signer


def resigned(client: TestClient, url: str, **changes: object) -> str:
    """The link with some of its grant changed, signed by the server as if it had made it."""
    signer = signer_of(client)
    link = signer.verify(url.rsplit("/", 1)[1])
    return f"/v1/links/{signer.sign(link.model_copy(update=changes))}"


def decoded(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def encoded(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_a_link_in_an_answer_opens_the_original_pdf_without_a_key(
    keyed: TestClient, shelf: dict[str, str], pdf: bytes
) -> None:
    asker = make_key(keyed, permissions=["ask"])["secret"]
    response = keyed.post(
        "/v1/responses",
        json={
            "input": QUERY,
            "tools": [{"type": "file_search", "vector_store_ids": ["docs"]}],
            "include": ["file_search_call.results"],
        },
        headers=auth(asker),
    )
    assert response.status_code == 200, response.text
    url = response.json()["output"][0]["results"][0]["attributes"]["access_url"]
    assert url.startswith("http://testserver/v1/links/")
    opened = keyed.get(url)
    assert (opened.status_code, opened.content) == (200, pdf)
    assert opened.headers["content-type"] == "application/pdf"
    assert opened.headers["content-disposition"] == 'inline; filename="multi_page.pdf"'
    assert opened.headers["x-content-type-options"] == "nosniff"
    # Chromium shows no PDF in a sandboxed document; other files are sandboxed.
    assert opened.headers["content-security-policy"] == "frame-ancestors 'self'"
    scope, max_age = opened.headers["cache-control"].split(", ")
    assert scope == "private" and 0 < int(max_age.removeprefix("max-age=")) <= 900
    # The link opens what the answer showed, and no more: the key itself may not read originals.
    direct = keyed.get(f"/v1/sources/{shelf['multi_page.pdf']}/content", headers=auth(asker))
    assert_error(direct, 403, code="permission_denied")


def test_a_search_results_link_opens_its_own_source(
    keyed: TestClient, shelf: dict[str, str]
) -> None:
    searcher = make_key(keyed, permissions=["search"])["secret"]
    opened = keyed.get(searched_link(keyed, searcher, "notes"))
    assert opened.content == NOTE
    assert opened.headers["content-type"] == "text/plain; charset=utf-8"
    assert opened.headers["content-security-policy"] == "sandbox"


@pytest.mark.parametrize(("part", "position"), [(0, 0), (0, -1), (1, 0), (1, -1)])
def test_a_link_changed_in_one_character_is_refused(
    keyed: TestClient, shelf: dict[str, str], pdf: bytes, part: int, position: int
) -> None:
    url = searched_link(keyed, ADMIN)
    base, token = url.rsplit("/", 1)
    pieces = token.split(".")
    chars = list(pieces[part])
    chars[position] = BASE64URL[BASE64URL.index(chars[position]) ^ 1]
    changed = "".join(chars)
    if (part, position) == (1, -1):
        # The lowest bits of the signature's last character are unused: it decodes the same.
        assert decoded(changed) == decoded(pieces[part])
    pieces[part] = changed
    error = assert_error(keyed.get(f"{base}/{'.'.join(pieces)}"), 403, code="link_invalid")
    assert error["message"] == "The link is not valid."
    # The server keeps serving, and the link as made still opens.
    assert keyed.get("/healthz").status_code == 200
    assert keyed.get(url).content == pdf


@pytest.mark.parametrize(
    "token",
    ["not-a-link", "a.b", "a.b.c", "." * 3, "%00", "abc.%C3%A9", "%C3%A9.abc", "%ED%A0%80.x"],
)
def test_what_is_not_a_link_is_refused(keyed: TestClient, token: str) -> None:
    assert_error(keyed.get(f"/v1/links/{token}"), 403, code="link_invalid")


def test_a_link_whose_tenant_was_edited_is_refused(
    keyed: TestClient, shelf: dict[str, str]
) -> None:
    acme = keyed.post("/v1/tenants", json={"name": "Acme"}, headers=auth(ADMIN)).json()
    payload, signature = searched_link(keyed, ADMIN).rsplit("/", 1)[1].split(".")
    grant = json.loads(decoded(payload))
    grant["tenant_id"] = acme["id"]
    edited = encoded(json.dumps(grant, separators=(",", ":")).encode())
    assert_error(keyed.get(f"/v1/links/{edited}.{signature}"), 403, code="link_invalid")


def test_a_link_never_crosses_a_tenant_even_when_signed(
    keyed: TestClient, shelf: dict[str, str]
) -> None:
    acme = keyed.post("/v1/tenants", json={"name": "Acme"}, headers=auth(ADMIN)).json()
    owner = make_key(keyed, tenant_id=acme["id"], permissions=["manage", "ingest", "search"])
    keyed.headers.update(auth(owner["secret"]))
    keyed.post("/v1/buckets", json={"slug": "secrets"})
    theirs = upload(keyed, "secrets", "plan.txt", b"Acme launches in May.").json()["source"]["id"]
    keyed.headers.pop("authorization")
    ours = searched_link(keyed, make_key(keyed, permissions=["search"])["secret"])
    # A link of tenant A naming tenant B's source: as if the source did not exist.
    assert_error(keyed.get(resigned(keyed, ours, source_id=theirs)), 404, code="not_found")
    # A link claiming tenant B for a key of tenant A.
    claimed = keyed.get(resigned(keyed, ours, tenant_id=acme["id"], source_id=theirs))
    assert_error(claimed, 403, code="permission_denied")
    # Tenant B's own link opens for B.
    assert keyed.get(searched_link(keyed, owner["secret"], "secrets")).status_code == 200


def test_a_revoked_keys_links_die(keyed: TestClient, shelf: dict[str, str], pdf: bytes) -> None:
    key = make_key(keyed, permissions=["search"])
    url = searched_link(keyed, key["secret"])
    assert keyed.get(url).content == pdf
    assert keyed.delete(f"/v1/keys/{key['id']}", headers=auth(ADMIN)).status_code == 200
    error = assert_error(keyed.get(url), 403, code="key_revoked")
    assert error["message"] == "The API key this link was made for is no longer valid."


def test_an_expired_link_is_refused(keyed: TestClient, shelf: dict[str, str]) -> None:
    url = searched_link(keyed, ADMIN)
    expired = resigned(keyed, url, expires_at=signer_of(keyed).now())
    assert_error(keyed.get(expired), 403, code="link_expired")


def test_a_link_opens_only_what_its_key_may_do_and_see_now(
    keyed: TestClient, shelf: dict[str, str]
) -> None:
    keyed.headers.update(auth(ADMIN))
    labelled = upload(keyed, "docs", "hr.txt", b"Salaries rise in May.", acl='["hr"]').json()
    keyed.headers.pop("authorization")
    key = make_key(keyed, permissions=["search"], bucket_ids=["docs"], acl_labels=["staff"])
    url = searched_link(keyed, key["secret"])
    assert keyed.get(url).status_code == 200
    # Each grant below is signed by the server: only the key's current state refuses it.
    lacking = keyed.get(resigned(keyed, url, permission=Permission.ASK))
    assert "no longer has the 'ask' permission" in assert_error(lacking, 403)["message"]
    other_bucket = keyed.get(resigned(keyed, url, source_id=shelf["note.txt"]))
    assert_error(other_bucket, 404, code="not_found")
    other_label = keyed.get(resigned(keyed, url, source_id=labelled["source"]["id"]))
    assert_error(other_label, 404, code="not_found")


def test_a_deleted_sources_link_opens_nothing(keyed: TestClient, shelf: dict[str, str]) -> None:
    url = searched_link(keyed, ADMIN)
    deleted = keyed.delete(f"/v1/sources/{shelf['multi_page.pdf']}", headers=auth(ADMIN))
    assert deleted.status_code == 200
    assert_error(keyed.get(url), 404, code="not_found")


def test_an_open_servers_links_survive_a_restart_but_not_an_operator_key(
    settings: Settings,
) -> None:
    with TestClient(create_app(settings)) as client:
        client.post("/v1/buckets", json={"slug": "notes"})
        upload(client, "notes", "note.txt", NOTE)
        url = search(client, "When does the workshop close?", ["notes"])["data"][0]["access_url"]
    kept = settings.data_dir / SECRET_FILE
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    with TestClient(create_app(settings)) as client:
        assert client.get(url).content == NOTE
    keyed = settings.model_copy(update={"admin_key": SecretStr(ADMIN)})
    with TestClient(create_app(keyed)) as client:
        # The local user the link was made for exists only on an open server.
        assert_error(client.get(url), 403, code="key_revoked")


def test_a_link_is_valid_until_its_expiry_and_not_after() -> None:
    now = [1000.0]
    signer = LinkSigner(b"k" * 32, ttl=900, clock=lambda: now[0])
    made = signer.grant(Principal.local(), Permission.SEARCH, "src_1", expires_at=signer.expiry())
    token = signer.sign(made)
    now[0] = 1899.9
    assert signer.verify(token) == made
    now[0] = 1900.0
    with pytest.raises(LinkRefused) as refused:
        signer.verify(token)
    assert refused.value.reason is Refusal.EXPIRED


def test_a_configured_secret_is_used_and_nothing_is_written(tmp_path: Path) -> None:
    secret = "s" * 32
    signer = LinkSigner.open(LinkSettings(secret=SecretStr(secret)), tmp_path)
    made = signer.grant(Principal.local(), Permission.ASK, "src_1", expires_at=signer.expiry())
    twin = LinkSigner(secret.encode(), ttl=1)
    assert twin.verify(signer.sign(made)) == made
    assert not (tmp_path / SECRET_FILE).exists()
    stranger = LinkSigner(b"t" * 32, ttl=1)
    with pytest.raises(LinkRefused):
        stranger.verify(signer.sign(made))
