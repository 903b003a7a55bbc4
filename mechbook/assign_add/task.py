"""The Assign-and-Add task: token layout, the seeded split, training rows and evaluation pools.

Chapter 7 presents it; chapters 8-11 train and probe models on it. A sequence is 16 tokens:
positions ``0..11`` hold 1-6 assignments (``variable value``) with PAD filler, positions
``12..15`` the query ``+ lhs rhs =``. The label is ``(n1 + n2) mod N``.

Token ids (for the default N = 59, 12 variables): numbers ``0..58``, ``'+' = 59``, ``'=' = 60``,
``PAD = 61``, variables ``a..l = 62..73``.

A *row* ``(var, kind, n1, n2)`` fixes what a sequence asks; everything else (the distractor
assignments, their values and order, where the PADs go, and the second variable of a 2-var row)
is drawn afresh every time the row is sampled. Kinds:

- ``0`` (0-var): query ``+ n1 n2 =``; ``var`` is still assigned a random value (a distractor);
- ``1`` (1-var left): ``var n1`` assigned, query ``+ var n2 =``;
- ``2`` (1-var right): ``var n2`` assigned, query ``+ n1 var =``;
- ``3`` (2-var): ``v1 n1`` and ``v2 n2`` assigned, query ``+ v1 v2 =``; in training the pair
  ``(v1, v2)`` is drawn uniformly from the allowed ordered pairs every time (the row's ``var``
  only counts the row: 10 rows per number pair, as in the paper's run).

The defaults reproduce the authors' released run: its split (Python's
``random.Random(42).sample`` of 2,436 of the row-major ordered pairs), its restrictions and its
generator (number of assignments uniform on 1..6, raised to 2 for 2-var rows).
"""

from __future__ import annotations

import math
import random
import string
from dataclasses import dataclass

import numpy as np

from mechbook.validation import POSITIVE, SEED, at_least, between, check_argument, check_fields, one_of

KIND_NAMES: tuple[str, ...] = ("0-var", "1-var left", "1-var right", "2-var")
ZERO_VAR, ONE_VAR_LEFT, ONE_VAR_RIGHT, TWO_VAR = 0, 1, 2, 3

POOL_NAMES: tuple[str, ...] = (
    "0var_train",
    "0var_heldout",
    "1var_train",
    "1var_heldout",
    "1var_misplaced",
    "2var_train",
    "2var_heldout",
    "2var_misplaced_one",
    "2var_misplaced_both",
)
"""The nine evaluation pools, in the order the book plots them."""

GENERALISATION_UNION: tuple[str, ...] = ("2var_heldout", "2var_misplaced_one", "2var_misplaced_both")
"""The 2-var pools that test generalisation (held-out pairs or misplaced variables)."""


def union_accuracy(accuracies: dict[str, float], task: Task, weighting: str = "paper") -> float:
    """Accuracy on the 2-var generalisation union from its parts' accuracies.

    ``"paper"``: weighted by the parts' sizes in the enumerated union (:meth:`Task.union_counts`,
    0.497 / 0.453 / 0.050 at the default), which is how the paper scores the union;
    ``"equal"``: the book's earlier mean of the three parts (1/3 each).
    """
    if weighting == "equal":
        return float(np.mean([accuracies[p] for p in GENERALISATION_UNION]))
    if weighting != "paper":
        raise ValueError(f"weighting must be 'paper' or 'equal', got {weighting!r}")
    counts = task.union_counts()
    return float(sum(accuracies[p] * counts[p] for p in GENERALISATION_UNION) / sum(counts.values()))


@dataclass(frozen=True)
class TaskConfig:
    """Everything that defines the task and its split (chapter 7); the defaults are the paper's run.

    ``train_pair_fraction`` (f) is the share of the ``N * N`` ordered pairs used for training:
    ``random.Random(split_seed).sample(pairs, floor(f * N^2))`` over the pairs in row-major order
    (``n1`` outer), as the authors' run draws its 2,436 training pairs with seed 42.
    ``two_var_fraction`` (r) is the share of eligible 2-var training rows kept, each row decided
    as in the authors' code by ``random.Random(split_seed + i).random() < r`` with ``i`` the row's
    index in their (variable, kind, n1, n2) table (chapter 11 sweeps both). ``no_right``
    variables never appear as the right operand in training, ``no_left`` ones never as the left.
    """

    modulus: int = 59
    n_vars: int = 12
    seq_len: int = 16
    query_len: int = 4
    max_assignments: int = 6
    train_pair_fraction: float = 0.7
    two_var_fraction: float = 1.0
    split_seed: int = 42
    no_right: tuple[str, ...] = ("a", "b")
    no_left: tuple[str, ...] = ("k", "l")

    def __post_init__(self) -> None:
        check_fields(
            self,
            modulus=at_least(2, "the paper uses 59"),
            n_vars=between(2, len(string.ascii_lowercase), "one letter per variable"),
            seq_len=POSITIVE,
            query_len=one_of((4,), "the query is '+ lhs rhs ='"),
            max_assignments=at_least(2, "2-var sequences need two"),
            train_pair_fraction=between(0.0, 1.0, low_open=True),
            two_var_fraction=between(0.0, 1.0),
            split_seed=SEED,
        )
        if 2 * self.max_assignments > self.context_len:
            raise ValueError(
                f"a context of {self.context_len} tokens (seq_len {self.seq_len} - query_len {self.query_len}) "
                f"cannot hold {self.max_assignments} assignments of 2 tokens: raise seq_len to at least "
                f"{2 * self.max_assignments + self.query_len} or lower max_assignments"
            )
        if self.max_assignments > self.n_vars:
            raise ValueError(
                f"each variable is assigned at most once, so {self.n_vars} variables cannot fill "
                f"{self.max_assignments} assignments: raise n_vars or lower max_assignments"
            )
        letters = set(self.letters)
        for name, group in (("no_right", self.no_right), ("no_left", self.no_left)):
            unknown = sorted(set(group) - letters)
            if unknown:
                raise ValueError(
                    f"{name} names {unknown}, which are not among the variables {self.letters[0]}..{self.letters[-1]}"
                )

    @property
    def context_len(self) -> int:
        """Tokens before the query (12 by default)."""
        return self.seq_len - self.query_len

    @property
    def letters(self) -> tuple[str, ...]:
        """The variable names, ``a``, ``b``, ... (12 by default: ``a..l``)."""
        return tuple(string.ascii_lowercase[: self.n_vars])

    @property
    def plus(self) -> int:
        return self.modulus

    @property
    def eq(self) -> int:
        return self.modulus + 1

    @property
    def pad(self) -> int:
        return self.modulus + 2

    @property
    def var0(self) -> int:
        """Token id of the first variable (``a``)."""
        return self.modulus + 3

    @property
    def d_vocab(self) -> int:
        """Number of input tokens: N numbers, '+', '=', PAD and the variables (74 by default)."""
        return self.modulus + 3 + self.n_vars


@dataclass
class Draws:
    """The random choices behind a batch of sequences (B rows), before they are laid out.

    ``assign_vars``/``assign_vals`` (B, A) hold the assignments in context order, the first
    ``n_assign[b]`` of each row valid; ``pad_gaps`` (B, C) holds, for each of the ``C = 12`` PAD
    slots, the gap it drops into (``0..n_assign``), only the first ``C - 2 n_assign`` valid.
    """

    assign_vars: np.ndarray
    assign_vals: np.ndarray
    n_assign: np.ndarray
    pad_gaps: np.ndarray
    lhs: np.ndarray
    rhs: np.ndarray
    labels: np.ndarray


class Task:
    """The task built from a :class:`TaskConfig`: split, rows, sampling, pools, rendering."""

    def __init__(self, cfg: TaskConfig = TaskConfig()) -> None:
        self.cfg = check_argument(cfg, TaskConfig, "Task's cfg")
        n = cfg.modulus
        n_train = math.floor(cfg.train_pair_fraction * n * n + 1e-9)
        if n_train < 1:
            raise ValueError(f"train_pair_fraction {cfg.train_pair_fraction} leaves no training pair for modulus {n}")
        row_major = [(n1, n2) for n1 in range(n) for n2 in range(n)]
        chosen = np.array(random.Random(cfg.split_seed).sample(row_major, n_train)).reshape(-1, 2)
        self.train_pairs: np.ndarray = np.zeros((n, n), dtype=bool)
        self.train_pairs[chosen[:, 0], chosen[:, 1]] = True
        """(N, N) bool: True where the ordered pair (n1, n2) may be summed in training."""
        letters = cfg.letters
        self.no_right = np.array([v in cfg.no_right for v in letters])
        self.no_left = np.array([v in cfg.no_left for v in letters])
        v = np.arange(cfg.n_vars)
        self.allowed_two_var: np.ndarray = ~self.no_left[:, None] & ~self.no_right[None, :] & (v[:, None] != v[None, :])
        """(V, V) bool: ordered variable pairs (v1, v2) allowed in 2-var training sequences."""
        self.two_var_pairs: np.ndarray = np.argwhere(self.allowed_two_var)
        """(92, 2) the allowed pairs (v1, v2), row-major; training draws one uniformly per 2-var row."""
        self.train_rows: np.ndarray = self._build_train_rows()
        """(R, 4) int64 rows ``(var, kind, n1, n2)`` that training samples from, with replacement."""

    # ------------------------------------------------------------------ split and rows
    def _build_train_rows(self) -> np.ndarray:
        cfg = self.cfg
        n1, n2 = np.nonzero(self.train_pairs)
        rows = []
        for kind, var_ok in (
            (ZERO_VAR, np.ones(cfg.n_vars, dtype=bool)),
            (ONE_VAR_LEFT, ~self.no_left),
            (ONE_VAR_RIGHT, ~self.no_right),
            (TWO_VAR, self.allowed_two_var.any(axis=1)),
        ):
            vars_ = np.nonzero(var_ok)[0]
            block = np.stack(
                [
                    np.repeat(vars_, n1.size),
                    np.full(vars_.size * n1.size, kind),
                    np.tile(n1, vars_.size),
                    np.tile(n2, vars_.size),
                ],
                axis=1,
            )
            if kind == TWO_VAR and cfg.two_var_fraction < 1.0:
                n = cfg.modulus
                table_index = ((block[:, 0] * 4 + kind) * n + block[:, 2]) * n + block[:, 3]
                keep = [random.Random(cfg.split_seed + int(i)).random() < cfg.two_var_fraction for i in table_index]
                block = block[np.array(keep, dtype=bool)]
            rows.append(block)
        return np.concatenate(rows).astype(np.int64)

    @property
    def heldout_pairs(self) -> np.ndarray:
        """(N, N) bool: the pairs never summed in training (1,045 of 3,481 by default)."""
        return ~self.train_pairs

    def kind_counts(self) -> dict[str, int]:
        """Number of training rows of each kind (chapter 7's table)."""
        counts = np.bincount(self.train_rows[:, 1], minlength=4)
        return {name: int(c) for name, c in zip(KIND_NAMES, counts)}

    # ------------------------------------------------------------------ drawing and layout
    def _draw(
        self,
        var: np.ndarray,
        var2: np.ndarray,
        kind: np.ndarray,
        n1: np.ndarray,
        n2: np.ndarray,
        rng: np.random.Generator,
        n_assign: np.ndarray | None = None,
    ) -> Draws:
        """Draw contexts for explicit rows: distractors, values, order and PAD gaps (vectorised)."""
        cfg = self.cfg
        b, a_max, c = len(var), cfg.max_assignments, cfg.context_len
        two = kind == TWO_VAR
        if n_assign is None:
            n_assign = self.training_n_assign(kind, rng)
        n_assign = np.asarray(n_assign, dtype=np.int64)
        if np.any(n_assign < np.where(two, 2, 1)) or np.any(n_assign > a_max):
            raise ValueError(f"n_assign must be in 1..{a_max} (at least 2 for 2-var rows)")
        rows = np.arange(b)
        # Variable order: required variables first (key -1), the rest in random order.
        keys = rng.random((b, cfg.n_vars))
        keys[rows, var] = -2.0
        keys[rows[two], var2[two]] = -1.0
        chosen = np.argsort(keys, axis=1)[:, :a_max]
        values = rng.integers(0, cfg.modulus, size=(b, a_max))
        values[:, 0] = np.where(kind == ONE_VAR_RIGHT, n2, np.where(kind == ZERO_VAR, values[:, 0], n1))
        values[two, 1] = n2[two]
        # Shuffle the first n_assign assignments; unused slots sort last.
        slot = np.arange(a_max)[None, :]
        order_keys = np.where(slot < n_assign[:, None], rng.random((b, a_max)), 2.0)
        perm = np.argsort(order_keys, axis=1)
        assign_vars = np.take_along_axis(chosen, perm, axis=1)
        assign_vals = np.take_along_axis(values, perm, axis=1)
        pad_gaps = np.floor(rng.random((b, c)) * (n_assign[:, None] + 1)).astype(np.int64)
        var_tok = cfg.var0 + var
        lhs = np.where((kind == ONE_VAR_LEFT) | two, var_tok, n1)
        rhs = np.where(kind == ONE_VAR_RIGHT, var_tok, np.where(two, cfg.var0 + var2, n2))
        labels = (n1 + n2) % cfg.modulus
        return Draws(assign_vars, assign_vals, n_assign, pad_gaps, lhs, rhs, labels)

    def _layout(self, d: Draws) -> np.ndarray:
        """Tokens (B, 16) from draws: assignments at their gap-shifted places, then the query."""
        cfg = self.cfg
        b, a_max, c = d.assign_vars.shape[0], cfg.max_assignments, cfg.context_len
        n_pads = c - 2 * d.n_assign
        valid_pad = np.arange(c)[None, :] < n_pads[:, None]
        gap_counts = ((d.pad_gaps[:, :, None] == np.arange(a_max + 1)) & valid_pad[:, :, None]).sum(axis=1)
        starts = np.cumsum(gap_counts, axis=1)[:, :a_max] + 2 * np.arange(a_max)
        tokens = np.full((b, cfg.seq_len), cfg.pad, dtype=np.int64)
        used = np.arange(a_max)[None, :] < d.n_assign[:, None]
        r = np.broadcast_to(np.arange(b)[:, None], used.shape)[used]
        tokens[r, starts[used]] = cfg.var0 + d.assign_vars[used]
        tokens[r, starts[used] + 1] = d.assign_vals[used]
        tokens[:, c:] = np.stack([np.full(b, cfg.plus), d.lhs, d.rhs, np.full(b, cfg.eq)], axis=1)
        return tokens

    def _layout_loop(self, d: Draws) -> np.ndarray:
        """Literal per-sequence version of :meth:`_layout` (reference for tests and the benchmark)."""
        cfg = self.cfg
        out = []
        for i in range(len(d.n_assign)):
            k = int(d.n_assign[i])
            gaps = [0] * (k + 1)
            for g in d.pad_gaps[i, : cfg.context_len - 2 * k]:
                gaps[int(g)] += 1
            seq = [cfg.pad] * gaps[0]
            for j in range(k):
                seq += [cfg.var0 + int(d.assign_vars[i, j]), int(d.assign_vals[i, j])] + [cfg.pad] * gaps[j + 1]
            seq += [cfg.plus, int(d.lhs[i]), int(d.rhs[i]), cfg.eq]
            out.append(seq)
        return np.array(out, dtype=np.int64).reshape(-1, cfg.seq_len)

    def training_n_assign(self, kind: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Numbers of assignments as the paper's training generator draws them: uniform on
        ``1..max_assignments``, raised to 2 for 2-var rows (so P(2 | 2-var) = 2/6 at the default)."""
        a_max = self.cfg.max_assignments
        n = 1 + np.floor(rng.random(len(kind)) * a_max).astype(np.int64)
        return np.where(kind == TWO_VAR, np.maximum(n, 2), n)

    def pool_n_assign(self, kind: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Numbers of assignments as the paper's evaluation pools draw them: uniform on
        ``1..max_assignments``, and uniform on ``2..max_assignments`` for 2-var sequences (the pools'
        builder draws the 2-var count afresh rather than raising it, so P(2 | 2-var) = 1/5 there)."""
        a_max = self.cfg.max_assignments
        low = np.where(kind == TWO_VAR, 2, 1)
        return low + np.floor(rng.random(len(kind)) * (a_max + 1 - low)).astype(np.int64)

    def _two_var_draw(
        self, var: np.ndarray, kind: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(v1, v2)`` for each row: for 2-var rows a pair drawn uniformly from the 92 allowed
        ordered pairs (replacing the row's variable), else ``(var, -1)``."""
        two = kind == TWO_VAR
        pick = self.two_var_pairs[rng.integers(0, len(self.two_var_pairs), size=len(var))]
        return np.where(two, pick[:, 0], var), np.where(two, pick[:, 1], -1)

    def generate(
        self,
        rows: np.ndarray,
        rng: np.random.Generator,
        var2: np.ndarray | None = None,
        n_assign: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Tokens (B, 16) int64 and labels (B,) for explicit rows ``(var, kind, n1, n2)``.

        ``var2`` fixes the second variable of 2-var rows, whose ``var`` is then the first; if None
        the pair ``(v1, v2)`` of each 2-var row is drawn uniformly from the allowed pairs, as in
        training. ``n_assign`` fixes the number of assignments (:meth:`training_n_assign` if None).
        """
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
        var, kind, n1, n2 = rows.T
        if var2 is None:
            var, var2 = self._two_var_draw(var, kind, rng)
        d = self._draw(var, np.asarray(var2, dtype=np.int64), kind, n1, n2, rng, n_assign)
        return self._layout(d), d.labels

    def sample(self, n_or_idx: int | np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """A training batch: ``n`` rows drawn with replacement (or the rows at ``idx``), fresh contexts."""
        if isinstance(n_or_idx, (np.ndarray, list, tuple)):
            idx = np.asarray(n_or_idx)
        else:
            n = check_argument(n_or_idx, int, "Task.sample's n (or an array of row indices)", POSITIVE)
            idx = rng.integers(0, len(self.train_rows), size=int(n))
        return self.generate(self.train_rows[idx], rng)

    def sample_loop(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """The same as :meth:`sample` written as a per-sequence Python loop (benchmark baseline)."""
        check_argument(n, int, "Task.sample_loop's n", POSITIVE)
        toks, labels = [], []
        for _ in range(n):
            row = self.train_rows[rng.integers(0, len(self.train_rows), size=1)]
            var, var2 = self._two_var_draw(row[:, 0], row[:, 1], rng)
            d = self._draw(var, var2, row[:, 1], row[:, 2], row[:, 3], rng)
            toks.append(self._layout_loop(d))
            labels.append(d.labels)
        return np.concatenate(toks), np.concatenate(labels)

    # ------------------------------------------------------------------ evaluation pools
    def pool_rows(self, name: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` rows ``(var, kind, n1, n2)`` and their ``var2`` for evaluation pool ``name``.

        Pools on training pairs take their number pairs from the training pairs; ``*_heldout``
        from the held-out pairs; the misplaced pools use training pairs with a restricted variable
        in its forbidden slot (1-var: a/b on the right or k/l on the left; 2-var one: exactly one
        of v1 in {k,l}, v2 in {a,b}; 2-var both: v1 in {k,l} and v2 in {a,b}).
        """
        if name not in POOL_NAMES:
            raise ValueError(f"unknown pool {name!r}; the pools are {', '.join(POOL_NAMES)}")
        check_argument(n, int, "Task.pool_rows's n", POSITIVE)
        nv = self.cfg.n_vars
        pairs = np.argwhere(self.heldout_pairs if name.endswith("heldout") else self.train_pairs)
        if len(pairs) == 0:
            raise ValueError(f"pool {name} is empty: train_pair_fraction leaves no such pairs")
        n1, n2 = pairs[rng.integers(0, len(pairs), size=n)].T
        if name.startswith("0var"):
            var, kind = rng.integers(0, nv, size=n), np.full(n, ZERO_VAR)
            return np.stack([var, kind, n1, n2], axis=1), np.full(n, -1)
        if name.startswith("1var"):
            left_ok = ~self.no_left if name != "1var_misplaced" else self.no_left
            right_ok = ~self.no_right if name != "1var_misplaced" else self.no_right
            options = [(v, ONE_VAR_LEFT) for v in np.nonzero(left_ok)[0]] + [
                (v, ONE_VAR_RIGHT) for v in np.nonzero(right_ok)[0]
            ]
            if not options:
                raise ValueError(f"pool {name} is empty: no variable is restricted in this TaskConfig")
            pick = np.array(options)[rng.integers(0, len(options), size=n)]
            return np.stack([pick[:, 0], pick[:, 1], n1, n2], axis=1), np.full(n, -1)
        v = np.arange(nv)
        distinct = v[:, None] != v[None, :]
        bad_left, bad_right = self.no_left[:, None], self.no_right[None, :]
        allowed = {
            "2var_train": self.allowed_two_var,
            "2var_heldout": self.allowed_two_var,
            "2var_misplaced_one": distinct & (bad_left ^ bad_right),
            "2var_misplaced_both": distinct & bad_left & bad_right,
        }[name]
        vpairs = np.argwhere(allowed)
        if len(vpairs) == 0:
            raise ValueError(f"pool {name} is empty: no variable pair fits it in this TaskConfig")
        var, var2 = vpairs[rng.integers(0, len(vpairs), size=n)].T
        return np.stack([var, np.full(n, TWO_VAR), n1, n2], axis=1), var2

    def eval_pools(self, n_per_pool: int, seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """``{pool name: (tokens (n, 16), labels (n,))}`` for the nine pools, deterministic in ``seed``.

        The ``*_train`` pools are drawn from the training rows themselves with the training
        generator (so with r < 1 the 2-var train pool holds only kept rows); the others as
        described in :meth:`pool_rows`, with :meth:`pool_n_assign` assignments.
        """
        check_argument(n_per_pool, int, "Task.eval_pools's n_per_pool", POSITIVE)
        check_argument(seed, int, "Task.eval_pools's seed", SEED)
        rng = np.random.default_rng([seed, 7])
        pools = {}
        for name in POOL_NAMES:
            if name.endswith("_train"):
                kind = {"0": [ZERO_VAR], "1": [ONE_VAR_LEFT, ONE_VAR_RIGHT], "2": [TWO_VAR]}[name[0]]
                candidates = np.nonzero(np.isin(self.train_rows[:, 1], kind))[0]
                if len(candidates) == 0:
                    raise ValueError(f"pool {name} is empty: this TaskConfig keeps no such training rows")
                pools[name] = self.generate(
                    self.train_rows[candidates[rng.integers(0, len(candidates), size=n_per_pool)]], rng
                )
            else:
                rows, var2 = self.pool_rows(name, n_per_pool, rng)
                pools[name] = self.generate(rows, rng, var2=var2, n_assign=self.pool_n_assign(rows[:, 1], rng))
        return pools

    # ------------------------------------------------------------------ exactly enumerated pools
    def union_var_pairs(self, part: str) -> np.ndarray:
        """(K, 2) ordered variable pairs (v1, v2), row-major, of one part of the 2-var
        generalisation union: ``2var_heldout`` the 92 allowed pairs, ``2var_misplaced_one`` the
        pairs with exactly one of v1 in ``no_left``, v2 in ``no_right`` (36 at the default),
        ``2var_misplaced_both`` those with both (4)."""
        v = np.arange(self.cfg.n_vars)
        distinct = v[:, None] != v[None, :]
        bad_left, bad_right = self.no_left[:, None], self.no_right[None, :]
        allowed = {
            "2var_heldout": self.allowed_two_var,
            "2var_misplaced_one": distinct & (bad_left ^ bad_right),
            "2var_misplaced_both": distinct & bad_left & bad_right,
        }
        if part not in allowed:
            raise ValueError(f"unknown union part {part!r}; the parts are {', '.join(GENERALISATION_UNION)}")
        return np.argwhere(allowed[part])

    def union_counts(self) -> dict[str, int]:
        """Sequences in each part of the enumerated 2-var union: number pairs (held-out for
        ``2var_heldout``, training for the misplaced parts) times the part's variable pairs
        (96,140 + 87,696 + 9,744 = 193,580 at the default)."""
        n_pairs = {"2var_heldout": int(self.heldout_pairs.sum())}
        return {
            part: n_pairs.get(part, int(self.train_pairs.sum())) * len(self.union_var_pairs(part))
            for part in GENERALISATION_UNION
        }

    def exact_heldout_0var(self, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Every held-out pair once (row-major), as a 0-var sequence with fresh pool contexts."""
        rng = np.random.default_rng([seed, 11])
        n1, n2 = np.nonzero(self.heldout_pairs)
        var = rng.integers(0, self.cfg.n_vars, size=len(n1))
        rows = np.stack([var, np.full(len(n1), ZERO_VAR), n1, n2], axis=1)
        return self.generate(rows, rng, var2=np.full(len(n1), -1), n_assign=self.pool_n_assign(rows[:, 1], rng))

    def exact_union(self, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The enumerated 2-var generalisation union: for each part (see :meth:`union_var_pairs`)
        every (number pair, variable pair) once, with fresh pool contexts. Returns tokens (S, 16),
        labels (S,) and the part index (S,) into :data:`GENERALISATION_UNION`."""
        rng = np.random.default_rng([seed, 13])
        tokens, labels, parts = [], [], []
        for i, part in enumerate(GENERALISATION_UNION):
            pairs = np.argwhere(self.heldout_pairs if part == "2var_heldout" else self.train_pairs)
            vpairs = self.union_var_pairs(part)
            n1, n2 = np.repeat(pairs, len(vpairs), axis=0).T
            v1, v2 = np.tile(vpairs, (len(pairs), 1)).T
            rows = np.stack([v1, np.full(len(v1), TWO_VAR), n1, n2], axis=1)
            x, y = self.generate(rows, rng, var2=v2, n_assign=self.pool_n_assign(rows[:, 1], rng))
            tokens.append(x)
            labels.append(y)
            parts.append(np.full(len(y), i))
        return np.concatenate(tokens), np.concatenate(labels), np.concatenate(parts)

    # ------------------------------------------------------------------ reading
    def token_str(self, t: int) -> str:
        """The readable form of one token id."""
        cfg = self.cfg
        if 0 <= t < cfg.modulus:
            return str(t)
        if cfg.var0 <= t < cfg.d_vocab:
            return cfg.letters[t - cfg.var0]
        names = {cfg.plus: "+", cfg.eq: "=", cfg.pad: "_"}
        if t in names:
            return names[t]
        raise ValueError(f"token id {t} is outside the vocabulary 0..{cfg.d_vocab - 1}")

    def render(self, tokens: np.ndarray) -> str | list[str]:
        """``c 1 b 17 a 42 + b 19 =`` as ``"c=1, b=17, a=42, b+19=?"`` (a list for a batch)."""
        tokens = np.asarray(tokens)
        if tokens.ndim == 2:
            return [self.render(t) for t in tokens]
        cfg = self.cfg
        if tokens.shape != (cfg.seq_len,):
            raise ValueError(f"a sequence has {cfg.seq_len} tokens, got shape {tokens.shape}")
        ctx = [int(t) for t in tokens[: cfg.context_len] if t != cfg.pad]
        parts = [f"{self.token_str(ctx[i])}={self.token_str(ctx[i + 1])}" for i in range(0, len(ctx) - 1, 2)]
        q = tokens[cfg.context_len :]
        parts.append(f"{self.token_str(int(q[1]))}+{self.token_str(int(q[2]))}=?")
        return ", ".join(parts)

    def raw(self, tokens: np.ndarray) -> str:
        """The 16 tokens as the model reads them, PAD shown as ``_``."""
        return " ".join(self.token_str(int(t)) for t in np.asarray(tokens))
