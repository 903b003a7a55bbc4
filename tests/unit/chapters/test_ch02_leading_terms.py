"""Chapter 2's module and its library (check_numbers, the CH02_CLAIMS table): profiles and resolve,
the claims on both sides of their rules with the prose that reads them, the prose branches
(departure or none, learned or not), the charts' widths and titles, and the smoke bounds rejecting
a broken check (attention_first: leading_terms/test_lt_readings.py)."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lt_markov import markov_tokens, sweep_frame

from mechbook import claims
from mechbook.book.checks import check_thresholds, load_thresholds
from mechbook.chapters import ch02_leading_terms as ch02
from mechbook.leading_terms.check import (
    CheckRuns,
    CheckRunsConfig,
    autograd_check,
)
from mechbook.leading_terms.claims import CH02_CLAIMS, TABLES
from mechbook.leading_terms.readings import check_numbers, check_readings
from mechbook.leading_terms.stats import corpus_stats
from mechbook.leading_terms.theorem import INITS, TheoremRuns, TheoremRunsConfig, theorem_run

VOCAB = 8


@pytest.fixture(scope="module")
def setup():
    tokens = markov_tokens(n=30, length=9, vocab=VOCAB, seed=1)
    stats = corpus_stats(tokens, VOCAB)
    runs = CheckRunsConfig(
        ch02.CONFIGS["smoke"].runs.corpus,
        30,
        check_lrs=(0.01, 0.03),
        check_steps=8,
        sweep_lrs=(3.0, 6.0),
        sweep_steps=12,
    )
    theorem = TheoremRunsConfig(ch02.CONFIGS["smoke"].theorem.corpus, 30, zero_lr=0.01, steps=6)
    cfg = ch02.ChapterConfig(runs, theorem)
    check = autograd_check(tokens, stats, VOCAB, runs.check())
    sweep = autograd_check(tokens, stats, VOCAB, runs.sweep())
    frame = pd.concat([theorem_run(tokens, stats, VOCAB, theorem, init) for init in INITS], ignore_index=True)
    # |V| 8 and T 8 are outside the theorem's conditions; the rules are exercised as if inside them
    inside = TheoremRuns(frame, VOCAB, 8, 3, {init: [] for init in INITS})
    return cfg, CheckRuns(tokens, VOCAB, stats, check, sweep), inside


def test_profiles_resolve_and_bad_configs_say_what_to_do():
    for profile in ("smoke", "cpu", "paper"):
        assert isinstance(ch02.CONFIGS[profile], ch02.ChapterConfig)
    assert ch02.resolve("smoke", check_steps=6).runs.check().steps == 6
    assert ch02.resolve("cpu") == ch02.CONFIGS["cpu"]
    with pytest.raises(ValueError, match="check_steps must be at least 4"):
        ch02.resolve("smoke", check_steps=3)


def _with(data: CheckRuns, **frames) -> CheckRuns:
    return CheckRuns(
        data.tokens, data.vocab_size, data.stats, frames.get("check", data.check), frames.get("sweep", data.sweep)
    )


def _ev(data: CheckRuns, cfg, theorem: TheoremRuns):
    """The chapter's verdicts on ``data``, as its pages compute them."""
    return claims.evidence(CH02_CLAIMS, check_readings(data, theorem, cfg.runs.check_steps))


def test_closed_form_claims_on_both_sides(setup):
    cfg, d, th = setup
    ev = _ev(d, cfg, th)
    assert ev["ch02.closed_form_direction"].verdict == "reproduced"
    assert ev["ch02.closed_form_size"].verdict == "reproduced"
    assert ev["ch02.eta_exponents"].verdict == "reproduced" and ev["ch02.s_slopes_above"].verdict == "reproduced"
    text = ch02.check_prose(d, cfg, _ev(d, cfg, th))
    assert "**Reproduced.** The paper" in text and "barely learned" in text
    # sizes off by 50%: the direction still holds, the size does not
    wrong = _with(d, check=d.check.assign(ratio=d.check["ratio"] * 1.5))
    ev = _ev(wrong, cfg, th)
    assert ev["ch02.closed_form_size"].verdict == "not reproduced"
    assert ev["ch02.closed_form_direction"].verdict == "reproduced"
    assert "**Not reproduced.**" in ch02.check_prose(wrong, cfg, _ev(wrong, cfg, th))
    off = _with(d, check=d.check.assign(cosine=d.check["cosine"] * 0.9))
    assert _ev(off, cfg, th)["ch02.closed_form_direction"].verdict == "not reproduced"
    # a norm off by a factor s: the slopes in s no longer sit just above the exponents... they sit far above,
    # and a norm divided by s puts them below
    below = _with(d, check=d.check.assign(norm=d.check["norm"] / d.check["step"].clip(lower=1)))
    ev = _ev(below, cfg, th)
    assert ev["ch02.s_slopes_above"].verdict == "not reproduced"
    assert "**Does not hold.**" in ch02.slopes_prose(_ev(below, cfg, th))
    eta = _with(d, check=d.check.assign(norm=d.check["norm"] * d.check["lr"] ** 0.2))
    assert _ev(eta, cfg, th)["ch02.eta_exponents"].verdict == "not reproduced"


def test_departure_prose_and_claim_branches(setup):
    cfg, d, th = setup
    attention = _with(d, sweep=sweep_frame({"P": 0.004, "W": 0.003}))
    text = ch02.departure_prose(attention, cfg, _ev(attention, cfg, th))
    assert "**P alone**, at **η·s = 3**" in text and "**Holds.**" in text
    first_v = _with(d, sweep=sweep_frame({"V": 0.004, "P": 0.001}))
    text = ch02.departure_prose(first_v, cfg, _ev(first_v, cfg, th))
    assert "**V alone**" in text and "**Does not hold.**" in text
    # P first is not enough: W must leave before V and W_O too (chapter 2's full-batch sweep: P, V, W, W_O)
    p_then_v = _with(d, sweep=sweep_frame({"P": 0.004, "V": 0.003, "W": 0.002}))
    text = ch02.departure_prose(p_then_v, cfg, _ev(p_then_v, cfg, th))
    assert "**P alone**" in text and "**Does not hold.**" in text
    assert "η = 1: P 3, V 4, W 6, W_O never" in text
    assert _ev(p_then_v, cfg, th)["ch02.attention_leaves_first"].values == [0.0]
    never = _with(d, sweep=sweep_frame({}))
    text = ch02.departure_prose(never, cfg, _ev(never, cfg, th))
    assert "No matrix falls below" in text and "**Untested here.**" in text and "diverged" in text
    assert _ev(never, cfg, th)["ch02.attention_leaves_first"].verdict == "untested"
    assert "breakdown_loss_drop" not in check_numbers(never, cfg.runs.check_steps)


def test_setup_and_shortcut_prose(setup):
    cfg, d, _ = setup
    assert "the first **30** TinyStories sequences of T = 8" in ch02.setup_prose("smoke", cfg, d)
    literal = (20**4 / 8) / (0.5 * sum(k * k * (k - 1) for k in range(20)))
    assert f"**{literal:.2f}** times" in ch02.shortcut_prose(20)


def test_learned_words_label_a_model_that_has_not_learned():
    assert "barely learned" in ch02.learned_words(0.01, 5.0)
    assert "barely learned" not in ch02.learned_words(0.5, 5.0)


def test_smoke_bounds_reject_a_broken_check(setup):
    cfg, d, th = setup
    bounds = load_thresholds("02_leading_terms")["smoke"]
    wide = _theorem(th, in_window=lambda f: f["step"].between(1, 3))
    assert set(bounds) <= set(check_readings(d, wide, cfg.runs.check_steps).numbers)
    good = check_numbers(d, cfg.runs.check_steps)
    assert not [p for p in check_thresholds(good, bounds) if p.startswith(("check_", "slope_eta"))]
    wrong = d.check.assign(norm=d.check["norm"] * d.check["step"], ratio=d.check["ratio"] * d.check["step"])
    flagged = {
        p.split()[0] for p in check_thresholds(check_numbers(_with(d, check=wrong), cfg.runs.check_steps), bounds)
    }
    assert {"check_max_ratio_error", "slope_s_W_O", "slope_s_V", "slope_s_W", "slope_s_P"} <= flagged
    # a distance past its bound, a term larger than its bound: the theorem's records flag both
    broken = _theorem(wide, ratio=lambda f: f["ratio"] * 1e12, predicted_norm=lambda f: f["predicted_norm"] * 1e30)
    numbers = check_readings(d, broken, cfg.runs.check_steps).numbers
    flagged = {p.split()[0] for p in check_thresholds(numbers, bounds)}
    assert {"theorem_ratio_zero", "theorem_ratio_gaussian", "theorem_attention_bound_over_term"} <= flagged
    off = d.check.assign(cosine=d.check["cosine"] * 0.9)
    assert "check_min_cosine" in {
        p.split()[0] for p in check_thresholds(check_numbers(_with(d, check=off), cfg.runs.check_steps), bounds)
    }


def _theorem(th: TheoremRuns, **columns) -> TheoremRuns:
    """``th`` with some of its frame's columns replaced (functions of the frame)."""
    return TheoremRuns(th.frame.assign(**columns), th.vocab_size, th.context, th.n_layers, th.unmet)


def test_theorem_claims_on_both_sides(setup):
    cfg, d, th = setup
    # at T = 8 the Gaussian start's window (s <= T/36) is empty: its claim is untested, and the page says so
    ev = _ev(d, cfg, th)
    assert ev["ch02.theorem_bounds"].verdict == "reproduced"
    # the zero start's window (s <= 2 at η = 0.01) ends before W and P have terms (s >= 3)
    assert ev["ch02.attention_bounds_loose"].verdict == "untested"
    assert ev["ch02.theorem_bounds_gaussian"].verdict == "untested"
    readings = check_readings(d, th, cfg.runs.check_steps)
    assert "No logged step of the Gaussian start is inside its window" in ch02.theorem_prose(th, cfg, readings, ev)
    # a window of three steps for both starts (W and P have terms at s = 3): the Gaussian start's W and P still point at their noise
    wide = _theorem(th, in_window=lambda f: f["step"].between(1, 3))
    readings = check_readings(d, wide, cfg.runs.check_steps)
    ev = claims.evidence(CH02_CLAIMS, readings)
    assert ev["ch02.theorem_bounds_gaussian"].verdict == "reproduced"
    assert ev["ch02.attention_bounds_loose"].verdict == "reproduced"
    text = ch02.theorem_prose(wide, cfg, readings, ev)
    assert readings.numbers["theorem_gaussian_cos_W"] < 0.99 and "W and P do not yet" in text
    size = readings.numbers["theorem_gaussian_term_over_start"]
    assert (size < 1) == ("the start's noise still dominates them" in text)
    # distances past their bounds, and terms larger than their bounds
    past = _theorem(wide, ratio=lambda f: f["ratio"] * 1e12)
    ev = _ev(d, cfg, past)
    assert ev["ch02.theorem_bounds"].verdict == "not reproduced"
    assert ev["ch02.theorem_bounds_gaussian"].verdict == "not reproduced"
    big = _theorem(wide, predicted_norm=lambda f: f["predicted_norm"] * 1e30)
    assert _ev(d, cfg, big)["ch02.attention_bounds_loose"].verdict == "not reproduced"
    # outside the conditions every theorem claim is untested, and the page names the unmet conditions
    outside = TheoremRuns(th.frame, 8, 8, 3, {"zero": ["|V| = 8 < 500"], "gaussian": ["|V| = 8 < 500"]})
    readings = check_readings(d, outside, cfg.runs.check_steps)
    ev = claims.evidence(CH02_CLAIMS, readings)
    assert {
        ev[c].verdict for c in ("ch02.theorem_bounds", "ch02.theorem_bounds_gaussian", "ch02.attention_bounds_loose")
    } == {"untested"}
    assert "**outside the theorem's conditions** (|V| = 8 < 500)" in ch02.theorem_prose(outside, cfg, readings, ev)


def test_window_prose_reads_the_breakdown_against_the_window(setup):
    cfg, d, th = setup
    readings = check_readings(d, th, cfg.runs.check_steps)
    ev = claims.evidence(CH02_CLAIMS, readings)
    ratio = readings.numbers["breakdown_over_window"]
    window = min(1 / 36, 5 / (8 * np.sqrt(d.tokens.shape[1] - 1)))
    assert ratio == pytest.approx(readings.numbers["breakdown_eta_s"] / window)
    text = ch02.theorem_prose(th, cfg, readings, ev)
    assert (f"{ratio:.3g} times the window's end" in text) == (ratio > 1)


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


def test_charts_fit_the_column_and_title_the_finding(setup):
    cfg, d, th = setup
    wide = _theorem(th, in_window=lambda f: f["step"].between(1, 3))
    charts = (
        ch02.norm_chart(d.check, cfg.runs.check_steps),
        ch02.sweep_chart(d.sweep, VOCAB),
        ch02.theorem_chart(wide),
    )
    for chart in charts:
        spec = chart.to_dict()
        assert 0 < _width(spec) <= ch02.WIDTH - 60
        assert "eta *" not in str(spec) and "Phi^T" not in str(spec)
    title = ch02.sweep_chart(sweep_frame({"P": 0.004}), VOCAB).to_dict()["title"]
    assert title.startswith("P alone first below cosine 0.99, at η·s = 3 (η = 0.5)")
    assert f"fallen {np.log(VOCAB) - 2.7:.3f} nats from log |V| = {np.log(VOCAB):.3f}" in title
    assert ch02.sweep_chart(sweep_frame({}), VOCAB).to_dict()["title"].startswith("No matrix falls below")
    spec = ch02.theorem_chart(wide).to_dict()
    rows = [row for data in spec["datasets"].values() for row in data if "kind" in row]
    assert rows and all(row["term"] for row in rows), "every point names its matrix (no 'undefined' series)"
    title = spec["title"]
    assert title["text"] == "Inside the theorem's window every matrix is within its bound"
    assert title["subtitle"].startswith("distance / bound at most")
    past = _theorem(wide, ratio=lambda f: f["ratio"].where(f["kind"] != "V", 2.0))
    assert ch02.theorem_chart(past).to_dict()["title"]["text"].endswith("some matrix is past its bound")


@given(st.floats(0, 1), st.floats(1, 10))
@settings(max_examples=100, deadline=None)
def test_learned_words_print_the_drop_they_judge(drop, log_vocab):
    text = ch02.learned_words(drop, log_vocab)
    shown = float(text.split("fallen ")[1].split(" nats")[0])
    assert ("barely learned" in text) == (drop < 0.1) and abs(shown - drop) <= 5e-4


def test_the_table_is_the_chapters_and_records_every_claim(setup):
    cfg, d, th = setup
    assert TABLES[ch02.STEM] is CH02_CLAIMS and {c.chapter for c in CH02_CLAIMS} == {ch02.STEM}
    readings = check_readings(d, th, cfg.runs.check_steps)
    records = ch02.record_all(readings, claims.evidence(CH02_CLAIMS, readings))
    assert {f"claim.{c.id}" for c in CH02_CLAIMS} <= set(records)
    assert records["check_min_cosine"] == records["claim.ch02.closed_form_direction"]["values"][0]
