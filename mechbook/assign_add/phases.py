"""The three phases of training, detected from the accuracy curves (chapter 8; chapter 10 uses
the phase-2 step). Rules, never hard-coded steps:

1. *Modular addition*: the first evaluation where ``0var_train`` accuracy reaches 0.9.
2. *Variable binding*: the sharpest rise of ``1var_train`` accuracy from phase 1 on (1-var
   accuracy co-rises while addition is learned, in the released run by 0.33 in the first 500
   steps, more than its binding jump gains in any 500 steps): the span of at most
   ``jump_window`` steps over which it rises most, dated by the steepest evaluation interval in
   that span; a rise smaller than ``min_jump`` does not count as a phase (a run too short to bind),
   nor does a span that ends below ``phase2_end``: up to the any-value control (0.43 on
   ``1var_train``, a model that adds right with any context value) 1-var accuracy needs no binding,
   and a run whose only rise is addition's co-rise up to there has not bound.
3. *Refinement*, as the paper defines it: after phase 2 a misplaced-variable pool sits on a
   plateau, its (smoothed) accuracy within ``2 * plateau_tol`` for at least ``plateau_len`` steps
   below ``refined``, and is then lifted to ``refined`` or above (near 1). Phase 3 is the first
   step at or above ``refined`` after such a plateau (the earliest over pools), and the plateau it
   lifts is the last one before that step (a pool can climb in stages: the released run's
   both-misplaced pool sits at 0.2, then 0.47, then rises to 1). A rise that ends below
   ``refined`` is no refinement: a recovery from a collapse, or a climb from one plateau to
   another, leaves the run on its plateau. Statuses: ``refined``; ``plateau, not refined`` (a
   plateau and no lift by the run's last step; the plateau reported is the one the run sits on
   at its end); ``absent`` (no binding, or no pool ever plateaus below ``refined``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechbook.assign_add.task import POOL_NAMES
from mechbook.validation import POSITIVE, between, check_fields, one_of

MISPLACED_POOLS: tuple[str, ...] = ("1var_misplaced", "2var_misplaced_one", "2var_misplaced_both")


@dataclass(frozen=True)
class PhaseRules:
    """Thresholds of the three detection rules (chapter 8 prints them next to the marks)."""

    phase1_pool: str = "0var_train"
    phase1_level: float = 0.9
    phase2_pool: str = "1var_train"
    jump_window: int = 500
    min_jump: float = 0.1
    # the binding rise ends at least this high: the any-value control of ``1var_train`` (0.43,
    # chapter 8's baseline) plus ``min_jump``, rounded up (tests/unit/assign_add/test_aa_phases.py holds it there)
    phase2_end: float = 0.55
    phase3_pools: tuple[str, ...] = MISPLACED_POOLS
    plateau_len: int = 1000
    plateau_tol: float = 0.05
    refined: float = 0.9
    smooth: int = 3

    def __post_init__(self) -> None:
        if not self.phase3_pools:
            raise ValueError(
                "PhaseRules(phase3_pools=()) reads no pool, so phase 3 could never be found: name at least one"
            )
        pool, fraction = one_of(POOL_NAMES), between(0.0, 1.0)
        check_fields(
            self,
            phase1_pool=pool,
            phase1_level=fraction,
            phase2_pool=pool,
            jump_window=POSITIVE,
            min_jump=fraction,
            phase2_end=fraction,
            phase3_pools=pool,
            plateau_len=POSITIVE,
            plateau_tol=fraction,
            refined=fraction,
            smooth=POSITIVE,
        )


@dataclass(frozen=True)
class Phases:
    """Detected phase steps (None when a rule does not fire) and what supports them."""

    phase1: int | None
    phase2: int | None
    phase2_jump: float | None
    phase3: int | None
    phase3_status: str
    phase3_pool: str | None
    plateau: tuple[int, int, float] | None

    def marks(self) -> pd.DataFrame:
        """Rows ``(phase, step, rule)`` for the phases that were detected (chart rules)."""
        rows = [
            ("phase 1: addition", self.phase1),
            ("phase 2: binding", self.phase2),
            ("phase 3: refinement", self.phase3),
        ]
        return pd.DataFrame([{"phase": p, "step": s} for p, s in rows if s is not None], columns=["phase", "step"])


def _curve(history: pd.DataFrame, pool: str) -> tuple[np.ndarray, np.ndarray]:
    if not {"step", "pool", "accuracy"} <= set(history.columns):
        raise ValueError("history needs columns step, pool and accuracy (TrainResult.history)")
    part = history[history.pool == pool].sort_values("step")
    if part.empty:
        raise ValueError(f"history has no pool {pool!r}; it has {sorted(history.pool.unique())}")
    return part.step.to_numpy(), part.accuracy.to_numpy(dtype=float)


def first_crossing(steps: np.ndarray, acc: np.ndarray, level: float) -> int | None:
    """The first step where ``acc >= level`` (None if never)."""
    hit = np.nonzero(acc >= level)[0]
    return int(steps[hit[0]]) if hit.size else None


def sharpest_rise(
    steps: np.ndarray, acc: np.ndarray, window: int, end_at_least: float = -np.inf
) -> tuple[int | None, float | None]:
    """``(step, jump)``: the largest rise ``jump = acc[j] - acc[i]`` over any span of at most
    ``window`` steps that ends at ``acc[j] >= end_at_least``, and the evaluation that ends the
    steepest interval inside that span; ``(None, None)`` when no span ends that high.

    Measuring the rise over a window (not one interval) tells a genuine jump from a slow climb of
    the same speed, e.g. the early co-rise of 1-var accuracy while addition is being learned."""
    if len(acc) < 2:
        return None, None
    best = (-np.inf, 0, 1)
    for i in range(len(acc) - 1):
        for j in range(i + 1, len(acc)):
            if steps[j] - steps[i] > window and j > i + 1:
                break
            if acc[j] >= end_at_least and acc[j] - acc[i] > best[0]:
                best = (acc[j] - acc[i], i, j)
    jump, i, j = best
    if not np.isfinite(jump):
        return None, None
    k = i + 1 + int(np.argmax(np.diff(acc[i : j + 1])))
    return int(steps[k]), float(jump)


def plateaus(steps: np.ndarray, acc: np.ndarray, rules: PhaseRules, after: int) -> list[tuple[int, int, float]]:
    """``(start, end, level)`` of every plateau from ``after`` on, in order: maximal stretches where
    the smoothed accuracy (rolling mean of ``rules.smooth`` evaluations) stays within ``2 *
    plateau_tol`` and below ``refined`` for at least ``plateau_len`` steps; ``level`` is the
    stretch's mean. Plateaus do not overlap: each found one ends the scan's current stretch."""
    smooth = pd.Series(acc).rolling(rules.smooth, center=True, min_periods=1).mean().to_numpy()
    starts = np.nonzero(steps >= after)[0]
    a = int(starts[0]) if starts.size else len(smooth)
    found: list[tuple[int, int, float]] = []
    while a < len(smooth):
        b, low, high = a, smooth[a], smooth[a]
        while b + 1 < len(smooth) and max(high, smooth[b + 1]) - min(low, smooth[b + 1]) <= 2 * rules.plateau_tol:
            b += 1
            low, high = min(low, smooth[b]), max(high, smooth[b])
        if steps[b] - steps[a] >= rules.plateau_len and high < rules.refined:
            found.append((int(steps[a]), int(steps[b]), float(smooth[a : b + 1].mean())))
            a = b + 1
        else:
            a += 1
    return found


def lift(
    steps: np.ndarray, acc: np.ndarray, rules: PhaseRules, after: int
) -> tuple[tuple[int, int, float] | None, int | None]:
    """``(plateau, step)``: the first step at which the smoothed accuracy reaches ``refined`` after
    the end of a plateau (:func:`plateaus`), and the last plateau before it; without such a
    step, the last plateau and None (the pool sits there at the run's end); ``(None, None)``
    without a plateau."""
    found = plateaus(steps, acc, rules, after)
    if not found:
        return None, None
    smooth = pd.Series(acc).rolling(rules.smooth, center=True, min_periods=1).mean().to_numpy()
    for _, end, _ in found:
        later = np.nonzero((steps > end) & (smooth >= rules.refined))[0]
        if later.size:
            step = int(steps[later[0]])
            return [p for p in found if p[1] < step][-1], step
    return found[-1], None


def detect_phases(history: pd.DataFrame, rules: PhaseRules = PhaseRules()) -> Phases:
    """Apply the three rules to a training history (``TrainResult.history``)."""
    phase1 = first_crossing(*_curve(history, rules.phase1_pool), rules.phase1_level)
    steps2, acc2 = _curve(history, rules.phase2_pool)
    if phase1 is not None:
        steps2, acc2 = steps2[steps2 >= phase1], acc2[steps2 >= phase1]
    phase2, jump = sharpest_rise(steps2, acc2, rules.jump_window, rules.phase2_end)
    if jump is not None and jump < rules.min_jump:
        phase2 = None
    lifted: tuple[int, str, tuple[int, int, float]] | None = None
    sitting: tuple[str, tuple[int, int, float]] | None = None
    if phase2 is not None:
        for pool in rules.phase3_pools:
            plateau, step = lift(*_curve(history, pool), rules, after=phase2)
            if plateau is not None and step is not None and (lifted is None or step < lifted[0]):
                lifted = (step, pool, plateau)
            elif plateau is not None and step is None and sitting is None:
                sitting = (pool, plateau)
    if lifted is not None:
        return Phases(phase1, phase2, jump, lifted[0], "refined", lifted[1], lifted[2])
    if sitting is not None:
        return Phases(phase1, phase2, jump, None, "plateau, not refined", sitting[0], sitting[1])
    return Phases(phase1, phase2, jump, None, "absent", None, None)
