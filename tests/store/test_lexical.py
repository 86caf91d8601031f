"""BM25 over tantivy: per-language analysis, filtering inside the query, writes across processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tantivy

from citewell.errors import StoreError
from citewell.store.sqlite.lexical import LexicalDoc, LexicalIndex

DOCS = [
    LexicalDoc("en-refund", 1, "Refunds are available within 30 days of purchase.", "en"),
    LexicalDoc("en-museum", 1, "The museum opens at 9am every day except Monday.", "en"),
    LexicalDoc(
        "es-refund", 2, "Puede solicitar un reembolso dentro de los 30 días tras la compra.", "es"
    ),
    LexicalDoc("es-museum", 2, "El museo abre a las nueve de la mañana todos los días.", "es"),
    LexicalDoc("es-policy", 2, "La política de privacidad describe qué datos guardamos.", "es"),
    LexicalDoc("zh-refund", 3, "客户可以在购买后三十天内申请退款，退款期限为三十天。", "zh"),
    LexicalDoc("zh-museum", 3, "博物馆每天上午九点开门，周一除外。", "zh"),
    LexicalDoc("de-refund", 4, "Rückerstattung innerhalb von dreißig Tagen möglich.", None),
]


@pytest.fixture
def index() -> LexicalIndex:
    index = LexicalIndex(None)
    with index.writer() as writer:
        writer.add(DOCS)
    return index


def ids(index: LexicalIndex, query: str, source_keys: set[int] | None = None) -> list[str]:
    return [hit.chunk_id for hit in index.search(query, source_keys=source_keys, limit=10)]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("refund window", "en-refund"),
        ("refunded", "en-refund"),  # English stemming
        ("reembolsos", "es-refund"),  # Spanish stemming
        ("politica de privacidad", "es-policy"),  # accents folded away
        ("退款期限", "zh-refund"),  # jieba splits 退款 / 期限
        ("九点开门", "zh-museum"),
        ("Rückerstattung", "de-refund"),  # other languages: words as written
        ("rueckerstattung möglich", "de-refund"),
    ],
)
def test_a_query_finds_the_document_in_its_own_language(
    index: LexicalIndex, query: str, expected: str
) -> None:
    assert ids(index, query)[0] == expected


def test_scores_are_positive_and_best_first(index: LexicalIndex) -> None:
    hits = index.search("30 refund reembolso 退款", source_keys=None, limit=10)
    scores = [hit.score for hit in hits]
    assert len(hits) >= 3
    assert scores == sorted(scores, reverse=True)
    assert all(score > 0 for score in scores)


def test_source_filter_changes_membership_but_not_scores(index: LexicalIndex) -> None:
    everything = {hit.chunk_id: hit.score for hit in index.search("30", source_keys=None, limit=10)}
    assert set(everything) == {"en-refund", "es-refund"}
    only_spanish = index.search("30", source_keys={2, 3}, limit=10)
    assert [(hit.chunk_id, hit.score) for hit in only_spanish] == [
        ("es-refund", everything["es-refund"])
    ]
    assert index.search("30", source_keys=set(), limit=10) == []
    as_array = index.search("30", source_keys=np.array([2, 3], dtype=np.int64), limit=10)
    assert as_array == only_spanish


def test_the_filter_applies_before_the_limit(index: LexicalIndex) -> None:
    best, second = ids(index, "30")
    second_key = next(doc.source_key for doc in DOCS if doc.chunk_id == second)
    limited = index.search("30", source_keys={second_key}, limit=1)
    assert [hit.chunk_id for hit in limited] == [second]


@pytest.mark.parametrize(
    "query", ['"', "a:b", "((", "*", "AND OR", "text_en:refund)", "refund^2 ~", "\\", "-", ""]
)
def test_hostile_queries_are_only_words(index: LexicalIndex, query: str) -> None:
    index.search(query, source_keys=None, limit=10)  # never raises


def test_query_syntax_is_not_interpreted(index: LexicalIndex) -> None:
    assert ids(index, 'text_en:"museum" AND') == ["en-museum"]


@pytest.mark.parametrize("query", ["", "   ", "the of and", "el de la", "的 了", "?!"])
def test_empty_or_stopword_only_query_finds_nothing(index: LexicalIndex, query: str) -> None:
    assert index.search(query, source_keys=None, limit=10) == []


def test_delete_source_removes_its_documents(index: LexicalIndex) -> None:
    with index.writer() as writer:
        writer.delete_source(2)
    assert ids(index, "reembolso") == []
    assert ids(index, "refund") == ["en-refund"]


def test_a_failed_write_is_rolled_back(index: LexicalIndex) -> None:
    with pytest.raises(KeyError), index.writer() as writer:
        writer.add([LexicalDoc("new", 9, "a brand new refund note", "en")])
        writer.delete_source(1)
        raise KeyError("boom")
    assert ids(index, "refund") == ["en-refund"]


def test_a_writer_is_unusable_after_its_block(index: LexicalIndex) -> None:
    with index.writer() as writer:
        pass
    with pytest.raises(RuntimeError):
        writer.add(DOCS)


def test_an_index_persists_across_reopening(tmp_path: Path) -> None:
    index = LexicalIndex(tmp_path / "lexical")
    with index.writer() as writer:
        writer.add(DOCS)
    index.close()
    reopened = LexicalIndex(tmp_path / "lexical")
    assert ids(reopened, "reembolsos") == ["es-refund"]
    assert ids(reopened, "退款") == ["zh-refund"]


def test_refresh_shows_another_instances_commit(tmp_path: Path) -> None:
    reader = LexicalIndex(tmp_path / "lexical")
    writer_side = LexicalIndex(tmp_path / "lexical")
    with writer_side.writer() as writer:
        writer.add(DOCS[:1])
    reader.refresh()
    assert ids(reader, "refund") == ["en-refund"]


_HOLD_SECONDS = 0.6
_CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from citewell.store.sqlite.lexical import LexicalDoc, LexicalIndex

    index = LexicalIndex(Path(sys.argv[1]))
    with index.writer() as writer:
        print("locked", flush=True)
        time.sleep(float(sys.argv[2]))
        writer.add([LexicalDoc("child", 7, "written by the child process", "en")])
    """
)


def test_a_writer_in_another_process_blocks_this_one(tmp_path: Path) -> None:
    path = tmp_path / "lexical"
    index = LexicalIndex(path)
    with subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path), str(_HOLD_SECONDS)],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "locked"
        with index.writer() as writer:
            # Had it not waited, the child (still holding its writer) would not have committed.
            index.refresh()
            assert set(ids(index, "written process")) == {"child"}
            writer.add([LexicalDoc("parent", 8, "written by the parent process", "en")])
        assert child.wait(timeout=30) == 0
    # Both survive.
    index.refresh()
    assert set(ids(index, "written process")) == {"child", "parent"}


def test_writers_in_two_threads_take_turns() -> None:
    index = LexicalIndex(None)
    order: list[str] = []
    first_holds = threading.Event()

    def first() -> None:
        with index.writer() as writer:
            first_holds.set()
            time.sleep(0.2)
            writer.add([LexicalDoc("first", 1, "first refund", "en")])
            order.append("first done")

    thread = threading.Thread(target=first)
    thread.start()
    first_holds.wait()
    with index.writer() as writer:
        order.append("second started")
        writer.add([LexicalDoc("second", 2, "second refund", "en")])
    thread.join()
    assert order == ["first done", "second started"]
    assert set(ids(index, "refund")) == {"first", "second"}


def test_a_folder_holding_another_index_layout_is_a_store_error(tmp_path: Path) -> None:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("something_else")
    tantivy.Index(builder.build(), path=str(tmp_path))
    with pytest.raises(StoreError):
        LexicalIndex(tmp_path)


def test_a_closed_index_refuses_use() -> None:
    index = LexicalIndex(None)
    index.close()
    with pytest.raises(RuntimeError):
        index.search("refund", source_keys=None, limit=5)
