"""The text of each page of a PDF, as citewell reads it: ``python pdf_pages.py FILE``.

Prints a JSON list, one string per page (the range of the canonical text each page holds). The
Anthropic SDK tests run it with the server's interpreter (the one that has citewell), so that
they can check ``page_location`` citations in a venv that holds only the SDK and pytest.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from citewell.config import IngestSettings
from citewell.ingest import parse


def page_texts(data: bytes, filename: str) -> list[str]:
    document = parse(data, filename=filename, limits=IngestSettings())
    return [document.text[p.span.start : p.span.end] for p in document.pages]


if __name__ == "__main__":
    path = Path(sys.argv[1])
    json.dump(page_texts(path.read_bytes(), path.name), sys.stdout, ensure_ascii=False)
