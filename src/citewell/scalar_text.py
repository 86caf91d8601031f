"""Unicode scalar text: what a JSON escape can smuggle in, and what must never go out.

JSON may write a UTF-16 surrogate as an escape (``"\\ud800"``) without its other half. Python
decodes it into a ``str`` that cannot be encoded as UTF-8, so it would be stored and then break
every response that shows it. Requests are checked with ``unpaired_escape`` (on the raw bytes,
before anything is parsed) and ``has_surrogates`` (on values decoded by hand); stored JSON is
read with ``loads_scalar`` and whatever is written out passes ``without_surrogates``, so that a
row stored before the checks existed never breaks a read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["has_surrogates", "loads_scalar", "unpaired_escape", "without_surrogates"]

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPE_LENGTH = 6  # \uXXXX


def unpaired_escape(body: bytes) -> int | None:
    """The offset of the first ``\\uD800``-``\\uDFFF`` escape in a JSON text that is not one half
    of a high-low pair, or None. Linear in the body; only surrogate escapes are looked at."""
    pending_high: int | None = None
    for match in _SURROGATE_ESCAPE.finditer(body):
        start = match.start()
        if not _escapes(body, start):
            continue  # "\\ud800": an escaped backslash, then plain letters
        high = match.group()[3:4].lower() in (b"8", b"9", b"a", b"b")
        if pending_high is not None:
            if not high and start == pending_high + _ESCAPE_LENGTH:
                pending_high = None
                continue
            return pending_high
        if not high:
            return start
        pending_high = start
    return pending_high


def _escapes(body: bytes, start: int) -> bool:
    """Whether the backslash at ``start`` begins an escape: it is preceded by an even number of
    backslashes (which escape each other)."""
    run = 0
    while start - run - 1 >= 0 and body[start - run - 1] == 0x5C:
        run += 1
    return run % 2 == 0


def has_surrogates(value: Any) -> bool:
    """Whether a decoded JSON value holds a surrogate anywhere, in a key or in a string."""
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, Mapping):
        return any(has_surrogates(k) or has_surrogates(v) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return any(has_surrogates(item) for item in value)
    return False


def without_surrogates(text: str) -> str:
    """``text`` with each surrogate replaced by U+FFFD, so that it encodes as UTF-8."""
    return _SURROGATE.sub("\ufffd", text)


def loads_scalar(text: str | bytes) -> Any:
    """``json.loads``, with each surrogate of a string (key or value) replaced by U+FFFD."""
    value = json.loads(text)
    return _replaced(value) if has_surrogates(value) else value


def _replaced(value: Any) -> Any:
    if isinstance(value, str):
        return without_surrogates(value)
    if isinstance(value, dict):
        return {_replaced(k): _replaced(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replaced(item) for item in value]
    return value
