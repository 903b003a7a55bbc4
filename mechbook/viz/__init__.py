"""Charts for every chapter: the book's Altair theme and offline renderer (:mod:`.render`),
``explore`` (:mod:`.explorer`), shared chart builders (:mod:`.charts`) and notation and escaping
helpers (:mod:`.fmt`). ``import mechbook.viz`` enables the theme and the renderer."""

from __future__ import annotations

import altair as alt

from mechbook.viz.charts import (
    attention_heatmap,
    curves_with_controls,
    highlight_lines,
    level_rules,
    signed_heatmap,
    step_marks,
    training_curves,
)
from mechbook.viz.explorer import MAX_GRID, explore, explore_grid, live_explorer, static_explorer
from mechbook.viz.fmt import NOTATION, escape_html, escape_markdown, label
from mechbook.viz.render import (
    LAB_MIME_TYPE,
    MAX_ROWS,
    NAME,
    VL_VERSION,
    chart_html,
    chart_svg,
    fit_spec,
    render,
    static_mode,
    theme,
)

alt.theme.register(NAME, enable=True)(theme)
alt.renderers.register(NAME, render)
alt.renderers.enable(NAME)
alt.data_transformers.enable("default", max_rows=MAX_ROWS)

__all__ = [
    "LAB_MIME_TYPE",
    "MAX_GRID",
    "MAX_ROWS",
    "NAME",
    "NOTATION",
    "VL_VERSION",
    "attention_heatmap",
    "chart_html",
    "chart_svg",
    "curves_with_controls",
    "escape_html",
    "escape_markdown",
    "explore",
    "explore_grid",
    "fit_spec",
    "highlight_lines",
    "label",
    "level_rules",
    "live_explorer",
    "render",
    "signed_heatmap",
    "static_explorer",
    "static_mode",
    "step_marks",
    "theme",
    "training_curves",
]
