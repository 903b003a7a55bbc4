"""How much data generalisation needs: the r and f sweeps (chapter 11).

Each sweep point is a full training run with one knob of the task changed; the runs of one sweep
share everything else, so they train together as one stacked model
(:func:`~mechbook.assign_add.run_cache.load_or_train_runs`, one cache entry per run, so a point
trained elsewhere as a job is found as the chapter's own):

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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechbook.assign_add.run_cache import load_or_train_runs
from mechbook.assign_add.task import Task, union_accuracy
from mechbook.assign_add.train import TrainConfig, TrainResult, with_overrides

KNOBS = {"r": "two_var_fraction", "f": "train_pair_fraction"}
"""Sweep name -> the TaskConfig field it changes."""

PAPER_THRESHOLDS = {"f": 0.25, "r": 0.2}
"""The thresholds the paper reports (approximate): held-out pairs need f >= ~0.25, 2-var
generalisation needs r >= ~0.2 (chapter 11 compares its own with these)."""


@dataclass(frozen=True)
class SweepsConfig:
    """Chapter 11's two sweeps: the training run behind every point of the f sweep (``f_train``)
    and of the r sweep (``r_train``; their task's f or r is replaced per point), the values
    (increasing, in (0, 1]), and the score ``level`` that defines a threshold."""

    f_train: TrainConfig
    r_train: TrainConfig
    f_values: tuple[float, ...]
    r_values: tuple[float, ...]
    level: float = 0.9

    def __post_init__(self) -> None:
        for name in ("f_values", "r_values"):
            values = getattr(self, name)
            if (
                len(values) < 2
                or any(b <= a for a, b in zip(values, values[1:]))
                or not 0 < values[0] <= values[-1] <= 1
            ):
                raise ValueError(f"{name} must be at least two increasing fractions in (0, 1], got {values}")
        if not 0 < self.level < 1:
            raise ValueError(f"level must be in (0, 1), got {self.level}")


def point_config(base: TrainConfig, knob: str, value: float) -> TrainConfig:
    """``base`` with the task's ``r`` (two_var_fraction) or ``f`` (train_pair_fraction) set to ``value``."""
    if knob not in KNOBS:
        raise ValueError(
            f"knob must be one of {sorted(KNOBS)} (r: 2-var fraction, f: training-pair fraction), got {knob!r}"
        )
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


def sweep_results(
    base: TrainConfig, knob: str, values: Sequence[float], device: str | None = None
) -> list[TrainResult]:
    """The trained run of every point (``base`` with ``knob`` set to each of ``values``), trained
    together as stacks, each run cached under its own entry."""
    cfgs = [point_config(base, knob, v) for v in values]
    return load_or_train_runs(cfgs, device, desc=f"{knob} sweep")


def run_sweep(base: TrainConfig, knob: str, values: Sequence[float], device: str | None = None) -> pd.DataFrame:
    """Train (or load from the cache) one model per value and score it: columns ``knob``,
    ``value``, ``score``, ``train_loss`` (final training cross-entropy), for ``r`` also
    ``score_equal_weights`` (the book's earlier union score, the three parts weighted 1/3 each),
    and one column per evaluation pool (final accuracies)."""
    rows = []
    for value, result in zip(values, sweep_results(base, knob, values, device)):
        accs = final_accuracies(result.history)
        task = Task(result.config.task)
        row = {
            "knob": knob,
            "value": float(value),
            "score": score(knob, accs, task),
            "train_loss": final_train_loss(result.history),
        }
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
