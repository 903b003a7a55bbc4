"""Misplaced-variable cases (mechbook.assign_add.cases, chapter 8): what each case holds, the
history plumbing, the ranking, and the released run's lagging case (b as the right operand)."""

import numpy as np
import pandas as pd
import pytest
from test_aa_release import SHARED, needs_release

from mechbook.assign_add import cases, release
from mechbook.assign_add.model import AssignAddModel, ModelConfig
from mechbook.assign_add.task import Task

TASK = Task()
CFG = TASK.cfg


def test_cases_cover_exactly_the_misplaced_pools():
    specs = cases.case_specs(TASK)
    assert [(p, sum(1 for q, *_ in specs if q == p)) for p in cases.CASE_POOLS] == [(p, 4) for p in cases.CASE_POOLS]
    for part in ("2var_misplaced_one", "2var_misplaced_both"):
        pairs = {(int(v1), int(v2)) for pool, _, ch in specs if pool == part for _, v1, v2 in ch}
        assert pairs == {tuple(p) for p in TASK.union_var_pairs(part).tolist()}


def test_each_case_puts_its_variable_in_its_slot():
    letters = np.array(CFG.letters)
    for (pool, case), (tokens, labels) in cases.case_pools(TASK, 50, seed=1).items():
        lhs, rhs = tokens[:, 13], tokens[:, 14]
        for name_slot in case.split(", "):
            name, slot = name_slot.split()
            column = lhs if slot == "left" else rhs
            assert (column == CFG.var0 + CFG.letters.index(name)).all(), (pool, case)
        two = pool.startswith("2var")
        assert ((lhs >= CFG.var0) & (rhs >= CFG.var0)).all() == two
        bad = np.isin(letters[np.clip(lhs - CFG.var0, 0, None)], CFG.no_left) & (lhs >= CFG.var0)
        bad = bad.astype(int) + (np.isin(letters[np.clip(rhs - CFG.var0, 0, None)], CFG.no_right) & (rhs >= CFG.var0))
        assert (bad == (2 if pool.endswith("both") else 1)).all()
        ctx = tokens[:, :12]
        for i in range(len(tokens)):
            env = {
                int(ctx[i, j]): int(ctx[i, j + 1])
                for j in range(11)
                if ctx[i, j] >= CFG.var0 and ctx[i, j + 1] < CFG.modulus
            }
            a = env[int(lhs[i])] if lhs[i] >= CFG.var0 else int(lhs[i])
            b = env[int(rhs[i])] if rhs[i] >= CFG.var0 else int(rhs[i])
            assert TASK.train_pairs[a, b] and labels[i] == (a + b) % CFG.modulus


def test_case_history_scores_every_case_of_every_step():
    models = {s: AssignAddModel(ModelConfig(d_model=16, d_head=16, d_mlp=32, seed=s)).eval() for s in (1, 2)}
    history = cases.case_history(models.__getitem__, [1, 2], TASK, n_per_case=40, seed=3)
    pools = cases.case_pools(TASK, 40, seed=3)
    for step, model in models.items():
        direct = cases.case_accuracies(model, pools)
        got = history[history.step == step].drop(columns="step").reset_index(drop=True)
        pd.testing.assert_frame_equal(got, direct)


def test_lagging_cases_rank_by_the_mean_over_the_span():
    h = pd.DataFrame(
        {
            "step": [1, 2, 3, 1, 2, 3],
            "pool": ["p"] * 6,
            "case": ["x"] * 3 + ["y"] * 3,
            "accuracy": [0.9, 0.1, 0.2, 0.5, 0.5, 0.5],
        }
    )
    ranked = cases.lagging_cases(h, 2, 3)
    assert ranked.case.tolist() == ["x", "y"] and ranked.accuracy.tolist() == pytest.approx([0.15, 0.5])
    with pytest.raises(ValueError, match="no step"):
        cases.lagging_cases(h, 5, 9)


@needs_release
def test_the_released_plateau_is_b_as_the_right_operand():
    """Over the released run's misplaced plateau every case with b on the right lags far behind."""
    history = cases.case_history(
        lambda s: release.load_release(s, folder=SHARED, download=False), [8001, 10001, 13001], TASK, n_per_case=128
    )
    ranked = cases.lagging_cases(history, 8001, 13001)
    lagging = ranked[ranked.accuracy < 0.3]
    assert len(lagging) == 4 and all("b right" in c for c in lagging.case)
    assert ranked[ranked.accuracy >= 0.3].accuracy.min() > 0.6
