"""What each chapter page says it costs, under its profile line.

Used by :func:`mechbook.book.site.stage_site`: every staged chapter gets one Markdown cell after
the cell that shows its profile line (``mechbook.ran_with``): what the chapter trains in the
profile, how long it took on the machine that measured the shipped costs
(:mod:`mechbook.book.costs`), on what CPU, and which chapters open its runs. What a chapter
trains and whose runs it opens are data, in ``mechbook/book/pages.json`` beside the costs
(left out of the executor's cache key like them: they change the page, not a result). A page
that was never executed for the profile says so in the same cell.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat

from mechbook.book.costs import costs_path, reference
from mechbook.book.relay import format_seconds

#: The pages file, relative to the package folder ``mechbook/``.
PAGES_FILE = "book/pages.json"
#: The metadata mark of the cell this module adds, so staging twice replaces it.
NOTE_MARK = "cost-note"
#: What a notebook's profile-line cell calls.
PROFILE_LINE = "ran_with("


def pages_data(root: Path) -> dict[str, Any]:
    """``{"trains": {profile: {stem: text}}, "opens": {stem: [stems]}, "needs": {input: [stems]}}``
    from the pages file (``needs``: the chapters that read TinyStories and the released run, for
    :func:`mechbook.book.environment.check_inputs`); empty parts where it is missing or unreadable."""
    try:
        loaded = json.loads((root / "mechbook" / PAGES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        loaded = {}
    loaded = loaded if isinstance(loaded, dict) else {}
    return {part: loaded.get(part) or {} for part in ("trains", "opens", "needs")}


def chapter_name(stem: str) -> str:
    """``chapter 8`` for ``08_training_dynamics``; ``the introduction`` for ``intro``."""
    return f"chapter {int(stem[:2])}" if stem[:2].isdigit() else "the introduction"


def _joined(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def cost_note(root: Path, profile: str, stem: str, problem: str | None = None) -> str:
    """The Markdown under the profile line of chapter ``stem`` in ``profile``; ``problem`` (why
    the page shows no outputs, or its last run's failure) is added in bold."""
    data = pages_data(root)
    try:
        shipped = json.loads(costs_path(root).read_text(encoding="utf-8")).get(profile) or {}
    except (OSError, ValueError, AttributeError):
        shipped = {}
    machine = reference(root)
    parts = []
    trains = (data["trains"].get(profile) or {}).get(stem)
    if trains:
        parts.append(f"In the {profile} profile this page trains {trains}.")
    seconds = shipped.get(stem) if isinstance(shipped, dict) else None
    if isinstance(seconds, (int, float)) and machine is not None:
        when = f"; {machine['times']}" if machine.get("times") else ""
        parts.append(f"It took {format_seconds(seconds)} on the machine that timed the book ({machine['cpu']}{when}).")
    elif isinstance(seconds, (int, float)):
        parts.append(f"It took {format_seconds(seconds)} when the book was last timed.")
    else:
        parts.append(f"No time has been measured for it in the {profile} profile yet.")
    if profile == "cpu":
        openers = sorted(s for s, opened in data["opens"].items() if stem in opened)
        if openers:
            who = _joined([chapter_name(s) for s in openers])
            verb = (
                "open its runs: run alone, they train" if len(openers) > 1 else "opens its runs: run alone, it trains"
            )
            parts.append(f"{who[0].upper()}{who[1:]} {verb} them first.")
    if problem:
        parts.append(f"**{problem}**")
    return "**What this page costs.** " + " ".join(parts)


def add_cost_note(nb: nbformat.NotebookNode, note: str) -> nbformat.NotebookNode:
    """Put ``note`` in a Markdown cell after the first code cell that shows the profile line
    (after the first cell when none does), replacing a note added before; in place."""
    nb.cells = [c for c in nb.cells if c.get("metadata", {}).get("mechbook") != NOTE_MARK]
    at = next(
        (i + 1 for i, c in enumerate(nb.cells) if c.cell_type == "code" and PROFILE_LINE in c.source),
        min(1, len(nb.cells)),
    )
    nb.cells.insert(at, nbformat.v4.new_markdown_cell(note, metadata={"mechbook": NOTE_MARK}))
    return nb
