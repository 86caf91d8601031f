"""Progress: a bar on a terminal, plain lines at a modest rate anywhere else."""

from __future__ import annotations

import io

from citewell.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_off_a_terminal_progress_is_plain_lines_at_most_every_interval_and_the_last() -> None:
    log, clock = io.StringIO(), Clock()
    progress = Progress("ingest", 100, unit="documents", stream=log, interval=10, clock=clock)
    for done in range(1, 101):
        clock.now += 0.5  # 50 seconds in all: a line at 10 s, 20, 30, 40 and at the end
        progress.update_to(done)
    progress.close()
    lines = log.getvalue().splitlines()
    assert lines == [
        "ingest: 20/100 documents (20%)",
        "ingest: 40/100 documents (40%)",
        "ingest: 60/100 documents (60%)",
        "ingest: 80/100 documents (80%)",
        "ingest: 100/100 documents (100%)",
    ]
    assert "\r" not in log.getvalue() and "\x1b" not in log.getvalue()


def test_a_command_that_ends_within_the_interval_prints_no_progress() -> None:
    log, clock = io.StringIO(), Clock()
    progress = Progress("ingest", 3, stream=log, interval=10, clock=clock)
    for done in range(1, 4):
        clock.now += 1
        progress.update_to(done)
    assert log.getvalue() == ""


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_progress_is_a_bar() -> None:
    screen = Terminal()
    progress = Progress("ask", 3, unit="questions", stream=screen)
    for done in range(1, 4):
        progress.update_to(done)
    progress.close()
    assert "\r" in screen.getvalue() and "ask" in screen.getvalue()
