"""Seeds of the rebuild (mechbook.assign_add.seeds): configs, stacked runs, summary, the rule."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from mechbook.assign_add import seeds
from mechbook.assign_add.config import TrainConfig
from mechbook.assign_add.model import ModelConfig
from mechbook.assign_add.phases import detect_phases
from mechbook.assign_add.task import Task, union_accuracy

TINY = TrainConfig(
    steps=16,
    batch_size=16,
    eval_every=8,
    eval_per_pool=8,
    keep_every=8,
    resume_every=8,
    model=ModelConfig(d_model=16, d_head=16, d_mlp=32),
)


@pytest.fixture(autouse=True)
def _quiet(monkeypatch, tmp_path):
    monkeypatch.setenv("MECHBOOK_QUIET", "1")
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))


def none_if_nan(value):
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else value


def test_seed_configs_change_only_the_seeds():
    cfgs = seeds.seed_configs(TINY, [3, 9])
    assert [(c.seed, c.model.seed) for c in cfgs] == [(3, 3), (9, 9)]
    assert all(dataclasses.replace(c, seed=TINY.seed, model=TINY.model) == TINY for c in cfgs)
    with pytest.raises(ValueError, match="no seed twice"):
        seeds.seed_configs(TINY, [1, 1])


def test_seeds_train_together_and_summarise_each_run():
    results = seeds.train_seeds(TINY, [0, 1, 2], device="cpu")
    assert [r.config.seed for r in results] == [0, 1, 2]
    assert not np.array_equal(results[0].final_state["embed.W_E"], results[1].final_state["embed.W_E"])
    summary = seeds.seed_summary(results)
    for row, result in zip(summary.itertuples(), results):
        ph = detect_phases(result.history)
        assert [none_if_nan(v) for v in (row.phase1, row.phase2, row.phase3)] == [ph.phase1, ph.phase2, ph.phase3]
        assert row.phase3_status == ph.phase3_status
        last = result.history[result.history.step == result.history.step.max()].set_index("pool").accuracy
        assert row.final_0var_heldout == last["0var_heldout"]
        assert row.final_2var_union == pytest.approx(union_accuracy(last.to_dict(), Task(result.config.task)))
    assert seeds.example_seed(summary) in (0, 1, 2)


@pytest.mark.parametrize(
    "phase2, expected",
    [([5000, 3000, None, 4000], 13), ([3000, 6000, 5000, 4000], 13), ([4000, 4000, 9000, None], 10)],
)
def test_example_seed_is_the_median_binding_jump(phase2, expected):
    summary = pd.DataFrame({"seed": [10, 11, 12, 13], "phase2": phase2, "final_1var_train": [0.5, 0.9, 0.1, 0.7]})
    assert seeds.example_seed(summary) == expected


def test_example_seed_without_binding_is_the_median_final_accuracy():
    summary = pd.DataFrame({"seed": [10, 11, 12], "phase2": [None, None, None], "final_1var_train": [0.5, 0.9, 0.1]})
    assert seeds.example_seed(summary) == 10


def test_seed_runs_are_validated():
    with pytest.raises(ValueError, match="at least 4 distinct seeds"):
        seeds.SeedRuns(TINY, seeds=(0, 1, 2))
    with pytest.raises(TypeError, match="TrainConfig"):
        seeds.SeedRuns("cpu")
