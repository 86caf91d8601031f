"""What every dialect renders the same way: the text with its markers and appendix, labels, links.

One ``TextBuilder`` makes the rendered text of an answer, whether the answer arrives whole (a
plain response) or as engine events (a stream), so both give the same text and offsets:

- ``native``: the answer's text, flat; a citation is an offset range of it.
- ``legacy``: the same text with ``[n]`` markers (one per cited source, in source order) right
  after each cited claim; every range is shifted to the marked text, and still covers exactly the
  claim's text, never its marker.
- ``sources_appendix=include``: ``"\\n\\nSources:\\n[1] label\\n[2] label"`` appended after the
  answer; ranges into the answer are unchanged.

Sources are shown (annotations, markers, appendix, search results) unless the agent hides them
(``Agent.show_sources``, grounding ``hidden``); ``missing`` and ``none`` answers have none to show.

Claims that need a citation and have none (a non-strict agent keeps them) are flagged as
``unsupported`` ranges of the rendered text, only for answers whose grounding is ``available``:
never as citations.

Offsets are Unicode code points (Python ``str`` indices), start inclusive, end exclusive.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from citewell.locator import locator_label, source_label
from citewell.model import Answer, Box, Citation, GroundingState, PageRegion, Passage, Source, Span
from citewell.scalar_text import without_surrogates

__all__ = [
    "AccessUrl",
    "Anchor",
    "AnswerOptions",
    "CitationCompat",
    "Ids",
    "Layout",
    "SourcesAppendix",
    "TextBuilder",
    "appendix_text",
    "citations_by_claim",
    "cited_range",
    "cited_regions",
    "count_tokens",
    "dumps",
    "layout",
    "marker",
    "passage_label",
    "passage_pictures",
    "shows_sources",
    "token_usage",
    "unsupported_claims",
]

CitationCompat = Literal["native", "legacy"]
SourcesAppendix = Literal["omit", "include"]


class AccessUrl(Protocol):
    """Where a reader opens a source and pictures of its pages: signed links on this server,
    made by the HTTP handler for the request's caller (``citewell.api.links.access_urls``)."""

    def __call__(self, source_id: str) -> str:
        """The source's original file."""
        ...

    def page(self, source_id: str, page_number: int) -> str:
        """A picture of one page of the source."""
        ...

    def highlight(self, source_id: str, page_number: int, span: Span) -> str:
        """That picture with the boxes of ``span`` (a range of the source's text) tinted."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerOptions:
    """What a request asked of the rendering, shared by every dialect."""

    id: str
    """The key every wire id of this reply derives from (``resp_<id>``, ``msg_<id>``,
    ``chatcmpl-<id>``): chosen when the request arrives, since a stream names its reply before
    the answer exists."""
    model: str
    """The name the client gave (an agent's name), echoed back."""
    created_at: int
    """When the request arrived, in Unix seconds."""
    citation_compat: CitationCompat = "native"
    sources_appendix: SourcesAppendix = "omit"
    show_sources: bool = True
    """The agent's policy (``Agent.show_sources``); a stream must know it before the answer's
    grounding is settled."""
    retrieve: bool = True
    """Whether the request looks anything up (a stream announces the search before it ends)."""
    instructions: str | None = None
    access_url: AccessUrl | None = None
    """How links to sources and their pages are made; None where nothing serves them (the CLI):
    results then carry no ``access_url`` and no pictures, regions no ``image_url``."""


@dataclass(frozen=True, slots=True)
class Ids:
    """The wire ids of one reply, all derived from one key."""

    key: str

    def of(self, prefix: str) -> str:
        """``resp_…``, ``msg_…``, ``fs_…``; ``chatcmpl-…`` for Chat Completions."""
        separator = "" if prefix.endswith(("_", "-")) else "_"
        return f"{prefix}{separator}{self.key}"


def shows_sources(answer: Answer, options: AnswerOptions) -> bool:
    """Whether the answer's citations, results and appendix may be shown.

    Decided by the agent's policy alone (a stream shows citations before the grounding is
    known), and never for a ``hidden`` answer.
    """
    return options.show_sources and answer.grounding is not GroundingState.HIDDEN


def marker(citations: Sequence[Citation]) -> str:
    """``[1][2]``: one marker per source the claim cites, in the order of its citations."""
    return "".join(f"[{n}]" for n in dict.fromkeys(c.source_index for c in citations))


@dataclass(frozen=True, slots=True)
class Anchor:
    """A citation, placed on the rendered text: ``start``/``end`` cover its claim."""

    citation: Citation
    start: int
    end: int


class TextBuilder:
    """The rendered text, built as the answer's text and claims arrive (engine order).

    ``add`` takes answer text, ``claim`` a finished claim with its citations, ``finish`` the
    appendix; each returns the rendered text to pass on now. In legacy mode text is held back
    until the claim it belongs to is finished, so each marker goes out with its claim.
    """

    def __init__(self, *, legacy: bool, show_sources: bool) -> None:
        self._legacy = legacy
        self._show = show_sources
        self._flat = ""
        self._released = 0
        """Flat text passed on so far."""
        self._shift = 0
        """Marker characters passed on so far."""
        self.text = ""
        self.anchors: list[Anchor] = []
        self.unsupported: list[Span] = []
        """Ranges of the rendered text of claims flagged as unsupported."""

    def add(self, text: str) -> str:
        self._flat += text
        return "" if self._legacy else self._release(len(self._flat))

    def claim(
        self, span: Span, citations: Sequence[Citation], *, unsupported: bool = False
    ) -> tuple[str, list[Anchor]]:
        """``unsupported``: flag the claim (kept uncited) when sources are shown."""
        shown = citations if self._show else ()
        # Markers passed on so far stand at or before the claim's start: they shift it whole.
        anchors = [Anchor(c, span.start + self._shift, span.end + self._shift) for c in shown]
        self.anchors.extend(anchors)
        if unsupported and self._show:
            self.unsupported.append(
                Span(start=span.start + self._shift, end=span.end + self._shift)
            )
        piece = self._release(span.end) if self._legacy else ""
        if self._legacy and shown:
            mark = marker(shown)
            self._shift += len(mark)
            self.text += mark
            piece += mark
        return piece, anchors

    def finish(self, appendix: str = "") -> str:
        piece = self._release(len(self._flat)) + appendix
        self.text += appendix
        return piece

    def _release(self, end: int) -> str:
        piece = self._flat[self._released : max(end, self._released)]
        self._released += len(piece)
        self.text += piece
        return piece


@dataclass(frozen=True, slots=True)
class Layout:
    text: str
    anchors: tuple[Anchor, ...]
    unsupported: tuple[Span, ...] | None
    """Ranges of the rendered text of unsupported claims; None when the answer's grounding is
    not shown (not ``available``, or sources hidden)."""


def cited_range(citation: Citation, links: AccessUrl | None) -> dict[str, Any]:
    """citewell's annotation fields naming the range of the source a citation cites: the same in
    every dialect, beside the dialect's own fields."""
    return {
        "cited_text": citation.cited_text,
        "cited_start_index": citation.span.start,
        "cited_end_index": citation.span.end,
        "chunk_id": citation.chunk_id,
        "page_number": citation.page_number,
        "page_label": citation.page_label,
        "support": citation.support,
        "regions": cited_regions(citation, links),
        "conflict_side": citation.conflict_side,
    }


def cited_regions(citation: Citation, links: AccessUrl | None) -> list[dict[str, Any]]:
    """Where the cited range lies on its pages: per page, its boxes (one per line) in page
    coordinates and normalised to the page (0–1), with links to pictures of the page (null
    where nothing serves them)."""
    return [
        {
            "page_number": region.page_number,
            "page_label": region.page_label,
            "page_width": round(region.page_width, 2),
            "page_height": round(region.page_height, 2),
            "boxes": [_box(box, region) for box in region.boxes],
            "ocr_confidence": region.ocr_confidence,
            "image_url": links.page(citation.source_id, region.page_number) if links else None,
            "highlight_url": (
                links.highlight(citation.source_id, region.page_number, citation.span)
                if links
                else None
            ),
        }
        for region in citation.regions
    ]


def _box(box: Box, region: PageRegion) -> dict[str, float]:
    width, height = region.page_width, region.page_height
    return {
        "x0": box.x0,
        "y0": box.y0,
        "x1": box.x1,
        "y1": box.y1,
        "nx0": round(box.x0 / width, 5),
        "ny0": round(box.y0 / height, 5),
        "nx1": round(box.x1 / width, 5),
        "ny1": round(box.y1 / height, 5),
    }


def passage_pictures(passage: Passage, links: AccessUrl | None) -> tuple[str, str] | None:
    """Links to (a picture of the page, the same with the range tinted) of a retrieved passage's
    best sentence (else of the whole passage), on the page where it starts; None for a source
    without pages, or where nothing serves links."""
    best = passage.sentences[0] if passage.sentences else None
    page = best.page_number if best else passage.page_number
    if links is None or page is None:
        return None
    span = best.span if best else passage.chunk.span
    return links.page(passage.source.id, page), links.highlight(passage.source.id, page, span)


def citations_by_claim(answer: Answer) -> dict[int, list[Citation]]:
    grouped: dict[int, list[Citation]] = {}
    for citation in answer.citations:
        grouped.setdefault(citation.claim_index, []).append(citation)
    return grouped


def layout(answer: Answer, options: AnswerOptions) -> Layout:
    """The rendered text of a whole answer: exactly what a stream of the same answer adds up to."""
    builder = TextBuilder(
        legacy=options.citation_compat == "legacy", show_sources=shows_sources(answer, options)
    )
    builder.add(answer.text)
    grouped = citations_by_claim(answer)
    flagged = answer.grounding is GroundingState.AVAILABLE and shows_sources(answer, options)
    for index, claim in enumerate(answer.claims):
        unsupported = flagged and claim.needs_citation and not claim.supported
        builder.claim(claim.span, grouped.get(index, ()), unsupported=unsupported)
    builder.finish(appendix_text(answer, options))
    return Layout(
        builder.text, tuple(builder.anchors), tuple(builder.unsupported) if flagged else None
    )


def unsupported_claims(rendered: Layout) -> list[dict[str, int]]:
    """The wire form of the flagged claims, the same in every dialect."""
    return [{"start_index": s.start, "end_index": s.end} for s in rendered.unsupported or ()]


def appendix_text(answer: Answer, options: AnswerOptions) -> str:
    """``\\n\\nSources:\\n[1] handbook.pdf (p. 4)``…; "" when not asked for or not to be shown."""
    if options.sources_appendix != "include" or not shows_sources(answer, options):
        return ""
    if not answer.sources:
        return ""
    lines = [f"[{s.source_index}] {cited_source_label(answer, s.source)}" for s in answer.sources]
    return "\n\nSources:\n" + "\n".join(lines)


def cited_source_label(answer: Answer, source: Source) -> str:
    """The file name with every place it is cited: ``handbook.pdf (p. 4, p. 9)``."""
    chunks = {p.chunk.id: p.chunk for p in answer.passages}
    locators: list[str] = []
    for citation in answer.citations:
        if citation.source_id != source.id:
            continue
        chunk = chunks.get(citation.chunk_id)
        locator = locator_label(
            page_number=citation.page_number,
            page_label=citation.page_label,
            heading_path=chunk.heading_path if chunk else (),
        )
        if locator and locator not in locators:
            locators.append(locator)
    return source_label(source.filename, ", ".join(locators) or None)


def passage_label(passage: Passage) -> tuple[str, str | None]:
    """(label, locator) of a retrieved passage, as search results name it."""
    locator = locator_label(
        page_number=passage.page_number,
        page_label=passage.page_label,
        heading_path=passage.chunk.heading_path,
    )
    return source_label(passage.source.filename, locator), locator


# A CJK character is about one token; elsewhere a run of letters and digits, or one mark.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+|[^\w\s]")


_PIECE = 65_536
"""Characters counted in one regex call: a call holds the GIL throughout, and over a 10 MB
document one would keep the event loop from running for half a second."""


def count_tokens(text: str | None) -> int:
    """A rough token count (words, marks and CJK characters): citewell runs no tokenizer."""
    if not text:
        return 0
    count, start = 0, 0
    while start < len(text):
        end = min(start + _PIECE, len(text))
        if end < len(text):
            space = text.rfind(" ", start, end)  # no word is cut in two (CJK needs no space)
            end = space + 1 if space > start else end
        count += len(_TOKEN.findall(text, start, end))
        start = end
    return count


def token_usage(answer: Answer, options: AnswerOptions, rendered: str) -> tuple[int, int]:
    """(input, output) tokens: the question, instructions and evidence read; the text sent."""
    read = count_tokens(answer.question) + count_tokens(options.instructions)
    read += sum(count_tokens(p.chunk.text) for p in answer.passages)
    return read, count_tokens(rendered)


def dumps(data: Any) -> str:
    """Compact JSON, as sent on the wire (non-ASCII kept as is, a surrogate as U+FFFD)."""
    return without_surrogates(json.dumps(data, ensure_ascii=False, separators=(",", ":")))
