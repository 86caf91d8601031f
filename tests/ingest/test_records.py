"""CSV, TSV, JSON and JSON Lines: one self-describing record per row or object."""

from __future__ import annotations

import pytest

from citewell.config import IngestSettings
from citewell.errors import FileTooLarge, ParseError
from citewell.ingest import parse
from citewell.ingest.base import BlockKind, ParsedDocument

LIMITS = IngestSettings()


def _parse(data: bytes, name: str, limits: IngestSettings = LIMITS) -> ParsedDocument:
    return parse(data, filename=name, limits=limits)


def _records(document: ParsedDocument) -> list[str]:
    assert {b.kind for b in document.blocks} <= {BlockKind.RECORD}
    return [document.text[b.span.start : b.span.end] for b in document.blocks]


def test_each_csv_row_reads_header_value_pairs_without_empty_values() -> None:
    data = b'Plan,Price,Seats\r\nPro,$20,5\r\nFree,,1\r\n"Team, large","multi\nline",50\r\n'
    document = _parse(data, "plans.csv")
    assert _records(document) == [
        "Plan: Pro; Price: $20; Seats: 5",
        "Plan: Free; Seats: 1",
        "Plan: Team, large; Price: multi line; Seats: 50",
    ]
    assert document.text == "\n".join(_records(document))


def test_the_csv_delimiter_is_sniffed() -> None:
    assert _records(_parse(b"name;city\nAna;Madrid\nLi;Beijing\n", "people.csv")) == [
        "name: Ana; city: Madrid",
        "name: Li; city: Beijing",
    ]


def test_tsv_splits_on_tabs_only() -> None:
    assert _records(_parse(b"term\tmeaning\nA, B\tletters, two\n", "terms.tsv")) == [
        "term: A, B; meaning: letters, two"
    ]


def test_values_beyond_the_header_stand_alone() -> None:
    assert _records(_parse(b"a,b\n1,2,3\n4\n", "ragged.csv")) == ["a: 1; b: 2; 3", "a: 4"]


def test_more_rows_than_max_records_is_too_large() -> None:
    with pytest.raises(FileTooLarge, match=r"big\.csv has 3 records; the limit is 2"):
        _parse(b"h\n1\n2\n3\n", "big.csv", IngestSettings(max_records=2))


def test_a_json_array_of_objects_gives_one_flattened_record_each() -> None:
    data = b"""[
      {"id": 1, "name": "Ana", "address": {"city": "Madrid", "geo": {"lat": 40.4}}, "note": null},
      {"id": 2, "tags": ["x", "y", ""], "active": true, "items": [{"sku": "A1"}, {"sku": "B2"}]}
    ]"""
    assert _records(_parse(data, "people.json")) == [
        "id: 1; name: Ana; address.city: Madrid; address.geo.lat: 40.4",
        "id: 2; tags: x, y; active: true; items[0].sku: A1; items[1].sku: B2",
    ]


def test_an_object_holding_one_list_of_objects_gives_those_records() -> None:
    data = b'{"total": 2, "data": [{"id": 1}, {"id": 2}]}'
    assert _records(_parse(data, "page.json")) == ["id: 1", "id: 2"]


def test_any_other_json_value_is_one_record() -> None:
    assert _records(_parse(b'{"a": [1, 2], "b": [3]}', "o.json")) == ["a: 1, 2; b: 3"]
    assert _records(_parse(b'"just a string"', "s.json")) == ["just a string"]


def test_json_lines_give_one_record_per_line() -> None:
    data = b'{"q": "Why?", "a": {"text": "Because."}}\n\n  \n["x", 1]\n'
    assert _records(_parse(data, "qa.jsonl")) == ["q: Why?; a.text: Because.", "x, 1"]


def test_invalid_json_names_the_file_line_and_column() -> None:
    with pytest.raises(ParseError, match=r"^bad\.json is not valid JSON: .* at line 3, column 9$"):
        _parse(b'[\n  {"a": 1},\n  {"b": }\n]', "bad.json")


def test_invalid_json_lines_name_the_line_of_the_file() -> None:
    with pytest.raises(ParseError, match=r"^bad\.jsonl is not valid JSON: .* at line 3, column 2$"):
        _parse(b'{"a": 1}\n\n{oops}\n', "bad.jsonl")


def test_deeply_nested_json_is_a_parse_error_not_a_crash() -> None:
    with pytest.raises(ParseError, match=r"^deep\.json is nested too deeply"):
        _parse(b"[" * 200_000 + b"]" * 200_000, "deep.json")


def test_a_header_only_csv_contains_no_text() -> None:
    with pytest.raises(ParseError, match=r"^empty\.csv contains no text$"):
        _parse(b"a,b,c\n", "empty.csv")
