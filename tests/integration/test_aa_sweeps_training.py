"""Chapter 11's sweeps (mechbook/assign_add/sweeps.py) trained for real: the points of a sweep
trained together and cached per run, and the budgets read at each fraction of the steps."""

import pandas as pd
from test_aa_sweeps import tiny_run

from mechbook.assign_add.run_cache import load_or_train_runs
from mechbook.assign_add.sweeps import (
    LOSS_BOUND,
    final_accuracies,
    history_until,
    point_configs,
    read_budgets,
    read_sweep,
    run_sweep,
    score_runs,
)


def test_run_sweep_trains_its_points_together_and_caches_each_run(tmp_path, monkeypatch):
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    monkeypatch.setenv("MECHBOOK_QUIET", "1")
    base = tiny_run(steps=4, keep_every=2)
    first = run_sweep(base, "f", [0.3, 0.6], seeds=(0, 1))
    assert list(first["value"]) == [0.3, 0.3, 0.6, 0.6] and list(first["seed"]) == [0, 1, 0, 1]
    assert first["score"].between(0, 1).all() and (first["train_loss"] > 0).all()
    assert (first["converged"] == (first["train_loss"] <= LOSS_BOUND)).all()
    assert (first["chance"] == 1 / 59).all() and (first["control"] >= first["chance"]).all()
    assert (first["control"] == first["control_0var_heldout"]).all()
    assert len(list((tmp_path / "assign_add" / "run").glob("*.pt"))) == 4  # one entry per point and seed
    pd.testing.assert_frame_equal(run_sweep(base, "f", [0.3, 0.6], seeds=(0, 1)), first)
    assert first.loc[0, "score"] != first.loc[1, "score"] or first.loc[0, "train_loss"] != first.loc[1, "train_loss"]


def test_budgets_read_each_fraction_and_the_end(tmp_path, monkeypatch):
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    monkeypatch.setenv("MECHBOOK_QUIET", "1")
    base = tiny_run(steps=8, keep_every=8)
    cfgs = point_configs(base, "f", [0.3, 0.6], (0, 1))
    results = load_or_train_runs(cfgs)
    end = read_sweep(score_runs(cfgs, results, "f"), 0.9)
    budgets = read_budgets(cfgs, results, end, (0.1, 0.25, 0.5, 0.7))
    assert [b.steps for b in budgets] == [2, 4, 8]  # 0.8 steps -> none; 5.6 -> the evaluated step 4
    assert budgets[-1].reading == end
    assert budgets[-2].reading == read_sweep(score_runs(cfgs, results, "f", at_step=4), 0.9)
    early = score_runs(cfgs, results, "f", at_step=4)
    assert (early["steps"] == 4).all()
    assert list(early["score"]) == [final_accuracies(history_until(r.history, 4))["0var_heldout"] for r in results]
