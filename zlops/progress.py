"""Progress of long steps: a live display on a terminal, plain log lines everywhere else.

Every pipeline step runs inside ``progress.step(step, suite=..., commit=..., device=...)``. On a
terminal (the CLI) that is a rich display with elapsed time per step; under Airflow or in a pipe it
is one log line when a step starts and one when it ends, with its duration.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

log = logging.getLogger("zlops.progress")


def mark_step(exc: BaseException, label: str) -> None:
    """Record on ``exc`` the innermost step it failed in (the CLI names it: zlops.errors.os_error_line)."""
    if getattr(exc, "zlops_step", None) is None:
        try:
            exc.zlops_step = label  # type: ignore[attr-defined]
        except (AttributeError, TypeError):
            pass


def _label(step: str, ctx: dict[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in ctx.items() if v is not None]
    return f"{step} [{' '.join(parts)}]" if parts else step


class LogProgress:
    """Plain log lines (Airflow task logs, CI, pipes)."""

    @contextlib.contextmanager
    def step(self, step: str, **ctx: Any) -> Iterator[None]:
        label = _label(step, ctx)
        log.info("start %s", label)
        t0 = time.monotonic()
        try:
            yield
        except BaseException as exc:
            mark_step(exc, label)
            log.info("FAILED %s after %.1f s", label, time.monotonic() - t0)
            raise
        log.info("done %s in %.1f s", label, time.monotonic() - t0)

    def note(self, message: str) -> None:
        log.info("%s", message)

    def close(self) -> None:
        return None


class RichProgress:
    """A live rich display: one line per running step with a spinner and elapsed time."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.console = Console(stderr=True)
        self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                  console=self.console, transient=False)
        self._progress.start()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def step(self, step: str, **ctx: Any) -> Iterator[None]:
        from rich.markup import escape

        label = escape(_label(step, ctx))  # "[suite=...]" is not rich markup
        with self._lock:
            task = self._progress.add_task(label, total=1)
        try:
            yield
        except BaseException as exc:
            mark_step(exc, _label(step, ctx))
            with self._lock:
                self._progress.update(task, description=f"[red]FAILED[/red] {label}", completed=1)
                self._progress.stop_task(task)
            raise
        with self._lock:
            self._progress.update(task, description=f"[green]done[/green] {label}", completed=1)
            self._progress.stop_task(task)

    def note(self, message: str) -> None:
        from rich.markup import escape

        self._progress.console.print(escape(message))

    def close(self) -> None:
        self._progress.stop()


Progress = LogProgress | RichProgress


def make_progress(interactive: bool | None = None) -> Progress:
    """Rich on a terminal, log lines otherwise (``interactive`` forces one or the other)."""
    if interactive is None:
        interactive = sys.stderr.isatty()
    return RichProgress() if interactive else LogProgress()
