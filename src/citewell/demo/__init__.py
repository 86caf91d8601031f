"""A handful of short, original documents to try citewell on: ``citewell serve --demo``.

An English handbook in Markdown (headings and a table), a Spanish HTML page, a Chinese note in
plain text and a small CSV price list. They are kept short on purpose: the default embedder
reads about one passage a second, and the demo should be ready within a few seconds.
"""

from __future__ import annotations

from importlib.resources import files

from citewell.library import Library
from citewell.model import IngestResult

__all__ = ["DEMO_BUCKET", "demo_documents", "load_demo"]

DEMO_BUCKET = "demo"


def demo_documents() -> list[tuple[str, bytes]]:
    """(file name, bytes) of each demo document, by name."""
    folder = files(__name__) / "documents"
    return sorted((item.name, item.read_bytes()) for item in folder.iterdir() if item.is_file())


def load_demo(library: Library) -> list[IngestResult]:
    """Ingest the demo documents into the ``demo`` bucket; a second run changes nothing."""
    library.create_bucket(DEMO_BUCKET, name="citewell demo")
    return [
        library.ingest(data, filename=name, bucket=DEMO_BUCKET) for name, data in demo_documents()
    ]
