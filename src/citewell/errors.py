"""Every error citewell raises on purpose, arranged by who must act.

    CitewellError
    ├── ConfigError            the operator: a setting is wrong or a dependency is missing
    ├── InvalidRequest         the caller: the request cannot be served as written
    │   ├── NotFound           ... it names something that does not exist (or is not visible)
    │   │   └── UnknownModel   ...... a model (an agent) the caller has none of
    │   ├── UnknownPrevious    ... it continues an earlier answer that is not there
    │   ├── Unauthenticated    ... it carries no valid API key where one is required
    │   ├── PermissionDenied   ... the caller may not do this
    │   ├── Conflict           ... it clashes with the current state
    │   └── QuotaExceeded      ... its tenant has used up a budget for now: retry later
    ├── IngestError            the input file: citewell cannot read it
    │   ├── UnsupportedFormat  ... no parser for its media type
    │   ├── FileTooLarge       ... over a configured size limit
    │   └── ParseError         ... damaged, truncated, hostile or not what it claims to be
    ├── StoreError             the store failed; retrying later may help
    └── GeneratorError         the generator's backend failed
        ├── GeneratorUnavailable   ... it cannot be reached or refused the request
        ├── GeneratorTimeout       ... it did not answer in time
        └── GeneratorBusy          ... it has no room for another answer now: retry later

Exceptions carry the ids they concern as attributes. Programmer errors stay ``ValueError``,
``TypeError`` or ``RuntimeError``.
"""

from __future__ import annotations

__all__ = [
    "CitewellError",
    "ConfigError",
    "Conflict",
    "FileTooLarge",
    "GeneratorBusy",
    "GeneratorError",
    "GeneratorTimeout",
    "GeneratorUnavailable",
    "IngestError",
    "InvalidRequest",
    "NotFound",
    "ParseError",
    "PermissionDenied",
    "QuotaExceeded",
    "StoreError",
    "Unauthenticated",
    "UnknownModel",
    "UnknownPrevious",
    "UnsupportedFormat",
]


class CitewellError(Exception):
    """Root of citewell's errors."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(CitewellError):
    """A setting is wrong or something the setting needs is missing."""


class InvalidRequest(CitewellError):
    """The request cannot be served as written. ``param`` names the offending field, if any."""

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class NotFound(InvalidRequest):
    """The request names something that does not exist, or that the caller may not see."""


class UnknownModel(NotFound):
    """The request names as its ``model`` an agent the caller has none of."""


class UnknownPrevious(InvalidRequest):
    """The request continues an earlier answer (``previous_response_id``) that is not there:
    a bad request rather than a missing resource, since the URL itself names nothing."""


class Unauthenticated(InvalidRequest):
    """The request carries no API key where one is required, or a key that is not valid
    (unknown, malformed or revoked)."""


class PermissionDenied(InvalidRequest):
    """The caller is known but may not do this."""


class Conflict(InvalidRequest):
    """The request clashes with the current state."""


class QuotaExceeded(InvalidRequest):
    """The caller's tenant has used up a budget for now (pages waiting for OCR); a later retry,
    once some of that work is done, may pass."""


class IngestError(CitewellError):
    """A file could not be ingested. ``filename`` names it when known."""

    def __init__(self, message: str, *, filename: str | None = None) -> None:
        super().__init__(message)
        self.filename = filename


class UnsupportedFormat(IngestError):
    """No parser handles the file's media type."""


class FileTooLarge(IngestError):
    """The file, or what it unpacks to, is over a configured limit."""


class ParseError(IngestError):
    """The file is damaged, truncated, hostile, or not what its name or type claims."""


class StoreError(CitewellError):
    """The store failed in a way the caller cannot fix; retrying later may help."""


class GeneratorError(CitewellError):
    """The generator's backend failed."""


class GeneratorUnavailable(GeneratorError):
    """The generator's backend cannot be reached, or refused the request."""


class GeneratorTimeout(GeneratorError):
    """The generator's backend did not answer in time."""


class GeneratorBusy(GeneratorError):
    """The generator's backend is serving all the answers it can hold; a later retry may pass.

    Raised before anything of the answer is sent, so the caller gets an HTTP 429."""
