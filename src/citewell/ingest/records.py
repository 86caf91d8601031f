"""Tabular and structured data: CSV, TSV, JSON and JSON Lines, one RECORD block per record.

Every record reads ``key: value; key: value`` (the format of ``tables.format_row``), so a
record cited on its own says what each value is. Empty values are left out. Records are
separated by a single newline.

- CSV/TSV: the first row is the header; the dialect of a CSV file is sniffed from a sample.
- JSON: an array gives one record per element; an object whose only list-valued key holds
  objects gives one record per object of that list; any other value is one record. Nested keys
  flatten to ``a.b.c``, objects inside lists to ``a[0].b``, and lists of scalars join with ", ".
- JSON Lines: one record per non-blank line.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

from citewell.config import IngestSettings
from citewell.errors import ParseError
from citewell.ingest.base import BlockKind, DocumentBuilder, ParsedDocument
from citewell.ingest.limits import check_limit
from citewell.ingest.tables import format_row
from citewell.ingest.text import decode_text

__all__ = [
    "CSV_PARSER",
    "JSONL_PARSER",
    "JSON_PARSER",
    "TSV_PARSER",
    "CsvParser",
    "JsonLinesParser",
    "JsonParser",
    "flatten",
]

RECORD_SEPARATOR = "\n"
_SNIFF_SAMPLE = 64 * 1024
_SNIFF_DELIMITERS = ",;\t|"
# Python's csv module refuses fields over 128 KB by default; a long free-text cell is legitimate.
_FIELD_LIMIT = 16 * 1024 * 1024


def _build(
    rows: Iterable[tuple[list[str], list[str]]], *, filename: str, limits: IngestSettings
) -> ParsedDocument:
    """One RECORD block per ``(keys, values)`` row, enforcing ``max_records``."""
    builder = DocumentBuilder(block_separator=RECORD_SEPARATOR)
    for count, (keys, values) in enumerate(rows, start=1):
        check_limit(
            count, limits.max_records, what="records", setting="max_records", filename=filename
        )
        builder.add_block(BlockKind.RECORD, format_row(keys, values))
    return builder.build()


class CsvParser:
    """Comma- or tab-separated values; ``delimiter`` None means sniff it."""

    def __init__(self, media_types: tuple[str, ...], delimiter: str | None = None) -> None:
        self.media_types = media_types
        self.delimiter = delimiter

    def parse(self, data: bytes, *, filename: str, limits: IngestSettings) -> ParsedDocument:
        text = decode_text(data, filename)
        csv.field_size_limit(max(csv.field_size_limit(), _FIELD_LIMIT))
        # newline="" lets quoted fields hold line breaks (the text is already normalised).
        reader = csv.reader(io.StringIO(text, newline=""), self._dialect(text))
        header = next(reader, [])
        return _build(((header, row) for row in reader), filename=filename, limits=limits)

    def _dialect(self, text: str) -> type[csv.Dialect] | csv.Dialect:
        if self.delimiter == "\t":
            return csv.excel_tab
        try:
            return csv.Sniffer().sniff(text[:_SNIFF_SAMPLE], delimiters=_SNIFF_DELIMITERS)
        except csv.Error:
            return csv.excel  # too little to tell: plain commas


def _scalar(value: Any) -> str:
    """A JSON scalar as it is spelled in JSON (true, false), strings as they are."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """``(key, text)`` pairs of a JSON value, nested keys joined with dots.

    Uses an explicit stack, so deeply nested input cannot exhaust Python's recursion limit.
    """
    stack: list[tuple[str, Any]] = [(prefix, value)]
    while stack:
        key, item = stack.pop()
        if isinstance(item, dict):
            children = [(f"{key}.{name}" if key else str(name), v) for name, v in item.items()]
            stack.extend(reversed(children))
        elif isinstance(item, list) and any(isinstance(v, dict | list) for v in item):
            stack.extend(reversed([(f"{key}[{i}]", v) for i, v in enumerate(item)]))
        elif isinstance(item, list):
            yield key, ", ".join(text for text in map(_scalar, item) if text)
        else:
            yield key, _scalar(item)


def _record(value: Any) -> tuple[list[str], list[str]]:
    pairs = list(flatten(value))
    return [key for key, _ in pairs], [text for _, text in pairs]


def _records_of(document: Any) -> list[Any]:
    """The records a JSON document holds (see the module docstring)."""
    if isinstance(document, list):
        return document
    if isinstance(document, dict):
        lists = [v for v in document.values() if isinstance(v, list)]
        if len(lists) == 1 and lists[0] and all(isinstance(v, dict) for v in lists[0]):
            return lists[0]
    return [document]


def _loads(text: str, *, filename: str, line_offset: int = 0) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(
            f"{filename} is not valid JSON: {exc.msg} at line {exc.lineno + line_offset}, "
            f"column {exc.colno}",
            filename=filename,
        ) from None
    except RecursionError:
        raise ParseError(f"{filename} is nested too deeply to read", filename=filename) from None


class JsonParser:
    media_types: tuple[str, ...] = ("application/json",)

    def parse(self, data: bytes, *, filename: str, limits: IngestSettings) -> ParsedDocument:
        document = _loads(decode_text(data, filename), filename=filename)
        records = _records_of(document)
        check_limit(
            len(records),
            limits.max_records,
            what="records",
            setting="max_records",
            filename=filename,
        )
        return _build(map(_record, records), filename=filename, limits=limits)


class JsonLinesParser:
    media_types: tuple[str, ...] = ("application/x-ndjson",)

    def parse(self, data: bytes, *, filename: str, limits: IngestSettings) -> ParsedDocument:
        lines = decode_text(data, filename).split("\n")
        values = (
            _loads(line, filename=filename, line_offset=number)
            for number, line in enumerate(lines)
            if line.strip()
        )
        return _build(map(_record, values), filename=filename, limits=limits)


CSV_PARSER = CsvParser(media_types=("text/csv",))
TSV_PARSER = CsvParser(media_types=("text/tab-separated-values",), delimiter="\t")
JSON_PARSER = JsonParser()
JSONL_PARSER = JsonLinesParser()
