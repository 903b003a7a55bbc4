"""Chapter 11's module: config validation, one override path for both sweeps, the threshold
prose in each case, the dip note, the verdict on the last run, records."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest
import yaml
from conftest import ROOT

from mechbook.assign_add import sweeps
from mechbook.assign_add.sweeps import SweepsConfig, threshold
from mechbook.assign_add.task import POOL_NAMES
from mechbook.book.checks import check_spread, check_thresholds, load_spread, load_thresholds
from mechbook.chapters import ch11_how_much_data as ch11


def runs(knob: str, values: list[float], scores: list[float]) -> pd.DataFrame:
    rows = []
    for v, s in zip(values, scores):
        rows.append(
            {
                "knob": knob,
                "value": v,
                "score": s,
                "train_loss": 1.0 - s / 2,
                **{p: s for p in POOL_NAMES},
                "2var_heldout": min(1.0, s + 0.1),
            }
        )
    return pd.DataFrame(rows)


def test_steps_and_seed_reach_both_sweeps():
    cfg = ch11.resolve("cpu", steps=500, seed=9)
    assert (cfg.f_train.steps, cfg.r_train.steps, cfg.f_train.seed, cfg.r_train.seed) == (500, 500, 9, 9)
    assert (cfg.f_train.model.seed, cfg.r_train.model.seed) == (9, 9)
    assert cfg.f_train.model.d_model == ch11.CONFIGS["cpu"].f_train.model.d_model
    assert ch11.CONFIGS["cpu"].r_train.steps == 2 * ch11.CONFIGS["cpu"].f_train.steps


@pytest.mark.parametrize("values", [(0.5,), (0.5, 0.3), (0.0, 0.5), (0.5, 1.2)])
def test_sweep_values_are_checked(values):
    base = ch11.CONFIGS["smoke"]
    with pytest.raises(ValueError, match="f_values"):
        SweepsConfig(base.f_train, base.r_train, f_values=values, r_values=(0.1, 0.9))


def test_level_is_checked():
    base = ch11.CONFIGS["smoke"]
    with pytest.raises(ValueError, match="level"):
        SweepsConfig(base.f_train, base.r_train, (0.1, 0.9), (0.1, 0.9), level=1.5)


def test_describe_covers_the_three_cases():
    never = runs("f", [0.1, 0.5], [0.3, 0.6])
    assert "never reaches 0.9 on this grid (best 0.600 at f = 0.5)" in ch11.describe("f", math.nan, never, 0.9)
    early = runs("f", [0.1, 0.5], [0.95, 0.99])
    assert "at or below it" in ch11.describe("f", threshold(early.value, early.score), early, 0.9)
    mid = runs("f", [0.1, 0.5], [0.5, 1.0])
    star = threshold(mid.value, mid.score)
    assert star == pytest.approx(0.42)
    assert "f ≈ **0.420** (interpolated)" in ch11.describe("f", star, mid, 0.9)


def test_monotone_note_names_the_largest_dip():
    assert ch11.monotone_note("r", runs("r", [0.1, 0.2, 0.3], [0.5, 0.51, 0.9])) == ""
    note = ch11.monotone_note("r", runs("r", [0.1, 0.2, 0.3, 0.4], [0.6, 0.5, 0.9, 0.7]))
    assert "from 0.90 at r = 0.3 to 0.70 at r = 0.4" in note


def test_thresholds_prose_scores_held_out_pairs_alone():
    f, r = runs("f", [0.1, 0.5], [0.5, 1.0]), runs("r", [0.1, 0.5], [0.5, 0.85])
    stars = {"f": threshold(f.value, f.score), "r": math.nan, "r_heldout": threshold(r.value, r["2var_heldout"])}
    text = ch11.thresholds_prose(f, r, stars, 0.9)
    assert "**r**: the score never reaches 0.9" in text and "held-out pairs alone" in text
    assert f"r ≈ **{stars['r_heldout']:.3f}**" in text


def test_last_run_verdict():
    history = pd.DataFrame(
        [{"step": s, "pool": p, "accuracy": a} for s, a in ((10, 0.2), (20, 0.95)) for p in POOL_NAMES]
        + [{"step": 20, "pool": "train", "accuracy": 0.1}]
    )
    assert ch11.last_run_verdict(history, 0.9, 20).startswith("every pool ends at 0.95")
    history.loc[(history.step == 20) & (history.pool == "2var_misplaced_both"), "accuracy"] = 0.4
    assert ch11.last_run_verdict(history, 0.9, 20) == "2var_misplaced_both ends at 0.40, still below 0.9"


def test_charts_and_table():
    f, r = runs("f", [0.1, 0.5], [0.5, 1.0]), runs("r", [0.1, 0.5], [0.5, 0.85])
    stars = {"f": 0.42, "r": math.nan, "r_heldout": 0.3}
    spec = ch11.sweeps_chart(f, r, stars, 0.9).to_dict()
    assert len(spec["hconcat"][0]["layer"]) == 3 and len(spec["hconcat"][1]["layer"]) == 2
    assert ch11.pools_chart(pd.concat([f, r])).to_dict()["facet"]["field"] == "sweep"
    table = ch11.thresholds_table(stars)
    assert table["this book"].tolist() == ["0.420", "not reached", "0.300"]


def test_record_all_covers_the_thresholds(monkeypatch):
    seen = {}
    monkeypatch.setattr(ch11.mechbook, "record", lambda name, value: seen.setdefault(name, value))
    f, r = runs("f", [0.1, 0.5], [0.5, 1.0]), runs("r", [0.1, 0.5], [0.2, 0.4])
    values = ch11.record_all(f, r, {"f": 0.42, "r": math.nan, "r_heldout": 0.3})
    assert values == seen and values["r_threshold"] is None and values["n_runs"] == 4
    assert values["max_final_train_loss"] == pytest.approx(0.9)
    bounds = yaml.safe_load((ROOT / "book" / "thresholds" / "11_how_much_data.yml").read_text())
    for profile in ("smoke", "cpu"):
        assert set(bounds[profile]) <= set(values)


SMOKE_BOUNDS = load_thresholds("11_how_much_data")["smoke"]


def test_the_measured_seed_spread_passes_the_smoke_bounds():
    assert check_spread(SMOKE_BOUNDS, load_spread("11_how_much_data")["smoke"]) == []


def test_smoke_bounds_reject_sweeps_that_never_learn():
    """Both smoke sweeps with a learning rate of 0, so every run keeps its initial weights,
    recorded as the notebook records them: the training cross-entropy stays at its value at
    initialisation, above ln 59 and above every seed's 60-step runs."""
    cfg = ch11.CONFIGS["smoke"]
    frozen = dataclasses.replace(
        cfg, f_train=dataclasses.replace(cfg.f_train, lr=0.0), r_train=dataclasses.replace(cfg.r_train, lr=0.0)
    )
    f_runs = sweeps.run_sweep(frozen.f_train, "f", frozen.f_values)
    r_runs = sweeps.run_sweep(frozen.r_train, "r", frozen.r_values)
    stars = {
        "f": threshold(f_runs["value"], f_runs["score"], frozen.level),
        "r": threshold(r_runs["value"], r_runs["score"], frozen.level),
        "r_heldout": threshold(r_runs["value"], r_runs["2var_heldout"], frozen.level),
    }
    records = ch11.record_all(f_runs, r_runs, stars)
    assert [p.split()[0] for p in check_thresholds(records, SMOKE_BOUNDS)] == ["max_final_train_loss"]
    assert records["max_final_train_loss"] > math.log(59)
