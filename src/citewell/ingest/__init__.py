"""Reading original files: media-type detection, the registry of parsers, and safe entry points.

    parse(data, filename=..., limits=..., ocr=...) -> ParsedDocument

Parsers register by media type (``PARSERS``), one module per format. Those of formats whose
pages may be pixels only (PDF, images) are ``SCAN_PARSERS`` too, and read such pages with the
``ocr`` given to ``parse``. ``parse`` enforces the file size limit, detects the type when it is
not given, and is the one place where failures of third-party libraries on bad input become
``ParseError`` naming the file.
"""

from __future__ import annotations

import codecs
import io
import logging
import os
import stat
import zipfile
import zlib
from collections.abc import Iterator
from concurrent.futures import CancelledError
from contextlib import contextmanager
from pathlib import Path, PurePath

import pypdfium2

from citewell.config import IngestSettings
from citewell.errors import CitewellError, FileTooLarge, IngestError, ParseError, UnsupportedFormat
from citewell.ingest import docx, html, image, markdown, pdf, records, text
from citewell.ingest.base import ParsedDocument, Parser, ScanParser
from citewell.ingest.limits import check_limit
from citewell.ingest.ocr import Ocr

__all__ = [
    "PARSERS",
    "SCAN_PARSERS",
    "SUPPORTED_MEDIA_TYPES",
    "detect_media_type",
    "parse",
    "read_limited",
]

logger = logging.getLogger(__name__)

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

_SCANNERS: tuple[ScanParser, ...] = (pdf.PARSER, image.PARSER)

_BUILT_INS: tuple[Parser, ...] = (
    text.PARSER,
    markdown.PARSER,
    html.PARSER,
    docx.PARSER,
    *_SCANNERS,
    records.CSV_PARSER,
    records.TSV_PARSER,
    records.JSON_PARSER,
    records.JSONL_PARSER,
)

PARSERS: dict[str, Parser] = {kind: parser for parser in _BUILT_INS for kind in parser.media_types}
"""The parser of each supported media type."""

SCAN_PARSERS: dict[str, ScanParser] = {
    kind: parser for parser in _SCANNERS for kind in parser.media_types
}
"""The parsers of ``PARSERS`` that read pages of pixels with OCR, when ``parse`` is given one."""

SUPPORTED_MEDIA_TYPES: tuple[str, ...] = tuple(sorted(PARSERS))

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "application/pdf"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
)

_EXTENSIONS: dict[str, str] = {
    **dict.fromkeys((".txt", ".text", ".log"), "text/plain"),
    **dict.fromkeys((".md", ".markdown"), "text/markdown"),
    **dict.fromkeys((".html", ".htm"), "text/html"),
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".json": "application/json",
    **dict.fromkeys((".jsonl", ".ndjson"), "application/x-ndjson"),
    ".docx": DOCX,
    ".pdf": "application/pdf",
    ".png": "image/png",
    **dict.fromkeys((".jpg", ".jpeg"), "image/jpeg"),
    **dict.fromkeys((".tif", ".tiff"), "image/tiff"),
    ".webp": "image/webp",
}

# Other names clients send for the types we read.
_ALIASES: dict[str, str] = {
    "application/xhtml+xml": "text/html",
    "text/x-markdown": "text/markdown",
    "application/csv": "text/csv",
    "application/jsonl": "application/x-ndjson",
    "application/json-lines": "application/x-ndjson",
    "application/x-jsonlines": "application/x-ndjson",
    "image/jpg": "image/jpeg",
}

# Failures of the libraries the parsers use, and what they mean for the file. Checked in order;
# anything else still becomes a ParseError (see _foreign_errors).
_FOREIGN_ERRORS: tuple[tuple[type[Exception], str], ...] = (
    (zipfile.BadZipFile, "is a damaged ZIP package"),
    (zlib.error, "holds damaged compressed data"),
    (EOFError, "is truncated"),
    (pypdfium2.PdfiumError, "is a damaged PDF"),
    (UnicodeError, "holds text in an invalid encoding"),
    (RecursionError, "is nested too deeply to read"),
    (KeyError, "is missing a part it refers to"),
    (SyntaxError, "holds malformed XML"),  # lxml's XMLSyntaxError derives from SyntaxError
)


def _sniff(data: bytes, filename: str) -> str | None:
    """The media type the first bytes announce, if they announce one."""
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            return kind
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data.startswith(b"PK\x03\x04") and _zip_holds(data, docx.MAIN_PART):
        return DOCX
    head = data[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if head.startswith((b"<!doctype html", b"<html")):
        return "text/html"
    return None


def _zip_holds(data: bytes, member: str) -> bool:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            return member in package.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return False


def _looks_like_text(data: bytes) -> bool:
    if text.sniff_bom(data) is not None:
        return True
    try:
        # final=False: a character cut at the end of the sample is not an error.
        codecs.getincrementaldecoder("utf-8")().decode(data[:65536], final=False)
    except UnicodeDecodeError:
        return False
    return True


def detect_media_type(data: bytes, filename: str) -> str:
    """The media type of a file: magic bytes first, then the extension, then UTF-8 text.

    Raises ``UnsupportedFormat`` when none of these tells.
    """
    kind = _sniff(data, filename) or _EXTENSIONS.get(PurePath(filename).suffix.lower())
    if kind is not None:
        return kind
    if _looks_like_text(data):
        return "text/plain"
    raise UnsupportedFormat(
        f"{filename}: cannot tell what kind of file this is; citewell reads PDF, DOCX, HTML, "
        "Markdown, CSV, TSV, JSON, JSON Lines, UTF-8 text and PNG, JPEG, TIFF or WebP images",
        filename=filename,
    )


def _normalise(media_type: str) -> str:
    """``Text/HTML; charset=utf-8`` -> ``text/html``, with aliases resolved."""
    kind = media_type.split(";", 1)[0].strip().lower()
    return _ALIASES.get(kind, kind)


def _parser_for(media_type: str, filename: str) -> Parser:
    parser = PARSERS.get(media_type)
    if parser is not None:
        return parser
    raise UnsupportedFormat(
        f"{filename} ({media_type}): no parser reads this media type", filename=filename
    )


@contextmanager
def _foreign_errors(filename: str, media_type: str) -> Iterator[None]:
    """Turn any failure while parsing into an ``IngestError`` that names the file."""
    try:
        yield
    except CitewellError:
        # The file's own (IngestError), the operator's (ConfigError: OCR's models are missing),
        # or the caller's, raised by whoever hears of OCR's progress (a budget).
        raise
    except CancelledError:
        raise  # OCR stopped with the process: not the file's fault
    except MemoryError:
        raise FileTooLarge(f"{filename} needs more memory to parse than is free") from None
    except Exception as exc:
        meaning = next((m for kind, m in _FOREIGN_ERRORS if isinstance(exc, kind)), None)
        if meaning is None:
            # Unexpected: keep the traceback in the log, give the caller a plain message.
            logger.warning("parsing %s (%s) failed", filename, media_type, exc_info=True)
            meaning = f"could not be read as {media_type}"
        detail = str(exc).strip()[:200]
        message = f"{filename} {meaning}" + (f" ({detail})" if detail else "")
        raise ParseError(message, filename=filename) from exc


def parse(
    data: bytes,
    *,
    filename: str,
    limits: IngestSettings,
    media_type: str | None = None,
    ocr: Ocr | None = None,
) -> ParsedDocument:
    """Parse one file into its canonical text, blocks, pages and boxes.

    Pages of pixels only are read with ``ocr``; without it, a PDF's scanned pages have no text
    and an image is ``UnsupportedFormat``.
    Raises ``FileTooLarge`` (over a limit of ``limits``), ``UnsupportedFormat`` (no parser for
    the type), ``ParseError`` (empty, damaged, truncated, hostile or not what it claims), or
    ``ConfigError`` (OCR is needed and tesseract's language models are missing).
    """
    check_limit(
        len(data), limits.max_file_bytes, what="bytes", setting="max_file_bytes", filename=filename
    )
    if not data:
        raise ParseError(f"{filename} is empty", filename=filename)
    kind = _normalise(media_type) if media_type else detect_media_type(data, filename)
    parser = _parser_for(kind, filename)
    scanner = SCAN_PARSERS.get(kind)
    with _foreign_errors(filename, kind):
        if scanner is not None:
            document = scanner.parse(data, filename=filename, limits=limits, ocr=ocr)
        else:
            document = parser.parse(data, filename=filename, limits=limits)
    if not document.text and not document.pages:
        raise ParseError(f"{filename} contains no text", filename=filename)
    return document


def read_limited(path: str | os.PathLike[str], limits: IngestSettings) -> bytes:
    """Read a file, refusing it by its size on disk before reading a byte of it.

    Raises ``FileTooLarge``; ``IngestError`` for anything but a regular file (a pipe or a device
    could block or never end); ``OSError`` for a missing or unreadable file.
    """
    path = Path(path)
    status = path.stat()
    if not stat.S_ISREG(status.st_mode):
        raise IngestError(
            f"{path.name} is not a regular file (a folder, pipe, device or socket)",
            filename=path.name,
        )
    check_limit(
        status.st_size,
        limits.max_file_bytes,
        what="bytes",
        setting="max_file_bytes",
        filename=path.name,
    )
    with path.open("rb") as file:
        data = file.read(limits.max_file_bytes + 1)  # it may have grown since stat
    check_limit(
        len(data), limits.max_file_bytes, what="bytes", setting="max_file_bytes", filename=path.name
    )
    return data
