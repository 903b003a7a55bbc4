"""What the circuit's parts do across the binding jump (chapter 8; chapter 10 reads the jump's
readings too): progress measures before and after phase 2, when the variable-identity probe
first reads the variable after layer 1, over every seed of a seed stack and on the released run.

- :func:`jump_reading`: the progress measures (:mod:`mechbook.assign_add.measures`) at the last
  kept checkpoint before the jump and at the first where ``1var_train`` accuracy reaches
  :data:`BOUND_LEVEL` (or the last checkpoint, when it never does);
- :func:`probe_curve`: the variable-identity probe over a run's checkpoints and its first readable
  step (:func:`rebuild_probe_history` caches it for a rebuild);
- :func:`seed_readings`: both for every seed of a :class:`~mechbook.assign_add.seeds.Dissected` stack.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechbook.assign_add import probes
from mechbook.assign_add.config import TrainResult, load_model
from mechbook.assign_add.measures import MeasureConfig, measures_over_training
from mechbook.assign_add.phases import PhaseRules, Phases, detect_phases
from mechbook.assign_add.probes import ProbeConfig
from mechbook.assign_add.seeds import Dissected
from mechbook.assign_add.task import Task
from mechbook.cache import cached

BOUND_LEVEL = 0.95
"""1-var training accuracy that marks the binding jump as complete."""
PROBE_LEVEL = 0.95
"""Probe accuracy at which the variable counts as readable."""
PROBE_SITE = "after layer 1"
"""The residual-stream site whose probe dates when the variable becomes readable."""


def measure_at(measures: pd.DataFrame, measure: str, step: int) -> float:
    """``measure`` at the last checkpoint at or before ``step`` (NaN if none)."""
    rows = measures[(measures.measure == measure) & (measures.step <= step)]
    return float(rows.sort_values("step").value.iloc[-1]) if len(rows) else float("nan")


def final_measures(measures: pd.DataFrame) -> pd.Series:
    """Each measure's value at the last checkpoint."""
    return measures[measures.step == measures.step.max()].set_index("measure").value


def adder_first_step(measures: pd.DataFrame, level: float = 0.9) -> int | None:
    """The first checkpoint where the adder alone is right on at least ``level`` of the pairs."""
    hits = measures[(measures.measure == "adder") & (measures.value >= level)].step
    return None if hits.empty else int(hits.min())


def window_steps(checkpoints: list[int], centre: int, window: int) -> list[int]:
    """Kept checkpoints within ``window`` steps of ``centre`` (all of them if none is)."""
    near = sorted(s for s in checkpoints if abs(s - centre) <= window)
    return near or sorted(checkpoints)


@dataclass(frozen=True)
class JumpReading:
    """The progress measures either side of one run's binding jump: ``before`` (the last kept
    checkpoint before phase 2) and ``after`` (the first at or after the step where ``1var_train``
    accuracy reaches :data:`BOUND_LEVEL`; the last checkpoint when ``reached`` is False, with the
    run's final ``final_1var`` accuracy), with every measure's value at each."""

    jump: int
    before: int
    after: int
    reached: bool
    final_1var: float
    at_before: Mapping[str, float]
    at_after: Mapping[str, float]


def jump_reading(result: TrainResult, phases: Phases, measures: pd.DataFrame) -> JumpReading | None:
    """The :class:`JumpReading` of ``result`` (None when the rules found no jump)."""
    if phases.phase2 is None:
        return None
    steps = sorted(result.checkpoints)
    acc = result.accuracy()["1var_train"]
    before = max([s for s in steps if s < phases.phase2], default=steps[0])
    reached = acc[(acc.index >= phases.phase2) & (acc >= BOUND_LEVEL)]
    after = steps[-1]
    if len(reached):
        after = min([s for s in steps if s >= int(reached.index[0])], default=steps[-1])
    names = sorted(measures.measure.unique())
    return JumpReading(
        jump=int(phases.phase2),
        before=int(before),
        after=int(after),
        reached=bool(len(reached)),
        final_1var=float(acc.iloc[-1]),
        at_before={m: measure_at(measures, m, before) for m in names},
        at_after={m: measure_at(measures, m, after) for m in names},
    )


def identity_step(frame: pd.DataFrame, level: float = PROBE_LEVEL, where: str = PROBE_SITE) -> int | None:
    """The first checkpoint where the probe reads the variable at ``where`` with at least ``level``
    accuracy (None if it never does)."""
    part = frame[(frame["where"] == where) & (frame.accuracy >= level)]
    return int(part.step.min()) if len(part) else None


@dataclass(frozen=True)
class ProbeCurve:
    """The variable-identity probe over one run (``frame``: ``step``, ``where``, ``accuracy``,
    ``chance``, ``n``), the run's phases, and the first step it reads the variable after layer 1
    (``first``, None if never)."""

    frame: pd.DataFrame
    phases: Phases
    first: int | None

    @property
    def lead(self) -> int | None:
        """Steps from the first readable checkpoint to the binding jump (positive: readable
        before the jump); None without either."""
        if self.first is None or self.phases.phase2 is None:
            return None
        return int(self.phases.phase2 - self.first)


def probe_curve(frame: pd.DataFrame, phases: Phases) -> ProbeCurve:
    """The :class:`ProbeCurve` of a probe history and its run's phases."""
    return ProbeCurve(frame, phases, identity_step(frame))


def probe_tokens(task: Task, n_sequences: int) -> np.ndarray:
    """The training-distribution sequences the probe reads (the released run's probe draws the same)."""
    tokens, _ = task.sample(n_sequences, np.random.default_rng([0, 19]))
    return tokens


def rebuild_probe_history(result: TrainResult, n_sequences: int, cfg: ProbeConfig | None = None) -> pd.DataFrame:
    """:func:`mechbook.assign_add.probes.variable_identity_over_training` at every kept checkpoint of a
    rebuild, on ``n_sequences`` training sequences; cached on the run, the sizes and the probe config."""
    cfg = cfg or ProbeConfig()
    steps = sorted(result.checkpoints)
    task = Task(result.config.task)

    def compute() -> pd.DataFrame:
        return probes.variable_identity_over_training(
            lambda s: load_model(result, s), steps, task.cfg, probe_tokens(task, n_sequences), cfg=cfg
        )

    key = {"train": result.config, "steps": steps, "final": result.final_state, "n": n_sequences, "probe": cfg}
    return cached("assign_add/rebuild_probes", key, compute)


@dataclass(frozen=True)
class SeedReading:
    """One seed's readings around its binding jump: its phases, its :class:`JumpReading` and its
    :class:`ProbeCurve` (both None when the seed did not bind)."""

    seed: int
    phases: Phases
    jump: JumpReading | None
    probe: ProbeCurve | None


def seed_readings(
    dissected: Dissected,
    rules: PhaseRules,
    measures: MeasureConfig,
    probe_sequences: int,
    probe: ProbeConfig | None = None,
) -> tuple[SeedReading, ...]:
    """A :class:`SeedReading` for every seed of ``dissected`` (cached progress measures and probes,
    computed only for the seeds that bind), in the stack's seed order; ``probe`` None: the default probe."""
    out = []
    for result in dissected.results:
        phases = detect_phases(result.history, rules)
        if phases.phase2 is None:
            out.append(SeedReading(result.config.seed, phases, None, None))
            continue
        jump = jump_reading(result, phases, measures_over_training(result, measures))
        curve = probe_curve(rebuild_probe_history(result, probe_sequences, probe), phases)
        out.append(SeedReading(result.config.seed, phases, jump, curve))
    return tuple(out)
