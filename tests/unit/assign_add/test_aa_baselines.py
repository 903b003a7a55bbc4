"""The accuracy baselines: chance, the best constant, and exact addition with any context value,
checked against literal per-sequence loops and hand-built sequences."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.assign_add import baselines
from mechbook.assign_add.task import POOL_NAMES, Task, TaskConfig

CFG = TaskConfig()


def _sequence(assignments: list[tuple[str, int]], left: str | int, right: str | int) -> np.ndarray:
    """One 16-token sequence: the assignments (letter, value), PAD filler, then ``+ left right =``."""
    letter = {c: CFG.var0 + i for i, c in enumerate(CFG.letters)}
    ctx = [t for v, n in assignments for t in (letter[v], n)]
    ctx += [CFG.pad] * (CFG.context_len - len(ctx))
    op = [letter[x] if isinstance(x, str) else x for x in (left, right)]
    return np.array(ctx + [CFG.plus, *op, CFG.eq])


def _literal(tokens: np.ndarray, labels: np.ndarray) -> float:
    """Expected accuracy by enumerating every choice of context value per variable operand."""
    scores = []
    for seq, label in zip(tokens, labels):
        values = [int(seq[i + 1]) for i in range(CFG.context_len - 1) if CFG.var0 <= seq[i] < CFG.d_vocab]
        choices = [
            [int(seq[slot])] if seq[slot] < CFG.modulus else values
            for slot in (CFG.context_len + 1, CFG.context_len + 2)
        ]
        pairs = list(itertools.product(*choices))
        scores.append(sum((a + b) % CFG.modulus == label for a, b in pairs) / len(pairs) if pairs else 0.0)
    return float(np.mean(scores))


def test_chance_and_best_constant():
    assert baselines.chance(59) == pytest.approx(1 / 59)
    assert baselines.best_constant(np.array([3, 3, 5, 7])) == 0.5
    with pytest.raises(ValueError, match="modulus"):
        baselines.chance(0)
    with pytest.raises(ValueError, match="labels is empty"):
        baselines.best_constant(np.array([], dtype=int))


def test_any_value_on_hand_built_sequences():
    one = _sequence([("a", 7)], "a", 5)  # the only value is the right one
    three = _sequence([("a", 7), ("b", 1), ("c", 30)], "a", 5)  # one of three values is right
    two = _sequence([("a", 7), ("b", 1)], "a", "b")  # (7+1) is right, and so is (1+7): 2 of 4 choices
    constants = _sequence([("a", 7)], 10, 20)
    labels = np.array([12, 12, 8, 30])
    assert baselines.any_value_accuracy(one[None], labels[:1], CFG) == 1.0
    assert baselines.any_value_accuracy(three[None], labels[1:2], CFG) == pytest.approx(1 / 3)
    assert baselines.any_value_accuracy(two[None], labels[2:3], CFG) == pytest.approx(0.5)
    assert baselines.any_value_accuracy(constants[None], labels[3:], CFG) == 1.0
    assert baselines.any_value_accuracy(constants[None], np.array([31]), CFG) == 0.0


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), pool=st.sampled_from([p for p in POOL_NAMES if not p.startswith("0var")]))
def test_any_value_matches_a_literal_loop(seed, pool):
    tokens, labels = Task().eval_pools(16, seed=seed)[pool]
    assert baselines.any_value_accuracy(tokens, labels, CFG) == pytest.approx(_literal(tokens, labels))


def test_pool_baselines_and_the_hardest_control():
    b = baselines.pool_baselines(Task(), n_per_pool=64)
    assert b.chance == pytest.approx(1 / 59) and set(b.best_constant) == set(POOL_NAMES)
    assert not any(p.startswith("0var") for p in b.any_value)
    # with up to six assignments, any-value addition is right more often than chance on 1-var pools
    assert b.any_value["1var_train"] > 5 * b.chance
    assert b.control("1var_train") == b.any_value["1var_train"]
    assert b.control("0var_train") == max(b.chance, b.best_constant["0var_train"])


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 60).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.integers(0, n - 1), min_size=1))))
def test_the_best_constant_is_the_most_common_labels_share_and_never_below_chance(case):
    modulus, labels = case
    assert baselines.best_constant(np.array(labels)) == Counter(labels).most_common(1)[0][1] / len(labels)
    assert baselines.best_constant(np.array(labels)) >= baselines.chance(modulus)
