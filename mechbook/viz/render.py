"""The book's Altair theme and its renderer (enabled by ``import mechbook.viz``).

In the static build (``MECHBOOK_STATIC=1``, set by the executor) a chart becomes ``text/html``:
``<div class="mechbook-chart">`` holding an inline SVG (vl-convert, so the executed notebook shows
the chart without JavaScript) and the spec in a ``<script type="application/json">``. The site
(:mod:`mechbook.site`) moves the SVG out of the page into a ``<noscript>`` image and its loader
draws a live ``vegaEmbed`` view, so selections and ``alt.param`` controls work without a kernel.
In a live kernel the bundle is the Vega-Lite JSON (JupyterLab draws it interactively) plus the SVG.

Before either, :func:`fit_spec` makes every chart fit the text column (~680 px): single and
layered views take the width of their container, and the chart's title becomes its
``description``, which Vega uses as the chart's ``aria-label``.
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any

import altair as alt

NAME = "mechbook"
VL_VERSION = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
# JupyterLab 4 renders Vega-Lite under this mime type (nbformat wants a "+json" name for a JSON object).
LAB_MIME_TYPE = "application/vnd.vegalite.v5+json"
COLUMN_WIDTH = 680  # px: the text column of the site at a 1280 px screen
FIXED_WIDTH_LIMIT = 320  # px: a single view fixed wider than this follows the container instead
SVG_WIDTH = 600  # px: the plot width of the SVG drawn for a container-width chart
COMPOSITE = ("facet", "hconcat", "vconcat", "concat", "repeat")
MAX_ROWS = 100_000
"""The most rows one chart's data may hold, for every chart of the book (``import mechbook.viz``
sets it in place of Altair's default of 5,000). A page embeds each chart's data as JSON, about
50-100 bytes a row, so this caps one chart at a few MB of page. Where phases fall moves how many
checkpoints a window holds, so the limit sits far above the largest chart a profile can draw
(tests/unit/viz/test_chart_sizes.py builds each growing chart at its profile's largest size)."""


def static_mode() -> bool:
    """True in the static build (``MECHBOOK_STATIC=1``): explorers render without a kernel."""
    return os.environ.get("MECHBOOK_STATIC", "") not in ("", "0")


def theme() -> alt.theme.ThemeConfig:
    """The book's Altair theme: 13-16 px text, a 560 x 320 px plot area, left-aligned titles, and
    legends below the plot, stacked, each in at most two columns (so legends never widen a chart
    past the text column); wrapped facets and concatenations default to two columns."""
    return alt.theme.ThemeConfig(
        {
            "config": {
                "view": {"continuousWidth": 560, "continuousHeight": 320, "stroke": None},
                "font": "Helvetica, Arial, sans-serif",
                "axis": {"labelFontSize": 13, "titleFontSize": 14, "titlePadding": 8, "gridOpacity": 0.5},
                "legend": {
                    "labelFontSize": 13,
                    "titleFontSize": 13,
                    "orient": "bottom",
                    "direction": "horizontal",
                    "columns": 2,
                    "labelLimit": 260,
                    "titleLimit": 600,
                    "layout": {"bottom": {"anchor": "start", "direction": "vertical", "margin": 6}},
                },
                "header": {"labelFontSize": 13, "titleFontSize": 14},
                "title": {
                    "fontSize": 16,
                    "subtitleFontSize": 13,
                    "anchor": "start",
                    "offset": 10,
                    "limit": COLUMN_WIDTH,
                },
                "facet": {"columns": 2},
                "concat": {"columns": 2},
            }
        }
    )


def title_text(spec: dict[str, Any]) -> str:
    """The chart's title as one line of text ('' when it has none): a string, the lines of a list
    joined by spaces, or the ``text`` of a title object, with its subtitle. A chart with no
    title of its own takes its first layer's, or its panels' titles joined by "; "."""

    def flat(value: Any) -> str:
        if isinstance(value, (list, tuple)):
            return " ".join(str(v) for v in value)
        return "" if value is None else str(value)

    title = spec.get("title")
    if title is None and spec.get("layer"):
        title = spec["layer"][0].get("title")
    if title is None:
        parts = [title_text(child) for key in ("hconcat", "vconcat", "concat") for child in spec.get(key, [])]
        parts += [title_text(spec[key]) for key in ("spec",) if isinstance(spec.get(key), dict)]
        return "; ".join(p for p in parts if p)
    if isinstance(title, dict):
        return " ".join(t for t in (flat(title.get("text")), flat(title.get("subtitle"))) if t)
    return flat(title)


def is_single_view(spec: dict[str, Any]) -> bool:
    """True for a unit or layered view (what Vega-Lite can size to its container)."""
    return not any(key in spec for key in COMPOSITE) and ("mark" in spec or "layer" in spec)


def fit_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``spec`` ready for the page: a single or layered view with no width, or one fixed
    wider than ``FIXED_WIDTH_LIMIT`` px, gets ``width: "container"``; a chart with a title and no
    ``description`` gets its title as description (its aria-label). Composite charts keep their
    sizes (their builders size the panels; the site scales an overwide one down to the column)."""
    out = copy.deepcopy(spec)
    width = out.get("width")
    if is_single_view(out) and (width is None or (isinstance(width, (int, float)) and width > FIXED_WIDTH_LIMIT)):
        out["width"] = "container"
    text = title_text(out)
    if text and not out.get("description"):
        out["description"] = text
    return out


def svg_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with a container width replaced by ``SVG_WIDTH`` px (an SVG has no container)."""
    if spec.get("width") != "container":
        return spec
    return {**spec, "width": SVG_WIDTH}


def chart_svg(spec: dict[str, Any]) -> str:
    """The chart drawn as SVG by vl-convert (no browser needed)."""
    import vl_convert

    return vl_convert.vegalite_to_svg(svg_spec(spec), vl_version=VL_VERSION)


def chart_html(spec: dict[str, Any]) -> str:
    """The static-site HTML of a Vega-Lite spec: an SVG fallback plus the spec for the loader."""
    svg = chart_svg(spec)
    payload = json.dumps(spec, separators=(",", ":")).replace("</", "<\\/")
    return (
        f'<div class="{NAME}-chart"><div class="{NAME}-fallback">{svg}</div>'
        f'<script type="application/json" class="{NAME}-spec">{payload}</script></div>'
    )


def render(spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    """Altair renderer. Static build: ``text/html`` from :func:`chart_html` of :func:`fit_spec`
    (the site's loader makes it live). Live kernel: the Vega-Lite JSON, which JupyterLab renders
    interactively with its bundled Vega (no network), plus the SVG for front ends that cannot."""
    fitted = fit_spec(spec)
    if static_mode():
        return {"text/html": chart_html(fitted)}
    live = svg_spec(fitted) if fitted.get("width") == "container" else fitted
    return {LAB_MIME_TYPE: live, "image/svg+xml": chart_svg(fitted)}
