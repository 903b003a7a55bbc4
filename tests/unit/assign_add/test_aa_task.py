"""The Assign-and-Add task of chapter 7: split, restrictions, layout, pools, bad input."""

import itertools
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.assign_add.task import GENERALISATION_UNION, POOL_NAMES, TWO_VAR, Task, TaskConfig, union_accuracy

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


def literal_train_pairs(seed: int, n: int, fraction: float) -> set[tuple[int, int]]:
    """The split as the authors' run states it: a seeded Python sample of the row-major pairs."""
    pairs = [(a, b) for a in range(n) for b in range(n)]
    return set(random.Random(seed).sample(pairs, math.floor(fraction * n * n)))


@pytest.mark.parametrize("seed, fraction", [(42, 0.7), (42, 0.25), (7, 0.7)])
def test_split_is_the_papers_seeded_python_sample(seed, fraction):
    task = Task(TaskConfig(split_seed=seed, train_pair_fraction=fraction))
    assert {tuple(p) for p in np.argwhere(task.train_pairs)} == literal_train_pairs(seed, 59, fraction)


def test_two_var_fraction_thins_rows_as_the_papers_table_does():
    """Row (v, kind 3, n1, n2) is kept when Random(42 + its index in the (v, kind, n1, n2)
    table) draws below r; literal loop over that table as reference."""
    r = 0.25
    kept = Task(TaskConfig(two_var_fraction=r)).train_rows
    kept = {tuple(row[[0, 2, 3]]) for row in kept if row[1] == TWO_VAR}
    train = literal_train_pairs(42, 59, 0.7)
    literal = set()
    for v, t, a, b in itertools.product(range(12), range(4), range(59), range(59)):
        if t == 3 and v < 10 and (a, b) in train and random.Random(42 + ((v * 4 + t) * 59 + a) * 59 + b).random() < r:
            literal.add((v, a, b))
    assert kept == literal
    assert abs(len(kept) / (10 * 2436) - r) < 4 * math.sqrt(r * (1 - r) / (10 * 2436))


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
    var, var2 = TASK._two_var_draw(rows[:, 0], rows[:, 1], rng)
    draws = TASK._draw(var, var2, rows[:, 1], rows[:, 2], rows[:, 3], rng)
    assert np.array_equal(TASK._layout(draws), TASK._layout_loop(draws))


def test_sampling_is_deterministic_and_fresh():
    a, _ = TASK.sample(64, np.random.default_rng(3))
    b, _ = TASK.sample(64, np.random.default_rng(3))
    assert np.array_equal(a, b)
    rng = np.random.default_rng(4)
    same_rows = np.zeros(200, dtype=np.int64)
    x, _ = TASK.sample(same_rows, rng)
    assert len({tuple(s) for s in x}) > 100, "contexts are not drawn afresh for the same row"


def within(observed: int, n: int, p: float, z: float = 4.5) -> bool:
    """Whether a count of ``observed`` in ``n`` Bernoulli(p) draws lies within z standard errors."""
    return abs(observed / n - p) <= z * math.sqrt(p * (1 - p) / n)


def test_training_generator_matches_the_papers_distributions():
    """Counts 1..6 uniform, raised to 2 for 2-var (P(2 | 2-var) = 1/3, P(k | 2-var) = 1/6 for
    k >= 3), and (v1, v2) uniform over the 92 allowed pairs (P(v1 = a) = 10/92, where a row-tied v1 gives 1/10)."""
    x, _ = TASK.sample(120_000, np.random.default_rng(5))
    n_assign = (x[:, :12] >= CFG.var0).sum(axis=1)
    two = (x[:, 13] >= CFG.var0) & (x[:, 14] >= CFG.var0)
    n_two, n_other = int(two.sum()), int((~two).sum())
    assert within(n_two, len(x), 10 / 42)
    assert within(int((n_assign[two] == 2).sum()), n_two, 1 / 3)
    for k in range(3, 7):
        assert within(int((n_assign[two] == k).sum()), n_two, 1 / 6)
    for k in range(1, 7):
        assert within(int((n_assign[~two] == k).sum()), n_other, 1 / 6)
    v1, v2 = x[two, 13] - CFG.var0, x[two, 14] - CFG.var0
    assert within(int((v1 == 0).sum()), n_two, 10 / 92) and within(int((v1 == 2).sum()), n_two, 9 / 92)
    pair_counts = np.zeros((12, 12), dtype=int)
    np.add.at(pair_counts, (v1, v2), 1)
    assert (pair_counts[~TASK.allowed_two_var] == 0).all()
    allowed = pair_counts[TASK.allowed_two_var]
    chi2 = float(((allowed - n_two / 92) ** 2 / (n_two / 92)).sum())
    assert chi2 < 91 + 5 * math.sqrt(2 * 91), f"pair frequencies not uniform (chi2 {chi2:.0f} on 91 dof)"


def test_pool_generator_draws_two_var_counts_uniformly_from_two():
    rows = np.tile([[0, TWO_VAR, 3, 4]], (60_000, 1))
    x, _ = TASK.generate(
        rows,
        np.random.default_rng(1),
        var2=np.full(60_000, 5),
        n_assign=TASK.pool_n_assign(rows[:, 1], np.random.default_rng(2)),
    )
    n_assign = (x[:, :12] >= CFG.var0).sum(axis=1)
    for k in range(2, 7):
        assert within(int((n_assign == k).sum()), len(x), 1 / 5)


def test_enumerated_union_holds_every_sequence_once():
    """Literal count: (held-out pairs x allowed variable pairs) + (training pairs x pairs with
    exactly one / both variables misplaced)."""
    letters = CFG.letters
    counts = {p: 0 for p in GENERALISATION_UNION}
    for (_v1, l1), (_v2, l2) in itertools.permutations(enumerate(letters), 2):
        bad = int(l1 in CFG.no_left) + int(l2 in CFG.no_right)
        part = GENERALISATION_UNION[bad]
        counts[part] += int(TASK.heldout_pairs.sum() if bad == 0 else TASK.train_pairs.sum())
    assert (
        counts
        == TASK.union_counts()
        == {"2var_heldout": 96_140, "2var_misplaced_one": 87_696, "2var_misplaced_both": 9_744}
    )
    tokens, labels, parts = TASK.exact_union(seed=0)
    assert len(tokens) == 193_580 and np.bincount(parts).tolist() == [96_140, 87_696, 9_744]

    def value_of(var_tok: np.ndarray) -> np.ndarray:
        at = tokens[:, :11] == var_tok[:, None]
        assert (at.sum(axis=1) == 1).all()
        return tokens[:, 1:12][at]

    n1, n2 = value_of(tokens[:, 13]), value_of(tokens[:, 14])
    assert np.array_equal(labels, (n1 + n2) % CFG.modulus)
    keys = np.stack([parts, tokens[:, 13], tokens[:, 14], n1, n2], axis=1)
    assert len(np.unique(keys, axis=0)) == len(tokens), "a (number pair, variable pair) occurs twice"
    assert (TASK.heldout_pairs[n1, n2] == (parts == 0)).all()
    for i in np.random.default_rng(0).choice(len(tokens), 300, replace=False):
        _, a, b = parse(tokens[i])
        assert (a, b) == (n1[i], n2[i])


def test_exact_heldout_pool_is_every_heldout_pair_once():
    tokens, labels = TASK.exact_heldout_0var(seed=3)
    assert len(tokens) == 1045 and (tokens[:, 13:15] < CFG.modulus).all()
    pairs = {(int(a), int(b)) for a, b in tokens[:, 13:15]}
    assert pairs == {tuple(p) for p in np.argwhere(TASK.heldout_pairs)}
    assert np.array_equal(labels, (tokens[:, 13] + tokens[:, 14]) % CFG.modulus)


def test_union_accuracy_weights():
    acc = {"2var_heldout": 1.0, "2var_misplaced_one": 0.0, "2var_misplaced_both": 0.5}
    assert union_accuracy(acc, TASK, "equal") == pytest.approx(0.5)
    assert union_accuracy(acc, TASK) == pytest.approx((96_140 + 0.5 * 9_744) / 193_580)
    with pytest.raises(ValueError, match="'paper' or 'equal'"):
        union_accuracy(acc, TASK, "natural")


def test_context_statistics():
    x, _ = TASK.sample(20000, np.random.default_rng(5))
    n_assign = (x[:, :12] >= CFG.var0).sum(axis=1)
    counts = np.bincount(n_assign, minlength=7)[1:]
    assert counts.min() > 0.1 * len(x)  # every count 1..6 occurs often
    pad_before_first = x[:, 0] == CFG.pad
    assert 0.2 < pad_before_first.mean() < 0.9


@pytest.mark.parametrize("name", POOL_NAMES)
def test_pools_hold_what_their_names_say(name):
    tokens, labels = TASK.eval_pools(200, seed=2)[name]
    assert tokens.shape == (200, 16)
    n_vars = (tokens[:, 13:15] >= CFG.var0).sum(axis=1)
    assert (n_vars == int(name[0])).all()
    letters = np.array(CFG.letters)
    for seq, label in zip(tokens, labels):
        _env, a, b = parse(seq)
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
