"""The public Python surface is a promise: changing it must be deliberate."""

from __future__ import annotations

import ast
import re
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
    # Attribution and verification judge evidence already retrieved (the chat-model judge is a
    # generator's model, so it lives in generate/).
    "cite": (
        "citewell.generate",
        "citewell.store",
        "citewell.embed",
        "citewell.retrieve",
        "citewell.library",
        "citewell.engine",
        "citewell.render",
        "citewell.api",
        "citewell.cli",
    ),
}


def test_dependencies_point_one_way() -> None:
    for package, forbidden in LAYERS.items():
        for path in (SRC / package).rglob("*.py"):
            bad = {m for m in _imports(path) if m.startswith(forbidden)}
            assert not bad, f"{path.relative_to(SRC)} imports {sorted(bad)}"


def _front_doors() -> list[Path]:
    """The modules that serve people: the HTTP API and the command line."""
    cli = SRC / "cli"
    return [
        *(SRC / "api").rglob("*.py"),
        *(cli.rglob("*.py") if cli.is_dir() else [SRC / "cli.py"]),
    ]


def test_the_api_and_the_cli_reach_storage_only_through_the_library_and_the_engine() -> None:
    for path in _front_doors():
        imported = {m for m in _imports(path) if m.startswith("citewell.store")}
        assert not imported, f"{path.relative_to(SRC)} imports {sorted(imported)}"
        reached = sorted(
            ast.unparse(node)
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute)
            and node.attr == "store"
            and re.search(r"library(\(.*\))?$", ast.unparse(node.value))
        )
        assert not reached, f"{path.relative_to(SRC)} reaches {reached}"


def test_the_cli_prints_the_records_renderers_draw_and_only_serve_starts_the_api() -> None:
    for path in (SRC / "cli").rglob("*.py"):
        imported = {m for m in _imports(path) if m.startswith("citewell.api")}
        allowed = {"citewell.api"} if path.name == "serve.py" else set()  # create_app
        assert imported <= allowed, f"{path.relative_to(SRC)} imports {sorted(imported)}"


def _package_of(module: str) -> str:
    """``citewell.cite.attribute`` -> ``cite``; a top-level module is its own unit."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "citewell"


def _package_imports() -> dict[str, set[str]]:
    """For each package (or top-level module) of citewell, the others it imports."""
    graph: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        unit = path.relative_to(SRC).parts[0].removesuffix(".py")
        for module in _imports(path):
            other = _package_of(module)
            if other not in (unit, "citewell"):
                graph.setdefault(unit, set()).add(other)
    return graph


def test_no_two_packages_import_each_other_even_through_others() -> None:
    graph = _package_imports()

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            unit = todo.pop()
            if unit == goal:
                return True
            if unit not in seen:
                seen.add(unit)
                todo.extend(graph.get(unit, ()))
        return False

    cycles = sorted(
        f"{unit} -> {other} -> ... -> {unit}"
        for unit, others in graph.items()
        for other in others
        if reaches(other, unit)
    )
    assert not cycles


def test_renderers_import_only_the_vocabulary_and_the_events() -> None:
    """Renderers draw an Answer: they never search, generate or attribute."""
    allowed = (
        "citewell.model",
        "citewell.events",
        "citewell.locator",  # the labels and ranges that name a place in a source
        "citewell.scalar_text",  # JSON that every client can decode
        "citewell.render",
    )
    for path in (SRC / "render").glob("*.py"):
        bad = {m for m in _imports(path) if not m.startswith(allowed)}
        assert not bad, f"{path.relative_to(SRC)} imports {sorted(bad)}"
