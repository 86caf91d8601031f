"""Translate a portable ``Filter`` into a SQL condition on the ``sources`` table (alias ``s``).

Values always travel as parameters, never inside the SQL text. Built-in attributes compare with
columns; any other key compares with the source's metadata of that exact name. A source that lacks
the key matches ``ne`` and ``nin`` and nothing else. The meaning is the same in every SQL
dialect; only how a placeholder, a boolean constant and a metadata lookup are spelt differs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from citewell.errors import InvalidRequest
from citewell.model import Comparison, CompoundFilter, Filter, MetadataValue

__all__ = ["BUILTIN_KEYS", "POSTGRES", "SQLITE", "Dialect", "SqlParam", "compile_filter"]

BUILTIN_KEYS: dict[str, str] = {
    "filename": "s.filename",
    "mime_type": "s.mime_type",
    "language": "s.language",
    "modality": "s.modality",
    "effective_date": "s.effective_date",
    "source_id": "s.id",
}

_OPERATORS = {"eq": "=", "ne": "!=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}

SqlParam = Any
"""A value bound to a placeholder: str, int, float, None, a date or a dialect's JSON wrapper."""


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one SQL dialect spells what a filter needs."""

    mark: str
    """A placeholder."""
    true: str
    false: str
    metadata: Callable[[str], str]
    """Given a test (``= ?``, ``IN (?, ?)``), the condition that the key (the first parameter)
    is in the source's metadata with a value passing the test; false (or unknown) when absent."""
    date: Callable[[dt.date], SqlParam]
    """How an ``effective_date`` is bound."""
    value: Callable[[MetadataValue], SqlParam]
    """How a value compared with metadata is bound."""


def _sqlite_value(value: MetadataValue) -> SqlParam:
    if isinstance(value, bool):
        return int(value)  # JSON true/false read back from json_each as 1/0
    return value


SQLITE = Dialect(
    mark="?",
    true="1",
    false="0",
    metadata=lambda test: (
        f"EXISTS (SELECT 1 FROM json_each(s.metadata) AS m WHERE m.key = ? AND m.value {test})"
    ),
    date=dt.date.isoformat,
    value=_sqlite_value,
)


def _postgres_value(value: MetadataValue) -> SqlParam:
    from psycopg.types.json import Jsonb  # only the PostgreSQL store imports psycopg

    return Jsonb(value)


POSTGRES = Dialect(
    mark="%s",
    true="TRUE",
    false="FALSE",
    # jsonb compares numbers as numbers and strings as strings; an absent key gives NULL.
    metadata=lambda test: f"coalesce((s.metadata -> %s) {test}, FALSE)",
    date=lambda date: date,
    value=_postgres_value,
)


def compile_filter(filter_: Filter, dialect: Dialect = SQLITE) -> tuple[str, list[SqlParam]]:
    """A SQL boolean expression and its parameters."""
    if isinstance(filter_, CompoundFilter):
        if not filter_.filters:
            return (dialect.true if filter_.type == "and" else dialect.false), []
        parts, params = [], []
        for child in filter_.filters:
            sql, child_params = compile_filter(child, dialect)
            parts.append(f"({sql})")
            params.extend(child_params)
        return f" {filter_.type.upper()} ".join(parts), params
    return _compile_comparison(filter_, dialect)


def _compile_comparison(comparison: Comparison, dialect: Dialect) -> tuple[str, list[SqlParam]]:
    negated = comparison.type in ("ne", "nin")
    column = BUILTIN_KEYS.get(comparison.key)
    if comparison.type in ("in", "nin"):
        values = comparison.value if isinstance(comparison.value, list) else [comparison.value]
        if not values:
            return (dialect.true if negated else dialect.false), []
        test = f"IN ({', '.join([dialect.mark] * len(values))})"
        params = [_param(comparison.key, v, column is not None, dialect) for v in values]
    else:
        if isinstance(comparison.value, list):
            raise InvalidRequest(
                f"filter '{comparison.type}' on '{comparison.key}' takes one value, not a list",
                param="filters",
            )
        test = f"{_OPERATORS['eq' if negated else comparison.type]} {dialect.mark}"
        params = [_param(comparison.key, comparison.value, column is not None, dialect)]
    if column is not None:
        if negated:
            return f"{column} IS NULL OR NOT ({column} {test})", params
        return f"{column} {test}", params
    exists = dialect.metadata(test)
    return (f"NOT {exists}" if negated else exists), [comparison.key, *params]


def _param(key: str, value: MetadataValue, builtin: bool, dialect: Dialect) -> SqlParam:
    if key == "effective_date" and isinstance(value, str):
        try:
            return dialect.date(dt.date.fromisoformat(value))
        except ValueError:
            raise InvalidRequest(
                f"effective_date filter value {value!r} is not an ISO date (YYYY-MM-DD)",
                param="filters",
            ) from None
    return value if builtin else dialect.value(value)
