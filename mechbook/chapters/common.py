"""Helpers every chapter module may use: recording a chapter's headline numbers in one call, showing
a numbered figure, and the sentence naming the seeds of chapter 8's stack that had not bound
(chapters 9 and 10)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


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


def not_bound(unbound: Sequence[int], when: str) -> str:
    """The sentence chapters 9 and 10 name the seeds they leave out with: "Seed 3 had not bound
    {when}" or "Seeds 0 and 3 had not bound {when}" (empty when none)."""
    if not unbound:
        return ""
    names = [str(s) for s in unbound]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return f"Seed{'s' if len(names) > 1 else ''} {listed} had not bound {when}"
