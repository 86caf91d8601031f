"""What looking for ruled tables costs a PDF parse: time per page with and without it.

Each PDF is parsed ``--rounds`` times with table detection and as many times with
``pdf.find_tables`` replaced by a function finding nothing, the two alternating so that both see
the same machine load; the medians per page and their ratio are printed.

    .venv/bin/python bench/pdf_tables.py                       # the evaluation PDFs
    .venv/bin/python bench/pdf_tables.py some.pdf --rounds 20
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from statistics import median
from typing import Any

from citewell.config import IngestSettings
from citewell.ingest import pdf

PDFS = Path(__file__).resolve().parents[2] / "shared/evaldata/documents/pdf_text"


def _no_tables(page: Any, crop: Any) -> tuple[()]:
    return ()


def _seconds(data: bytes, name: str) -> tuple[float, int]:
    started = time.perf_counter()
    document = pdf.PARSER.parse(data, filename=name, limits=IngestSettings())
    return time.perf_counter() - started, len(document.pages)


def measure(path: Path, rounds: int) -> None:
    data = path.read_bytes()
    find_tables = pdf.find_tables
    timings: dict[bool, list[float]] = {True: [], False: []}
    pages = 1
    for _ in range(rounds):
        for detect in (True, False):
            pdf.find_tables = find_tables if detect else _no_tables  # type: ignore[assignment]
            seconds, pages = _seconds(data, path.name)
            timings[detect].append(seconds)
    pdf.find_tables = find_tables
    with_tables, without = (median(timings[detect]) * 1000 / pages for detect in (True, False))
    print(
        f"{path.name}: {pages} pages, {with_tables:.2f} ms/page with table detection, "
        f"{without:.2f} without, ratio {with_tables / without:.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pdfs", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    for path in args.pdfs or sorted(PDFS.glob("*.pdf")):
        measure(path, args.rounds)


if __name__ == "__main__":
    main()
