"""mechbook.viz: theme, renderer and explore (static grid chart and live widgets), the shared chart
builders (drawn with vl-convert to check what the reader sees) and the escaping helpers."""

from __future__ import annotations

import json
import re

import altair as alt
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mechbook.viz as viz
from mechbook.viz.render import COLUMN_WIDTH, SVG_WIDTH, svg_spec


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
    assert any('datum["kind"] == kind' in f for f in filters) and any('datum["k"]' in f for f in filters)
    rows = next(iter(spec["datasets"].values()))
    assert len(rows) == 3 * 2 * 4
    expected = {(k, kind, x): _compute(k, kind).y[x] for k in (1, 2, 3) for kind in ("pow", "mul") for x in range(4)}
    assert {(r["k"], r["kind"], r["x"]): r["y"] for r in rows} == expected
    assert spec["title"] == "T"


def test_uneven_numbers_get_a_dropdown_and_tolerant_match(monkeypatch):
    monkeypatch.setenv("MECHBOOK_STATIC", "1")
    spec = viz.explore(
        lambda lr: pd.DataFrame({"x": [lr]}), lambda b: b.mark_point().encode(x="x:Q"), {"lr": [0.001, 0.01, 0.1]}
    ).to_dict()
    assert spec["params"][0]["bind"]["input"] == "select"
    assert "abs(" in spec["transform"][0]["filter"]
    arr = viz.explore(
        lambda k: pd.DataFrame({"x": [k]}), lambda b: b.mark_point().encode(x="x:Q"), {"k": np.arange(3)}
    ).to_dict()
    assert arr["params"][0]["bind"]["max"] == 2


@given(st.lists(st.integers(-50, 50), min_size=1, max_size=6, unique=True), st.integers(1, 5))
@settings(max_examples=30, deadline=None)
def test_match_selects_exactly_one_value_even_with_float_noise(values, scale):
    vals = [v / scale for v in values]
    expr = viz.explorer.control_filter("v", vals)
    if expr.startswith("abs("):
        tol = float(expr.rsplit("<", 1)[1])
        for target in vals:
            noisy = target + 1e-9
            assert [v for v in vals if abs(v - noisy) < tol] == [target]


def test_grid_limit_and_bad_controls(monkeypatch):
    monkeypatch.setenv("MECHBOOK_STATIC", "1")
    with pytest.raises(ValueError, match="combinations"):
        viz.explore(_compute, _chart, {"k": list(range(21)), "kind": [str(i) for i in range(10)]})
    for bad, msg in [
        ({}, "at least one control"),
        ({"k": []}, "non-empty"),
        ({"k": [1, "a"]}, "only finite numbers"),
        ({"k": [1, 1]}, "twice"),
        ({"not valid": [1]}, "identifier"),
        ({"k": "abc"}, "non-empty list"),
    ]:
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


# --- fitting charts to the text column --------------------------------------------------------------


def test_single_views_follow_the_container_and_composites_keep_their_panels():
    df = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    point = alt.Chart(df).mark_point().encode(x="a:Q")
    assert viz.fit_spec(point.to_dict())["width"] == "container"
    assert viz.fit_spec(point.properties(width=620).to_dict())["width"] == "container"
    assert viz.fit_spec(point.properties(width=200).to_dict())["width"] == 200
    assert viz.fit_spec((point + point).to_dict())["width"] == "container"
    facet = viz.fit_spec(point.properties(width=250).facet("b:N", columns=2).to_dict())
    assert "width" not in facet and facet["spec"]["width"] == 250


@given(st.one_of(st.text(min_size=1, max_size=30), st.lists(st.text(min_size=1, max_size=10), min_size=1, max_size=3)))
@settings(max_examples=30, deadline=None)
def test_the_title_becomes_the_description(title):
    spec = viz.fit_spec(alt.Chart(pd.DataFrame({"a": [1]})).mark_point().properties(title=title).to_dict())
    assert spec["description"] == (title if isinstance(title, str) else " ".join(title))


def test_description_from_title_object_layer_and_kept_when_given():
    base = alt.Chart(pd.DataFrame({"a": [1]})).mark_point()
    titled = base.properties(title=alt.TitleParams("Main", subtitle=["sub one", "two"]))
    assert viz.fit_spec(titled.to_dict())["description"] == "Main sub one two"
    assert viz.fit_spec((base.properties(title="Inner") + base).to_dict())["description"] == "Inner"
    assert viz.fit_spec(base.properties(title="T", description="mine").to_dict())["description"] == "mine"
    assert "description" not in viz.fit_spec(base.to_dict())
    panels = alt.hconcat(base.properties(title="Left"), base.properties(title=["Right", "side"]), base)
    assert viz.fit_spec(panels.to_dict())["description"] == "Left; Right side"


def test_theme_puts_legends_below_in_columns_and_wraps_facets():
    config = alt.Chart(pd.DataFrame({"a": [1]})).mark_point().to_dict()["config"]
    assert config["legend"]["orient"] == "bottom" and config["legend"]["columns"] == 2
    assert config["facet"]["columns"] == 2 and config["concat"]["columns"] == 2


def test_static_chart_is_fitted_and_its_fallback_has_a_width(monkeypatch):
    monkeypatch.setenv("MECHBOOK_STATIC", "1")
    bundle = alt.Chart(pd.DataFrame({"a": [1, 2]})).mark_point().encode(x="a:Q").properties(title="Title")
    html = bundle._repr_mimebundle_()
    html = (html[0] if isinstance(html, tuple) else html)["text/html"]
    spec = json.loads(html.split('class="mechbook-spec">', 1)[1].rsplit("</script></div>", 1)[0])
    assert spec["width"] == "container" and spec["description"] == "Title"
    svg_width = float(re.search(r'<svg[^>]* width="([\d.]+)"', html).group(1))
    assert SVG_WIDTH <= svg_width <= COLUMN_WIDTH


# --- shared chart builders ------------------------------------------------------------------------


def _svg(chart, **param_values) -> str:
    """The chart drawn by vl-convert, with the given parameters set to a value."""
    import vl_convert

    spec = svg_spec(viz.fit_spec(chart.to_dict()))
    for p in spec.get("params", []):
        if p["name"] in param_values:
            p["value"] = param_values[p["name"]]
    return vl_convert.vegalite_to_svg(spec, vl_version=viz.VL_VERSION)


def _svg_width(svg: str) -> float:
    return float(re.search(r'<svg[^>]* width="([\d.]+)"', svg).group(1))


def _pattern(layers=(1, 2), n=6):
    tokens = [f"{i} {c}" for i, c in enumerate("a=3;b?")][:n]
    rows = [
        dict(
            layer=f"layer {layer}",
            query_token=tokens[q],
            key_token=tokens[k],
            weight=1.0 / (q + 1),
            role="bind" if (q, k) == (n - 1, 2) else "",
        )
        for layer in layers
        for q in range(n)
        for k in range(q + 1)
    ]
    return pd.DataFrame(rows), tokens


def test_attention_heatmap_axes_sorted_by_position_with_outlined_roles():
    frame, tokens = _pattern(layers=(1,))
    spec = viz.attention_heatmap(frame, highlight="role", title="Layer 1 binds").to_dict()
    cells, boxes = spec["layer"]
    assert cells["encoding"]["x"]["sort"] == tokens and cells["encoding"]["y"]["sort"] == tokens
    assert cells["encoding"]["x"]["field"] == "key_token" and cells["encoding"]["y"]["field"] == "query_token"
    assert cells["encoding"]["color"]["scale"]["domain"] == [0, 1]
    assert boxes["encoding"]["stroke"]["field"] == "role" and "role" in boxes["transform"][0]["filter"]
    svg = _svg(viz.attention_heatmap(frame, highlight="role"))
    assert svg.count("<path") > len(frame), "one rect per (query, key) plus the outline"
    assert _svg_width(svg) <= COLUMN_WIDTH


def test_attention_heatmap_facets_wrap_inside_the_column():
    frame, _ = _pattern(layers=(1, 2, 3))
    spec = viz.attention_heatmap(frame, facet="layer", title="Three layers").to_dict()
    assert spec["columns"] == 2 and spec["facet"]["field"] == "layer"
    assert _svg_width(_svg(viz.attention_heatmap(frame, facet="layer"))) <= COLUMN_WIDTH
    with pytest.raises(ValueError, match="no column"):
        viz.attention_heatmap(frame, weight="w")
    with pytest.raises(TypeError, match="DataFrame"):
        viz.attention_heatmap([1, 2])


def test_attention_heatmap_takes_a_filtered_base_with_a_slider():
    frame, _ = _pattern()
    frame["index"] = frame.layer.str[-1].astype(int)
    slider = alt.param(name="checkpoint", value=1, bind=alt.binding_range(min=1, max=2, step=1))
    base = alt.Chart(frame).transform_filter(alt.datum.index == slider)
    chart = viz.attention_heatmap(base).add_params(slider)
    assert _svg(chart, checkpoint=1) != _svg(chart, checkpoint=2) or frame.weight.nunique() == 1


def test_signed_heatmap_data_is_the_matrix_on_a_symmetric_scale():
    rng = np.random.default_rng(0)
    block = rng.normal(size=(4, 3))
    letters, cols = list("abcd"), list("xyz")
    spec = viz.signed_heatmap(block, rows=letters, cols=cols, value_title="U QK₂ Uᵀ").to_dict()
    rows = next(iter(spec["datasets"].values()))
    literal = {(letters[i], cols[j]): block[i, j] for i in range(4) for j in range(3)}
    assert {(r["row"], r["col"]): r["value"] for r in rows} == pytest.approx(literal)
    scale = spec["encoding"]["color"]["scale"]
    m = np.abs(block).max()
    assert scale["domain"] == pytest.approx([-m, m]) and scale["domainMid"] == 0
    assert spec["encoding"]["y"]["sort"] == letters


@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=4, max_size=4), st.booleans())
@settings(max_examples=30, deadline=None)
def test_signed_heatmap_normalise_keeps_raw_and_drops_nan(values, with_nan):
    a = np.array(values, dtype=float).reshape(2, 2)
    b = a * 3
    if with_nan:
        b[0, 1] = np.nan
    spec = viz.signed_heatmap({"A": a, "B": b}, normalise=True).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert len(rows) == 8 - with_nan
    for r in rows:
        peak = np.nanmax(np.abs(a if r["panel"] == "A" else b))
        assert abs(r["value"]) <= 1 + 1e-12
        assert r["value"] == pytest.approx(r["raw"] / peak if peak > 0 else r["raw"])
    assert spec["facet"]["sort"] == ["A", "B"] and spec["columns"] == 2


def test_signed_heatmap_rejects_wrong_labels():
    with pytest.raises(ValueError, match="labels"):
        viz.signed_heatmap(np.zeros((2, 2)), rows=["a"])
    with pytest.raises(ValueError, match="2-d"):
        viz.signed_heatmap(np.zeros(3))


def _curves():
    return pd.DataFrame(
        [
            dict(step=s, acc=s / 100 * (j + 1) / 4 * lr, pool=f"pool {j}", lr=lr)
            for s in range(0, 100, 20)
            for j in range(3)
            for lr in (0.1, 0.2)
        ]
    )


def _opacities(svg: str) -> list[float]:
    """Opacities of the line marks in a vl-convert SVG (Vega writes one per line)."""
    return [float(o) for o in re.findall(r'<path[^>]*aria-roledescription="line mark"[^>]* opacity="([\d.]+)"', svg)]


def test_highlight_lines_legend_and_keyboard_highlight_dim_the_others():
    chart = viz.highlight_lines(
        _curves()[lambda d: d.lr == 0.1],
        x="step",
        y="acc",
        series="pool",
        x_title="training step",
        y_title="accuracy",
        title="Lines",
    )
    spec = chart.to_dict()
    params = {p["name"]: p for p in spec["params"]}
    assert params["pick_pool"]["bind"] == "legend" and params["pick_pool"]["select"]["fields"] == ["pool"]
    assert params["focus_pool"]["bind"]["options"] == ["", "pool 0", "pool 1", "pool 2"]
    assert "click" in spec["encoding"]["color"]["title"]
    everything = _opacities(_svg(chart))
    focused = _opacities(_svg(chart, focus_pool="pool 1"))
    assert everything and all(o == 1 for o in everything)
    assert sorted(focused) == [viz.charts.DIM_OPACITY] * 2 + [1.0]


def test_curves_with_controls_draw_only_the_chosen_rows():
    frame = _curves()
    chart = viz.curves_with_controls(
        frame,
        controls=["lr"],
        initial={"lr": 0.2},
        x="step",
        y="acc",
        series="pool",
        x_title="step",
        y_title="accuracy",
    )
    spec = chart.to_dict()
    lr = next(p for p in spec["params"] if p["name"] == "lr")
    assert lr["value"] == 0.2 and lr["bind"]["input"] == "range"
    assert _svg(chart, lr=0.1) != _svg(chart, lr=0.2)
    assert len(_opacities(_svg(chart, lr=0.1))) == 3, "one line per pool of the chosen lr"
    with pytest.raises(ValueError, match="not among"):
        viz.curves_with_controls(
            frame, controls=["lr"], initial={"lr": 0.5}, x="step", y="acc", series="pool", x_title="s", y_title="a"
        )
    with pytest.raises(ValueError, match="at least one"):
        viz.curves_with_controls(frame, controls=[], x="step", y="acc", series="pool", x_title="s", y_title="a")


# --- notation and escaping ------------------------------------------------------------------------


def test_label_uses_the_notation_and_names_unknown_keys():
    assert viz.label("eta_s") == "η·s" and viz.label("B_Phi_T") == "(BΦ)ᵀ" and viz.label("Sigma_B") == "Σ_B"
    with pytest.raises(KeyError, match="known"):
        viz.label("nope")


def _markdown_text(source: str) -> str:
    """The text a reader sees when MyST renders ``source`` (CommonMark + dollar math)."""
    import html as html_lib

    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    rendered = MarkdownIt("commonmark").use(dollarmath_plugin).render(source)
    assert "<math" not in rendered and 'class="math' not in rendered, rendered
    return html_lib.unescape(re.sub(r"<[^>]+>", "", rendered)).strip()


@given(
    st.text(
        alphabet=st.characters(min_codepoint=32, max_codepoint=0x3FF, blacklist_categories=("Cs",)),
        min_size=1,
        max_size=40,
    )
    .map(lambda t: " ".join(t.split()))
    .filter(bool)
)
@settings(max_examples=80, deadline=None)
def test_escaped_markdown_shows_the_text_verbatim(text):
    assert _markdown_text(viz.escape_markdown(text)) == text


def test_special_tokens_survive_markdown_and_html():
    for token in ("<unk>", "<|endoftext|>", "said, <unk>, *your* $5 car_", "# not a heading"):
        assert _markdown_text(viz.escape_markdown(token)) == token
    assert viz.escape_html('<unk> & "x"') == "&lt;unk&gt; &amp; &quot;x&quot;"


def test_training_curves_mark_steps_and_levels_and_state_the_title():
    frame = pd.DataFrame(
        {"step": [0, 100, 200] * 2, "acc": [0.1, 0.5, 0.9, 0.0, 0.2, 0.3], "pool": ["a"] * 3 + ["b"] * 3}
    )
    lines = viz.highlight_lines(frame, x="step", y="acc", series="pool", x_title="step", y_title="accuracy")
    marks = pd.DataFrame([{"phase": "jump", "step": 100}, {"phase": "late", "step": 200}])
    levels = pd.DataFrame([{"baseline": "chance", "level": 0.05, "colour": "#777"}])
    spec = viz.training_curves(lines, title=["Found", "and why"], marks=marks, levels=levels).to_dict()
    assert spec["title"]["text"] == ["Found", "and why"] and len(spec["layer"]) == 5
    marks_only = viz.training_curves(lines, title="t", marks=marks.iloc[:0]).to_dict()
    assert len(marks_only["layer"]) == 1  # no mark and no level: the curves alone
    with pytest.raises(ValueError, match="level"):
        viz.training_curves(lines, title="t", levels=pd.DataFrame([{"baseline": "chance"}]))


def test_the_sites_vega_lite_is_the_version_the_specs_declare():
    """The bundle the site serves runs the Vega-Lite the charts were written for (the spec's
    ``$schema``), whatever vl-convert's latest is."""
    from mechbook.site import vega_bundle

    declared = re.search(r"/v(\d+\.\d+)\.\d+\.json$", alt.Chart().mark_point().to_dict()["$schema"]).group(1)
    bundled = set(re.findall(r'"(\d+\.\d+)\.\d+"', vega_bundle()))
    assert declared == viz.VL_VERSION and declared in bundled
