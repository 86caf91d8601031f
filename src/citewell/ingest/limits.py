"""Guards shared by the parsers: every limit of ``IngestSettings`` is enforced through here.

A limit names its setting in the message, so the operator knows which variable to raise.
"""

from __future__ import annotations

from citewell.errors import FileTooLarge

__all__ = ["check_limit"]


def check_limit(count: int, limit: int, *, what: str, setting: str, filename: str) -> None:
    """Raise ``FileTooLarge`` when ``count`` (of ``what``) is over ``limit``.

    ``setting`` is the field of ``IngestSettings`` that holds the limit, e.g. ``"max_pages"``.
    """
    if count > limit:
        variable = f"CITEWELL_INGEST__{setting.upper()}"
        raise FileTooLarge(
            f"{filename} has {count:,} {what}; the limit is {limit:,} ({variable})",
            filename=filename,
        )
