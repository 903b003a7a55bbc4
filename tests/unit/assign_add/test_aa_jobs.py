"""One cache entry per run (mechbook.assign_add.run_cache) and the plan of jobs
(mechbook.assign_add.jobs): a run trained in a stack here and the same run trained as a job are
one entry holding the same numbers."""

import dataclasses
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_aa_stacked import BASE
from test_aa_stacked import RUNS as STACKED_RUNS

from mechbook.assign_add import jobs, run_cache
from mechbook.assign_add.config import TrainConfig
from mechbook.assign_add.runs import SWEEPS
from mechbook.assign_add.sweeps import point_configs
from mechbook.assign_add.train import train_stacked
from mechbook.cache import module_closure, torch_loads, unbind

TINY = dataclasses.replace(BASE, steps=16)
"""test_aa_stacked's tiny run, shortened to two evaluations."""
RUNS = [dataclasses.replace(c, steps=16) for c in STACKED_RUNS]


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MECHBOOK_QUIET", "1")
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path / "cache"))


def assert_same_run(a, b):
    """Bit for bit: every tensor of the final weights and of the checkpoints, and the history."""
    assert a.config == b.config
    assert a.history.equals(b.history)
    assert a.final_state.keys() == b.final_state.keys()
    for name in a.final_state:
        assert torch.equal(a.final_state[name], b.final_state[name]), name
    assert a.checkpoints.keys() == b.checkpoints.keys()
    for step in a.checkpoints:
        for name in a.checkpoints[step]:
            assert torch.equal(a.checkpoints[step][name], b.checkpoints[step][name]), (step, name)


def spy_train_groups(monkeypatch):
    """Record the configs :func:`run_cache.load_or_train_runs` sends to training."""
    calls: list[list[TrainConfig]] = []
    real = run_cache.train_groups

    def spy(cfgs, *args, **kwargs):
        calls.append(list(cfgs))
        return real(cfgs, *args, **kwargs)

    monkeypatch.setattr(run_cache, "train_groups", spy)
    return calls


def test_a_run_sliced_from_a_stack_equals_it_trained_as_a_stack_of_one():
    # what lets one cache entry stand for both (on a CPU): the job trains a stack of one
    for keep in (False, True):
        stacked = train_stacked(RUNS, device="cpu", keep=keep)
        for cfg, got in zip(RUNS, stacked):
            (alone,) = train_stacked([cfg], device="cpu", keep=keep)
            assert_same_run(got, alone)


def test_only_the_missing_runs_are_trained_and_each_has_its_own_entry(monkeypatch, tmp_path):
    calls = spy_train_groups(monkeypatch)
    (first,) = run_cache.load_or_train_runs(RUNS[:1], "cpu")
    assert calls == [RUNS[:1]]
    results = run_cache.load_or_train_runs(RUNS, "cpu")
    assert calls[1] == RUNS[1:]
    assert_same_run(results[0], first)
    assert [r.config for r in results] == RUNS
    # the files cached() wrote are exactly the entries the plan checks
    stored = set((tmp_path / "cache" / run_cache.NAMESPACE).glob("*.pt"))
    assert stored == {run_cache.entry(c, "cpu", False) for c in RUNS}
    again = run_cache.load_or_train_runs(RUNS, "cpu")
    assert len(calls) == 2
    for a, b in zip(results, again):
        assert_same_run(a, b)


def test_keep_and_device_are_separate_entries(monkeypatch):
    calls = spy_train_groups(monkeypatch)
    run_cache.load_or_train_runs(RUNS[:1], "cpu", keep=False)
    assert not run_cache.is_cached(RUNS[0], "cpu", True)
    assert not run_cache.is_cached(RUNS[0], "cuda", False)
    (kept,) = run_cache.load_or_train_runs(RUNS[:1], "cpu", keep=True)
    assert len(calls) == 2
    assert len(kept.checkpoints) > 1


def test_a_job_writes_the_entry_the_chapters_read(monkeypatch, tmp_path):
    path = run_cache.train_job(RUNS[1], "cpu", True)
    assert path == str(run_cache.entry(RUNS[1], "cpu", True))
    calls = spy_train_groups(monkeypatch)
    (read,) = run_cache.load_or_train_runs([RUNS[1]], "cpu", keep=True)
    assert calls == []
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path / "elsewhere"))
    (here,) = run_cache.load_or_train_runs(RUNS, "cpu", keep=True)[1:2]
    assert_same_run(read, here)
    with open(path, "rb") as fh:
        named, payload = unbind(fh.read())
    assert named == Path(path).stem, "the entry names the key it was computed for"
    assert_same_run(torch_loads(payload), here)


def test_chapter_11_jobs_are_the_sweep_points_per_seed():
    sweeps = SWEEPS["smoke"]
    runs = jobs.chapter_runs("smoke", 11, 3)
    assert len(runs) == 3 * (len(sweeps.f_values) + len(sweeps.r_values))
    # the chapter's own runs (every point at the profile's seeds) are among the jobs, under the same configs
    own = set(point_configs(sweeps.f_train, "f", sweeps.f_values, sweeps.seeds))
    own |= set(point_configs(sweeps.r_train, "r", sweeps.r_values, sweeps.seeds))
    assert own <= {c for _, c, _ in runs}
    assert {c.seed for _, c, _ in runs} == set(jobs.run_seeds(list(sweeps.seeds or (sweeps.f_train.seed,)), 3))
    assert all(c.model.seed == c.seed and not keep for _, c, keep in runs)
    assert len({c for _, c, _ in runs}) == len(runs)


@settings(max_examples=80, deadline=None)
@given(own=st.lists(st.integers(0, 60), min_size=1, max_size=6, unique=True), n=st.integers(1, 12))
def test_seeds_are_the_chapters_own_then_the_smallest_others(own, n):
    seeds = jobs.run_seeds(own, n)
    assert seeds[: len(own)] == own
    assert len(seeds) == max(n, len(own)) and len(set(seeds)) == len(seeds)
    added = seeds[len(own) :]
    assert added == sorted(added)
    assert all(k in seeds for k in range(max(added, default=-1)) if k not in own)


def test_bad_arguments_name_the_option():
    with pytest.raises(ValueError, match="--seeds"):
        jobs.run_seeds([42], 0)
    with pytest.raises(ValueError, match="--chapter"):
        jobs.chapter_runs("smoke", 9, 1)
    with pytest.raises(ValueError, match="--max-parallel"):
        jobs.Resources(max_parallel=0)
    with pytest.raises(ValueError, match="--gpus-per-job"):
        jobs.Resources(gpus_per_job=-1)


def test_the_cost_is_steps_over_the_rate_measured_once_per_shape(monkeypatch):
    measured = []

    def rate(cfg, device):
        measured.append((cfg.model.d_model, cfg.batch_size, device))
        return 4.0 if cfg.batch_size == 16 else 2.0

    monkeypatch.setattr(jobs, "step_rate", rate)
    wide = dataclasses.replace(TINY, batch_size=32, steps=72)
    todo = [jobs.Job(f"run {i}", c, False, False) for i, c in enumerate([*RUNS, wide])]
    cost = jobs.estimate(todo, "cuda", "cpu")
    assert measured == [(16, 16, "cpu"), (16, 32, "cpu")]
    assert cost.hours == pytest.approx((3 * 16 / 4.0 + 72 / 2.0) / 3600)
    assert cost.longest == pytest.approx(72 / 2.0 / 3600)
    assert cost.measured_on == "cpu"


def test_the_step_rate_is_measured_on_the_runs_own_config():
    rate = jobs.step_rate(TINY, "cpu", steps=5)
    assert rate > 0
    with pytest.raises(ValueError, match="steps"):
        jobs.step_rate(TINY, "cpu", steps=2)


def test_a_runs_key_does_not_reach_the_sweeps_the_seed_rule_or_the_jobs():
    # editing chapter 11's threshold rule, chapter 8's seed rule or the job command retrains nothing
    closure = module_closure([run_cache.__name__])
    assert {"mechbook.assign_add.config", "mechbook.assign_add.train", "mechbook.assign_add.model"} <= set(closure)
    assert not {"mechbook.assign_add.sweeps", "mechbook.assign_add.seeds", "mechbook.assign_add.jobs"} & set(closure)
