"""Scoring a model on the task's pools (chapters 8-11): sampled pools over training, exactly
enumerated pools for final scores, and the nine pool curves of the authors' released run.

- :func:`exact_scores`: accuracy on every held-out pair (0-var, all 1,045) and on the enumerated
  2-var generalisation union (193,580 sequences), weighted by the parts' sizes as the paper
  scores it, beside the book's equal-weighted mean of the three parts;
- :func:`release_history`: the nine sampled pools (the same pools the rebuild's training loop
  scores, :meth:`Task.eval_pools`) at every locally available released checkpoint, as a
  ``(step, pool, accuracy, loss)`` frame that :func:`mechbook.assign_add.phases.detect_phases`
  reads like a rebuild's ``TrainResult.history``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from mechbook.assign_add import release
from mechbook.assign_add.task import GENERALISATION_UNION, Task, TaskConfig, union_accuracy
from mechbook.cache import cached
from mechbook.progress import progress


@torch.no_grad()
def correct_and_loss(
    model: torch.nn.Module, tokens: np.ndarray, labels: np.ndarray, batch_size: int = 8192
) -> tuple[np.ndarray, np.ndarray]:
    """Per sequence: whether the argmax of the logits at '=' is the label (bool (S,)), and the
    cross-entropy there (float (S,)), computed in batches of ``batch_size``."""
    device = next(model.parameters()).device
    hits, losses = [], []
    for start in range(0, len(tokens), batch_size):
        x = torch.as_tensor(tokens[start : start + batch_size], device=device)
        y = torch.as_tensor(labels[start : start + batch_size], device=device)
        logits = model(x, last_only=True).float()
        hits.append((logits.argmax(-1) == y).cpu().numpy())
        losses.append(F.cross_entropy(logits, y, reduction="none").cpu().numpy())
    return np.concatenate(hits), np.concatenate(losses)


def exact_scores(model: torch.nn.Module, task: Task, seed: int = 0) -> dict[str, float]:
    """Final scores on exactly enumerated pools (contexts drawn with ``seed``):

    - ``0var_heldout_all``: every held-out pair once as a 0-var sequence;
    - ``2var_heldout_all``, ``2var_misplaced_one_all``, ``2var_misplaced_both_all``: each part of
      the enumerated union (:meth:`Task.exact_union`);
    - ``2var_union_paper``: the whole union, i.e. the parts weighted by their sizes (the paper's
      score); ``2var_union_equal``: the three parts weighted 1/3 each (the book's earlier score).
    """
    tokens, labels = task.exact_heldout_0var(seed)
    out = {"0var_heldout_all": float(correct_and_loss(model, tokens, labels)[0].mean())}
    tokens, labels, parts = task.exact_union(seed)
    hits = correct_and_loss(model, tokens, labels)[0]
    per_part = {name: float(hits[parts == i].mean()) for i, name in enumerate(GENERALISATION_UNION)}
    out.update({f"{name}_all": acc for name, acc in per_part.items()})
    out["2var_union_paper"] = float(hits.mean())
    out["2var_union_equal"] = union_accuracy(per_part, task, "equal")
    return out


def pool_scores(
    model: torch.nn.Module, pools: dict[str, tuple[np.ndarray, np.ndarray]]
) -> dict[str, tuple[float, float]]:
    """``{pool: (accuracy, mean cross-entropy)}`` on sampled pools (:meth:`Task.eval_pools`)."""
    out = {}
    for name, (tokens, labels) in pools.items():
        hits, losses = correct_and_loss(model, tokens, labels)
        out[name] = (float(hits.mean()), float(losses.mean()))
    return out


def release_history(
    steps: Sequence[int] | None = None,
    n_per_pool: int = 512,
    eval_seed: int = 1,
    folder: str | Path | None = None,
) -> pd.DataFrame:
    """``(step, pool, accuracy, loss)`` of the released run at ``steps`` (default: every
    checkpoint present locally, :func:`release.available_steps`) on the nine pools of
    ``Task().eval_pools(n_per_pool, eval_seed)``, the pools the rebuild's training loop uses.
    Cached; the key holds the pinned commit, the steps, the pool sizes and the code."""
    steps = sorted(release.available_steps(folder) if steps is None else steps)
    if not steps:
        raise ValueError(
            f"no released checkpoint is available locally; set {release.ENV_VAR} to a copy of the release, "
            "pass folder=..., or pass steps=[...] to download them"
        )
    for step in steps:
        release.file_name(step)

    def compute() -> pd.DataFrame:
        task = Task(TaskConfig())
        pools = task.eval_pools(n_per_pool, eval_seed)
        rows = []
        for step in progress(steps, desc="released checkpoints"):
            model = release.load_release(step, folder)
            for pool, (acc, loss) in pool_scores(model, pools).items():
                rows.append({"step": step, "pool": pool, "accuracy": acc, "loss": loss})
        return pd.DataFrame(rows)

    key = {"commit": release.RELEASE_COMMIT, "steps": list(steps), "n_per_pool": n_per_pool, "eval_seed": eval_seed}
    return cached("assign_add/release_history", key, compute)
