"""Fixtures shared by the whole suite: the evaluation data folder and isolated settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from citewell.config import RetrieveSettings, Settings

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def evaldata() -> Path:
    """The shared evaluation data (``CITEWELL_EVALDATA_DIR``, else ``../shared/evaldata``)."""
    path = Path(os.environ.get("CITEWELL_EVALDATA_DIR", REPO.parent / "shared" / "evaldata"))
    if not (path / "README.md").is_file():
        raise RuntimeError(f"evaluation data not found at {path}; set CITEWELL_EVALDATA_DIR")
    return path


@pytest.fixture
def documents(evaldata: Path) -> Path:
    return evaldata / "documents"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings on a fresh data folder, with the fast embedder and one thread."""
    return Settings(
        data_dir=tmp_path / "data",
        retrieve=RetrieveSettings(embedder="use", threads=1),
    )
