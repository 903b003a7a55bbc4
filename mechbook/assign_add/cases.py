"""The misplaced-variable pools split by case, to trace the phase-3 plateau (chapter 8).

A misplaced sequence puts a restricted variable in the slot training never shows it in: ``a`` or
``b`` as the right operand, ``k`` or ``l`` as the left. Each pool splits into cases by which
variable is misplaced and where:

- ``1var_misplaced``: ``a right``, ``b right``, ``k left``, ``l left``;
- ``2var_misplaced_one``: the same four, the other variable an allowed one in its slot;
- ``2var_misplaced_both``: ``k left, a right`` and the other three combinations.

:func:`case_history` scores every case at each checkpoint of any run; :func:`lagging_cases`
ranks the cases by their mean accuracy over a span of steps (the plateau), lowest first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from mechbook.assign_add import release
from mechbook.assign_add.scores import correct_and_loss
from mechbook.assign_add.task import ONE_VAR_LEFT, ONE_VAR_RIGHT, TWO_VAR, Task, TaskConfig
from mechbook.cache import cached
from mechbook.progress import progress

CASE_POOLS: tuple[str, ...] = ("1var_misplaced", "2var_misplaced_one", "2var_misplaced_both")


def case_specs(task: Task) -> list[tuple[str, str, np.ndarray]]:
    """``(pool, case, choices)`` for every case; ``choices`` (C, 3) holds the allowed
    ``(kind, v1, v2)`` of the case (``v2 = -1`` for 1-var), drawn uniformly per sequence."""
    cfg = task.cfg
    letters = cfg.letters
    bad_right, bad_left = np.nonzero(task.no_right)[0], np.nonzero(task.no_left)[0]
    ok_left = [v for v in range(cfg.n_vars) if not task.no_left[v]]
    ok_right = [v for v in range(cfg.n_vars) if not task.no_right[v]]
    specs = []
    for v in bad_right:
        specs.append(("1var_misplaced", f"{letters[v]} right", np.array([[ONE_VAR_RIGHT, v, -1]])))
    for v in bad_left:
        specs.append(("1var_misplaced", f"{letters[v]} left", np.array([[ONE_VAR_LEFT, v, -1]])))
    for v in bad_right:
        specs.append(
            ("2var_misplaced_one", f"{letters[v]} right", np.array([[TWO_VAR, u, v] for u in ok_left if u != v]))
        )
    for v in bad_left:
        specs.append(
            ("2var_misplaced_one", f"{letters[v]} left", np.array([[TWO_VAR, v, u] for u in ok_right if u != v]))
        )
    for v1 in bad_left:
        for v2 in bad_right:
            if v1 != v2:
                specs.append(
                    ("2var_misplaced_both", f"{letters[v1]} left, {letters[v2]} right", np.array([[TWO_VAR, v1, v2]]))
                )
    if not specs:
        raise ValueError(
            "this TaskConfig restricts no variable (no_left and no_right are empty), so nothing is misplaced"
        )
    return specs


def case_pools(task: Task, n_per_case: int, seed: int = 0) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
    """``{(pool, case): (tokens, labels)}``: ``n_per_case`` sequences per case on training
    number pairs, contexts as in the evaluation pools, deterministic in ``seed``."""
    rng = np.random.default_rng([seed, 17])
    pairs = np.argwhere(task.train_pairs)
    out = {}
    for pool, case, choices in case_specs(task):
        pick = choices[rng.integers(0, len(choices), size=n_per_case)]
        n1, n2 = pairs[rng.integers(0, len(pairs), size=n_per_case)].T
        rows = np.stack([pick[:, 1], pick[:, 0], n1, n2], axis=1)
        out[(pool, case)] = task.generate(rows, rng, var2=pick[:, 2], n_assign=task.pool_n_assign(pick[:, 0], rng))
    return out


def case_accuracies(
    model: torch.nn.Module, pools: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]
) -> pd.DataFrame:
    """Accuracy of ``model`` on each case (columns ``pool``, ``case``, ``accuracy``)."""
    rows = []
    for (pool, case), (tokens, labels) in pools.items():
        rows.append({"pool": pool, "case": case, "accuracy": float(correct_and_loss(model, tokens, labels)[0].mean())})
    return pd.DataFrame(rows)


def case_history(
    load: Callable[[int], torch.nn.Module], steps: Sequence[int], task: Task, n_per_case: int = 256, seed: int = 0
) -> pd.DataFrame:
    """Per-case accuracy at every step (``load(step)`` gives the model there): columns ``step``,
    ``pool``, ``case``, ``accuracy``. Works on any run (a rebuild's ``load_model`` or the release)."""
    pools = case_pools(task, n_per_case, seed)
    frames = []
    for step in progress(list(steps), desc="misplaced cases"):
        frame = case_accuracies(load(step), pools)
        frame.insert(0, "step", step)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def release_case_history(
    steps: Sequence[int] | None = None, n_per_case: int = 256, seed: int = 0, folder=None
) -> pd.DataFrame:
    """:func:`case_history` of the released run at ``steps`` (default: every local checkpoint),
    cached on the pinned commit, the steps, the sizes and the code."""
    steps = sorted(release.available_steps(folder) if steps is None else steps)
    if not steps:
        raise ValueError(f"no released checkpoint is available locally; set {release.ENV_VAR} or pass folder=...")
    key = {"commit": release.RELEASE_COMMIT, "steps": steps, "n_per_case": n_per_case, "seed": seed}
    return cached(
        "assign_add/release_cases",
        key,
        lambda: case_history(lambda s: release.load_release(s, folder), steps, Task(TaskConfig()), n_per_case, seed),
    )


def lagging_cases(history: pd.DataFrame, start: int, end: int) -> pd.DataFrame:
    """Mean accuracy of each case over the steps in ``[start, end]`` (e.g. the phase-3 plateau
    that :func:`mechbook.assign_add.phases.detect_phases` reports), lowest first."""
    span = history[(history.step >= start) & (history.step <= end)]
    if span.empty:
        raise ValueError(f"the history has no step in [{start}, {end}]")
    return span.groupby(["pool", "case"], as_index=False).accuracy.mean().sort_values("accuracy", ignore_index=True)
