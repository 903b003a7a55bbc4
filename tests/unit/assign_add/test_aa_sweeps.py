"""The r and f sweeps (mechbook.assign_add.sweeps, chapter 11): thresholds, seeds, the reading
per seed, convergence, and the dip rule against chance."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.assign_add.config import TrainConfig
from mechbook.assign_add.model import ModelConfig
from mechbook.assign_add.run_cache import load_or_train_runs
from mechbook.assign_add.sweeps import (
    CHANCE_MARGIN,
    DIP,
    LOSS_BOUND,
    SweepsConfig,
    final_accuracies,
    final_train_loss,
    history_until,
    largest_dip,
    lowest_final_pool,
    near_chance,
    point_config,
    point_configs,
    read_sweep,
    score,
    threshold,
)
from mechbook.assign_add.task import POOL_NAMES, Task


def tiny_run(steps: int, keep_every: int) -> TrainConfig:
    """A run of a few steps of a tiny model, evaluated every 2 steps (for the tests that train)."""
    return TrainConfig(
        steps=steps,
        batch_size=16,
        eval_every=2,
        eval_per_pool=8,
        keep_every=keep_every,
        resume_every=keep_every,
        model=ModelConfig(d_model=8, d_head=8, d_mlp=16),
    )


def test_threshold_interpolates_a_linear_ramp_exactly():
    xs = [0.1, 0.2, 0.3, 0.4]
    assert threshold(xs, [0.0, 0.5, 1.0, 1.0], level=0.9) == pytest.approx(0.28)


@settings(max_examples=40, deadline=None)
@given(centre=st.floats(0.2, 0.8), width=st.floats(0.01, 0.05), level=st.floats(0.6, 0.95))
def test_threshold_of_a_dense_logistic_curve_is_its_crossing(centre, width, level):
    xs = np.linspace(0.0, 1.0, 401)
    ys = 1 / (1 + np.exp(-(xs - centre) / width))
    crossing = centre + width * math.log(level / (1 - level))
    assert threshold(xs, ys, level) == pytest.approx(crossing, abs=1e-3)


def test_threshold_edge_cases():
    assert math.isnan(threshold([0.1, 0.5], [0.2, 0.3]))
    assert threshold([0.1, 0.5], [0.95, 1.0]) == 0.1
    with pytest.raises(ValueError, match="increasing"):
        threshold([0.5, 0.1], [0.0, 1.0])
    with pytest.raises(ValueError, match="equal-length"):
        threshold([0.1, 0.2], [1.0])


def test_point_config_changes_only_its_knob():
    base = TrainConfig(steps=10)
    r = point_config(base, "r", 0.3)
    f = point_config(base, "f", 0.25)
    assert r.task.two_var_fraction == 0.3 and r.task.train_pair_fraction == base.task.train_pair_fraction
    assert f.task.train_pair_fraction == 0.25 and f.task.two_var_fraction == base.task.two_var_fraction
    assert r.model == base.model and r.steps == base.steps
    with pytest.raises(ValueError, match="knob"):
        point_config(base, "d", 0.3)


def test_scores_read_the_right_pools():
    history = pd.DataFrame(
        [
            {"step": s, "pool": p, "accuracy": (i + 1) / 10 if s == 20 else 0.0}
            for s in (10, 20)
            for i, p in enumerate(POOL_NAMES)
        ]
    )
    accs = final_accuracies(history)
    assert accs["0var_heldout"] == pytest.approx(0.2)
    task = Task()
    assert score("f", accs, task) == pytest.approx(0.2)
    assert score("r", accs, task) == pytest.approx((0.7 * 96_140 + 0.8 * 87_696 + 0.9 * 9_744) / 193_580)


def test_final_train_loss_reads_the_last_train_row():
    history = pd.DataFrame(
        [
            {"step": 10, "pool": "train", "loss": 4.0},
            {"step": 20, "pool": "train", "loss": 3.5},
            {"step": 20, "pool": "0var_train", "loss": 1.0},
        ]
    )
    assert final_train_loss(history) == 3.5
    with pytest.raises(ValueError, match="train"):
        final_train_loss(history[history["pool"] != "train"])


def test_point_configs_set_both_seeds_per_value():
    base = TrainConfig(steps=10)
    cfgs = point_configs(base, "r", [0.2, 0.5], seeds=(3, 4))
    assert [(c.task.two_var_fraction, c.seed, c.model.seed) for c in cfgs] == [
        (0.2, 3, 3),
        (0.2, 4, 4),
        (0.5, 3, 3),
        (0.5, 4, 4),
    ]
    assert point_configs(base, "r", [0.2], None) == [point_config(base, "r", 0.2)]


@pytest.mark.parametrize("seeds", [(), (1, 1), (-1,), (0.5,), (True,)])
def test_sweeps_config_refuses_bad_seeds(seeds):
    base = TrainConfig(steps=10)
    with pytest.raises((ValueError, TypeError), match="seeds"):  # a wrong type (0.5, True) is a TypeError
        SweepsConfig(base, base, (0.1, 0.9), (0.1, 0.9), seeds=seeds)
    assert SweepsConfig(base, base, (0.1, 0.9), (0.1, 0.9), seeds=(0, 1)).n_seeds == 2


def frame(values, seeds, scores, losses, chance=1 / 59):
    """A run_sweep frame: ``scores[i][j]`` and ``losses[i][j]`` for value i and seed j."""
    rows = []
    for i, v in enumerate(values):
        for j, s in enumerate(seeds):
            rows.append(
                {
                    "knob": "f",
                    "value": v,
                    "seed": s,
                    "steps": 400 + 100 * i if losses[i][j] <= LOSS_BOUND else 800,
                    "score": scores[i][j],
                    "train_loss": losses[i][j],
                    "converged": losses[i][j] <= LOSS_BOUND,
                    "chance": chance,
                    "control": 0.03,
                    "2var_heldout": scores[i][j] / 2,
                    "control_2var_heldout": 0.04,
                }
            )
    return pd.DataFrame(rows)


def test_read_sweep_reads_each_seed_and_the_median():
    runs = frame(
        [0.1, 0.3, 0.5], [7, 8], [[0.2, 0.1], [0.5, 0.95], [1.0, 1.0]], [[2.0, 0.05], [0.05, 0.05], [0.01, 0.01]]
    )
    reading = read_sweep(runs, 0.9)
    assert dict(reading.thresholds) == {
        7: pytest.approx(0.3 + 0.4 * 0.2 / 0.5),
        8: pytest.approx(0.1 + 0.2 * 0.8 / 0.85),
    }
    assert reading.threshold == pytest.approx(np.median([t for _, t in reading.thresholds]))
    assert reading.spread == (min(reading.reached), max(reading.reached))
    assert reading.scores == pytest.approx((0.15, 0.725, 1.0)) and reading.controls == (0.03, 0.03, 0.03)
    assert reading.unconverged == ((0.1, 7, 2.0),) and reading.max_loss == 2.0
    assert reading.ends == (800, 400, 500, 500, 600, 600)
    held = read_sweep(runs, 0.9, "2var_heldout")
    assert math.isnan(held.threshold) and held.spread is None and held.controls == (0.04, 0.04, 0.04)


def test_a_seed_that_never_reaches_the_level_leaves_no_median():
    runs = frame([0.1, 0.5], [0, 1], [[0.2, 0.95], [0.5, 1.0]], [[0.0, 0.0], [0.0, 0.0]])
    reading = read_sweep(runs, 0.9)
    assert math.isnan(reading.threshold) and reading.reached == (0.1,)
    with pytest.raises(ValueError, match="nope"):
        read_sweep(runs, 0.9, "nope")


def test_a_drop_between_two_points_near_chance_is_no_dip():
    chance = 1 / 59
    assert largest_dip([0.1, 0.2], [0.09, 0.01], chance) is None
    dip = largest_dip([0.1, 0.2, 0.3, 0.4], [0.6, 0.5, 0.9, 0.7], chance)
    assert (dip.value_from, dip.value_to, dip.score_from, dip.score_to) == (0.3, 0.4, 0.9, 0.7)
    assert largest_dip([0.1, 0.2], [0.5, 0.49], chance) is None


@settings(max_examples=200, deadline=None)
@given(
    scores=st.lists(st.floats(0, 1), min_size=2, max_size=8),
    chance=st.sampled_from([1 / 59, 1 / 7, 0.5]),
)
def test_a_reported_dip_is_a_real_drop_away_from_chance(scores, chance):
    values = [i / 10 for i in range(1, len(scores) + 1)]
    dip = largest_dip(values, scores, chance)
    pairs = list(zip(scores[:-1], scores[1:]))
    eligible = [a - b for a, b in pairs if a - b > DIP and not (near_chance(a, chance) and near_chance(b, chance))]
    if dip is None:
        assert not eligible
        return
    assert dip.score_from - dip.score_to == pytest.approx(max(eligible))
    assert not (abs(dip.score_from - chance) <= CHANCE_MARGIN and abs(dip.score_to - chance) <= CHANCE_MARGIN)
    assert float(f"{dip.score_from:.2f}") > float(f"{dip.score_to:.2f}")
    assert values.index(dip.value_to) == values.index(dip.value_from) + 1


def test_lowest_final_pool():
    history = pd.DataFrame(
        [
            {"step": s, "pool": p, "accuracy": 0.5 if s == 10 else 0.9 + i / 100}
            for s in (10, 20)
            for i, p in enumerate(POOL_NAMES)
        ]
        + [{"step": 20, "pool": "train", "accuracy": 0.0}]
    )
    assert lowest_final_pool(history) == (POOL_NAMES[0], pytest.approx(0.9))


def test_a_run_read_at_step_k_is_a_k_step_run(tmp_path, monkeypatch):
    """The premise of chapter 11's step budgets: with a constant learning rate and a sequential
    data stream, the first k steps of a longer run record what a k-step run records, bit for bit."""
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    monkeypatch.setenv("MECHBOOK_QUIET", "1")
    long = tiny_run(steps=8, keep_every=2)
    short = dataclasses.replace(long, steps=4)
    (a,) = load_or_train_runs([long], keep=True)
    (b,) = load_or_train_runs([short])
    pd.testing.assert_frame_equal(history_until(a.history, 4).reset_index(drop=True), b.history.reset_index(drop=True))
    for name, value in b.final_state.items():
        assert torch.equal(a.checkpoints[4][name], value.to(torch.float16)), name
    with pytest.raises(ValueError, match="was not evaluated"):
        history_until(a.history, 3)


@pytest.mark.parametrize("budgets", [(0.0,), (1.0,), (-0.5,)])
def test_sweeps_config_refuses_budgets_outside_the_run(budgets):
    run = TrainConfig(steps=10, eval_every=5)
    with pytest.raises(ValueError, match="budgets"):
        SweepsConfig(run, run, (0.1, 0.5), (0.1, 0.5), budgets=budgets)
