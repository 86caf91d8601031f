"""Settings: what the fingerprint of an index covers."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from citewell.config import JobSettings, OcrSettings, RetrieveSettings, Settings


def test_the_fingerprint_changes_with_what_is_indexed_only() -> None:
    base = Settings()
    assert Settings(ocr=OcrSettings(languages="eng")).fingerprint() != base.fingerprint()
    assert Settings(ocr=OcrSettings(dpi=200)).fingerprint() != base.fingerprint()
    assert Settings(retrieve=RetrieveSettings(embedder="use")).fingerprint() != base.fingerprint()
    # How many threads or workers do the work changes nothing in the result.
    assert Settings(ocr=OcrSettings(workers=3)).fingerprint() == base.fingerprint()
    assert Settings(retrieve=RetrieveSettings(threads=3)).fingerprint() == base.fingerprint()


def test_a_lease_is_renewed_at_least_twice_before_it_runs_out() -> None:
    assert JobSettings(lease_seconds=3, poll_seconds=1.5).lease_seconds == 3
    with pytest.raises(ValidationError, match="at most half"):
        JobSettings(lease_seconds=3, poll_seconds=2)
