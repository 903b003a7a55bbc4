"""Helpers every chapter module may use: recording a chapter's headline numbers in one call."""

from __future__ import annotations

from collections.abc import Mapping
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
