"""``explore(compute, chart, controls)`` is the book's explorer (introduced in the introduction,
used by the chapters): ipywidgets in a live kernel, one Altair chart with bound parameters in the
static build (``MECHBOOK_STATIC=1``, set by the executor).
"""

from __future__ import annotations

import html
import itertools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from numbers import Real
from typing import Any

import altair as alt
import pandas as pd

from mechbook.viz.render import static_mode

MAX_GRID = 200


def control_values(name: str, values: Sequence[Any]) -> list[Any]:
    """Check one control's values: a non-empty list (or 1-d array) of all numbers or all strings."""
    if hasattr(values, "tolist") and getattr(values, "ndim", 0) == 1:  # a numpy array
        values = values.tolist()
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
        raise ValueError(f"control {name!r} needs a non-empty list of values, e.g. {name}=[1, 2, 4]")
    plain = [v.item() if hasattr(v, "item") else v for v in values]
    numbers = all(isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(v) for v in plain)
    strings = all(isinstance(v, str) for v in plain)
    if not (numbers or strings):
        raise ValueError(f"control {name!r} must list only finite numbers or only strings, got {plain!r}")
    if len(set(plain)) != len(plain):
        raise ValueError(f"control {name!r} lists a value twice: {plain!r}")
    return plain


def _evenly_spaced(values: list[float]) -> bool:
    if len(values) < 2:
        return True
    ordered = sorted(values)
    steps = [b - a for a, b in zip(ordered, ordered[1:])]
    return all(math.isclose(s, steps[0], rel_tol=1e-9, abs_tol=1e-12) for s in steps)


def control_binding(name: str, values: list[Any]) -> Any:
    """A slider (evenly spaced numbers), else a dropdown (strings, uneven numbers)."""
    if isinstance(values[0], str) or not _evenly_spaced(values):
        return alt.binding_select(options=values, name=f"{name} ")
    ordered = sorted(values)
    step = ordered[1] - ordered[0] if len(ordered) > 1 else 1
    return alt.binding_range(min=ordered[0], max=ordered[-1], step=step, name=f"{name} ")


def control_filter(name: str, values: list[Any]) -> str:
    """Vega expression keeping the rows of the current control value.

    Numbers match within half the smallest gap, so a slider value such as 0.30000000000000004
    still selects the row computed for 0.3.
    """
    if isinstance(values[0], str):
        return f"datum[{json.dumps(name)}] == {name}"
    ordered = sorted(values)
    gaps = [b - a for a, b in zip(ordered, ordered[1:])]
    tol = min(gaps) / 2 if gaps else 0.5
    return f"abs(datum[{json.dumps(name)}] - {name}) < {tol!r}"


def _checked_frame(frame: Any, names: list[str], values: dict[str, Any]) -> pd.DataFrame:
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"compute({values}) returned a {type(frame).__name__}; it must return a pandas DataFrame")
    clash = sorted(set(names) & set(frame.columns))
    if clash:
        raise ValueError(f"compute's DataFrame has column(s) {clash} named like controls; rename them")
    return frame


def explore_grid(compute: Callable[..., pd.DataFrame], controls: Mapping[str, list[Any]]) -> pd.DataFrame:
    """``compute(**values)`` for every combination of control values, concatenated, with one
    column per control holding its value (the data of the static explorer)."""
    names = list(controls)
    combos = list(itertools.product(*controls.values()))
    if len(combos) > MAX_GRID:
        raise ValueError(
            f"explore grid has {len(combos)} combinations (limit {MAX_GRID}); offer fewer values per control"
        )
    frames = []
    for combo in combos:
        values = dict(zip(names, combo))
        frames.append(_checked_frame(compute(**values), names, values).assign(**values))
    return pd.concat(frames, ignore_index=True)


def static_explorer(
    compute: Callable[..., pd.DataFrame],
    chart: Callable[[alt.Chart], alt.TopLevelMixin],
    controls: Mapping[str, list[Any]],
    title: str | None = None,
) -> alt.TopLevelMixin:
    """One Altair chart over the whole grid, with an ``alt.param`` per control bound to a slider
    or dropdown and a filter transform ``datum[control] == control`` on the shared base."""
    data = explore_grid(compute, controls)
    base = alt.Chart(data)
    params = []
    for name, values in controls.items():
        params.append(alt.param(name=name, value=values[0], bind=control_binding(name, values)))
        base = base.transform_filter(control_filter(name, values))
    out = chart(base).add_params(*params)
    return out.properties(title=title) if title else out


def live_explorer(
    compute: Callable[..., pd.DataFrame],
    chart: Callable[[alt.Chart], alt.TopLevelMixin],
    controls: Mapping[str, list[Any]],
    title: str | None = None,
):
    """An ipywidgets box: a selection slider per numeric control, a dropdown per string control;
    every change re-runs ``compute`` and redraws ``chart``."""
    import ipywidgets as widgets
    from IPython.display import display

    inputs = {
        name: (
            widgets.Dropdown(options=values, value=values[0], description=name)
            if isinstance(values[0], str)
            else widgets.SelectionSlider(options=values, value=values[0], description=name)
        )
        for name, values in controls.items()
    }
    out = widgets.Output()

    def redraw(_change: Any = None) -> None:
        values = {name: w.value for name, w in inputs.items()}
        frame = _checked_frame(compute(**values), list(inputs), values)
        with out:
            out.clear_output(wait=True)
            display(chart(alt.Chart(frame)))

    for w in inputs.values():
        w.observe(redraw, names="value")
    redraw()
    header = [widgets.HTML(f"<b>{html.escape(title)}</b>")] if title else []
    return widgets.VBox([*header, widgets.HBox(list(inputs.values())), out])


def explore(
    compute: Callable[..., pd.DataFrame],
    chart: Callable[[alt.Chart], alt.TopLevelMixin],
    controls: Mapping[str, list[Any]],
    title: str | None = None,
):
    """Let the reader vary ``controls`` and see ``chart`` of ``compute(**values)``.

    ``compute(**values) -> DataFrame`` (tidy); ``chart(base)`` adds marks and encodings to a base
    chart that already holds the data; ``controls`` maps a name to its allowed values (numbers: a
    slider, strings: a dropdown). Live Jupyter: ipywidgets. Static build (``MECHBOOK_STATIC=1``):
    compute runs over the whole grid (at most ``MAX_GRID`` combinations) and the result is one
    Altair chart with bound ``alt.param`` controls. First used in the introduction.
    """
    if not controls:
        raise ValueError("explore needs at least one control, e.g. controls={'k': [1, 2, 3]}")
    checked = {}
    for name, values in controls.items():
        if not str(name).isidentifier():
            raise ValueError(f"control name {name!r} must be a Python identifier (it is passed as compute(**values))")
        checked[name] = control_values(name, values)
    build = static_explorer if static_mode() else live_explorer
    return build(compute, chart, checked, title)
