"""The authors' released run read as a rebuild is read (chapter 8; chapters 9-10 open its final
model through :mod:`mechbook.assign_add.release`).

:func:`release_run` turns the released checkpoints into a :class:`~mechbook.assign_add.train.TrainResult`
(the nine sampled pools at chosen checkpoints, their weights, the final weights and the paper's
config), so the phase rules, progress measures, case histories and probes apply to it unchanged;
:func:`release_exact_scores` scores its final model on the exactly enumerated pools.
"""

from __future__ import annotations

from collections.abc import Sequence

from mechbook.assign_add import release, scores
from mechbook.assign_add.config import TrainConfig, TrainResult
from mechbook.assign_add.task import Task, TaskConfig
from mechbook.cache import cached

PAPER_PHASES = {"phase 1": "~500", "phase 2": "5,300-5,400", "phase 3": "14,500-16,000"}
"""When the paper dates its three phases (steps of its released run)."""


def check_release_steps(steps: Sequence[int] | None) -> None:
    """Refuse ``steps`` that are not released checkpoints, with one line naming them."""
    bad = sorted(set(steps or ()) - set(release.RELEASE_STEPS))
    if bad:
        raise ValueError(f"release_steps {bad} are not released checkpoints (1, 101, ..., 39901)")


def release_run(steps: Sequence[int] | None = None, per_pool: int = 512) -> TrainResult:
    """The authors' released run as a :class:`TrainResult`: the nine sampled pools (``per_pool``
    sequences each, the rebuild's own pools) at the released checkpoints ``steps`` (None: every
    one present locally), those checkpoints' weights, the final weights and the paper's training
    config. The pools' scores are cached (:func:`mechbook.assign_add.scores.release_history`)."""
    check_release_steps(steps)
    if per_pool < 1:
        raise ValueError(f"per_pool must be at least 1, got {per_pool}")
    history = scores.release_history(None if steps is None else tuple(steps), n_per_pool=per_pool)
    kept = sorted(history.step.unique().tolist())
    return TrainResult(
        history=history,
        checkpoints={s: release.release_state(s) for s in kept},
        final_state=release.release_state(release.FINAL),
        config=TrainConfig(),
        train_seconds=0.0,
    )


def release_exact_scores() -> dict[str, float]:
    """The released final model's scores on the exactly enumerated pools
    (:func:`mechbook.assign_add.scores.exact_scores`: every held-out 0-var pair, the enumerated
    2-var union and its parts), cached on the pinned commit and the task."""
    key = {"commit": release.RELEASE_COMMIT, "task": TaskConfig()}
    return cached(
        "assign_add/release_exact", key, lambda: scores.exact_scores(release.load_release(), Task(TaskConfig()))
    )
