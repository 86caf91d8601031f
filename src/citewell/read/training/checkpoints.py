"""Committing a training run's checkpoint as it is written, so that a machine taken away in the
middle of a run loses at most the steps since the last one."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

__all__ = ["commit_checkpoint"]


def commit_checkpoint(path: Path, step: int, steps: int) -> None:
    """Commit ``path`` (and nothing else staged) to the repository it lies in. Another git
    command holding the index lock is waited for, a few times; a failure is reported, never
    raised: the run goes on, and the next checkpoint tries again."""
    folder = path.parent.resolve()
    message = f"reader training: checkpoint at step {step} of {steps} ({folder.name})"
    for attempt in range(5):
        added = subprocess.run(
            ["git", "add", "--", path.name], cwd=folder, capture_output=True, text=True
        )
        committed = subprocess.run(
            ["git", "commit", "--quiet", "-m", message, "--", path.name],
            cwd=folder,
            capture_output=True,
            text=True,
        )
        if added.returncode == 0 and committed.returncode == 0:
            return
        time.sleep(2 + 3 * attempt)
    print(f"could not commit {path}: {committed.stderr.strip() or added.stderr.strip()}")
