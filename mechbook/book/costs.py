"""Measured seconds per chapter and profile, for the ETA that ``execute`` prints before the work
starts. Two files: ``mechbook/book/costs.json`` ships the times measured when the book was last
timed (committed on purpose, left out of the executor's cache key), and ``_build/costs.json``
holds this machine's own: every run that executes a chapter to the end rewrites its entry there,
as a ``cold`` time when the chapter computed something (it trained or analysed: what a build
from an empty model cache pays) or a ``warm`` one when everything came from the model cache. A
local cold entry wins over the shipped one (shipped times are cold: they come from a cold
build); the warm ones give the plan's second figure. A chapter with neither is "unknown".

The shipped file also says which machine measured its times (:func:`reference`: its CPU and its
figure of :func:`mechbook.book.calibrate.calibrate`), so that the plan can scale them to this
machine (:func:`scaled_costs`); this machine's own times are used as they are.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mechbook.book.calibrate import REFERENCE_KEY

#: The costs file, relative to the package folder ``mechbook/``.
COSTS_FILE = "book/costs.json"


def costs_path(root: Path) -> Path:
    """The shipped costs file of the repository at ``root``."""
    return root / "mechbook" / COSTS_FILE


def local_costs_path(root: Path) -> Path:
    """This machine's measured costs, rewritten by every run (never committed)."""
    return root / "_build" / "costs.json"


def _read(path: Path) -> dict[str, dict[str, float]]:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _times(path: Path) -> dict[str, dict[str, float]]:
    """The ``{profile: {stem: seconds}}`` part of a costs file (the machine it names left out)."""
    return {
        profile: {stem: float(t) for stem, t in measured.items() if isinstance(t, (int, float))}
        for profile, measured in _read(path).items()
        if profile != REFERENCE_KEY and isinstance(measured, dict)
    }


KINDS = ("cold", "warm")
"""The two kinds of a local time: the chapter computed something, or read everything from cache."""


def _local(root: Path, kind: str) -> dict[str, dict[str, float]]:
    """This machine's ``{profile: {stem: seconds}}`` of one of :data:`KINDS`."""
    part = _read(local_costs_path(root)).get(kind)
    if not isinstance(part, dict):
        return {}
    return {
        profile: {stem: float(t) for stem, t in measured.items() if isinstance(t, (int, float))}
        for profile, measured in part.items()
        if isinstance(measured, dict)
    }


def load_costs(root: Path) -> dict[str, dict[str, float]]:
    """``{profile: {notebook stem: seconds}}`` of a cold run: this machine's warm time of a chapter
    known by no other (one that computes nothing is never cold), overridden by the shipped times,
    overridden by this machine's cold ones; empty when neither file is there or readable."""
    table = _local(root, "warm")
    for source in (_times(costs_path(root)), _local(root, "cold")):
        for profile, measured in source.items():
            table.setdefault(profile, {}).update(measured)
    return table


def warm_costs(root: Path, profile: str) -> dict[str, float]:
    """``{stem: seconds}``: this machine's times of chapters that read everything from the model cache."""
    return _local(root, "warm").get(profile, {})


def reference(root: Path) -> dict[str, Any] | None:
    """The machine that measured the shipped times: ``{"cpu": "...", "steps_per_s": figure, ...}``
    (:mod:`mechbook.book.calibrate`); None when the shipped file names none or no usable figure."""
    found = _read(costs_path(root)).get(REFERENCE_KEY)
    if not isinstance(found, dict):
        return None
    rate = found.get("steps_per_s")
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
        return None
    return found


def scaled_costs(root: Path, profile: str, scale: float) -> tuple[dict[str, float], set[str]]:
    """``({stem: seconds}, stems extrapolated)`` of a cold run in ``profile``: this machine's own
    cold time of a chapter where it has one, else the shipped time times ``scale`` (how many times
    slower this machine is than the one that measured them)."""
    shipped = _times(costs_path(root)).get(profile, {})
    local = _local(root, "cold").get(profile, {})
    table = {stem: seconds * scale for stem, seconds in shipped.items() if stem not in local}
    extrapolated = set(table)
    table.update(local)
    for stem, seconds in warm_costs(root, profile).items():
        table.setdefault(stem, seconds)  # a chapter never measured cold: its warm time is all we know
    return table, extrapolated


@contextmanager
def _locked(lock: Path) -> Iterator[None]:
    """Hold an exclusive lock on the file ``lock`` (where the platform has ``fcntl``)."""
    with open(lock, "a", encoding="utf-8") as handle:
        try:
            import fcntl
        except ImportError:
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def save_costs(root: Path, profile: str, measured: dict[str, float], cold: bool = True) -> None:
    """Merge ``{stem: seconds}`` measured in ``profile`` into this machine's costs file, as cold
    times (the chapters computed something) or warm ones (atomically, and under a lock, since the
    book's parts run side by side; a file that cannot be written is skipped with a note, the
    book is not stopped for it)."""
    if not measured:
        return
    path = local_costs_path(root)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path.with_name(f".{path.name}.lock")):
            table = {kind: part for kind, part in _read(path).items() if kind in KINDS and isinstance(part, dict)}
            table.setdefault("cold" if cold else "warm", {}).setdefault(profile, {}).update(
                {k: round(v, 1) for k, v in measured.items()}
            )
            tmp.write_text(json.dumps(table, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        print(f"note: could not record the chapters' costs in {path} ({exc})")
