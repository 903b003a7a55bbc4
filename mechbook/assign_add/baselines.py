"""The scores an accuracy must beat (chapter 8; chapter 11 reads them for its sweeps): chance, the
best constant answer, and the harder control of a model that adds correctly but ignores which
variable is asked for.

- *chance*: ``1 / N`` (the answer is one of N residues);
- *best constant*: the share of a pool's sequences whose answer is the pool's most common one;
- *any context value*: the expected accuracy of a model that adds exactly but, for each variable
  operand, takes a value assigned in the context uniformly at random (any variable's): what
  addition alone earns on variable questions before binding. Computed exactly per sequence,
  over every choice of values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechbook.assign_add.task import POOL_NAMES, Task, TaskConfig


def chance(modulus: int) -> float:
    """Accuracy of a uniform guess among ``modulus`` residues."""
    if modulus < 1:
        raise ValueError(f"modulus must be at least 1, got {modulus}")
    return 1.0 / modulus


def best_constant(labels: np.ndarray) -> float:
    """Share of ``labels`` equal to their most common value: the best constant answer's accuracy.
    No model that ignores its input does better on these labels, and a finite pool puts it at or
    above :func:`chance`, so it is the harder of the two."""
    labels = np.asarray(labels)
    if labels.size == 0:
        raise ValueError("labels is empty: pass at least one sequence")
    return float(np.bincount(labels).max() / labels.size)


def context_values(tokens: np.ndarray, cfg: TaskConfig) -> list[np.ndarray]:
    """The values assigned in each sequence's context (a number right after a variable)."""
    ctx = tokens[:, : cfg.context_len]
    is_var = (ctx >= cfg.var0) & (ctx < cfg.d_vocab)
    out = []
    for row, marks in zip(ctx, is_var):
        at = np.nonzero(marks[:-1])[0] + 1
        out.append(row[at][row[at] < cfg.modulus])
    return out


def any_value_accuracy(tokens: np.ndarray, labels: np.ndarray, cfg: TaskConfig) -> float:
    """Expected accuracy of exact addition with every variable operand replaced by a uniformly
    chosen context value (see the module docstring), averaged over the sequences."""
    c = cfg.context_len
    values = context_values(tokens, cfg)
    hits = []
    for seq, label, vals in zip(tokens, labels, values):
        options = []
        for slot in (c + 1, c + 2):
            tok = seq[slot]
            options.append(np.array([tok]) if tok < cfg.modulus else vals)
        if min(len(o) for o in options) == 0:
            hits.append(0.0)
            continue
        sums = (options[0][:, None] + options[1][None, :]) % cfg.modulus
        hits.append(float((sums == label).mean()))
    return float(np.mean(hits))


@dataclass(frozen=True)
class PoolBaselines:
    """The baselines of the nine pools of one task: ``chance`` (one number), per pool the
    ``best_constant`` accuracy, and per pool with a variable (1-var and 2-var) the ``any_value``
    accuracy (on 0-var pools exact addition is simply right), on ``n_per_pool`` sequences each."""

    chance: float
    best_constant: dict[str, float]
    any_value: dict[str, float]
    n_per_pool: int

    def control(self, pool: str) -> float:
        """The hardest of the three baselines for ``pool`` (the one an accuracy must beat)."""
        return max(self.chance, self.best_constant[pool], self.any_value.get(pool, 0.0))


def pool_baselines(task: Task, n_per_pool: int = 1024, seed: int = 0) -> PoolBaselines:
    """:class:`PoolBaselines` on ``task.eval_pools(n_per_pool, seed)``."""
    pools = task.eval_pools(n_per_pool, seed)
    return PoolBaselines(
        chance=chance(task.cfg.modulus),
        best_constant={p: best_constant(pools[p][1]) for p in POOL_NAMES},
        any_value={p: any_value_accuracy(*pools[p], task.cfg) for p in POOL_NAMES if not p.startswith("0var")},
        n_per_pool=n_per_pool,
    )
