"""Progress of a long CLI command: a bar on a terminal, plain lines in a log or a pipe.

A bar (tqdm) redraws itself with carriage returns and cursor escapes, which turn a log file into
noise. Where the stream is not a terminal, ``Progress`` writes ``stage: done/total unit (pct%)``
lines instead, one every ``interval`` seconds, and the last one if it wrote any: a command that
ends sooner prints none.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO, Any

from tqdm import tqdm

__all__ = ["Progress"]

PLAIN_INTERVAL_SECONDS = 10.0


class Progress:
    def __init__(
        self,
        stage: str,
        total: int,
        *,
        unit: str = "it",
        stream: IO[str] | None = None,
        position: int = 0,
        interval: float = PLAIN_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stage, self.total, self.unit = stage, total, unit
        self.done = 0
        self._stream = stream or sys.stderr
        self._interval, self._clock = interval, clock
        self._last_line = clock()
        self._wrote = False
        self._bar: tqdm[Any] | None = None
        if self._stream.isatty():
            self._bar = tqdm(
                total=total,
                desc=stage,
                unit=unit,
                file=self._stream,
                position=position,  # a file's pages: a second bar under the files' one,
                leave=position == 0,  # which goes when done
            )

    def update_to(self, done: int, total: int | None = None) -> None:
        """Say that ``done`` of ``total`` (the total so far if None) are done."""
        self.done, self.total = done, total if total is not None else self.total
        if self._bar is not None:
            self._bar.total = self.total
            self._bar.update(done - self._bar.n)
            return
        now = self._clock()
        if now - self._last_line >= self._interval or (done >= self.total and self._wrote):
            self._write()
            self._last_line, self._wrote = now, True

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    def _write(self) -> None:
        share = f" ({100 * self.done // self.total}%)" if self.total else ""
        self._stream.write(f"{self.stage}: {self.done}/{self.total} {self.unit}{share}\n")
        self._stream.flush()
