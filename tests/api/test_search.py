"""POST /v1/search: ranked passages whose spans, pages and labels point at the exact text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from citewell.api.deps import get_principal
from citewell.model import Principal
from tests.api.conftest import assert_error, search, upload

HANDBOOK = b"""# Staff handbook

## Refunds

A refund is paid within thirty days of the request.

## Holidays

Every employee has twenty-five days of paid leave a year.
"""


@pytest.fixture
def pdf_bucket(client: TestClient, documents: Path) -> str:
    client.post("/v1/buckets", json={"slug": "essays"})
    data = (documents / "pdf_text" / "multi_page.pdf").read_bytes()
    assert upload(client, "essays", "multi_page.pdf", data).status_code == 201
    return "essays"


def canonical_text(client: TestClient, source_id: str) -> str:
    text: str = client.get(f"/v1/sources/{source_id}/text").json()["text"]
    return text


def sentence_with(
    results: list[dict[str, Any]], words: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first (result, sentence) whose sentence contains ``words``."""
    for result in results:
        for sentence in result["sentences"]:
            if words in sentence["text"]:
                return result, sentence
    raise AssertionError(f"no result sentence contains {words!r}")


@pytest.mark.parametrize(
    ("query", "words", "page"),
    [
        ("MacWrite leveraged the Macintosh graphical capabilities", "Apple’s MacWrite", 2),
        ("LaTeX popular among academics scientists engineers", "LaTeX gained popularity", 3),
        ("from clunky typewriters to AI-powered platforms", "clunky typewriters", 5),
    ],
)
def test_a_sentence_is_reported_on_the_page_it_is_printed_on(
    client: TestClient, pdf_bucket: str, query: str, words: str, page: int
) -> None:
    results = search(client, query, [pdf_bucket])["data"]
    result, sentence = sentence_with(results, words)
    assert sentence["page_number"] == page
    assert page in result["pages"]
    assert result["page_number"] == result["pages"][0]
    assert result["locator_label"] == f"p. {result['page_label'] or result['page_number']}"
    assert result["label"] == f"multi_page.pdf ({result['locator_label']})"


def test_spans_index_the_canonical_text_in_code_points(client: TestClient, pdf_bucket: str) -> None:
    results = search(client, "word processing software", [pdf_bucket])["data"]
    assert results
    text = canonical_text(client, results[0]["source_id"])
    for result in results:
        span = result["span"]
        assert text[span["start"] : span["end"]] == result["text"]
        for sentence in result["sentences"]:
            assert span["start"] <= sentence["start"] < sentence["end"] <= span["end"]
            assert text[sentence["start"] : sentence["end"]] == sentence["text"]


def test_spans_count_code_points_not_bytes(client: TestClient, bucket: str) -> None:
    note = "云雾山茶园每年三月十五日对外开放。采茶体验在每年四月举行，每人收费六十元。"
    source = upload(client, bucket, "茶园.txt", note.encode()).json()["source"]
    result = search(client, "采茶体验", [bucket])["data"][0]
    assert result["text"] == note[result["span"]["start"] : result["span"]["end"]]
    _, sentence = sentence_with([result], "采茶体验")
    assert note[sentence["start"] : sentence["end"]] == "采茶体验在每年四月举行，每人收费六十元。"
    assert canonical_text(client, source["id"]) == note


def test_a_result_carries_its_source_and_scores(client: TestClient, bucket: str) -> None:
    source = upload(client, bucket, "handbook.md", HANDBOOK).json()["source"]
    response = client.post("/v1/search", json={"query": "refund", "buckets": [bucket]})
    body = response.json()
    assert (body["object"], body["search_query"], body["has_more"]) == ("list", "refund", False)
    result = body["data"][0]
    assert result["chunk_id"]
    assert result["source_id"] == result["file_id"] == source["id"]
    assert result["bucket_id"] == source["bucket_id"]
    assert (result["filename"], result["mime_type"]) == ("handbook.md", "text/markdown")
    assert result["modality"] == "text"
    assert result["source"] == source
    assert 0 <= result["score"] <= 1
    assert result["scores"]["fused"] == result["score"]
    assert result["scores"]["lexical_rank"] == 1


def test_a_source_without_pages_is_located_by_its_heading(client: TestClient, bucket: str) -> None:
    upload(client, bucket, "handbook.md", HANDBOOK)
    result = search(client, "refund paid", [bucket])["data"][0]
    assert result["text"].endswith("Refunds\n\nA refund is paid within thirty days of the request.")
    assert result["heading_path"] == ["Staff handbook", "Refunds"]
    assert (result["page_number"], result["page_label"], result["pages"]) == (None, None, [])
    assert result["locator_label"] == "§ Refunds"
    assert result["label"] == "handbook.md (§ Refunds)"
    assert result["sentences"][0]["page_number"] is None


def test_a_plain_note_is_labelled_by_its_name_alone(client: TestClient, bucket: str) -> None:
    upload(client, bucket, "note.txt", b"Refunds are paid within thirty days.")
    result = search(client, "refunds", [bucket])["data"][0]
    assert (result["locator_label"], result["label"]) == (None, "note.txt")


@pytest.mark.parametrize("mode", ["lexical", "dense", "hybrid"])
def test_every_mode_finds_the_passage(client: TestClient, bucket: str, mode: str) -> None:
    upload(client, bucket, "handbook.md", HANDBOOK)
    results = search(client, "paid leave holidays", [bucket], mode=mode)["data"]
    assert "twenty-five days of paid leave" in results[0]["text"]
    scores = results[0]["scores"]
    assert (scores["lexical"] is not None) == (mode != "dense")
    assert (scores["dense"] is not None) == (mode != "lexical")


def test_max_results_caps_the_list(client: TestClient, pdf_bucket: str) -> None:
    assert len(search(client, "word processor", [pdf_bucket], max_results=2)["data"]) == 2


def test_search_spans_several_buckets_by_id_or_slug(client: TestClient, bucket: str) -> None:
    other = client.post("/v1/buckets", json={"slug": "other"}).json()["id"]
    upload(client, bucket, "a.txt", b"Refunds take thirty days.")
    upload(client, "other", "b.txt", b"Refunds take ninety days.")
    results = search(client, "refunds", [bucket, other])["data"]
    assert sorted(r["text"] for r in results) == [
        "Refunds take ninety days.",
        "Refunds take thirty days.",
    ]


def test_only_the_current_version_is_searched_unless_asked(client: TestClient, bucket: str) -> None:
    old = upload(client, bucket, "policy.txt", b"Refunds take thirty days.").json()["source"]
    new = upload(client, bucket, "policy.txt", b"Refunds take ninety days.").json()["source"]
    current = search(client, "refunds", [bucket])["data"]
    assert [r["source_id"] for r in current] == [new["id"]]
    every = search(client, "refunds", [bucket], include_superseded=True)["data"]
    assert sorted(r["source_id"] for r in every) == sorted([old["id"], new["id"]])
    superseded = next(r for r in every if r["source_id"] == old["id"])
    assert superseded["source"]["superseded_by"] == new["id"]


def test_filters_select_sources_by_metadata(client: TestClient, bucket: str) -> None:
    for team, year in (("hr", 2023), ("sales", 2024), ("hr", 2025)):
        upload(
            client,
            bucket,
            f"{team}-{year}.txt",
            f"Refunds policy of {team} for {year}.".encode(),
            metadata=f'{{"team": "{team}", "year": {year}}}',
        )

    def found(filters: dict[str, Any]) -> list[str]:
        results = search(client, "refunds policy", [bucket], filters=filters)["data"]
        return sorted(r["filename"] for r in results)

    assert found({"type": "eq", "key": "team", "value": "hr"}) == ["hr-2023.txt", "hr-2025.txt"]
    assert found(
        {
            "type": "and",
            "filters": [
                {"type": "eq", "key": "team", "value": "hr"},
                {"type": "gte", "key": "year", "value": 2024},
            ],
        }
    ) == ["hr-2025.txt"]
    assert found({"type": "in", "key": "filename", "value": ["sales-2024.txt"]}) == [
        "sales-2024.txt"
    ]
    assert found({"type": "eq", "key": "team", "value": "legal"}) == []


def test_sources_outside_the_callers_acl_are_invisible(client: TestClient, bucket: str) -> None:
    secret = upload(client, bucket, "pay.txt", b"Salaries are paid monthly.", acl='["hr"]')
    secret_id = secret.json()["source"]["id"]
    upload(client, bucket, "menu.txt", b"Lunch is paid by the company on Fridays.")
    # The local user sees everything...
    assert len(search(client, "paid", [bucket])["data"]) == 2
    # ...a caller without the label sees neither the passage nor the source...
    client.app.dependency_overrides[get_principal] = lambda: Principal()  # type: ignore[attr-defined]
    assert [r["filename"] for r in search(client, "paid", [bucket])["data"]] == ["menu.txt"]
    assert [s["filename"] for s in client.get(f"/v1/buckets/{bucket}/sources").json()["data"]] == [
        "menu.txt"
    ]
    for suffix in ("", "/text", "/content"):
        assert_error(client.get(f"/v1/sources/{secret_id}{suffix}"), 404)
    # ...and a caller holding it sees both.
    client.app.dependency_overrides[get_principal] = lambda: Principal(  # type: ignore[attr-defined]
        acl_labels=frozenset({"hr"})
    )
    assert len(search(client, "paid", [bucket])["data"]) == 2


def test_the_library_applies_acl_labels_of_the_principal(client: TestClient, bucket: str) -> None:
    from citewell.library import Library
    from citewell.model import SearchRequest

    upload(client, bucket, "pay.txt", b"Salaries are paid monthly.", acl='["hr", "finance"]')
    library: Library = client.app.state.library  # type: ignore[attr-defined]
    request = SearchRequest(query="salaries", bucket_ids=(bucket,))
    seen = {
        labels: len(library.search(request, principal=Principal(acl_labels=frozenset(labels))))
        for labels in [(), ("sales",), ("finance",), ("hr", "sales")]
    }
    assert seen == {(): 0, ("sales",): 0, ("finance",): 1, ("hr", "sales"): 1}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"query": "", "buckets": ["notes"]}, "query"),
        ({"query": "x" * 4001, "buckets": ["notes"]}, "query"),
        ({"buckets": ["notes"]}, "query"),
        ({"query": "refunds", "buckets": []}, "buckets"),
        ({"query": "refunds"}, "buckets"),
        ({"query": "refunds", "buckets": ["notes"], "max_results": 0}, "max_results"),
        ({"query": "refunds", "buckets": ["notes"], "max_results": "many"}, "max_results"),
        ({"query": "refunds", "buckets": ["notes"], "mode": "fuzzy"}, "mode"),
        (
            {"query": "refunds", "buckets": ["notes"], "include_superseded": "often"},
            "include_superseded",
        ),
        ({"query": "refunds", "buckets": ["notes"], "filters": {"type": "like"}}, "filters"),
        ({"query": "refunds", "buckets": ["notes"], "bucket_ids": ["notes"]}, "bucket_ids"),
    ],
)
def test_an_invalid_search_is_refused_naming_the_field(
    client: TestClient, bucket: str, body: dict[str, Any], param: str
) -> None:
    error = assert_error(client.post("/v1/search", json=body), 400)
    assert error["param"] == param


def test_filters_nested_too_deeply_are_refused(client: TestClient, bucket: str) -> None:
    filters: dict[str, Any] = {"type": "eq", "key": "team", "value": "hr"}
    for _ in range(9):
        filters = {"type": "and", "filters": [filters]}
    response = client.post(
        "/v1/search", json={"query": "x", "buckets": [bucket], "filters": filters}
    )
    error = assert_error(response, 400)
    assert error["param"] == "filters"
    assert "8 levels" in error["message"]
