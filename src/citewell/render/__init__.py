"""Renderers: one ``Answer`` (or the engine's events for one) in each wire dialect.

Pure functions of the answer and the request's options: no I/O, no retrieval, no attribution.
What dialects share (marked text, appendix, labels, links, token counts) is in ``common``.
"""

from citewell.render.chat import ChatOptions, ChatStream, render_completion
from citewell.render.common import AnswerOptions, CitationCompat, SourcesAppendix
from citewell.render.responses import ResponseOptions, ResponseStream, render_response

__all__ = [
    "AnswerOptions",
    "ChatOptions",
    "ChatStream",
    "CitationCompat",
    "ResponseOptions",
    "ResponseStream",
    "SourcesAppendix",
    "render_completion",
    "render_response",
]
