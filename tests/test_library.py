"""The Library: the Python API the CLI and HTTP mirror, over the real parts."""

from __future__ import annotations

from pathlib import Path

import pytest

from citewell.config import RetrieveSettings, Settings
from citewell.embed import open_embedder
from citewell.library import Library
from citewell.model import IngestOutcome, RetrievalMode, SearchRequest
from citewell.retrieve.search import fusion_for

SPANISH = "Los reembolsos se pagan en un plazo de treinta días.\n\nLa tienda abre a las nueve."
CHINESE = "购买后三十天内可以申请退款。\n\n商店每天早上九点开门。"
ENGLISH = "Refunds are paid within thirty days.\n\nThe shop opens at nine."


@pytest.fixture
def library(settings: Settings):
    with Library.open(settings) as library:
        library.create_bucket("shop")
        yield library


def best_sentence(library: Library, query: str, **options: object) -> str:
    request = SearchRequest(query=query, bucket_ids=("shop",), **options)  # type: ignore[arg-type]
    return library.search(request)[0].sentences[0].text


@pytest.mark.parametrize(
    ("filename", "text", "query", "expected"),
    [
        ("es.txt", SPANISH, "¿Cuándo pagan el reembolso?", SPANISH.split("\n\n")[0]),
        ("zh.txt", CHINESE, "退款期限是多久", CHINESE.split("\n\n")[0]),
        ("en.txt", ENGLISH, "how long do refunds take", ENGLISH.split("\n\n")[0]),
    ],
)
def test_each_language_finds_its_sentence(
    library: Library, filename: str, text: str, query: str, expected: str
) -> None:
    library.ingest(text.encode(), filename=filename, bucket="shop")
    assert best_sentence(library, query) == expected


def test_dense_search_crosses_languages(library: Library) -> None:
    library.ingest(SPANISH.encode(), filename="es.txt", bucket="shop")
    hits = library.search(
        SearchRequest(
            query="refund payment deadline", bucket_ids=("shop",), mode=RetrievalMode.DENSE
        )
    )
    assert hits[0].chunk.text.startswith("Los reembolsos")


def test_a_new_version_embeds_only_its_changed_passages(library: Library) -> None:
    calls: list[int] = []
    embed = library.embedder.embed_passages

    def counting(texts):  # type: ignore[no-untyped-def]
        calls.append(len(texts))
        return embed(texts)

    library.embedder.embed_passages = counting  # type: ignore[method-assign]
    first = "\n\n".join(f"Paragraph {i} says something about topic {i}. " * 15 for i in range(4))
    library.ingest(first.encode(), filename="long.txt", bucket="shop")
    changed = first.replace("topic 3.", "topic three.")
    result = library.ingest(changed.encode(), filename="long.txt", bucket="shop")
    assert result.outcome is IngestOutcome.NEW_VERSION
    assert result.source.chunk_count == 4
    assert calls == [4, 1]


def test_switching_embedders_backfills_vectors(settings: Settings) -> None:
    with Library.open(settings) as library:
        library.create_bucket("shop")
        library.ingest(ENGLISH.encode(), filename="en.txt", bucket="shop")
    other = settings.model_copy(
        update={"retrieve": RetrieveSettings(embedder="e5-small", threads=1)}
    )
    with Library.open(other) as library:
        dense = SearchRequest(query="refunds", bucket_ids=("shop",), mode=RetrievalMode.DENSE)
        assert library.search(dense) == []
        assert library.backfill_vectors() == 1
        assert library.search(dense)[0].chunk.text == ENGLISH


def test_the_fusion_weight_is_the_embedders_unless_set(settings: Settings) -> None:
    for name, weight in (("e5-small", 0.4), ("use", 0.7)):
        retrieve = RetrieveSettings(embedder=name)
        embedder = open_embedder(settings.model_copy(update={"retrieve": retrieve}))
        assert fusion_for(retrieve, embedder).lexical_weight == weight
    chosen = RetrieveSettings(embedder="use", lexical_weight=0.25)
    embedder = open_embedder(settings.model_copy(update={"retrieve": chosen}))
    assert fusion_for(chosen, embedder).lexical_weight == 0.25


def test_ingest_path_refuses_a_file_over_the_limit_before_reading_it(
    library: Library, tmp_path: Path
) -> None:
    from citewell.errors import FileTooLarge

    big = tmp_path / "big.txt"
    with big.open("wb") as f:
        f.truncate(500 * 1024 * 1024)  # sparse: 500 MB on paper, nothing on disk
    with pytest.raises(FileTooLarge):
        library.ingest_path(big, bucket="shop")
    assert library.list_sources("shop") == []


def test_an_import_cut_short_is_never_listed_and_gone_after_a_restart(settings: Settings) -> None:
    with Library.open(settings) as library:
        library.create_bucket("kept")
        library.store.create_bucket("_importing-0123456789abcdef", tenant_id="default")
        assert [b.slug for b in library.list_buckets()] == ["kept"]
    with Library.open(settings) as library:
        assert [b.slug for b in library.store.list_buckets(tenant_id="default")] == ["kept"]
