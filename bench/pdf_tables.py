"""What looking for tables costs a PDF parse, and how many it finds, with and without rulings.

Each PDF is parsed ``--rounds`` times with table detection and as many times with both detectors
(``pdf.find_tables`` for ruled tables, ``pdf_layout.find_aligned_tables`` for tables without
rulings) replaced by a function finding nothing, the two alternating so that both see the same
machine load; the medians per page and their ratio are printed, then the tables each detector
found in one more parse.

    .venv/bin/python bench/pdf_tables.py                       # the evaluation PDFs
    .venv/bin/python bench/pdf_tables.py some.pdf --rounds 20
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any

from citewell.config import IngestSettings
from citewell.ingest import pdf, pdf_layout
from common import evaldata_dir, machine, reproduce_line

FIND_RULED = pdf.find_tables
FIND_ALIGNED = pdf_layout.find_aligned_tables

Finder = Callable[..., tuple[Any, ...]]


def _none(*args: Any) -> tuple[()]:
    return ()


def _use(ruled: Finder, aligned: Finder) -> None:
    pdf.find_tables = ruled  # type: ignore[assignment]
    pdf_layout.find_aligned_tables = aligned  # type: ignore[assignment]


def _seconds(data: bytes, name: str) -> tuple[float, int]:
    started = time.perf_counter()
    document = pdf.PARSER.parse(data, filename=name, limits=IngestSettings())
    return time.perf_counter() - started, len(document.pages)


def _counting(find: Finder, counts: Counter[str], kind: str) -> Finder:
    def counted(*args: Any) -> tuple[Any, ...]:
        tables = find(*args)
        counts[kind] += len(tables)
        return tables

    return counted


def _found(data: bytes, name: str) -> Counter[str]:
    counts: Counter[str] = Counter(ruled=0, aligned=0)
    _use(_counting(FIND_RULED, counts, "ruled"), _counting(FIND_ALIGNED, counts, "aligned"))
    try:
        _seconds(data, name)
    finally:
        _use(FIND_RULED, FIND_ALIGNED)
    return counts


def measure(path: Path, rounds: int) -> None:
    data = path.read_bytes()
    timings: dict[bool, list[float]] = {True: [], False: []}
    pages = 1
    try:
        for _ in range(rounds):
            for detect in (True, False):
                _use(*((FIND_RULED, FIND_ALIGNED) if detect else (_none, _none)))
                seconds, pages = _seconds(data, path.name)
                timings[detect].append(seconds)
    finally:
        _use(FIND_RULED, FIND_ALIGNED)
    with_tables, without = (median(timings[detect]) * 1000 / pages for detect in (True, False))
    found = _found(data, path.name)
    print(
        f"{path.name}: {pages} pages, {with_tables:.2f} ms/page with table detection, "
        f"{without:.2f} without, ratio {with_tables / without:.3f}; tables found: "
        f"{found['ruled']} ruled, {found['aligned']} without rulings"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pdfs", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    print(machine())
    for path in args.pdfs or sorted((evaldata_dir() / "documents" / "pdf_text").glob("*.pdf")):
        measure(path, args.rounds)
    print(reproduce_line())


if __name__ == "__main__":
    main()
