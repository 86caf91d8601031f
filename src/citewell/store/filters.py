"""Translate a portable ``Filter`` into a SQLite condition on the ``sources`` table (alias ``s``).

Values always travel as parameters, never inside the SQL text. Built-in attributes compare with
columns; any other key compares with the source's metadata of that exact name. A source that lacks
the key matches ``ne`` and ``nin`` and nothing else.
"""

from __future__ import annotations

import datetime as dt

from citewell.errors import InvalidRequest
from citewell.model import Comparison, CompoundFilter, Filter, MetadataValue

__all__ = ["BUILTIN_KEYS", "compile_filter"]

BUILTIN_KEYS: dict[str, str] = {
    "filename": "s.filename",
    "mime_type": "s.mime_type",
    "language": "s.language",
    "modality": "s.modality",
    "effective_date": "s.effective_date",
    "source_id": "s.id",
}

_OPERATORS = {"eq": "=", "ne": "!=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}

SqlParam = str | int | float | None


def compile_filter(filter_: Filter) -> tuple[str, list[SqlParam]]:
    """A SQL boolean expression and its parameters."""
    if isinstance(filter_, CompoundFilter):
        if not filter_.filters:
            return ("1" if filter_.type == "and" else "0"), []
        parts, params = [], []
        for child in filter_.filters:
            sql, child_params = compile_filter(child)
            parts.append(f"({sql})")
            params.extend(child_params)
        return f" {filter_.type.upper()} ".join(parts), params
    return _compile_comparison(filter_)


def _compile_comparison(comparison: Comparison) -> tuple[str, list[SqlParam]]:
    negated = comparison.type in ("ne", "nin")
    if comparison.type in ("in", "nin"):
        values = comparison.value if isinstance(comparison.value, list) else [comparison.value]
        if not values:
            return ("1" if negated else "0"), []
        test = f"IN ({', '.join('?' * len(values))})"
        params = [_param(comparison.key, v) for v in values]
    else:
        if isinstance(comparison.value, list):
            raise InvalidRequest(
                f"filter '{comparison.type}' on '{comparison.key}' takes one value, not a list",
                param="filters",
            )
        test = f"{_OPERATORS['eq' if negated else comparison.type]} ?"
        params = [_param(comparison.key, comparison.value)]
    column = BUILTIN_KEYS.get(comparison.key)
    if column is not None:
        if negated:
            return f"{column} IS NULL OR NOT ({column} {test})", params
        return f"{column} {test}", params
    exists = f"EXISTS (SELECT 1 FROM json_each(s.metadata) AS m WHERE m.key = ? AND m.value {test})"
    return (f"NOT {exists}" if negated else exists), [comparison.key, *params]


def _param(key: str, value: MetadataValue) -> SqlParam:
    if key == "effective_date" and isinstance(value, str):
        try:
            return dt.date.fromisoformat(value).isoformat()
        except ValueError:
            raise InvalidRequest(
                f"effective_date filter value {value!r} is not an ISO date (YYYY-MM-DD)",
                param="filters",
            ) from None
    if isinstance(value, bool):
        return int(value)  # JSON true/false read back from json_each as 1/0
    return value
