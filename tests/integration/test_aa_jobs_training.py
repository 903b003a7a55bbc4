"""Jobs (mechbook/assign_add/jobs.py) against runs trained for real: chapter 8's seed runs trained
here are the cached jobs of the plan."""

import test_aa_jobs
from test_aa_jobs import TINY

from mechbook.assign_add import jobs
from mechbook.assign_add.seeds import SeedRuns, seed_configs, train_seeds

_cache = test_aa_jobs._cache  # the autouse fixture of test_aa_jobs.py


def test_chapter_8_seed_runs_trained_here_are_cached_jobs(monkeypatch):
    monkeypatch.setitem(jobs.SEED_RUNS, "smoke", SeedRuns(TINY, seeds=(0, 1, 2, 3)))
    before = jobs.plan("smoke", 8, 5, "cpu")
    assert [j.name for j in before.jobs] == [f"ch08 seed {s}" for s in (0, 1, 2, 3, 4)]
    assert not any(j.cached for j in before.jobs) and all(j.keep for j in before.jobs)
    train_seeds(TINY, (0, 1, 2, 3), "cpu", keep=True)  # what chapter 8 calls (via dissect)
    after = jobs.plan("smoke", 8, 5, "cpu")
    assert [j.name for j in after.missing] == ["ch08 seed 4"]
    assert after.missing[0].cfg == seed_configs(TINY, [4])[0]
