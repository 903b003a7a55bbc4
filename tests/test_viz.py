"""mechbook.viz: theme, renderer and explore (static grid chart and live widgets)."""

from __future__ import annotations

import json

import altair as alt
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mechbook.viz as viz


def _compute(k, kind):
    x = np.arange(4)
    return pd.DataFrame({"x": x, "y": x**k if kind == "pow" else x * k})


def _chart(base):
    return base.mark_line().encode(x="x:Q", y="y:Q")


def test_import_enables_theme_and_renderer():
    assert alt.theme.active == viz.NAME and alt.renderers.active == viz.NAME
    config = alt.Chart(pd.DataFrame({"a": [1]})).mark_point().encode(x="a:Q").to_dict()["config"]
    assert config["axis"]["labelFontSize"] >= 12 and config["view"]["continuousWidth"] == 560


def test_static_bundle_is_svg_fallback_plus_spec(monkeypatch):
    monkeypatch.setenv("MECHBOOK_STATIC", "1")
    chart = alt.Chart(pd.DataFrame({"a": [1, 2], "b": ["</script>", "x"]})).mark_point().encode(x="a:Q", tooltip="b:N")
    bundle = chart._repr_mimebundle_()
    bundle = bundle[0] if isinstance(bundle, tuple) else bundle
    assert list(bundle) == ["text/html"]
    html = bundle["text/html"]
    assert html.startswith('<div class="mechbook-chart"><div class="mechbook-fallback"><svg')
    payload = html.split('class="mechbook-spec">', 1)[1].rsplit("</script></div>", 1)[0]
    assert "</script>" not in payload, "a data value must not close the spec's script tag"
    assert json.loads(payload)["mark"]["type"] == "point"


def test_live_bundle_is_vegalite_json_plus_svg(monkeypatch):
    monkeypatch.delenv("MECHBOOK_STATIC", raising=False)
    bundle = alt.Chart(pd.DataFrame({"a": [1]})).mark_point().encode(x="a:Q")._repr_mimebundle_()
    bundle = bundle[0] if isinstance(bundle, tuple) else bundle
    assert isinstance(bundle[viz.LAB_MIME_TYPE], dict) and bundle["image/svg+xml"].startswith("<svg")


def test_static_explorer_binds_params_and_filters(monkeypatch):
    monkeypatch.setenv("MECHBOOK_STATIC", "1")
    out = viz.explore(_compute, _chart, {"k": [1, 2, 3], "kind": ["pow", "mul"]}, title="T")
    spec = out.to_dict()
    params = {p["name"]: p for p in spec["params"]}
    assert params["k"]["bind"] == {"input": "range", "min": 1, "max": 3, "step": 1, "name": "k "}
    assert params["kind"]["bind"]["input"] == "select" and params["kind"]["bind"]["options"] == ["pow", "mul"]
    filters = [t["filter"] for t in spec["transform"]]
    assert any("datum[\"kind\"] == kind" in f for f in filters) and any("datum[\"k\"]" in f for f in filters)
    rows = next(iter(spec["datasets"].values()))
    assert len(rows) == 3 * 2 * 4
    expected = {(k, kind, x): _compute(k, kind).y[x] for k in (1, 2, 3) for kind in ("pow", "mul") for x in range(4)}
    assert {(r["k"], r["kind"], r["x"]): r["y"] for r in rows} == expected
    assert spec["title"] == "T"


def test_uneven_numbers_get_a_dropdown_and_tolerant_match(monkeypatch):
    monkeypatch.setenv("MECHBOOK_STATIC", "1")
    spec = viz.explore(lambda lr: pd.DataFrame({"x": [lr]}), lambda b: b.mark_point().encode(x="x:Q"),
                       {"lr": [0.001, 0.01, 0.1]}).to_dict()
    assert spec["params"][0]["bind"]["input"] == "select"
    assert "abs(" in spec["transform"][0]["filter"]
    arr = viz.explore(lambda k: pd.DataFrame({"x": [k]}), lambda b: b.mark_point().encode(x="x:Q"),
                      {"k": np.arange(3)}).to_dict()
    assert arr["params"][0]["bind"]["max"] == 2


@given(st.lists(st.integers(-50, 50), min_size=1, max_size=6, unique=True), st.integers(1, 5))
@settings(max_examples=30, deadline=None)
def test_match_selects_exactly_one_value_even_with_float_noise(values, scale):
    vals = [v / scale for v in values]
    expr = viz._match("v", vals)
    if expr.startswith("abs("):
        tol = float(expr.rsplit("<", 1)[1])
        for target in vals:
            noisy = target + 1e-9
            assert [v for v in vals if abs(v - noisy) < tol] == [target]


def test_grid_limit_and_bad_controls(monkeypatch):
    monkeypatch.setenv("MECHBOOK_STATIC", "1")
    with pytest.raises(ValueError, match="combinations"):
        viz.explore(_compute, _chart, {"k": list(range(21)), "kind": [str(i) for i in range(10)]})
    for bad, msg in [({}, "at least one control"), ({"k": []}, "non-empty"), ({"k": [1, "a"]}, "only finite numbers"),
                     ({"k": [1, 1]}, "twice"), ({"not valid": [1]}, "identifier"), ({"k": "abc"}, "non-empty list")]:
        with pytest.raises(ValueError, match=msg):
            viz.explore(_compute, _chart, bad)
    with pytest.raises(TypeError, match="pandas DataFrame"):
        viz.explore(lambda k: [k], _chart, {"k": [1]})
    with pytest.raises(ValueError, match="named like controls"):
        viz.explore(lambda k: pd.DataFrame({"k": [k]}), _chart, {"k": [1]})


def test_live_explorer_recomputes_on_change(monkeypatch):
    monkeypatch.delenv("MECHBOOK_STATIC", raising=False)
    calls = []

    def compute(k, kind):
        calls.append((k, kind))
        return _compute(k, kind)

    box = viz.explore(compute, _chart, {"k": [1, 2, 3], "kind": ["pow", "mul"]}, title="T")
    slider, dropdown = box.children[1].children
    assert type(slider).__name__ == "SelectionSlider" and type(dropdown).__name__ == "Dropdown"
    slider.value = 3
    dropdown.value = "mul"
    assert calls == [(1, "pow"), (3, "pow"), (3, "mul")]
