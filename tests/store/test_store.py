"""The Store contract, and reopening, on every backend."""

from __future__ import annotations

import datetime as dt

import pytest

from citewell.errors import Conflict, StoreError
from citewell.model import ApiKey
from citewell.store.base import Scope
from tests.contracts.store import LOCAL, StoreContract, draft, texts_found
from tests.store.conftest import Backend


class TestStore(StoreContract):
    pass


def test_a_reopened_store_finds_what_was_stored(backend: Backend) -> None:
    store = backend.open()
    bucket = store.create_bucket("notes", tenant_id="default").id
    source = store.add_source(draft(bucket, "a.txt", "Refunds take 30 days."))
    store.close()
    reopened = backend.open()
    scope = Scope(principal=LOCAL, bucket_ids=(bucket,))
    assert texts_found(reopened, "refunds", scope) == ["Refunds take 30 days."]
    assert reopened.get_source(source.id) == source


def test_a_second_instance_sees_sources_added_by_the_first(backend: Backend) -> None:
    writer, reader = backend.open(), backend.open()
    bucket = writer.create_bucket("notes", tenant_id="default").id
    scope = Scope(principal=LOCAL, bucket_ids=(bucket,))
    assert texts_found(reader, "refunds", scope) == []
    source = writer.add_source(draft(bucket, "a.txt", "Refunds take 30 days."))
    assert texts_found(reader, "refunds", scope) == ["Refunds take 30 days."]
    writer.delete_source(source.id)
    assert texts_found(reader, "refunds", scope) == []


def test_a_failing_backend_is_a_store_error_and_a_clash_a_conflict(backend: Backend) -> None:
    store = backend.open()
    key = ApiKey(
        id="key_1", tenant_id="default", permissions=frozenset(), created_at=dt.datetime.now(dt.UTC)
    )
    store.put_key(key, "hash")
    with pytest.raises(Conflict):
        store.put_key(key, "hash")
    backend.sql("DROP TABLE agents")  # as a broken database would
    with pytest.raises(StoreError):
        store.list_agents(tenant_id="default")
