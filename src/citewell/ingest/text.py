"""Plain text: decoding shared by the text-based formats, and paragraphs split at blank lines.

The canonical text of a plain-text file is its content with line ends normalised to ``\\n`` and
the leading and trailing whitespace of the whole file removed; nothing else changes, so an offset
into the canonical text is an offset into the (normalised) file.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator

from citewell.config import IngestSettings
from citewell.errors import ParseError
from citewell.ingest.base import BlockKind, DocumentBuilder, ParsedDocument

__all__ = ["PARSER", "TextParser", "decode_text", "normalise_newlines", "split_paragraphs"]

# Longest first: the UTF-32-LE mark begins with the UTF-16-LE one.
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")


def sniff_bom(data: bytes) -> tuple[str, int] | None:
    """The encoding a byte-order mark announces and the mark's length, or None."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return encoding, len(bom)
    return None


def decode_text(data: bytes, filename: str) -> str:
    """Decode UTF-8 (or UTF-16/32 when a BOM says so), drop the BOM and normalise line ends.

    Raises ``ParseError`` naming the first bad byte, or when the text holds NUL characters (a
    binary file under a text name).
    """
    encoding, skip = sniff_bom(data) or ("utf-8", 0)
    try:
        text = data[skip:].decode(encoding)
    except UnicodeDecodeError as exc:
        name = "UTF-8" if encoding == "utf-8" else encoding.upper()
        raise ParseError(
            f"{filename} is not valid {name} text: bad byte at offset {skip + exc.start:,}",
            filename=filename,
        ) from None
    if "\x00" in text:
        raise ParseError(f"{filename} looks binary: it contains NUL bytes", filename=filename)
    return normalise_newlines(text)


def normalise_newlines(text: str) -> str:
    """Turn ``\\r\\n`` and lone ``\\r`` into ``\\n``."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def split_paragraphs(text: str) -> Iterator[tuple[str, str]]:
    """Yield ``(separator, paragraph)`` pairs that concatenate back to ``text`` exactly.

    A separator is a whole run of whitespace holding a blank line ('' before the first
    paragraph), so each paragraph starts and ends with non-whitespace, except that ``text``'s own
    leading and trailing whitespace stays with the first and last paragraph. Runs in linear time
    (no backtracking regex over long whitespace).
    """
    pos, separator = 0, ""
    for match in _BLANK_LINE.finditer(text):
        if match.start() < pos:
            continue  # inside the run already consumed
        start, end = match.start(), match.end()
        while start > pos and text[start - 1].isspace():
            start -= 1
        while end < len(text) and text[end].isspace():
            end += 1
        yield separator, text[pos:start]
        separator, pos = text[start:end], end
    yield separator, text[pos:]


class TextParser:
    media_types: tuple[str, ...] = ("text/plain",)

    def parse(self, data: bytes, *, filename: str, limits: IngestSettings) -> ParsedDocument:
        builder = DocumentBuilder()
        for separator, paragraph in split_paragraphs(decode_text(data, filename).strip()):
            # The original whitespace between paragraphs is kept, so offsets match the file.
            builder.add_block(BlockKind.PARAGRAPH, paragraph, separator=separator)
        return builder.build()


PARSER = TextParser()
