"""Form text is UTF-8: each field's name and value, and each file's name, checked as the body
streams past.

Starlette reads a form field whose bytes are not UTF-8 as Latin-1 (and a URL-encoded one with
the bad bytes replaced): the request succeeds and the text stored is not the text sent. A client
that sent broken bytes must be told, so ``FormTextCheck`` reads the body alongside the app — with
python-multipart's streaming parser, never holding a file in memory — and names the first part
that is not UTF-8. Files' contents are bytes, and are not checked.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

from python_multipart.multipart import MultipartParser, parse_options_header

__all__ = ["BadFormText", "FormTextCheck"]

_UTF8 = codecs.lookup("utf-8").name


@dataclass(frozen=True)
class BadFormText:
    """Why a form was refused: the field it names and what was wrong with it."""

    field: str
    problem: str

    @property
    def message(self) -> str:
        return f"The form field {self.field!r} {self.problem}: form text must be valid UTF-8."


class FormTextCheck:
    """Fed a form body chunk by chunk (``feed``), says at the first part that is not UTF-8."""

    def __init__(self, content_type: bytes) -> None:
        kind, options = parse_options_header(content_type)
        self._found: BadFormText | None = None
        charset = options.get(b"charset")
        if charset is not None and _codec(charset) != _UTF8:
            self._found = BadFormText(
                "content-type", f"declares the charset {charset.decode('latin-1')!r}"
            )
        self._urlencoded = kind == b"application/x-www-form-urlencoded"
        self._pending = b""  # URL-encoded: the part after the last '&'
        self._multipart: MultipartParser | None = None
        if not self._urlencoded and b"boundary" in options:
            self._part = _Part()
            self._multipart = MultipartParser(
                options[b"boundary"],
                {
                    "on_part_begin": self._begin_part,
                    "on_header_field": self._header_field,
                    "on_header_value": self._header_value,
                    "on_header_end": self._header_end,
                    "on_headers_finished": self._headers_finished,
                    "on_part_data": self._part_data,
                    "on_part_end": self._end_part,
                },
            )

    def feed(self, chunk: bytes, *, last: bool) -> BadFormText | None:
        """The first bad part found so far, after reading ``chunk`` (``last``: the body's end).
        A body python-multipart cannot parse is left to the app, which says why."""
        if self._found is not None:
            return self._found
        if self._urlencoded:
            self._feed_urlencoded(chunk, last=last)
        elif self._multipart is not None:
            try:
                self._multipart.write(chunk)
            except Exception:  # malformed framing: the app's own parser refuses it
                self._multipart = None
        return self._found

    # application/x-www-form-urlencoded ---------------------------------------------------------

    def _feed_urlencoded(self, chunk: bytes, *, last: bool) -> None:
        pairs = (self._pending + chunk).split(b"&")
        self._pending = b"" if last else pairs.pop()
        for pair in pairs:
            name, _, value = pair.partition(b"=")
            field = _text(_unquoted(name))
            if field is None:
                self._found = BadFormText(_shown(_unquoted(name)), "has a name that is not UTF-8")
                return
            if _text(_unquoted(value)) is None:
                self._found = BadFormText(field, "is not valid UTF-8")
                return

    # multipart/form-data -----------------------------------------------------------------------

    def _begin_part(self) -> None:
        self._part = _Part()

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._part.header_name += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._part.header_value += data[start:end]

    def _header_end(self) -> None:
        if self._part.header_name.lower() == b"content-disposition":
            self._part.disposition = self._part.header_value
        self._part.header_name = self._part.header_value = b""

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self._part.disposition)
        name = options.get(b"name", b"")
        self._part.field = _shown(name)
        if _text(name) is None:
            self._refuse("has a name that is not UTF-8")
        elif b"filename" in options:
            self._part.is_file = True
            if _text(options[b"filename"]) is None:
                self._refuse("names a file in bytes that are not UTF-8")

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._part.is_file or self._found is not None:
            return
        try:
            self._part.decoder.decode(data[start:end])
        except UnicodeDecodeError:
            self._refuse("is not valid UTF-8")

    def _end_part(self) -> None:
        if self._part.is_file or self._found is not None:
            return
        try:
            self._part.decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            self._refuse("is not valid UTF-8 (it ends inside a character)")

    def _refuse(self, problem: str) -> None:
        if self._found is None:
            self._found = BadFormText(self._part.field, problem)


class _Part:
    """What the multipart check keeps of the part it is reading."""

    def __init__(self) -> None:
        self.header_name = b""
        self.header_value = b""
        self.disposition = b""
        self.field = ""
        self.is_file = False
        self.decoder = codecs.getincrementaldecoder("utf-8")()


def _codec(charset: bytes) -> str | None:
    try:
        return codecs.lookup(charset.decode("latin-1")).name
    except LookupError:
        return None


def _unquoted(text: bytes) -> bytes:
    return unquote_to_bytes(text.replace(b"+", b" "))


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _shown(name: bytes) -> str:
    """A field's name as an error may show it (bad bytes replaced)."""
    return name.decode("utf-8", "replace")
