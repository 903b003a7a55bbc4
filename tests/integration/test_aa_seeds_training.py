"""Chapter 8's seed runs (mechbook/assign_add/seeds.py) trained for real: dissect opens the
rule-picked run with its checkpoints, and a picked seed outside the stack is trained alone."""

import dataclasses

import numpy as np
import test_aa_seeds
from test_aa_seeds import TINY

from mechbook.assign_add import seeds

_quiet = test_aa_seeds._quiet  # the autouse fixture of test_aa_seeds.py


def test_dissect_opens_the_rule_picked_run_with_its_checkpoints():
    runs = seeds.SeedRuns(TINY, seeds=(0, 1, 2, 3))
    got = seeds.dissect(runs, device="cpu")
    assert [r.config.seed for r in got.results] == [0, 1, 2, 3]
    assert got.example == seeds.example_seed(got.summary)
    assert got.run is got.results[[0, 1, 2, 3].index(got.example)] and got.picked_by_rule
    assert sorted(got.run.checkpoints) == [0, 8, 16]
    chosen = seeds.dissect(dataclasses.replace(runs, pick=2), device="cpu")
    assert chosen.run.config.seed == 2 and chosen.example == got.example
    assert chosen.picked_by_rule == (got.example == 2)


def test_a_picked_seed_outside_the_stack_is_trained_alone():
    runs = seeds.SeedRuns(TINY, seeds=(0, 1, 2, 3), pick=9)
    got = seeds.dissect(runs, device="cpu")
    assert (got.run.config.seed, got.run.config.model.seed) == (9, 9)
    assert not got.picked_by_rule and 9 not in got.summary.seed.tolist()
    stacked = seeds.train_seeds(TINY, [9], device="cpu", keep=True)[0]
    np.testing.assert_allclose(got.run.accuracy().to_numpy(), stacked.accuracy().to_numpy(), atol=1e-6)
