"""citewell: grounded answers over your own documents; every answer says where it came from.

The promises are this list, the HTTP API and the CLI; everything else may change.
"""

from citewell.config import Settings
from citewell.engine import Engine
from citewell.errors import CitewellError
from citewell.events import Question
from citewell.library import Library
from citewell.model import (
    Agent,
    Answer,
    Box,
    Bucket,
    Chunk,
    Citation,
    CitedSource,
    Claim,
    Comparison,
    CompoundFilter,
    GroundingState,
    IngestOutcome,
    IngestResult,
    Modality,
    Page,
    Passage,
    Principal,
    RetrievalMode,
    ScoreBreakdown,
    SearchRequest,
    SentenceMatch,
    Source,
    Span,
)

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "Answer",
    "Box",
    "Bucket",
    "Chunk",
    "Citation",
    "CitedSource",
    "CitewellError",
    "Claim",
    "Comparison",
    "CompoundFilter",
    "Engine",
    "GroundingState",
    "IngestOutcome",
    "IngestResult",
    "Library",
    "Modality",
    "Page",
    "Passage",
    "Principal",
    "Question",
    "RetrievalMode",
    "ScoreBreakdown",
    "SearchRequest",
    "SentenceMatch",
    "Settings",
    "Source",
    "Span",
]
