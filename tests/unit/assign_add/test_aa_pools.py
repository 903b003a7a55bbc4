"""What the pools ask and the baselines they are read against (mechbook.assign_add.pools,
chapters 7 and 11): counts against slow literal enumerations, the label check, and the
constant-answer control never below chance."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.assign_add import pools
from mechbook.assign_add.baselines import best_constant, chance
from mechbook.assign_add.task import POOL_NAMES, Task, TaskConfig

TASK = Task()
SMALL = Task(TaskConfig(modulus=7, n_vars=6, max_assignments=3, seq_len=10, no_right=("a",), no_left=("f",)))


def test_variable_configurations_by_enumeration():
    cfg = SMALL.cfg
    letters = cfg.letters
    ok_left = [v for v in letters if v not in cfg.no_left]
    ok_right = [v for v in letters if v not in cfg.no_right]
    pairs = [(a, b) for a in letters for b in letters if a != b]
    bad = [((a in cfg.no_left) + (b in cfg.no_right)) for a, b in pairs]
    got = pools.variable_configurations(SMALL)
    assert got["1var_train"] == len(ok_left) + len(ok_right)
    assert got["1var_misplaced"] == 2 * len(letters) - len(ok_left) - len(ok_right)
    assert got["2var_train"] == bad.count(0)
    assert got["2var_misplaced_one"] == bad.count(1)
    assert got["2var_misplaced_both"] == bad.count(2)


def test_distinct_questions_multiply_configurations_by_pairs():
    got = pools.distinct_questions(TASK)
    assert list(got) == list(POOL_NAMES)
    assert got["0var_heldout"] == TASK.cfg.n_vars * int(TASK.heldout_pairs.sum())
    assert got["2var_train"] == int(TASK.allowed_two_var.sum()) * int(TASK.train_pairs.sum())


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_literal_answer_agrees_with_the_generator(seed):
    tokens, labels = TASK.sample(16, np.random.default_rng(seed))
    assert [pools.literal_answer(t, TASK.cfg) for t in tokens] == list(labels)


def test_label_errors_catch_a_wrong_label():
    drawn = TASK.eval_pools(4, seed=1)
    assert pools.label_errors(TASK, drawn) == 0
    tokens, labels = drawn["1var_train"]
    broken = dict(drawn, **{"1var_train": (tokens, (labels + 1) % TASK.cfg.modulus)})
    assert pools.label_errors(TASK, broken) == 4


@pytest.mark.parametrize("fraction", [0.7, 0.05, 0.02])
def test_coverage_against_literal_sets(fraction):
    task = Task(TaskConfig(train_pair_fraction=fraction))
    n = task.cfg.modulus
    trained = [(a, b) for a in range(n) for b in range(n) if task.train_pairs[a, b]]
    got = pools.coverage(task)
    assert got["sums_missing"] == n - len({(a + b) % n for a, b in trained})
    assert got["left_missing"] == n - len({a for a, _ in trained})
    assert got["right_missing"] == n - len({b for _, b in trained})
    if fraction == 0.7:
        assert got == {"sums_missing": 0, "left_missing": 0, "right_missing": 0}
    if fraction == 0.02:
        assert got["left_missing"] > 0


def test_pool_controls_read_the_training_loops_pools():
    controls = pools.pool_controls(TASK, 64, 1)
    drawn = TASK.eval_pools(64, 1)
    assert list(controls) == list(POOL_NAMES)
    for name in POOL_NAMES:
        assert controls[name] == best_constant(drawn[name][1]) >= chance(TASK.cfg.modulus)
    assert chance(TASK.cfg.modulus) == pytest.approx(1 / 59)
