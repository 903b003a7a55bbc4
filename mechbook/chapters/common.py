"""Helpers every chapter module may use: recording a chapter's headline numbers in one call, showing
a numbered figure, and the seeds of chapter 8's stack that bound (chapters 9 and 10 read those)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import pandas as pd

T = TypeVar("T")


def record_all(numbers: Mapping[str, Any]) -> dict[str, Any]:
    """``mechbook.record`` every ``name: value`` of ``numbers`` (hidden outputs the tests and
    ``python -m mechbook check`` read back); returns the recorded values."""
    from mechbook import record

    return {name: record(name, value) for name, value in numbers.items()}


def figure(name: str, chart: Any) -> None:
    """Show ``chart`` as the numbered figure ``name`` of a chapter. In the static build
    (``MECHBOOK_STATIC=1``) it is glued without display, for the Markdown cell's
    ``{glue:figure} name`` directive that numbers and captions it (the site's recipe in
    DEVELOPING.md); in a live kernel, where that directive does not render, it is displayed here."""
    from mechbook.viz import static_mode

    if static_mode():
        from myst_nb import glue

        glue(name, chart, display=False)
    else:
        from IPython.display import display

        display(chart)


def bound_seeds(summary: pd.DataFrame) -> list[int]:
    """The seeds of a seed summary (:func:`~mechbook.assign_add.seeds.seed_summary`) whose binding
    jump chapter 8's phase-2 rule found, in the summary's order."""
    return [int(s) for s in summary.loc[summary["phase2"].notna(), "seed"]]


def not_bound(unbound: Sequence[int], when: str) -> str:
    """The sentence chapters 9 and 10 name the seeds they leave out with: "Seed 3 had not bound
    {when}" or "Seeds 0 and 3 had not bound {when}" (empty when none)."""
    if not unbound:
        return ""
    names = [str(s) for s in unbound]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return f"Seed{'s' if len(names) > 1 else ''} {listed} had not bound {when}"


def of_bound_seeds(readings: Mapping[int, T], summary: pd.DataFrame) -> dict[int, T]:
    """``readings`` (by seed) of the seeds that bound (:func:`bound_seeds`). Chapters 9 and 10 judge
    their claims on these alone: the paper's circuit and its gradient argument describe a model that
    binds, and a seed that has not bound by its last step has no binding circuit, nor a checkpoint
    before its jump, to read (chapter 8 counts it against its phase claims instead)."""
    bound = set(bound_seeds(summary))
    return {s: r for s, r in readings.items() if s in bound}
