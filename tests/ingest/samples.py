"""Builders of small, exactly known input files for the parser tests (imported by them).

``make_pdf`` writes a PDF by hand (standard Helvetica fonts, no embedded data), so a test states
exactly where each line of text sits, at which size, on which page, rotated or not.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import docx
import docx.document
from reportlab.pdfbase.pdfmetrics import stringWidth


@dataclass(frozen=True)
class Run:
    """A line of text drawn with its baseline starting at (x, y), PDF coordinates (y up)."""

    text: str
    x: float
    y: float
    size: float = 12
    bold: bool = False


def text_width(text: str, size: float = 12, bold: bool = False) -> float:
    """How wide ``make_pdf`` draws ``text`` (Helvetica's advance widths), in points."""
    return float(stringWidth(text, "Helvetica-Bold" if bold else "Helvetica", size))


@dataclass(frozen=True)
class PageSpec:
    runs: Sequence[Run] = ()
    width: float = 612
    height: float = 792
    rotate: int = 0
    image: bool = False


def _literal(text: str) -> bytes:
    raw = text.encode("cp1252")
    return b"(" + raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)") + b")"


def make_pdf(
    pages: Sequence[PageSpec], *, labels: str | None = None, title: str | None = None
) -> bytes:
    """A PDF with these pages; ``labels`` is the body of a /PageLabels number tree."""
    objects: list[bytes] = [
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>",
        b"<< /Type /XObject /Subtype /Image /Width 1 /Height 1 /ColorSpace /DeviceGray "
        b"/BitsPerComponent 8 /Length 1 >>\nstream\n\x80\nendstream",
    ]
    first_page = 4 + len(pages)  # object numbers: 3 shared objects, contents, pages, /Pages
    pages_id = first_page + len(pages)
    for spec in pages:
        ops = [
            b"BT /F%d %g Tf %g %g Td %s Tj ET"
            % (2 if run.bold else 1, run.size, run.x, run.y, _literal(run.text))
            for run in spec.runs
        ]
        if spec.image:
            ops.append(b"q 50 0 0 50 400 100 cm /Im1 Do Q")
        stream = b"\n".join(ops)
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    for number, spec in enumerate(pages):
        objects.append(
            b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 %g %g] /Rotate %d /Contents %d 0 R "
            b"/Resources << /Font << /F1 1 0 R /F2 2 0 R >> /XObject << /Im1 3 0 R >> >> >>"
            % (pages_id, spec.width, spec.height, spec.rotate, 4 + number)
        )
    kids = b" ".join(b"%d 0 R" % (first_page + n) for n in range(len(pages)))
    objects.append(b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(pages)))
    page_labels = b" /PageLabels << /Nums [%s] >>" % labels.encode() if labels else b""
    objects.append(b"<< /Type /Catalog /Pages %d 0 R%s >>" % (pages_id, page_labels))
    objects.append(b"<< /Title %s >>" % _literal(title or ""))
    assert len(objects) == pages_id + 2
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R /Info %d 0 R >>\n" % (
        len(objects) + 1,
        len(objects) - 1,
        len(objects),
    )
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def make_docx(build: Callable[[docx.document.Document], object]) -> bytes:
    """A DOCX written by python-docx after ``build`` filled in its body."""
    document = docx.Document()
    build(document)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()
