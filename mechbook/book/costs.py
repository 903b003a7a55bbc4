"""Measured seconds per chapter and profile (``mechbook/book/costs.json``), for the ETA that
``execute`` prints before the work starts. Every run that executes a chapter to the end
rewrites its entry, so the numbers are the last measured ones on the machine that built the
book; a chapter with no entry is "unknown". The file is left out of the executor's cache key.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

#: The costs file, relative to the package folder ``mechbook/``.
COSTS_FILE = "book/costs.json"


def costs_path(root: Path) -> Path:
    """The costs file of the repository at ``root``."""
    return root / "mechbook" / COSTS_FILE


def load_costs(root: Path) -> dict[str, dict[str, float]]:
    """``{profile: {notebook stem: seconds}}``; empty when the file is missing or unreadable."""
    try:
        loaded = json.loads(costs_path(root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def save_costs(root: Path, profile: str, measured: dict[str, float]) -> None:
    """Merge ``{stem: seconds}`` measured in ``profile`` into the costs file (atomically; a file
    that cannot be written is skipped with a note, the book is not stopped for it)."""
    if not measured:
        return
    table = load_costs(root)
    table.setdefault(profile, {}).update({k: round(v, 1) for k, v in measured.items()})
    path = costs_path(root)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
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
