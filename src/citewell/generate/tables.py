"""Tables in the evidence: which sentences are rows of one table, and which columns a question
names.

Ingest writes each row of a table as one sentence, ``Header: value; Header: value``
(``citewell.ingest.tables``), so a row cited alone still says what its values mean. A question
about a table is answered differently from one about prose: "When is the workshop open?" names
the column "Open", and each row holds one of its answers, so the answer is the rows, not the one
sentence of prose that repeats the question's words ("On Saturdays the workshop is open for
self-service only.") without a time in it.
"""

from __future__ import annotations

from dataclasses import dataclass

from citewell.analysis import terms
from citewell.ingest.tables import row_headers
from citewell.model import Evidence

__all__ = ["Table", "tables"]


@dataclass(frozen=True, slots=True)
class Table:
    """Consecutive rows of one passage under one header: at least two."""

    rows: tuple[int, ...]
    """Their evidence sentence indices, in document order."""
    headers: tuple[str, ...]
    """The first row's column headers."""

    def named_by(self, asked: frozenset[str], language: str | None) -> bool:
        """Whether a question with these content terms names one of its columns (asks for
        its values): "open" in "When is the workshop open?" names "Open"."""
        return any(asked & frozenset(terms(header, language)) for header in self.headers)


def tables(evidence: Evidence) -> dict[int, Table]:
    """The table of each evidence sentence that is a row of one, by sentence index.

    Rows are told apart from prose by reading as a row of labelled values and sharing their
    first column's header with the next or previous sentence of their passage; a row with an
    empty cell leaves that column out, so the first header is what a table's rows share."""
    found: dict[int, Table] = {}
    run: list[int] = []
    headers: tuple[str, ...] = ()

    def close() -> None:
        if len(run) >= 2:
            table = Table(tuple(run), headers)
            found.update(dict.fromkeys(run, table))

    for index, sentence in enumerate(evidence.sentences):
        read = row_headers(sentence.text)
        joins = (
            read is not None
            and run
            and read[0] == headers[0]
            and evidence.sentences[run[-1]].passage_index == sentence.passage_index
        )
        if joins:
            run.append(index)
            continue
        close()
        run, headers = ([index], read) if read is not None else ([], ())
    close()
    return found
