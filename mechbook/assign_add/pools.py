"""What the task's evaluation pools ask, and the baselines an accuracy on them is read against
(chapter 7 shows them, chapter 11 reads its sweeps against them).

- :func:`variable_configurations` and :func:`distinct_questions`: how many different questions
  each pool can ask before contexts are drawn;
- :func:`literal_answer` and :func:`label_errors`: every label checked by reading its sequence
  literally (find each operand's value in the context, or take the constant, and add);
- :func:`coverage`: residues no training pair sums to, and numbers never a training operand (the
  split holds pairs out, not sums);
- :func:`pool_controls`: the best constant answer's accuracy
  (:func:`~mechbook.assign_add.baselines.best_constant`, which a finite pool always puts at or
  above :func:`~mechbook.assign_add.baselines.chance`: the harder control) of every pool a
  training run scores.

Kept apart from :mod:`mechbook.assign_add.task` so that reading the task never changes the code
dependency, hence the cache key, of a trained model.
"""

from __future__ import annotations

import numpy as np

from mechbook.assign_add.baselines import best_constant
from mechbook.assign_add.task import POOL_NAMES, Task, TaskConfig


def variable_configurations(task: Task) -> dict[str, int]:
    """Per pool, the number of variable configurations it can ask: the variable (0-var), the
    (variable, slot) choices (1-var), or the ordered variable pairs (2-var)."""
    no_left, no_right = task.no_left, task.no_right
    distinct = ~np.eye(task.cfg.n_vars, dtype=bool)
    slots_ok = int((~no_left).sum() + (~no_right).sum())
    allowed = int(task.allowed_two_var.sum())
    return {
        "0var_train": task.cfg.n_vars,
        "0var_heldout": task.cfg.n_vars,
        "1var_train": slots_ok,
        "1var_heldout": slots_ok,
        "1var_misplaced": int(no_left.sum() + no_right.sum()),
        "2var_train": allowed,
        "2var_heldout": allowed,
        "2var_misplaced_one": int((distinct & (no_left[:, None] ^ no_right[None, :])).sum()),
        "2var_misplaced_both": int((distinct & no_left[:, None] & no_right[None, :]).sum()),
    }


def distinct_questions(task: Task) -> dict[str, int]:
    """Per pool, variable configurations times the number pairs it draws from (held-out pairs for
    the ``*_heldout`` pools, training pairs otherwise)."""
    n_held, n_train = int(task.heldout_pairs.sum()), int(task.train_pairs.sum())
    return {
        name: n * (n_held if name.endswith("heldout") else n_train) for name, n in variable_configurations(task).items()
    }


def literal_answer(seq: np.ndarray, tc: TaskConfig) -> int:
    """The label of one sequence read literally: each operand's value from the context (or the
    constant itself), summed mod N."""
    ctx = [int(t) for t in seq[: tc.context_len] if t != tc.pad]
    env = dict(zip(ctx[0::2], ctx[1::2]))
    lhs, rhs = int(seq[tc.context_len + 1]), int(seq[tc.context_len + 2])
    return (env.get(lhs, lhs) + env.get(rhs, rhs)) % tc.modulus


def label_errors(task: Task, pools: dict[str, tuple[np.ndarray, np.ndarray]]) -> int:
    """Sequences over all pools whose label differs from :func:`literal_answer`."""
    return sum(literal_answer(s, task.cfg) != y for name in POOL_NAMES for s, y in zip(*pools[name]))


def coverage(task: Task) -> dict[str, int]:
    """What the split leaves out of training beyond the pairs themselves: ``sums_missing``, the
    residues no training pair sums to; ``left_missing`` and ``right_missing``, the numbers never
    a left or right operand of a training pair (all 0 at the paper's split)."""
    n = task.cfg.modulus
    n1, n2 = np.nonzero(task.train_pairs)
    return {
        "sums_missing": int(n - len(np.unique((n1 + n2) % n))),
        "left_missing": int(n - len(np.unique(n1))),
        "right_missing": int(n - len(np.unique(n2))),
    }


def pool_controls(task: Task, n_per_pool: int, seed: int) -> dict[str, float]:
    """:func:`~mechbook.assign_add.baselines.best_constant` of every pool of ``task.eval_pools(n_per_pool, seed)``,
    the pools a training run with ``eval_per_pool=n_per_pool, eval_seed=seed`` scores."""
    return {name: best_constant(labels) for name, (_, labels) in task.eval_pools(n_per_pool, seed).items()}
