"""A running chapter's progress bars, relayed to the executor's console.

The executor names a side-channel file in the kernel's environment (:data:`PROGRESS_ENV`);
:func:`mechbook.progress.progress` writes its bars' states there, and a :class:`Relay` thread
polls the file and shows one updating line: chapter, the bar's ``desc``, steps done out of total,
rate and time left (nested bars as ``outer 2/6 › inner 300/1,000``). On a terminal the line is
redrawn in place; elsewhere (a log, CI) a line is printed at most every ``every`` seconds.

Warnings that change what a reader gets (:func:`mechbook.notices.notice`: a recomputed cache
entry, an unwritable cache, fewer stories than asked) come through a second file,
:attr:`Relay.notices` (named in :data:`NOTICES_ENV`), and are printed once each as
``label: warning: message``.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from mechbook.notices import NOTICES_ENV
from mechbook.progress import PROGRESS_ENV

__all__ = ["NOTICES_ENV", "PROGRESS_ENV", "Relay", "format_bars", "format_seconds"]


def format_seconds(seconds: float | None) -> str:
    """``1 h 02 min``, ``3 min 05 s``, ``42 s``; ``?`` when unknown."""
    if seconds is None or math.isnan(seconds) or seconds < 0:
        return "?"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s} s"


def _bar(state: dict[str, Any]) -> str:
    n, total = state.get("n", 0), state.get("total")
    count = f"{n:,}/{total:,}" if total is not None else f"{n:,}"
    desc = state.get("desc") or ""
    return f"{desc} {count}".strip()


def format_bars(label: str, bars: list[dict[str, Any]]) -> str:
    """The console line for the open ``bars`` (outermost first): label, each bar's
    ``desc n/total``, then the innermost bar's rate and time left."""
    if not bars:
        return f"{label}: running"
    inner = bars[-1]
    rate = inner.get("rate")
    unit = inner.get("unit") or "it"
    pace = f"{rate:,.1f} {unit}/s" if rate else f"? {unit}/s"
    left = format_seconds(inner.get("remaining"))
    return f"{label}: {' › '.join(_bar(b) for b in bars)} · {pace} · {left} left"


class Relay:
    """Poll the side-channel file of one running chapter and show its progress on ``stream``.

    Use as a context manager; :attr:`path` is the file to name in the kernel's environment
    (:data:`PROGRESS_ENV`), :attr:`notices` that of its notices (:data:`NOTICES_ENV`).
    ``live`` (default: whether ``stream`` is a terminal) redraws one line in place.
    """

    def __init__(
        self,
        label: str,
        stream: TextIO | None = None,
        interval: float = 0.5,
        every: float = 30.0,
        live: bool | None = None,
    ):
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self.every = every
        self.live = self.stream.isatty() if live is None else live
        self._dir = tempfile.TemporaryDirectory(prefix="mechbook-progress-")
        self.path = Path(self._dir.name) / "bars.json"
        self.notices = Path(self._dir.name) / "notices.jsonl"
        self._notices_read = 0
        self.noticed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._last_text = ""
        self._last_print: float | None = None
        self.shown: list[str] = []

    def read(self) -> list[dict[str, Any]] | None:
        """The open bars the kernel last wrote; None before it wrote any or when unreadable."""
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))["bars"]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def relay_notices(self) -> None:
        """Print each notice the kernel appended since the last call, once per distinct message."""
        try:
            with self.notices.open("rb") as fh:
                fh.seek(self._notices_read)
                chunk = fh.read()
        except OSError:
            return
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self._notices_read += len(complete)
        for line in complete.decode("utf-8", "replace").splitlines():
            try:
                message = str(json.loads(line)["message"])
            except (ValueError, KeyError, TypeError):
                continue
            if message in self.noticed:
                continue
            self.noticed.append(message)
            self.stream.write(("\r\x1b[2K" if self.live else "") + f"{self.label}: warning: {message}\n")
            self._last_text = ""  # redraw the progress line below it
            self.stream.flush()

    def poll(self) -> None:
        """Read the files once: print new notices, and show the line if it changed (throttled
        when not live)."""
        self.relay_notices()
        bars = self.read()
        if bars is None:
            return
        text = format_bars(self.label, bars)
        now = time.monotonic()
        if text == self._last_text or (
            not self.live and self._last_print is not None and now - self._last_print < self.every
        ):
            return
        self._last_text, self._last_print = text, now
        self.shown.append(text)
        if self.live:
            self.stream.write("\r\x1b[2K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def __enter__(self) -> Relay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.relay_notices()
        if self.live and self._last_text:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
        self._dir.cleanup()
