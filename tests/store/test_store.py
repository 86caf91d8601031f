"""The Store contract, and reopening, on every backend."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from citewell.errors import Conflict, StoreError
from citewell.model import Agent, ApiKey
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


def test_an_agent_keeps_what_its_owner_set_and_follows_the_defaults_it_left(
    backend: Backend,
) -> None:
    # A threshold left to the default is the reader card's, chosen again with every delta: a
    # stored agent must not pin the one that held when it was made.
    store = backend.open()
    store.put_agent(Agent(name="careful", strict=True), tenant_id="default")
    ((stored,),) = backend.sql("SELECT agent FROM agents WHERE name = 'careful'")
    written = stored if isinstance(stored, dict) else json.loads(stored)
    assert written == {"name": "careful", "strict": True}
    (agent,) = store.list_agents(tenant_id="default")
    assert agent == Agent(name="careful", strict=True)
    assert agent.support_threshold is None and agent.answerable_threshold is None
