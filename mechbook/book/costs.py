"""Measured seconds per chapter and profile, for the ETA that ``execute`` prints before the work
starts. Two files: ``mechbook/book/costs.json`` ships the times measured when the book was last
timed (committed on purpose, left out of the executor's cache key), and ``_build/costs.json``
holds this machine's own: every run that executes a chapter to the end rewrites its entry there,
and a local entry wins over the shipped one. A chapter with neither is "unknown".
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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


def load_costs(root: Path) -> dict[str, dict[str, float]]:
    """``{profile: {notebook stem: seconds}}``: the shipped times, overridden by this machine's;
    empty when neither file is there or readable."""
    table = _read(costs_path(root))
    for profile, measured in _read(local_costs_path(root)).items():
        if isinstance(measured, dict):
            table.setdefault(profile, {}).update(measured)
    return table


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


def save_costs(root: Path, profile: str, measured: dict[str, float]) -> None:
    """Merge ``{stem: seconds}`` measured in ``profile`` into this machine's costs file
    (atomically, and under a lock, since the book's parts run side by side; a file that cannot be
    written is skipped with a note, the book is not stopped for it)."""
    if not measured:
        return
    path = local_costs_path(root)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path.with_name(f".{path.name}.lock")):
            table = _read(path)
            table.setdefault(profile, {}).update({k: round(v, 1) for k, v in measured.items()})
            tmp.write_text(json.dumps(table, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        print(f"note: could not record the chapters' costs in {path} ({exc})")


def estimate(costs: dict[str, dict[str, float]], profile: str, stems: list[str]) -> tuple[float, list[str]]:
    """``(seconds, stems with no measured cost)`` for running ``stems`` in ``profile``."""
    known = costs.get(profile, {})
    total = sum(known[s] for s in stems if s in known)
    return total, [s for s in stems if s not in known]
