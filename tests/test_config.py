"""Settings: what the fingerprint of an index covers."""

from __future__ import annotations

from citewell.config import OcrSettings, RetrieveSettings, Settings


def test_the_fingerprint_changes_with_what_is_indexed_only() -> None:
    base = Settings()
    assert Settings(ocr=OcrSettings(languages="eng")).fingerprint() != base.fingerprint()
    assert Settings(ocr=OcrSettings(dpi=200)).fingerprint() != base.fingerprint()
    assert Settings(retrieve=RetrieveSettings(embedder="use")).fingerprint() != base.fingerprint()
    # How many threads or workers do the work changes nothing in the result.
    assert Settings(ocr=OcrSettings(workers=3)).fingerprint() == base.fingerprint()
    assert Settings(retrieve=RetrieveSettings(threads=3)).fingerprint() == base.fingerprint()
