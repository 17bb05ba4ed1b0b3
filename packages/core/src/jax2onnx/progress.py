"""Progress of long exports: the stage running, the tensors and bytes written, calibration steps.

One reporter per export, found by the stages through a context variable (so no stage signature
carries it, and threads exporting at once each see their own)::

    with progress.reporting(True):      # what to_onnx(progress=...) and export_causal_lm do
        ExportProgram(fn, inputs, ...).write()

The stages call :func:`current` (a silent reporter when none is set): ``stage("trace")``,
``writing(tensors, bytes)`` then ``wrote(nbytes)`` per tensor of the weights file,
``steps("calibrating", total)`` then ``step()``.

``progress=`` everywhere means:

- ``None`` (default): a live bar on a terminal (stderr is a tty) once the export has run for
  :data:`AUTO_DELAY_S` seconds (a quick export shows nothing), drawn then by a timer whatever stage
  is running (not at the next stage: a long trace would show nothing until it ends); nothing when
  not a terminal;
- ``True``: a live bar on a terminal, plain lines (one per stage, a line every tenth of the weights
  written) otherwise, e.g. in a log;
- ``False``: nothing.

The bar is ``rich``'s; without ``rich`` installed (it is optional for core) the plain lines are
written instead. Its elapsed time is redrawn by ``rich``'s own thread, so it moves as long as the
export does not hold the GIL for long in one call: the writers report each tensor (the weights
file's, and a single file's, written tensor by tensor by ``export/saving.py``).
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, TextIO

from .errors import InputSpecError

#: with progress=None, a terminal shows the bar only once the export has run this long
AUTO_DELAY_S = 2.0


def _size(n: float) -> str:
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            break
    return f"{n:.1f} {unit}"


class ExportProgress:
    """Reports one export's progress to ``stream`` as a live bar (``live=True``) or plain lines.
    ``delay``: seconds to stay silent first (quick exports print nothing)."""

    def __init__(self, stream: TextIO, *, live: bool, delay: float = 0.0, prefix: str = "jax2onnx") -> None:
        self.stream, self.live, self.delay, self.prefix = stream, live, delay, prefix
        self._start = time.perf_counter()
        self._shown = False
        self._closed = False
        self._bar: Any = None
        self._task: Any = None
        self._fields: dict[str, Any] = {"description": "", "total": None, "completed": 0}  # what the bar shows
        self._stage_start = self._start
        self._stage: str | None = None
        self._total = self._done = 0  # units of the current counted step (bytes or steps)
        self._unit = ""  # what the counted step counts: "tensors" (their bytes too), "batches", ...
        self._count = self._count_total = 0
        self._next_line = 0.0  # plain lines: the fraction at which the next count line is written
        # the export's thread reports, the timer's shows the bar once the delay is over: one at a time
        self._lock = threading.RLock()
        self._timer: threading.Timer | None = None
        if 0 < delay < threading.TIMEOUT_MAX:
            self._timer = threading.Timer(delay, self._show_when_due)
            self._timer.daemon = True  # never keeps a finished program alive
            self._timer.start()

    # -- what the stages call ------------------------------------------------------------------

    def stage(self, name: str) -> None:
        """A stage begins (``trace``, ``lower``, ``optimize``, ``write``, ...)."""
        with self._lock:
            self._end_stage()
            self._stage, self._stage_start = name, time.perf_counter()
            self._total = 0
            if self._visible() and not self.live:
                self._line(f"{name} ...")
            self._refresh(description=name, total=None, completed=0)

    def writing(self, tensors: int, nbytes: int) -> None:
        """A file is about to get ``tensors`` tensors, ``nbytes`` bytes in all (the weights file, or
        a single model file's weights)."""
        self._counted(f"writing {tensors} tensors", "tensors", tensors, nbytes)

    def wrote(self, nbytes: int) -> None:
        """One more tensor of ``nbytes`` is written."""
        self._advance(nbytes)

    def steps(self, what: str, total: int) -> None:
        """A counted step begins: ``total`` units of ``what`` (``calibrating layers``)."""
        self._counted(what, what.split()[-1], total, total)

    def step(self, n: int = 1) -> None:
        self._advance(n)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            self._closed = True
            self._end_stage()
            if self._bar is not None:
                self._bar.stop()
                self._bar = None
            if self._visible() and not self.live:
                self._line(f"done in {time.perf_counter() - self._start:.1f} s")

    # -- internals -------------------------------------------------------------------------------

    def _counted(self, what: str, unit: str, count: int, total: int) -> None:
        with self._lock:
            self._unit, self._count_total = unit, count
            self._total, self._done, self._count, self._next_line = max(total, 1), 0, 0, 0.1
            if self._visible() and not self.live:
                self._line(what + (f" ({_size(total)})" if unit == "tensors" else ""))
            self._refresh(description=f"{self._stage or ''}: {what}".strip(": "), total=self._total, completed=0)

    def _advance(self, n: int) -> None:
        with self._lock:
            self._done += n
            self._count += 1
            if self._visible() and not self.live and self._done / self._total >= self._next_line:
                self._next_line = (int(self._done / self._total * 10) + 1) / 10
                sizes = f", {_size(self._done)} of {_size(self._total)}" if self._unit == "tensors" else ""
                self._line(f"  {self._count}/{self._count_total} {self._unit}{sizes}")
            self._refresh(completed=self._done)

    def _show_when_due(self) -> None:
        """The timer's: the delay is over, so show what runs now (a long trace, say) at once."""
        with self._lock:
            if self._closed or not self._visible():
                return
            if self.live:
                self._draw()
            elif self._stage is not None:  # the plain line its start did not print
                self._line(f"{self._stage} ...")

    def _end_stage(self) -> None:
        if self._stage is not None and self._visible() and not self.live:
            self._line(f"{self._stage}: done in {time.perf_counter() - self._stage_start:.1f} s")
        self._stage = None

    def _visible(self) -> bool:
        if not self._shown and time.perf_counter() - self._start >= self.delay:
            self._shown = True
        return self._shown

    def _line(self, text: str) -> None:
        print(f"{self.prefix}: {text}", file=self.stream, flush=True)

    def _refresh(self, **fields: Any) -> None:
        self._fields.update(fields)
        if self.live and self._visible():
            self._draw()

    def _draw(self) -> None:
        if self._bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn(f"[bold]{self.prefix}[/bold] {{task.description}}"), BarColumn(),
                                 TextColumn("{task.fields[count]}"), TimeElapsedColumn(),
                                 console=Console(file=self.stream), transient=False)
            self._bar.start()
            self._task = self._bar.add_task(self._stage or "", total=None, count="")
        count = ""
        if self._total:
            count = f"{self._count}/{self._count_total} {self._unit}"
            if self._unit == "tensors":
                count += f", {_size(self._done)} of {_size(self._total)}"
        self._bar.update(self._task, count=count, **self._fields)


class _Silent(ExportProgress):
    """Reports nothing and keeps no state (one instance serves every quiet export, in any thread)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr, live=False, delay=float("inf"))

    def stage(self, name: str) -> None:
        pass

    def writing(self, tensors: int, nbytes: int) -> None:
        pass

    def wrote(self, nbytes: int) -> None:
        pass

    def steps(self, what: str, total: int) -> None:
        pass

    def step(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


_SILENT = _Silent()
_CURRENT: contextvars.ContextVar[ExportProgress | None] = contextvars.ContextVar("jax2onnx_progress", default=None)


def current() -> ExportProgress:
    """The reporter of the export running in this context (a silent one when none is)."""
    return _CURRENT.get() or _SILENT


def _has_rich() -> bool:
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def make(progress: bool | None, stream: TextIO | None = None) -> ExportProgress:
    """The reporter ``progress=`` asks for (see the module doc) on ``stream`` (stderr)."""
    if progress is not None and not isinstance(progress, bool):
        raise InputSpecError(f"progress= takes True (a bar on a terminal, plain lines otherwise), False (nothing) or "
                             f"None (a bar on a terminal for a long export), got {progress!r}")
    stream = stream if stream is not None else sys.stderr
    tty = bool(getattr(stream, "isatty", lambda: False)())
    if progress is False or (progress is None and not tty):
        return _SILENT
    live = tty and _has_rich()
    return ExportProgress(stream, live=live, delay=AUTO_DELAY_S if progress is None else 0.0)


@contextlib.contextmanager
def reporting(progress: bool | None, stream: TextIO | None = None) -> Iterator[ExportProgress]:
    """Report the export run inside on ``stream`` as ``progress=`` asks. Nested (a front-end's
    export runs ``to_onnx``-like stages), the outer reporter stays: one bar per export."""
    outer = _CURRENT.get()
    if outer is not None:
        yield outer
        return
    reporter = make(progress, stream)
    token = _CURRENT.set(reporter)
    try:
        yield reporter
    finally:
        _CURRENT.reset(token)
        reporter.close()


__all__ = ["AUTO_DELAY_S", "ExportProgress", "current", "make", "reporting"]
