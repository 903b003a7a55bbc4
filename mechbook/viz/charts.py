"""Chart builders shared by the chapters (attention patterns, signed blocks, highlighted lines,
curves with controls). Each returns an Altair chart that fits the text column (~680 px): single
views take the container's width (``width="container"``), legends sit below the plot, and
several panels wrap into ``columns`` columns of ``panel`` px each.

Used by chapters 6 and 8-11 (attention patterns in 8 and 9, variable blocks in 9 and 10, training
curves in 8 and 11, sweep curves in 11, similarity curves in 6).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from mechbook.viz.explorer import control_binding, control_filter, control_values

Width = int | str
ATTENTION_SCHEME = "blues"
SIGNED_SCHEME = "redblue"
DIM_OPACITY = 0.15
PANEL = 260  # px: the side of one panel when panels wrap two to a row inside the column


def _frame_and_base(data: pd.DataFrame | alt.Chart) -> tuple[pd.DataFrame, alt.Chart]:
    """The data frame and the base chart of ``data`` (a frame, or a chart built on one)."""
    if isinstance(data, alt.Chart):
        if not isinstance(data.data, pd.DataFrame):
            raise TypeError("a base chart passed to a mechbook.viz builder must hold a pandas DataFrame")
        return data.data, data
    if isinstance(data, pd.DataFrame):
        return data, alt.Chart(data)
    raise TypeError(f"expected a pandas DataFrame or an alt.Chart of one, got {type(data).__name__}")


def _require(frame: pd.DataFrame, *columns: str | None) -> None:
    missing = [c for c in columns if c is not None and c not in frame.columns]
    if missing:
        raise ValueError(f"the data has no column(s) {missing}; it has {list(frame.columns)}")


def _first_seen(values: pd.Series) -> list[Any]:
    return list(dict.fromkeys(values.tolist()))


def _sized(chart: alt.TopLevelMixin, width: Width, height: int) -> alt.TopLevelMixin:
    return chart.properties(width=width, height=height)


def _wrap(inner: alt.TopLevelMixin, field: str, columns: int, sort: Sequence[Any] | None = None) -> alt.FacetChart:
    return inner.facet(facet=alt.Facet(f"{field}:N", title=None, sort=list(sort) if sort else None), columns=columns)


def _titled(chart: alt.TopLevelMixin, title: str | Sequence[str] | None) -> alt.TopLevelMixin:
    if title is None:
        return chart
    return chart.properties(title=alt.TitleParams(list(title) if not isinstance(title, str) else title, anchor="start"))


def attention_heatmap(
    data: pd.DataFrame | alt.Chart,
    *,
    query: str = "query_token",
    key: str = "key_token",
    weight: str = "weight",
    order: Sequence[str] | None = None,
    highlight: str | None = None,
    highlight_title: str = "circuit role",
    facet: str | None = None,
    columns: int = 2,
    panel: int = PANEL,
    width: Width = "container",
    height: int = 300,
    title: str | Sequence[str] | None = None,
    tooltip: Sequence[Any] = (),
) -> alt.TopLevelMixin:
    """Attention pattern: one cell per (query, key) position, coloured by the attention ``weight``
    in [0, 1] (blues), with queries down and keys across, both labelled by their tokens (``order``:
    the token labels in position order; default their first appearance in the data).

    ``highlight``: a column whose non-empty values outline cells (e.g. the circuit's roles), with a
    legend. ``facet``: a column (e.g. the layer) giving one panel each, ``columns`` to a row,
    ``panel`` px square. ``data`` may be a base chart of a frame that already carries filters
    or bound parameters (chapter 8's checkpoint slider)."""
    frame, base = _frame_and_base(data)
    _require(frame, query, key, weight, highlight, facet)
    labels = list(order) if order is not None else _first_seen(frame[query])
    axes = dict(
        x=alt.X(f"{key}:O", sort=labels, title="key (position, token)"),
        y=alt.Y(f"{query}:O", sort=labels, title="query (position, token)"),
    )
    cells = base.mark_rect().encode(
        **axes,
        color=alt.Color(f"{weight}:Q", title="attention", scale=alt.Scale(domain=[0, 1], scheme=ATTENTION_SCHEME)),
        tooltip=[
            alt.Tooltip(f"{query}:N", title="query"),
            alt.Tooltip(f"{key}:N", title="key"),
            alt.Tooltip(f"{weight}:Q", title="attention", format=".3f"),
            *tooltip,
        ],
    )
    layers = [cells]
    if highlight is not None:
        layers.append(
            base.transform_filter(f"isValid(datum[{highlight!r}]) && datum[{highlight!r}] != ''")
            .mark_rect(fill=None, strokeWidth=2.5)
            .encode(**axes, stroke=alt.Stroke(f"{highlight}:N", title=highlight_title, scale=alt.Scale(scheme="set1")))
        )
    chart = alt.layer(*layers)
    if facet is None:
        return _titled(_sized(chart, width, height), title)
    return _titled(_wrap(_sized(chart, panel, panel), facet, columns, _first_seen(frame[facet])), title)


def signed_heatmap(
    blocks: np.ndarray | Mapping[str, np.ndarray],
    *,
    rows: Sequence[Any] | None = None,
    cols: Sequence[Any] | None = None,
    row_title: str = "query",
    col_title: str = "key",
    value_title: str = "score",
    normalise: bool = False,
    columns: int = 2,
    panel: int = PANEL,
    width: Width = "container",
    height: int = 300,
    title: str | Sequence[str] | None = None,
) -> alt.TopLevelMixin:
    """Signed matrix as a heatmap on a diverging scale centred at 0 (blue negative, white 0, red
    positive; domain [-m, m] with m the largest absolute entry shown, so equal magnitudes get equal
    colours), e.g. the 12 x 12 variable blocks U QK₂ Uᵀ. NaN entries are left blank (a masked
    triangle).

    ``blocks``: one matrix, or named matrices drawn as wrapped panels (``columns`` to a row,
    ``panel`` px square). ``normalise``: divide each block by its own largest absolute entry (the
    tooltip keeps the raw value). ``rows``/``cols``: the labels of the matrix rows and columns
    (default 0, 1, ...)."""
    named = {"": blocks} if isinstance(blocks, np.ndarray) or not isinstance(blocks, Mapping) else dict(blocks)
    if not named:
        raise ValueError("signed_heatmap needs at least one matrix")
    frames = []
    for name, block in named.items():
        matrix = np.asarray(block, dtype=float)
        if matrix.ndim != 2:
            raise ValueError(f"block {name!r} has shape {matrix.shape}; a heatmap needs a 2-d matrix")
        r = list(rows) if rows is not None else list(range(matrix.shape[0]))
        c = list(cols) if cols is not None else list(range(matrix.shape[1]))
        if (len(r), len(c)) != matrix.shape:
            raise ValueError(f"block {name!r} is {matrix.shape} but {len(r)} row and {len(c)} column labels were given")
        peak = np.nanmax(np.abs(matrix)) if np.isfinite(matrix).any() else 0.0
        scaled = matrix / peak if normalise and peak > 0 else matrix
        i, j = np.nonzero(np.isfinite(matrix))
        frames.append(
            pd.DataFrame(
                {
                    "panel": name,
                    "row": [r[k] for k in i],
                    "col": [c[k] for k in j],
                    "value": scaled[i, j],
                    "raw": matrix[i, j],
                }
            )
        )
    frame = pd.concat(frames, ignore_index=True)
    m = float(frame["value"].abs().max()) if len(frame) else 1.0
    m = m if m > 0 else 1.0
    row_order = list(rows) if rows is not None else sorted(frame["row"].unique().tolist())
    col_order = list(cols) if cols is not None else sorted(frame["col"].unique().tolist())
    shown_title = f"{value_title} / max |entry|" if normalise else value_title
    chart = (
        alt.Chart(frame)
        .mark_rect()
        .encode(
            x=alt.X("col:O", sort=col_order, title=col_title),
            y=alt.Y("row:O", sort=row_order, title=row_title),
            color=alt.Color(
                "value:Q",
                title=shown_title,
                scale=alt.Scale(scheme=SIGNED_SCHEME, reverse=True, domain=[-m, m], domainMid=0),
            ),
            tooltip=[
                alt.Tooltip("row:O", title=row_title),
                alt.Tooltip("col:O", title=col_title),
                alt.Tooltip("raw:Q", title=value_title, format=".3g"),
            ],
        )
    )
    if len(named) == 1:
        return _titled(_sized(chart, width, height), title)
    return _titled(_wrap(_sized(chart, panel, panel), "panel", columns, list(named)), title)


def _param_name(prefix: str, field: str) -> str:
    return prefix + "".join(ch if ch.isalnum() else "_" for ch in field)


def highlight_lines(
    data: pd.DataFrame | alt.Chart,
    *,
    x: str,
    y: str,
    series: str,
    x_title: str,
    y_title: str,
    series_title: str | None = None,
    title: str | Sequence[str] | None = None,
    stroke_dash: str | None = None,
    dash_title: str | None = None,
    detail: str | None = None,
    x_scale: alt.Scale | None = None,
    y_domain: Sequence[float] | None = None,
    point: bool = False,
    facet: str | None = None,
    columns: int = 2,
    panel: int = PANEL,
    width: Width = "container",
    height: int = 320,
    keyboard: bool = True,
    tooltip: Sequence[Any] = (),
    colors: Mapping[Any, str] | None = None,
) -> alt.TopLevelMixin:
    """Lines of ``y`` against ``x``, one colour per ``series``. Clicking a legend entry keeps that
    series opaque and dims the others (shift-click adds more; clicking the background clears);
    with ``keyboard`` a "highlight" dropdown below the chart does the same from the keyboard.

    ``stroke_dash``: a second categorical column drawn as dash patterns; ``detail``: a column
    that splits lines without a legend; ``facet``: one panel per value, ``columns`` to a row;
    ``colors``: a fixed colour per series value. ``data`` may be a base chart of a frame that
    carries filters or bound parameters (see :func:`curves_with_controls`)."""
    frame, base = _frame_and_base(data)
    _require(frame, x, y, series, stroke_dash, detail, facet)
    values = _first_seen(frame[series])
    pick = alt.selection_point(name=_param_name("pick_", series), fields=[series], bind="legend")
    params: list[Any] = [pick]
    store = f"data('{pick.name}_store')"
    test = f"!length({store}) || vlSelectionTest('{pick.name}_store', datum)"
    if keyboard:
        focus = alt.param(
            name=_param_name("focus_", series),
            value="",
            bind=alt.binding_select(
                options=["", *[str(v) for v in values]], labels=["all", *[str(v) for v in values]], name="highlight "
            ),
        )
        params.append(focus)
        test = f"{focus.name} == '' ? ({test}) : toString(datum[{series!r}]) == {focus.name}"
    color_scale = alt.Scale(domain=list(colors), range=list(colors.values())) if colors else alt.Undefined
    encoding: dict[str, Any] = dict(
        x=alt.X(f"{x}:Q", title=x_title, scale=x_scale if x_scale is not None else alt.Undefined),
        y=alt.Y(
            f"{y}:Q", title=y_title, scale=alt.Scale(domain=list(y_domain)) if y_domain is not None else alt.Undefined
        ),
        color=alt.Color(
            f"{series}:N", title=f"{series_title or series} (click to highlight)", sort=values, scale=color_scale
        ),
        opacity=alt.condition(test, alt.value(1.0), alt.value(DIM_OPACITY)),
        tooltip=[f"{series}:N", alt.Tooltip(f"{x}:Q"), alt.Tooltip(f"{y}:Q", format=".3f"), *tooltip],
    )
    if stroke_dash is not None:
        encoding["strokeDash"] = alt.StrokeDash(f"{stroke_dash}:N", title=dash_title or stroke_dash)
    if detail is not None:
        encoding["detail"] = f"{detail}:N"
    mark = base.mark_line(strokeWidth=2, point=alt.OverlayMarkDef(size=20) if point else False)
    chart = mark.encode(**encoding).add_params(*params)
    if facet is None:
        return _titled(_sized(chart, width, height), title)
    return _titled(_wrap(_sized(chart, panel, int(panel * 0.75)), facet, columns, _first_seen(frame[facet])), title)


def curves_with_controls(
    data: pd.DataFrame,
    *,
    controls: Sequence[str],
    initial: Mapping[str, Any] | None = None,
    **lines: Any,
) -> alt.TopLevelMixin:
    """:func:`highlight_lines` of the rows picked by ``controls``: each named column gets a slider
    (evenly spaced numbers) or a dropdown (strings, uneven numbers) over its values, and only the
    rows with the chosen values are drawn (e.g. one learning rate, one layer). ``initial``: a
    starting value per control (default its first value in the data). Works without a kernel."""
    if not controls:
        raise ValueError("curves_with_controls needs at least one control column, e.g. controls=['lr']")
    _require(data, *controls)
    initial = dict(initial or {})
    unknown = set(initial) - set(controls)
    if unknown:
        raise ValueError(f"initial values given for {sorted(unknown)}, which are not controls {list(controls)}")
    base = alt.Chart(data)
    params = []
    for name in controls:
        if not str(name).isidentifier():
            raise ValueError(f"control column {name!r} must be a Python identifier (it names a chart parameter)")
        values = control_values(name, sorted(data[name].unique().tolist()))
        start = initial.get(name, _first_seen(data[name])[0])
        if start not in values:
            raise ValueError(f"initial value {start!r} of {name!r} is not among its values {values}")
        params.append(alt.param(name=name, value=start, bind=control_binding(name, values)))
        base = base.transform_filter(control_filter(name, values))
    return highlight_lines(base, **lines).add_params(*params)


def step_marks(marks: pd.DataFrame) -> list[alt.Chart]:
    """Vertical dashed rules at named steps (``marks``: columns ``phase`` and ``step``, one row a
    mark, e.g. the detected phases or the binding jump) with staggered labels at the top; none when
    ``marks`` is empty (an empty frame has no type for Altair to infer)."""
    if marks.empty:
        return []
    _require(marks, "phase", "step")
    rule = alt.Chart(marks).mark_rule(color="#555", strokeDash=[3, 3]).encode(x="step:Q", tooltip=["phase:N", "step:Q"])
    staggered = marks.assign(row=8 + 16 * np.arange(len(marks)))
    label = (
        alt.Chart(staggered)
        .mark_text(align="left", dx=4, fontSize=12, color="#333")
        .encode(x="step:Q", y=alt.Y("row:Q", scale=None, axis=None), text="phase:N")
    )
    return [rule, label]


def level_rules(levels: pd.DataFrame) -> list[alt.Chart]:
    """Horizontal dotted rules at reference levels (``levels``: columns ``baseline``, ``level`` and
    ``colour``, e.g. chance and a control), each labelled at the right edge; none when empty."""
    if levels.empty:
        return []
    _require(levels, "baseline", "level", "colour")
    base = alt.Chart(levels).encode(
        y=alt.Y("level:Q"),
        color=alt.Color("colour:N", scale=None),
        tooltip=["baseline:N", alt.Tooltip("level:Q", format=".3f")],
    )
    rule = base.mark_rule(strokeDash=[1, 3], strokeWidth=1.5)
    text = base.mark_text(align="right", baseline="bottom", dy=-2, fontSize=11).encode(
        x=alt.value("width"), text="baseline:N"
    )
    return [rule, text]


def training_curves(
    lines: alt.TopLevelMixin,
    *,
    title: str | Sequence[str],
    marks: pd.DataFrame | None = None,
    levels: pd.DataFrame | None = None,
) -> alt.LayerChart:
    """Training curves (a :func:`highlight_lines` chart) under a ``title`` that states the finding,
    with named steps marked (:func:`step_marks`: the phases, the binding jump) and reference
    levels drawn (:func:`level_rules`: chance, controls). The one curves chart of chapters 6, 8, 10
    and 11."""
    empty = pd.DataFrame()
    layers = [lines, *level_rules(empty if levels is None else levels), *step_marks(empty if marks is None else marks)]
    return _titled(alt.layer(*layers), title)
