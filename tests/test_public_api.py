"""The public Python surface is a promise: changing it must be deliberate."""

from __future__ import annotations

import ast
from pathlib import Path

import citewell

SRC = Path(citewell.__file__).parent


def test_the_public_names_are_exactly_these() -> None:
    assert citewell.__all__ == [
        "Agent",
        "Answer",
        "Box",
        "Bucket",
        "Chunk",
        "Citation",
        "CitedSource",
        "CitewellError",
        "Claim",
        "Comparison",
        "CompoundFilter",
        "Engine",
        "GroundingState",
        "IngestOutcome",
        "IngestResult",
        "Library",
        "Modality",
        "Page",
        "Passage",
        "Principal",
        "Question",
        "RetrievalMode",
        "ScoreBreakdown",
        "SearchRequest",
        "SentenceMatch",
        "Settings",
        "Source",
        "Span",
    ]
    assert all(hasattr(citewell, name) for name in citewell.__all__)


def test_the_vocabulary_imports_nothing_from_citewell() -> None:
    tree = ast.parse((SRC / "model.py").read_text())
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module is not None
    } | {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert not any(name.startswith("citewell") for name in imported)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("citewell"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("citewell")}
    return found


LAYERS = {
    # package: citewell packages it must never import (dependencies point one way)
    "ingest": (
        "citewell.store",
        "citewell.embed",
        "citewell.retrieve",
        "citewell.library",
        "citewell.api",
        "citewell.cli",
    ),
    "store": (
        "citewell.embed",
        "citewell.retrieve",
        "citewell.library",
        "citewell.api",
        "citewell.cli",
    ),
    "embed": ("citewell.retrieve", "citewell.library", "citewell.api", "citewell.cli"),
    # The model runtime knows weights, graphs and sessions, not what its vectors are for, so the
    # reader (cite/) can use it as the embedder does.
    "encoder": (
        "citewell.read",
        "citewell.store",
        "citewell.embed",
        "citewell.retrieve",
        "citewell.library",
        "citewell.cite",
        "citewell.generate",
        "citewell.engine",
        "citewell.api",
        "citewell.cli",
    ),
    # The reader scores texts; what they are (passages, answers, citations) is the engine's.
    "read": (
        "citewell.store",
        "citewell.retrieve",
        "citewell.library",
        "citewell.generate",
        "citewell.engine",
        "citewell.render",
        "citewell.api",
        "citewell.cli",
    ),
    "retrieve": ("citewell.library", "citewell.api", "citewell.cli"),
    # Generators read evidence and write text: no store, no search, no offsets into sources.
    "generate": (
        "citewell.store",
        "citewell.embed",
        "citewell.retrieve",
        "citewell.library",
        "citewell.engine",
        "citewell.render",
        "citewell.api",
        "citewell.cli",
    ),
    # Attribution and verification judge evidence already retrieved.
    "cite": (
        "citewell.store",
        "citewell.embed",
        "citewell.retrieve",
        "citewell.library",
        "citewell.engine",
        "citewell.render",
        "citewell.api",
        "citewell.cli",
    ),
    # Renderers draw an Answer: they never search, generate or attribute.
    "render": (
        "citewell.store",
        "citewell.embed",
        "citewell.retrieve",
        "citewell.library",
        "citewell.generate",
        "citewell.cite.attribute",
        "citewell.api",
        "citewell.cli",
    ),
}


def test_dependencies_point_one_way() -> None:
    for package, forbidden in LAYERS.items():
        for path in (SRC / package).glob("*.py"):
            bad = {m for m in _imports(path) if m.startswith(forbidden)}
            assert not bad, f"{path.relative_to(SRC)} imports {sorted(bad)}"
