"""How much data generalisation needs: the r and f sweeps (chapter 11).

Each sweep point is a full training run with one knob of the task changed; the runs of one sweep
share everything else, so they train together as one stacked model
(:func:`~mechbook.assign_add.stacked.load_or_train_stacked`, cached per sweep):

- ``r`` = ``TaskConfig.two_var_fraction`` (share of eligible 2-var training rows kept), scored on
  the 2-var generalisation union (held-out pairs, one and both variables misplaced), its parts
  weighted by their sizes in the enumerated union as the paper scores it;
- ``f`` = ``TaskConfig.train_pair_fraction`` (share of the N^2 pairs used for training), scored on
  0-var held-out pairs.

The threshold of a sweep is the smallest knob value whose score reaches ``level``, linearly
interpolated between the last point below and the first point at or above it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from mechbook.assign_add.model import ModelConfig
from mechbook.assign_add.task import Task, union_accuracy
from mechbook.assign_add.stacked import load_or_train_stacked
from mechbook.assign_add.train import TrainConfig, TrainResult, with_overrides

KNOBS = {"r": "two_var_fraction", "f": "train_pair_fraction"}
"""Sweep name -> the TaskConfig field it changes."""

PAPER_THRESHOLDS = {"f": 0.25, "r": 0.2}
"""The thresholds the paper reports (approximate): held-out pairs need f >= ~0.25, 2-var
generalisation needs r >= ~0.2 (chapter 11 compares its own with these)."""


@dataclass(frozen=True)
class SweepChapterConfig:
    """Chapter 11: the training run behind every point of the f sweep (``f_train``) and of the
    r sweep (``r_train``; their task's f or r is replaced per point), the values (increasing),
    and the score ``level`` that defines a threshold."""

    f_train: TrainConfig
    r_train: TrainConfig
    f_values: tuple[float, ...]
    r_values: tuple[float, ...]
    level: float = 0.9


def _grid(lo: float, hi: float, n: int) -> tuple[float, ...]:
    return tuple(round(float(v), 4) for v in np.linspace(lo, hi, n))


_SMOKE_RUN = TrainConfig(
    steps=60, batch_size=128, eval_every=30, eval_per_pool=64, keep_every=60, resume_every=60,
    model=ModelConfig(d_model=32, d_head=32, d_mlp=128),
)
_CPU_RUN = TrainConfig(
    steps=8000, batch_size=256, lr=3e-3, eval_every=250, eval_per_pool=256, keep_every=500, resume_every=500,
    model=ModelConfig(d_model=64, d_head=64, d_mlp=256),
)

CHAPTER11_PROFILES = {
    "smoke": SweepChapterConfig(f_train=_SMOKE_RUN, r_train=_SMOKE_RUN, f_values=(0.3, 0.9), r_values=(0.1, 0.9)),
    "cpu": SweepChapterConfig(
        f_train=_CPU_RUN,
        r_train=with_overrides(_CPU_RUN, steps=16_000),
        f_values=(0.1, 0.2, 0.3, 0.45, 0.7, 0.95),
        r_values=(0.05, 0.1, 0.2, 0.35, 0.6, 0.9),
    ),
    "paper": SweepChapterConfig(
        f_train=TrainConfig(steps=40_000),
        r_train=TrainConfig(steps=40_000),
        f_values=_grid(0.06, 0.99, 20),
        r_values=_grid(0.01, 0.99, 20),
    ),
}
"""Sweep sizes per profile. ``paper`` is the spec's 20 + 20 full-size runs (a GPU job: each sweep
trains as one stack of 20 models); ``cpu`` trades width (d_model 64), batch (256) and learning rate
(3e-3) for time. A pilot run at that size (f = 0.7, r = 1) learnt the held-out pairs by step 1,000
and variable binding by ~1,750, and reached 0.9 on 2-var held-out pairs by 4,000 steps; a first
grid of 2,000 / 4,000 steps per point left small-f runs memorising and some runs unconverged
(final training loss up to 2.46), so each f point runs 8,000 steps and each r point 16,000, the
six runs of a sweep trained at once; ``smoke`` only exercises the machinery."""


def point_config(base: TrainConfig, knob: str, value: float) -> TrainConfig:
    """``base`` with the task's ``r`` (two_var_fraction) or ``f`` (train_pair_fraction) set to ``value``."""
    if knob not in KNOBS:
        raise ValueError(f"knob must be one of {sorted(KNOBS)} (r: 2-var fraction, f: training-pair fraction), got {knob!r}")
    return with_overrides(base, **{f"task__{KNOBS[knob]}": float(value)})


def final_accuracies(history: pd.DataFrame) -> dict[str, float]:
    """``{pool: accuracy}`` at the last evaluated step of a training history."""
    last = history[history["step"] == history["step"].max()]
    return {str(p): float(a) for p, a in zip(last["pool"], last["accuracy"])}


def final_train_loss(history: pd.DataFrame) -> float:
    """Mean training cross-entropy over the last evaluation interval (history pool ``"train"``)."""
    train = history[history["pool"] == "train"]
    if train.empty:
        raise ValueError("the history has no 'train' rows: was the run at least one evaluation interval long?")
    return float(train.loc[train["step"].idxmax(), "loss"])


def score(knob: str, accuracies: dict[str, float], task: Task) -> float:
    """The sweep's score: accuracy on the 2-var generalisation union (``r``; its three parts
    weighted by their sizes in ``task``'s enumerated union, as the paper scores it) or 0-var
    held-out accuracy (``f``)."""
    if knob == "r":
        return union_accuracy(accuracies, task, "paper")
    if knob == "f":
        return float(accuracies["0var_heldout"])
    raise ValueError(f"knob must be 'r' or 'f', got {knob!r}")


def sweep_results(base: TrainConfig, knob: str, values: Sequence[float], device: str | None = None) -> list[TrainResult]:
    """The trained run of every point (``base`` with ``knob`` set to each of ``values``), trained
    together as one stack and cached as a whole."""
    cfgs = [point_config(base, knob, v) for v in values]
    return load_or_train_stacked(cfgs, device, desc=f"{knob} sweep ({len(cfgs)} runs at once)")


def run_sweep(base: TrainConfig, knob: str, values: Sequence[float], device: str | None = None) -> pd.DataFrame:
    """Train (or load from the cache) one model per value and score it: columns ``knob``,
    ``value``, ``score``, ``train_loss`` (final training cross-entropy), for ``r`` also
    ``score_equal_weights`` (the book's earlier union score, the three parts weighted 1/3 each),
    and one column per evaluation pool (final accuracies)."""
    rows = []
    for value, result in zip(values, sweep_results(base, knob, values, device)):
        accs = final_accuracies(result.history)
        task = Task(result.config.task)
        row = {"knob": knob, "value": float(value), "score": score(knob, accs, task), "train_loss": final_train_loss(result.history)}
        if knob == "r":
            row["score_equal_weights"] = union_accuracy(accs, task, "equal")
        rows.append({**row, **accs})
    return pd.DataFrame(rows)


def threshold(values: Sequence[float], scores: Sequence[float], level: float = 0.9) -> float:
    """Smallest value whose score reaches ``level``, interpolated linearly between the point
    before it and that point; the first value if the first point already reaches it; NaN if no
    point does. ``values`` must be increasing."""
    x = np.asarray(values, dtype=np.float64)
    y = np.asarray(scores, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or len(x) == 0:
        raise ValueError(f"values and scores must be equal-length 1-D sequences, got {x.shape} and {y.shape}")
    if np.any(np.diff(x) <= 0):
        raise ValueError("values must be strictly increasing; sort the sweep points first")
    above = np.nonzero(y >= level)[0]
    if len(above) == 0:
        return math.nan
    i = int(above[0])
    if i == 0:
        return float(x[0])
    x0, x1, y0, y1 = x[i - 1], x[i], y[i - 1], y[i]
    return float(x0 + (level - y0) * (x1 - x0) / (y1 - y0))
