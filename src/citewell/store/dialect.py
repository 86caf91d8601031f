"""How the two SQL databases differ in running the statements both stores share
(``store/sql.py``): placeholders, how values are kept, text order, row locks and clocks."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, LiteralString, Protocol, cast

import numpy as np
import numpy.typing as npt

__all__ = ["Clause", "Connection", "Cursor", "Dialect", "Row"]


class Row(Protocol):
    """A row read by column name (``sqlite3.Row``, psycopg's ``DictRow``)."""

    def __getitem__(self, column: str, /) -> Any: ...


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """What the shared statements need of a connection: sqlite3's and psycopg's both have it."""

    def execute(self, query: LiteralString, params: Sequence[Any], /) -> Cursor: ...


@dataclass(frozen=True, slots=True)
class Clause:
    """A piece of a statement with the values of its placeholders."""

    sql: LiteralString
    params: tuple[Any, ...] = ()


class Dialect(ABC):
    """How one database runs the statements of ``store/sql.py``.

    By default the statements run as written (``?`` placeholders, no row locks, text ordered as
    it is) and values pass as they are, for a driver that turns Python's types into the
    database's (psycopg); a database that differs says how.
    """

    mark: LiteralString = "?"
    """The placeholder its driver takes for ``?``."""
    binary: LiteralString = ""
    """Appended to a text column in ORDER BY: order by code point, as SQLite always does."""
    locks_rows: bool = False
    """Whether a transaction locks the rows it reads to write (PostgreSQL), or the whole
    database is written by one transaction at a time anyway (SQLite's BEGIN IMMEDIATE)."""
    each: LiteralString
    """A table of one column, ``value``: the strings of one ``labels`` parameter."""
    each_key: LiteralString
    """A table of one column, ``value``: the integers of one ``keys`` parameter."""

    def query(self, text: LiteralString) -> LiteralString:
        """The statement as the driver takes it (the statements here hold no other ``?``)."""
        return text.replace("?", self.mark)

    def lock(self, clause: LiteralString) -> LiteralString:
        """A row-locking clause (`` FOR UPDATE``), where the database takes row locks."""
        return clause if self.locks_rows else ""

    def time(self, moment: datetime) -> Any:
        """A time as its column keeps it."""
        return moment

    def read_time(self, value: Any) -> datetime:
        return cast(datetime, value)

    def stamp(self, moment: datetime) -> Any:
        """A time as a column that is ordered and compared by it keeps it (traces, jobs)."""
        return moment

    def read_stamp(self, value: Any) -> datetime:
        return cast(datetime, value)

    def labels(self, values: Iterable[str]) -> Any:
        """A set of strings as its column keeps it, sorted."""
        return sorted(values)

    def read_labels(self, value: Any) -> list[str]:
        return list(value)

    def keys(self, values: Iterable[int]) -> Any:
        """Row keys as one parameter of ``each_key``."""
        return list(values)

    @abstractmethod
    def read_vector(self, value: Any) -> npt.NDArray[np.float32]:
        """A stored vector as float32."""

    def json_value(self, value: Any) -> Any:
        """A JSON value as its column keeps it."""
        return value

    def read_json_value(self, value: Any) -> Any:
        return value

    def day(self, value: date) -> Any:
        return value

    def read_day(self, value: Any) -> date:
        return cast(date, value)

    @abstractmethod
    def now(self, moment: datetime) -> Clause:
        """The time a lease is measured by: the database's clock where every server shares it
        (PostgreSQL), else ``moment``, the process's."""

    @abstractmethod
    def later(self, moment: datetime, seconds: float) -> Clause:
        """``seconds`` after ``now``."""
