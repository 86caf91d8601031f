"""Buckets over HTTP: create (idempotently), list, get by id or slug, delete."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.conftest import assert_error, search, upload


def test_creating_a_bucket_returns_201_with_the_bucket(client: TestClient) -> None:
    response = client.post("/v1/buckets", json={"slug": "handbook", "name": "Staff handbook"})
    assert response.status_code == 201
    bucket = response.json()
    assert bucket["object"] == "bucket"
    assert bucket["id"].startswith("bkt_")
    assert (bucket["slug"], bucket["name"]) == ("handbook", "Staff handbook")
    assert isinstance(bucket["created_at"], int)


def test_creating_an_existing_bucket_returns_it_unchanged_with_200(client: TestClient) -> None:
    first = client.post("/v1/buckets", json={"slug": "handbook", "name": "Staff handbook"})
    again = client.post("/v1/buckets", json={"slug": "handbook", "name": "Another name"})
    assert again.status_code == 200
    assert again.json() == first.json()


def test_a_bucket_name_defaults_to_its_slug(client: TestClient) -> None:
    assert client.post("/v1/buckets", json={"slug": "notes"}).json()["name"] == "notes"


def test_an_invalid_slug_is_refused_naming_the_slug(client: TestClient) -> None:
    error = assert_error(client.post("/v1/buckets", json={"slug": "Not A Slug"}), 400)
    assert error["param"] == "slug"


def test_buckets_are_listed_in_the_openai_list_shape(client: TestClient) -> None:
    ids = [client.post("/v1/buckets", json={"slug": s}).json()["id"] for s in ("b", "a")]
    listing = client.get("/v1/buckets").json()
    assert listing["object"] == "list"
    assert [b["slug"] for b in listing["data"]] == ["a", "b"]
    assert listing["first_id"] == ids[1]
    assert listing["last_id"] == ids[0]
    assert listing["has_more"] is False


def test_an_empty_list_has_null_ids_and_no_more(client: TestClient) -> None:
    assert client.get("/v1/buckets").json() == {
        "object": "list",
        "data": [],
        "first_id": None,
        "last_id": None,
        "has_more": False,
    }


def test_a_bucket_is_found_by_id_and_by_slug(client: TestClient) -> None:
    created = client.post("/v1/buckets", json={"slug": "handbook"}).json()
    assert client.get(f"/v1/buckets/{created['id']}").json() == created
    assert client.get("/v1/buckets/handbook").json() == created


def test_an_unknown_bucket_is_404(client: TestClient) -> None:
    error = assert_error(client.get("/v1/buckets/nope"), 404, code="not_found")
    assert error["param"] == "bucket"


def test_deleting_a_bucket_removes_it_with_its_sources(client: TestClient, bucket: str) -> None:
    source = upload(client, bucket, "a.txt", b"Refunds take thirty days.").json()["source"]
    bucket_id = client.get(f"/v1/buckets/{bucket}").json()["id"]
    response = client.delete(f"/v1/buckets/{bucket}")
    assert response.status_code == 200
    assert response.json() == {"id": bucket_id, "object": "bucket.deleted", "deleted": True}
    assert_error(client.get(f"/v1/buckets/{bucket}"), 404)
    assert_error(client.get(f"/v1/sources/{source['id']}"), 404)
    assert_error(client.delete(f"/v1/buckets/{bucket}"), 404)


def test_a_deleted_bucket_can_be_searched_no_more(client: TestClient, bucket: str) -> None:
    upload(client, bucket, "a.txt", b"Refunds take thirty days.")
    client.post("/v1/buckets", json={"slug": "other"})
    client.delete(f"/v1/buckets/{bucket}")
    assert search(client, "refunds", ["other"])["data"] == []
    response = client.post("/v1/search", json={"query": "refunds", "buckets": [bucket]})
    assert_error(response, 404)
