"""The Assign-and-Add task of chapter 7: split, restrictions, layout, pools, bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.assign_add.task import GENERALISATION_UNION, POOL_NAMES, TWO_VAR, Task, TaskConfig

TASK = Task()
CFG = TASK.cfg


def parse(tokens: np.ndarray) -> tuple[dict[int, int], int, int]:
    """Slow literal reading of one sequence: ({var index: value}, lhs value, rhs value)."""
    ctx = [int(t) for t in tokens[: CFG.context_len] if t != CFG.pad]
    assert len(ctx) % 2 == 0
    env: dict[int, int] = {}
    for var_tok, val in zip(ctx[0::2], ctx[1::2]):
        assert CFG.var0 <= var_tok < CFG.d_vocab and 0 <= val < CFG.modulus
        assert var_tok - CFG.var0 not in env, "a variable assigned twice"
        env[var_tok - CFG.var0] = val
    plus, lhs, rhs, eq = (int(t) for t in tokens[CFG.context_len :])
    assert (plus, eq) == (CFG.plus, CFG.eq)

    def value(t: int) -> int:
        return env[t - CFG.var0] if t >= CFG.var0 else t

    return env, value(lhs), value(rhs)


def test_split_counts_match_the_spec():
    assert TASK.train_pairs.sum() == 2436 and TASK.heldout_pairs.sum() == 1045
    assert TASK.allowed_two_var.sum() == 92
    counts = TASK.kind_counts()
    assert counts == {"0-var": 12 * 2436, "1-var left": 10 * 2436, "1-var right": 10 * 2436, "2-var": 10 * 2436}
    assert abs(counts["2-var"] / sum(counts.values()) - 0.24) < 0.01


def test_split_is_seeded():
    assert np.array_equal(Task(TaskConfig(split_seed=0)).train_pairs, TASK.train_pairs)
    assert not np.array_equal(Task(TaskConfig(split_seed=1)).train_pairs, TASK.train_pairs)


def test_two_var_fraction_keeps_that_share_of_rows():
    kept = Task(TaskConfig(two_var_fraction=0.25)).kind_counts()["2-var"]
    assert kept == int(0.25 * 10 * 2436)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 300))
def test_training_sequences_respect_every_rule(seed, n):
    tokens, labels = TASK.sample(n, np.random.default_rng(seed))
    assert tokens.shape == (n, 16) and tokens.dtype == np.int64 and labels.shape == (n,)
    for seq, label in zip(tokens, labels):
        env, a, b = parse(seq)
        assert 1 <= len(env) <= 6
        assert label == (a + b) % CFG.modulus
        assert TASK.train_pairs[a, b], "a held-out pair summed in training"
        lhs, rhs = int(seq[13]), int(seq[14])
        if lhs >= CFG.var0:
            assert CFG.letters[lhs - CFG.var0] not in CFG.no_left
        if rhs >= CFG.var0:
            assert CFG.letters[rhs - CFG.var0] not in CFG.no_right
        if lhs >= CFG.var0 and rhs >= CFG.var0:
            assert lhs != rhs and len(env) >= 2


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_fast_layout_matches_literal_loop(seed):
    rng = np.random.default_rng(seed)
    rows = TASK.train_rows[rng.integers(0, len(TASK.train_rows), size=64)]
    var2 = TASK._second_vars(rows[:, 0], rows[:, 1], rng)
    draws = TASK._draw(rows[:, 0], var2, rows[:, 1], rows[:, 2], rows[:, 3], rng)
    assert np.array_equal(TASK._layout(draws), TASK._layout_loop(draws))


def test_sampling_is_deterministic_and_fresh():
    a, _ = TASK.sample(64, np.random.default_rng(3))
    b, _ = TASK.sample(64, np.random.default_rng(3))
    assert np.array_equal(a, b)
    rng = np.random.default_rng(4)
    same_rows = np.zeros(200, dtype=np.int64)
    x, _ = TASK.sample(same_rows, rng)
    assert len({tuple(s) for s in x}) > 100, "contexts are not drawn afresh for the same row"


def test_context_statistics():
    x, _ = TASK.sample(20000, np.random.default_rng(5))
    n_assign = ((x[:, :12] >= CFG.var0).sum(axis=1))
    counts = np.bincount(n_assign, minlength=7)[1:]
    assert counts.min() > 0.1 * len(x)  # every count 1..6 occurs often
    pad_before_first = x[:, 0] == CFG.pad
    assert 0.2 < pad_before_first.mean() < 0.9


@pytest.mark.parametrize("name", POOL_NAMES)
def test_pools_hold_what_their_names_say(name):
    tokens, labels = TASK.eval_pools(200, seed=2)[name]
    assert tokens.shape == (200, 16)
    n_vars = ((tokens[:, 13:15] >= CFG.var0).sum(axis=1))
    assert (n_vars == int(name[0])).all()
    letters = np.array(CFG.letters)
    for seq, label in zip(tokens, labels):
        env, a, b = parse(seq)
        assert label == (a + b) % CFG.modulus
        assert TASK.heldout_pairs[a, b] == name.endswith("heldout")
        lhs, rhs = (letters[t - CFG.var0] if t >= CFG.var0 else None for t in (int(seq[13]), int(seq[14])))
        bad = int(lhs in CFG.no_left) + int(rhs in CFG.no_right)
        expected = {"1var_misplaced": 1, "2var_misplaced_one": 1, "2var_misplaced_both": 2}.get(name, 0)
        assert bad == expected


def test_eval_pools_are_deterministic():
    a, b = TASK.eval_pools(50, seed=9), TASK.eval_pools(50, seed=9)
    assert all(np.array_equal(a[k][0], b[k][0]) for k in POOL_NAMES)
    assert set(GENERALISATION_UNION) <= set(POOL_NAMES)


def test_render_reads_like_the_paper():
    cfg = CFG
    c, b, a = (cfg.var0 + i for i in (2, 1, 0))
    seq = np.array([c, 1, b, 17, a, 42] + [cfg.pad] * 6 + [cfg.plus, b, 19, cfg.eq])
    assert TASK.render(seq) == "c=1, b=17, a=42, b+19=?"
    assert TASK.raw(seq).startswith("c 1 b 17 a 42 _")


def test_generated_two_var_rows_need_two_assignments():
    rows = np.array([[0, TWO_VAR, 3, 4]])
    with pytest.raises(ValueError, match="at least 2"):
        TASK.generate(rows, np.random.default_rng(0), var2=np.array([3]), n_assign=np.array([1]))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"modulus": 1}, "modulus must be at least 2"),
        ({"n_vars": 27}, "one letter per variable"),
        ({"seq_len": 12}, "cannot hold 6 assignments"),
        ({"n_vars": 4}, "cannot fill"),
        ({"no_left": ("z",)}, "not among the variables"),
        ({"train_pair_fraction": 0.0}, "train_pair_fraction"),
    ],
)
def test_bad_configs_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TaskConfig(**kwargs)


def test_unknown_pool_and_bad_token_are_clear_errors():
    with pytest.raises(ValueError, match="unknown pool"):
        TASK.pool_rows("3var", 5, np.random.default_rng(0))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        TASK.token_str(99)
