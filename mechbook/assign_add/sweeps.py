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

A point may be trained for several seeds (``SweepsConfig.seeds``: each seed sets both the data
stream and the initialisation). The threshold of a sweep, for one seed, is the smallest knob value
whose score reaches ``level``, linearly interpolated between the last point below and the first
point at or above it; :func:`read_sweep` reads it per seed, with the scores against chance
(``1 / N``) and the constant-answer control (:mod:`mechbook.assign_add.pools`), whether each
point's run converged (final training loss at most :data:`LOSS_BOUND`), and the largest dip of
the scores by the rule of :func:`largest_dip`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechbook.assign_add.baselines import chance
from mechbook.assign_add.config import TrainConfig, TrainResult, with_overrides
from mechbook.assign_add.pools import pool_controls
from mechbook.assign_add.run_cache import load_or_train_runs
from mechbook.assign_add.task import POOL_NAMES, Task, union_accuracy
from mechbook.validation import SEED, between, check_fields

KNOBS = {"r": "two_var_fraction", "f": "train_pair_fraction"}
"""Sweep name -> the TaskConfig field it changes."""

PAPER_THRESHOLDS = {"f": 0.25, "r": 0.2}
"""The thresholds the paper reports (approximate): held-out pairs need f >= ~0.25, 2-var
generalisation needs r >= ~0.2 (chapter 11 compares its own with these)."""

LOSS_BOUND = 0.1
"""A point's run counts as converged when its final training cross-entropy is at most this (nats,
mean over the last evaluation interval): a model that answers its training batches right with
confidence. The paper's run ends near 0.01; a run that has the adder but not the variable
binding sits near 1 (the 2-var rows alone are a quarter of the batch)."""

CHANCE_MARGIN = 0.1
"""A score within this of chance (``1 / N``) counts as near chance: the run has not learnt what the
pool asks, so a drop between two such points is not read as a dip."""

DIP = 0.02
"""A score lower than the previous point's by more than this (and not near chance) is a dip."""

AUTHORS_SWEEP_STEPS = 30_000
"""Steps of each run of the authors' sweep script (``train.py``'s default ``MAX_STEPS``; SOURCE.md
of the released run), against the 40,000 of their main run."""


@dataclass(frozen=True)
class SweepsConfig:
    """Chapter 11's two sweeps: the training run behind every point of the f sweep (``f_train``)
    and of the r sweep (``r_train``; their task's f or r is replaced per point), the values
    (increasing, in (0, 1]), the score ``level`` that defines a threshold, and the ``seeds`` each
    point is trained for (None: one run, with the run's own ``seed`` and ``model.seed``)."""

    f_train: TrainConfig
    r_train: TrainConfig
    f_values: tuple[float, ...]
    r_values: tuple[float, ...]
    level: float = 0.9
    seeds: tuple[int, ...] | None = None
    budgets: tuple[float, ...] = (0.5,)  # earlier step budgets, as fractions of each sweep's steps, at which
    # the thresholds are read again from the same runs' evaluations, at the evaluated step at or below each
    # (chapter 11: does the threshold move with training length?); with a constant learning rate, step k of a
    # run is a k-step run

    def __post_init__(self) -> None:
        fraction = between(0.0, 1.0, low_open=True, high_open=True)
        check_fields(
            self,
            f_values=between(0.0, 1.0, low_open=True),
            r_values=between(0.0, 1.0, low_open=True),
            level=fraction,
            seeds=SEED,
            budgets=fraction,
        )
        for name in ("f_values", "r_values"):
            values = getattr(self, name)
            if len(values) < 2 or any(b <= a for a, b in zip(values, values[1:])):
                raise ValueError(f"{name} must be at least two increasing fractions in (0, 1], got {values}")
        if self.seeds is not None and (len(self.seeds) == 0 or len(set(self.seeds)) != len(self.seeds)):
            raise ValueError(f"seeds must be None or distinct whole numbers >= 0, e.g. (0, 1), got {self.seeds}")

    @property
    def n_seeds(self) -> int:
        """Runs per point."""
        return 1 if self.seeds is None else len(self.seeds)


def point_config(base: TrainConfig, knob: str, value: float) -> TrainConfig:
    """``base`` with the task's ``r`` (two_var_fraction) or ``f`` (train_pair_fraction) set to ``value``."""
    if knob not in KNOBS:
        raise ValueError(
            f"knob must be one of {sorted(KNOBS)} (r: 2-var fraction, f: training-pair fraction), got {knob!r}"
        )
    return with_overrides(base, **{f"task__{KNOBS[knob]}": float(value)})


def point_configs(
    base: TrainConfig, knob: str, values: Sequence[float], seeds: Sequence[int] | None = None
) -> list[TrainConfig]:
    """Every run of a sweep, value by value and, within a value, seed by seed (a seed sets both
    ``seed`` and ``model.seed``; None: ``base``'s own, one run per value)."""
    cfgs = []
    for value in values:
        cfg = point_config(base, knob, value)
        cfgs += [cfg] if seeds is None else [with_overrides(cfg, seed=int(s), model__seed=int(s)) for s in seeds]
    return cfgs


def history_until(history: pd.DataFrame, step: int) -> pd.DataFrame:
    """The rows of a training history up to ``step``, which must be an evaluated step: with a
    constant learning rate and a sequential data stream, what a run of ``step`` steps would have
    recorded (``tests/integration/test_aa_sweeps_training.py`` trains both and compares)."""
    if step not in set(history["step"]):
        raise ValueError(f"step {step:,} was not evaluated; the evaluated steps are every eval_every up to the last")
    return history[history["step"] <= step]


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
    base: TrainConfig,
    knob: str,
    values: Sequence[float],
    seeds: Sequence[int] | None = None,
    device: str | None = None,
) -> list[TrainResult]:
    """The trained run of every point and seed (:func:`point_configs` order), trained together as
    stacks, each run cached under its own entry."""
    cfgs = point_configs(base, knob, values, seeds)
    return load_or_train_runs(cfgs, device, desc=f"{knob} sweep ({len(cfgs)} runs)")


def score_runs(
    cfgs: Sequence[TrainConfig], results: Sequence[TrainResult], knob: str, at_step: int | None = None
) -> pd.DataFrame:
    """Score trained sweep runs (``cfgs`` and their ``results``, in :func:`point_configs` order),
    at their last step or, with ``at_step``, as they stood at that evaluated step (a run that stopped
    before it, having fit its training data, as it stopped: what a sweep capped at ``at_step`` gives).
    One row per run: ``knob``, ``steps`` (the step read), ``value``, ``seed``, ``score``, ``train_loss`` (final training
    cross-entropy), ``converged`` (``train_loss <= LOSS_BOUND``), ``chance`` (``1 / N``),
    ``control`` (the best constant answer's score on the same pools), for ``r`` also
    ``score_equal_weights`` (the three parts weighted 1/3 each), one column per evaluation pool
    (final accuracies) and its control (``control_<pool>``)."""
    rows = []
    controls: dict[float, tuple[Task, dict[str, float]]] = {}
    for cfg, result in zip(cfgs, results):
        value = float(getattr(cfg.task, KNOBS[knob]))
        if value not in controls:
            task = Task(cfg.task)
            controls[value] = (task, pool_controls(task, cfg.eval_per_pool, cfg.eval_seed))
        task, control = controls[value]
        last = int(result.history["step"].max())
        history = result.history if at_step is None else history_until(result.history, min(at_step, last))
        accs = final_accuracies(history)
        loss = final_train_loss(history)
        row = {
            "knob": knob,
            "steps": int(history["step"].max()),
            "value": value,
            "seed": int(cfg.seed),
            "score": score(knob, accs, task),
            "train_loss": loss,
            "converged": loss <= LOSS_BOUND,
            "chance": chance(cfg.task.modulus),
            "control": score(knob, control, task),
        }
        if knob == "r":
            row["score_equal_weights"] = union_accuracy(accs, task, "equal")
        rows.append({**row, **accs, **{f"control_{p}": control[p] for p in POOL_NAMES}})
    return pd.DataFrame(rows)


def run_sweep(
    base: TrainConfig,
    knob: str,
    values: Sequence[float],
    seeds: Sequence[int] | None = None,
    device: str | None = None,
) -> pd.DataFrame:
    """Train (or load from the cache) one model per value and seed and score it
    (:func:`score_runs`)."""
    return score_runs(point_configs(base, knob, values, seeds), sweep_results(base, knob, values, seeds, device), knob)


def lowest_final_pool(history: pd.DataFrame) -> tuple[str, float]:
    """The evaluation pool with the lowest final accuracy of a run, and that accuracy."""
    final = {p: a for p, a in final_accuracies(history).items() if p in POOL_NAMES}
    pool = min(final, key=final.__getitem__)
    return pool, final[pool]


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


@dataclass(frozen=True)
class Dip:
    """A drop of a sweep's score from one point to the next."""

    value_from: float
    value_to: float
    score_from: float
    score_to: float


def near_chance(score: float, chance_level: float, margin: float = CHANCE_MARGIN) -> bool:
    """Whether ``score`` is within ``margin`` of chance (:data:`CHANCE_MARGIN`)."""
    return abs(score - chance_level) <= margin


def largest_dip(
    values: Sequence[float],
    scores: Sequence[float],
    chance_level: float,
    dip: float = DIP,
    margin: float = CHANCE_MARGIN,
) -> Dip | None:
    """The largest drop between neighbouring points that is a dip: lower than the previous score
    by more than ``dip``, and not between two points both within ``margin`` of chance (there the
    runs learnt nothing the pool asks, and the drop is noise around chance). None if none is."""
    drops = [
        Dip(a, b, sa, sb)
        for a, b, sa, sb in zip(values[:-1], values[1:], scores[:-1], scores[1:])
        if sb < sa - dip and not (near_chance(sa, chance_level, margin) and near_chance(sb, chance_level, margin))
    ]
    return max(drops, key=lambda d: d.score_from - d.score_to, default=None)


@dataclass(frozen=True)
class SweepReading:
    """One sweep read on one score column (chapter 11): ``knob`` (``"f"`` or ``"r"``), ``column``
    of the runs frame scored, ``level``, ``chance`` (``1 / N``), per value (increasing) the mean
    score over seeds and the mean constant-answer control, per seed the threshold (NaN: not
    reached), per run ``(value, seed, final training loss)`` against ``loss_bound`` and the step
    it was read at (``ends``: where it stopped, having fit its data, or the step cap), and the
    largest dip of the mean scores (:func:`largest_dip`)."""

    knob: str
    column: str
    level: float
    chance: float
    values: tuple[float, ...]
    scores: tuple[float, ...]
    controls: tuple[float, ...]
    thresholds: tuple[tuple[int, float], ...]
    losses: tuple[tuple[float, int, float], ...]
    loss_bound: float
    ends: tuple[int, ...]
    dip: Dip | None

    @property
    def seeds(self) -> tuple[int, ...]:
        """The seeds read, in order."""
        return tuple(s for s, _ in self.thresholds)

    @property
    def reached(self) -> tuple[float, ...]:
        """The thresholds of the seeds that reached the level."""
        return tuple(t for _, t in self.thresholds if not math.isnan(t))

    @property
    def threshold(self) -> float:
        """The median threshold over seeds when every seed reached the level, else NaN."""
        if len(self.reached) < len(self.thresholds):
            return math.nan
        return float(statistics.median(self.reached))

    @property
    def spread(self) -> tuple[float, float] | None:
        """``(lowest, highest)`` threshold over the seeds that reached the level (None: none did)."""
        return (min(self.reached), max(self.reached)) if self.reached else None

    @property
    def unconverged(self) -> tuple[tuple[float, int, float], ...]:
        """The runs whose final training loss is above ``loss_bound``."""
        return tuple(run for run in self.losses if run[2] > self.loss_bound)

    @property
    def max_loss(self) -> float:
        """The largest final training loss over the runs."""
        return max(loss for _, _, loss in self.losses)

    @property
    def near_chance_values(self) -> tuple[float, ...]:
        """The values whose mean score is within :data:`CHANCE_MARGIN` of chance."""
        return tuple(v for v, s in zip(self.values, self.scores) if near_chance(s, self.chance))


def read_sweep(runs: pd.DataFrame, level: float, column: str = "score", loss_bound: float = LOSS_BOUND) -> SweepReading:
    """Read a :func:`run_sweep` frame on ``column`` (``"score"`` or a pool name): see
    :class:`SweepReading`."""
    if runs.empty or column not in runs.columns:
        raise ValueError(f"runs must be a run_sweep frame with a {column!r} column")
    control = "control" if column == "score" else f"control_{column}"
    by_value = runs.groupby("value", sort=True)
    values = tuple(float(v) for v in by_value.groups)
    scores = tuple(float(s) for s in by_value[column].mean())
    chance_level = float(runs["chance"].iloc[0])
    thresholds = tuple(
        (int(seed), threshold(group["value"], group[column], level))
        for seed, group in runs.sort_values("value").groupby("seed", sort=False)
    )
    return SweepReading(
        knob=str(runs["knob"].iloc[0]),
        column=column,
        level=level,
        chance=chance_level,
        values=values,
        scores=scores,
        controls=tuple(float(c) for c in by_value[control].mean()),
        thresholds=thresholds,
        losses=tuple(
            (float(v), int(s), float(loss)) for v, s, loss in zip(runs["value"], runs["seed"], runs["train_loss"])
        ),
        loss_bound=loss_bound,
        ends=tuple(int(s) for s in runs["steps"]),
        dip=largest_dip(values, scores, chance_level),
    )


@dataclass(frozen=True)
class Budget:
    """One sweep read at one step budget (chapter 11's "does the threshold move with training
    length?"): ``knob``, ``steps`` and the :class:`SweepReading` of the runs as they stood then."""

    knob: str
    steps: int
    reading: SweepReading


def read_budgets(
    cfgs: Sequence[TrainConfig],
    results: Sequence[TrainResult],
    end: SweepReading,
    fractions: Sequence[float],
) -> tuple[Budget, ...]:
    """The sweep read at each fraction of its steps (the evaluated step at or below it; none when
    that is step 0 or the end), then ``end``, its reading at the last step, shortest budget first."""
    steps, every = cfgs[0].steps, cfgs[0].eval_every
    earlier = sorted({int(f * steps) // every * every for f in fractions} - {0, steps})
    return (
        *(Budget(end.knob, b, read_sweep(score_runs(cfgs, results, end.knob, at_step=b), end.level)) for b in earlier),
        Budget(end.knob, steps, end),
    )


@dataclass(frozen=True)
class Sweeps:
    """Both sweeps of a :class:`SweepsConfig`, run and read (chapter 11): the runs frames, the f
    sweep on its score, the r sweep on the union and on 2-var held-out pairs alone, and
    ``(seed, training history)`` of each run at the largest r, and both sweeps read at each step
    budget of ``SweepsConfig.budgets`` and at their end (``f_budgets``, ``r_budgets``)."""

    f_runs: pd.DataFrame
    r_runs: pd.DataFrame
    f: SweepReading
    r: SweepReading
    r_heldout: SweepReading
    r_last: tuple[tuple[int, pd.DataFrame], ...]
    f_budgets: tuple[Budget, ...]
    r_budgets: tuple[Budget, ...]

    @property
    def runs(self) -> pd.DataFrame:
        """Both runs frames, one below the other."""
        return pd.concat([self.f_runs, self.r_runs], ignore_index=True)


def run_sweeps(cfg: SweepsConfig, device: str | None = None) -> Sweeps:
    """Train (or load) both sweeps of ``cfg`` and read them."""
    f_cfgs = point_configs(cfg.f_train, "f", cfg.f_values, cfg.seeds)
    f_results = sweep_results(cfg.f_train, "f", cfg.f_values, cfg.seeds, device)
    f_runs = score_runs(f_cfgs, f_results, "f")
    f = read_sweep(f_runs, cfg.level)
    r_cfgs = point_configs(cfg.r_train, "r", cfg.r_values, cfg.seeds)
    r_results = sweep_results(cfg.r_train, "r", cfg.r_values, cfg.seeds, device)
    r_runs = score_runs(r_cfgs, r_results, "r")
    r = read_sweep(r_runs, cfg.level)
    last = tuple(
        (int(c.seed), res.history) for c, res in zip(r_cfgs, r_results) if c.task.two_var_fraction == cfg.r_values[-1]
    )
    return Sweeps(
        f_runs,
        r_runs,
        f,
        r,
        read_sweep(r_runs, cfg.level, "2var_heldout"),
        last,
        read_budgets(f_cfgs, f_results, f, cfg.budgets),
        read_budgets(r_cfgs, r_results, r, cfg.budgets),
    )
