"""The bundled embedders: unit vectors of the right shape that rank relevant passages first."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from citewell.config import RetrieveSettings, Settings
from citewell.embed import Embedder, open_embedder
from citewell.embed.e5 import E5Small
from citewell.embed.use import UniversalSentenceEncoder
from citewell.errors import ConfigError

NAMES = ["e5-small", "use"]

# (query, relevant passage, unrelated passage)
CASES = {
    "en": (
        "What is the refund window?",
        "Refunds are available within 30 days of purchase.",
        "The museum opens at 9am every day except Mondays.",
    ),
    "es": (
        "¿Cuál es el plazo para pedir un reembolso?",
        "Los reembolsos están disponibles durante 30 días después de la compra.",
        "El museo abre a las nueve de la mañana todos los días excepto los lunes.",
    ),
    "zh": (
        "退款期限是多久？",
        "购买后三十天内可以申请退款。",
        "博物馆每天上午九点开门，周一除外。",
    ),
    "en->es": (
        "What is the refund window?",
        "Los reembolsos están disponibles durante 30 días después de la compra.",
        "El museo abre a las nueve de la mañana todos los días excepto los lunes.",
    ),
    "en->zh": (
        "What is the refund window?",
        "购买后三十天内可以申请退款。",
        "博物馆每天上午九点开门，周一除外。",
    ),
}


def settings_for(name: str) -> Settings:
    # The model cache is the installation's (`make install` builds into it), as a server's is.
    return Settings(retrieve=RetrieveSettings(embedder=name, threads=1))  # type: ignore[arg-type]


@pytest.fixture(scope="module", params=NAMES)
def embedder(request: pytest.FixtureRequest) -> Embedder:
    return open_embedder(settings_for(request.param))


def test_open_embedder_finds_each_by_name() -> None:
    assert isinstance(open_embedder(settings_for("e5-small")), E5Small)
    assert isinstance(open_embedder(settings_for("use")), UniversalSentenceEncoder)


def test_an_unknown_embedder_is_a_config_error() -> None:
    # model_construct skips validation, as a settings object built some other way might.
    retrieve = RetrieveSettings.model_construct(embedder="word2vec", threads=1)
    with pytest.raises(ConfigError, match="word2vec"):
        open_embedder(Settings(retrieve=retrieve))


def test_passages_are_unit_float32_rows(embedder: Embedder) -> None:
    vectors = embedder.embed_passages(["Refunds take 30 days.", "退款", "", "¿Dónde está?"])
    assert vectors.shape == (4, embedder.dim)
    assert vectors.dtype == np.float32 and vectors.flags.c_contiguous
    norms = np.linalg.norm(vectors[[0, 1, 3]], axis=1)
    assert norms == pytest.approx(1.0, abs=1e-5)


def test_no_passages_give_an_empty_matrix(embedder: Embedder) -> None:
    vectors = embedder.embed_passages([])
    assert vectors.shape == (0, embedder.dim) and vectors.dtype == np.float32


def test_a_query_is_one_unit_vector(embedder: Embedder) -> None:
    vector = embedder.embed_query("refund window")
    assert vector.shape == (embedder.dim,) and vector.dtype == np.float32
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_refund_query_ranks_the_refund_passage_first(embedder: Embedder, case: str) -> None:
    query, relevant, unrelated = CASES[case]
    passages = embedder.embed_passages([relevant, unrelated])
    scores = passages @ embedder.embed_query(query)
    assert scores[0] > scores[1]


@pytest.mark.parametrize("name", NAMES)
def test_batching_does_not_change_the_vectors(name: str) -> None:
    texts = [case[1] for case in CASES.values()] + ["one more", "and another one"]
    cache = Settings().model_cache_dir
    make = {
        "e5-small": lambda size: E5Small(1, cache, batch_size=size),
        "use": lambda size: UniversalSentenceEncoder(1, batch_size=size),
    }[name]
    whole, in_pairs = make(32).embed_passages(texts), make(2).embed_passages(texts)
    assert np.abs(whole - in_pairs).max() < 1e-4


def test_concurrent_queries_give_the_same_vectors(embedder: Embedder) -> None:
    queries = ["refund window", "退款期限", "plazo de reembolso"] * 4
    with ThreadPoolExecutor(max_workers=4) as pool:
        vectors = list(pool.map(embedder.embed_query, queries))
    for i, vector in enumerate(vectors):
        assert np.allclose(vector, vectors[i % 3], atol=1e-6)


def test_another_build_of_e5_names_its_own_vectors(tmp_path: Path) -> None:
    from citewell.encoder import MeanPooling, Recipe

    shallow = E5Small(1, tmp_path, recipe=Recipe("e5-small-2layers", 2, MeanPooling(), "fp32"))
    default = E5Small(1, tmp_path)
    assert (shallow.name, default.name) == ("e5-small-2layers", "e5-small")
    query = "What is the refund window?"
    assert float(shallow.embed_query(query) @ default.embed_query(query)) < 0.95
    assert len(list(tmp_path.glob("e5-small-2layers-*.onnx"))) == 1
    assert len(list(tmp_path.glob("e5-small-????????????????.onnx"))) == 1


def test_a_remembered_query_vector_is_the_one_computed() -> None:
    # e5 remembers recent queries: the reader embeds the question the search just embedded.
    asked = E5Small(1, Settings().model_cache_dir)
    first = asked.embed_query("How long is the refund window?")
    assert asked.embed_query("How long is the refund window?") is first
    assert not first.flags.writeable  # shared: no caller may change another's
    fresh = E5Small(1, Settings().model_cache_dir).embed_query("How long is the refund window?")
    np.testing.assert_array_equal(first, fresh)
