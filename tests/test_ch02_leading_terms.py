"""Chapter 2's module: profiles, the check's summaries against literal loops, the breakdown, the
prose branches, the charts' widths, and the smoke bounds rejecting a broken check."""

import numpy as np
import pandas as pd
import pytest
from lt_markov import markov_tokens

import mechbook
from mechbook.book.checks import check_thresholds, load_thresholds
from mechbook.chapters import ch02_leading_terms as ch
from mechbook.leading_terms.check import autograd_check
from mechbook.leading_terms.stats import corpus_stats

VOCAB = 8


@pytest.fixture(scope="module")
def data():
    tokens = markov_tokens(n=30, length=9, vocab=VOCAB, seed=1)
    stats = corpus_stats(tokens, VOCAB)
    cfg = ch.Chapter2Config(
        ch.CONFIGS["smoke"].corpus, 30, check_lrs=(0.01, 0.03), check_steps=8, sweep_lrs=(3.0, 6.0), sweep_steps=12
    )
    check = autograd_check(tokens, stats, VOCAB, cfg.check())
    sweep = autograd_check(tokens, stats, VOCAB, cfg.sweep())
    return cfg, ch.Chapter2Data(tokens, VOCAB, stats, check, sweep)


def test_profiles_resolve_and_bad_configs_say_what_to_do():
    for profile in ("smoke", "cpu", "paper"):
        assert isinstance(ch.CONFIGS[profile], ch.Chapter2Config)
    assert mechbook.resolve_profile(ch.CONFIGS, "smoke", check_steps=6).check().steps == 6
    with pytest.raises(ValueError, match="check_steps must be >= 4"):
        ch.Chapter2Config(ch.CONFIGS["smoke"].corpus, 8, (0.1,), 3, (1.0,), 5)


def test_summary_and_slopes_equal_literal_loops(data):
    cfg, d = data
    small = d.check[(d.check["lr"] == 0.01) & (d.check["predicted_norm"] > 0)]
    min_cos, max_err = ch.check_summary(d.check)
    assert min_cos == min(small["cosine"]) and max_err == max(abs(r - 1) for r in small["ratio"])
    table = ch.slopes(d.check, cfg.check_steps)
    for kind in ("W_O", "V", "W", "P"):
        rows = d.check[
            (d.check["kind"] == kind) & ((d.check["layer"] == 0) | d.check["layer"].isna()) & (d.check["step"] >= 4)
        ]
        x, y = np.log(rows["step"].to_numpy(float)), np.log(rows["norm"].to_numpy())
        slope = ((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()
        assert table.iloc[:, 0][kind] == pytest.approx(slope, rel=1e-9)
    assert table.iloc[:, 1].to_numpy() == pytest.approx([1, 2, 4, 4], abs=0.02)


def test_breakdown_is_the_first_eta_s_below_the_line():
    rows = []
    for lr in (0.5, 1.0):
        for step in range(8):
            for kind, cos in (("W_O", 1.0), ("V", 1.0 - 0.004 * step * lr)):
                rows.append(
                    {
                        "lr": lr,
                        "step": step,
                        "eta_s": lr * step,
                        "kind": kind,
                        "layer": None if kind == "W_O" else 0,
                        "cosine": cos,
                        "loss": 3.0 - step * lr,
                    }
                )
    sweep = pd.DataFrame(rows)
    breaks = ch.breakdown(sweep).set_index("lr")
    # literal: cosine 1 - 0.004 eta_s < 0.99 once eta_s > 2.5
    assert list(breaks.index) == [0.5, 1.0] and list(breaks["eta_s"]) == [3.0, 3.0]
    assert breaks.loc[1.0, "loss"] == 0.0
    never = sweep.assign(cosine=1.0)
    assert ch.breakdown(never).empty
    cfg = ch.Chapter2Config(ch.CONFIGS["smoke"].corpus, 8, (0.1,), 5, (0.5, 1.0), 8)
    text = ch.breakdown_markdown(never, cfg, 10)
    assert "No matrix falls below" in text and "diverged" in text


def test_check_prose_branches(data):
    cfg, d = data
    assert "are confirmed" in ch.check_markdown(d.check, cfg.check_steps)
    broken = d.check.assign(ratio=d.check["ratio"] * 1.5)
    assert "NOT confirmed" in ch.check_markdown(broken, cfg.check_steps)
    literal = (20**4 / 8) / (0.5 * sum(k * k * (k - 1) for k in range(20)))
    assert f"**{literal:.2f}** times" in ch.shortcut_markdown(20)


def test_smoke_bounds_reject_a_broken_check(data):
    cfg, d = data
    bounds = load_thresholds("02_leading_terms")["smoke"]
    good = ch.headline_records(d, cfg)
    assert set(good) == set(bounds)
    assert not [p for p in check_thresholds(good, bounds) if p.startswith(("check_", "slope_eta"))]
    # a closed form off by a factor s (wrong power of s): sizes and slopes in s are wrong
    wrong = d.check.assign(norm=d.check["norm"] * d.check["step"], ratio=d.check["ratio"] * d.check["step"])
    problems = check_thresholds(
        ch.headline_records(ch.Chapter2Data(d.tokens, VOCAB, d.stats, wrong, d.sweep), cfg), bounds
    )
    flagged = {p.split()[0] for p in problems}
    assert {"check_max_ratio_error", "slope_s_W_O", "slope_s_V", "slope_s_W", "slope_s_P"} <= flagged
    # a direction that is not the leading term's
    off = d.check.assign(cosine=d.check["cosine"] * 0.9)
    assert "check_min_cosine" in {
        p.split()[0]
        for p in check_thresholds(
            ch.headline_records(ch.Chapter2Data(d.tokens, VOCAB, d.stats, off, d.sweep), cfg), bounds
        )
    }


def _width(spec: dict) -> int:
    """Total drawn width of a Vega-Lite spec's panels (facet columns and hconcat add up)."""
    if "vconcat" in spec:
        return max(_width(s) for s in spec["vconcat"])
    if "hconcat" in spec:
        return sum(_width(s) for s in spec["hconcat"])
    if "facet" in spec:
        return spec.get("columns", 1) * spec["spec"].get("width", 0)
    if "layer" in spec:
        return max([spec.get("width", 0)] + [_width(s) for s in spec["layer"]])
    return spec.get("width", 0)


def test_charts_fit_the_column_and_use_unicode_labels(data):
    cfg, d = data
    for chart in (ch.norm_chart(d.check, cfg.check_steps), ch.sweep_chart(d.sweep, VOCAB)):
        spec = chart.to_dict()
        assert 0 < _width(spec) <= ch.WIDTH - 60
        text = str(spec)
        assert "eta *" not in text and "Phi^T" not in text
    assert "η·s" in str(ch.sweep_chart(d.sweep, VOCAB).to_dict())
