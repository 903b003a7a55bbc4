"""The r and f sweeps (mechbook.assign_add.sweeps, chapter 11)."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.assign_add.model import ModelConfig
from mechbook.assign_add.sweeps import final_accuracies, final_train_loss, point_config, run_sweep, score, threshold
from mechbook.assign_add.task import POOL_NAMES, Task
from mechbook.assign_add.train import TrainConfig


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


def test_run_sweep_trains_its_points_together_and_caches_each_run(tmp_path, monkeypatch):
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    monkeypatch.setenv("MECHBOOK_QUIET", "1")
    base = TrainConfig(
        steps=4,
        batch_size=16,
        eval_every=2,
        eval_per_pool=8,
        keep_every=2,
        resume_every=2,
        model=ModelConfig(d_model=8, d_head=8, d_mlp=16),
    )
    first = run_sweep(base, "f", [0.3, 0.6])
    assert list(first["value"]) == [0.3, 0.6] and first["score"].between(0, 1).all()
    assert (first["train_loss"] > 0).all()
    assert len(list((tmp_path / "assign_add" / "run").glob("*.pt"))) == 2  # one entry per point
    pd.testing.assert_frame_equal(run_sweep(base, "f", [0.3, 0.6]), first)
