"""Stacked training (mechbook/assign_add/train.py) across processes: stacks trained in parallel
worker processes equal the same stacks trained here, and the draw stream does not depend on chunks
or workers."""

import test_aa_stacked
import torch
from test_aa_stacked import BASE, RUNS

from mechbook.assign_add.config import with_overrides
from mechbook.assign_add.train import groups_of, train_groups, train_stacked

_quiet = test_aa_stacked._quiet  # the autouse fixture of test_aa_stacked.py


def test_the_stream_does_not_depend_on_chunks_or_workers():
    one = train_stacked(RUNS[:2], device="cpu", chunk=24, workers=1)
    pooled = train_stacked(RUNS[:2], device="cpu", chunk=7, workers=2)
    for a, b in zip(one, pooled):
        for name in a.final_state:
            assert torch.equal(a.final_state[name], b.final_state[name])


def test_stacks_in_parallel_processes_equal_the_same_stacks_trained_here():
    runs = [*RUNS, with_overrides(BASE, seed=5, model__seed=5)]
    parallel = train_groups(runs, device="cpu", processes=2)
    here = [r for g in groups_of(runs) for r in train_stacked(g, device="cpu")]
    assert [r.config for r in parallel] == runs
    for a, b in zip(parallel, here):
        assert a.history.equals(b.history)
        for name in a.final_state:
            assert torch.equal(a.final_state[name], b.final_state[name])
