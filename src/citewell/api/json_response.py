"""The app's JSON response: FastAPI's, but never failing on a surrogate.

A string holding an unpaired surrogate (a row stored before requests were checked for them,
``citewell.api.text_guard``) cannot be encoded as UTF-8: it is written as U+FFFD instead, so
that a read never fails on a stored row.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import JSONResponse

from citewell.scalar_text import without_surrogates

__all__ = ["ScalarJSONResponse"]


class ScalarJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            return without_surrogates(text).encode("utf-8")
