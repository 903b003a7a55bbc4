"""Nothing outlives its run: worker processes die with the process that started them, and the
executor takes its kernels down with it.

- :class:`WorkerPool` is the process pool of chapters 8 and 11's training
  (:mod:`mechbook.assign_add.train`): spawned workers that die with their parent (the kernel)
  however it ends, by :func:`die_with_parent`; an exception leaving its ``with`` block (an
  interrupt) kills the workers instead of waiting for their training to finish.
- :func:`die_with_parent` runs first in each worker: on Linux the parent-death signal
  (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), elsewhere a watchdog thread that exits when the parent
  pid changes. The signal fires when the *thread* that spawned the worker ends; the pools here are
  used from the one thread that created them, which outlives them.
- :func:`stop_kernels_on_signals` (the executor, :mod:`mechbook.book.run`): on SIGTERM or SIGINT,
  kill the process group of every child that leads its own group (Jupyter starts each kernel in a
  new session, its workers inside it) and end the run with one :class:`KeyboardInterrupt`.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import importlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

PR_SET_PDEATHSIG = 1
WATCH_INTERVAL_S = 0.5
"""How often the watchdog (where there is no ``prctl``) looks at the parent pid."""


def _set_parent_death_signal(sig: int) -> bool:
    """``prctl(PR_SET_PDEATHSIG, sig)``; False where that is not available (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int, interval: float = WATCH_INTERVAL_S) -> threading.Thread:
    """A daemon thread that ends this process as soon as its parent is no longer ``parent``."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(1)

    thread = threading.Thread(target=watch, name="mechbook-parent-watchdog", daemon=True)
    thread.start()
    return thread


def die_with_parent(parent: int | None = None) -> str:
    """Make this process die when its parent (``parent``, default the current one) does; returns
    how (``"prctl"`` or ``"watchdog"``). A parent already gone ends the process at once."""
    parent = os.getppid() if parent is None else parent
    how = "prctl" if _set_parent_death_signal(signal.SIGKILL) else "watchdog"
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)
    if how == "watchdog":
        _watch_parent(parent)
    return how


def _worker_init(parent: int, initializer: tuple[str, str] | None, initargs: tuple) -> None:
    """Arm :func:`die_with_parent` first, then import and run the pool's own initializer (passed
    by name, so that starting a worker imports nothing heavy before the signal is armed)."""
    die_with_parent(parent)
    if initializer is not None:
        module, name = initializer
        getattr(importlib.import_module(module), name)(*initargs)


def _named(func: Callable[..., Any] | None) -> tuple[str, str] | None:
    """``(module, name)`` of a module-level function, which the worker imports after arming."""
    if func is None:
        return None
    module, name = getattr(func, "__module__", None), getattr(func, "__qualname__", "")
    if not module or not name.isidentifier():
        raise TypeError(f"initializer must be a module-level function, got {func!r}")
    return module, name


class WorkerPool(ProcessPoolExecutor):
    """A pool of ``workers`` spawned processes that die with this one (:func:`die_with_parent`,
    armed before anything else is imported), then run ``initializer(*initargs)`` (a module-level
    function). Leaving its ``with`` block on an exception kills the
    workers and cancels what is pending, rather than waiting for running tasks to end."""

    def __init__(self, workers: int, initializer: Callable[..., Any] | None = None, initargs: tuple = ()) -> None:
        super().__init__(
            workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_worker_init,
            initargs=(os.getpid(), _named(initializer), tuple(initargs)),
        )

    def kill(self) -> None:
        """Kill every worker now and shut the pool down (pending work is cancelled)."""
        for proc in list((getattr(self, "_processes", None) or {}).values()):
            with contextlib.suppress(OSError, ValueError):
                proc.kill()
        self.shutdown(wait=True, cancel_futures=True)

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None:
            self.kill()
            return False
        return super().__exit__(exc_type, exc, tb)


def _stat(pid: int) -> tuple[int, int] | None:
    """``(parent pid, process group)`` of ``pid`` from ``/proc``; None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[2])


def child_groups(pid: int | None = None) -> list[int]:
    """The process groups led by children of ``pid`` (default: this process) other than its own
    group: the executor's kernels. Empty where there is no ``/proc``."""
    pid = os.getpid() if pid is None else pid
    own = os.getpgid(pid)
    groups = []
    for entry in Path("/proc").glob("[0-9]*"):
        stat = _stat(int(entry.name))
        if stat is not None and stat[0] == pid and stat[1] == int(entry.name) and stat[1] != own:
            groups.append(stat[1])
    return sorted(groups)


def kill_child_groups(sig: int = signal.SIGKILL) -> list[int]:
    """Send ``sig`` to the process group of each of :func:`child_groups`; returns those groups."""
    groups = child_groups()
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)
    return groups


def _children() -> list[int]:
    """This process's children that share its process group (the lanes of the executor)."""
    own = os.getpid()
    group = os.getpgid(own)
    out = []
    for entry in Path("/proc").glob("[0-9]*"):
        stat = _stat(int(entry.name))
        if stat is not None and stat[0] == own and stat[1] == group:
            out.append(int(entry.name))
    return out


@contextlib.contextmanager
def stop_kernels_on_signals() -> Iterator[None]:
    """While inside: SIGTERM, SIGINT and SIGHUP (a closed terminal) kill the kernels' process
    groups (:func:`kill_child_groups`), pass SIGTERM and SIGHUP on to the executor's own child
    processes (the lanes, which do the same), and
    raise :class:`KeyboardInterrupt` so the run ends as an interrupted one. Only in the main thread
    (signal handlers can be set nowhere else); the previous handlers come back on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    raised = []

    def handler(signum: int, frame: object) -> None:
        kill_child_groups(signal.SIGKILL)
        if signum != signal.SIGINT:  # a terminal's Ctrl-C reaches the lanes itself
            for child in _children():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGTERM)
        if not raised:  # once: a second signal must not interrupt the report of the first
            raised.append(signum)
            raise KeyboardInterrupt(signal.Signals(signum).name)

    saved = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)
