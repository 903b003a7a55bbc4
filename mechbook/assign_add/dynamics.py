"""Every reading chapter 8 shows, for the run it opens, for every seed of its stack and for the
authors' released run, gathered once (chapter 8; chapters 9-10 may read the same bundle).

:func:`read_dynamics` applies the phase rules, progress measures, case histories and the
variable-identity probe to the opened rebuild and to the released run, the jump readings and
plateaus to every seed, and the baselines to the task's pools, and returns one frozen
:class:`Dynamics`. Every piece is cached where it is computed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from mechbook.assign_add import cases, probes
from mechbook.assign_add.baselines import PoolBaselines, pool_baselines
from mechbook.assign_add.binding_jump import (
    JumpReading,
    ProbeCurve,
    SeedReading,
    jump_reading,
    probe_curve,
    rebuild_probe_history,
    seed_readings,
)
from mechbook.assign_add.config import TrainResult
from mechbook.assign_add.measures import MeasureConfig, measures_over_training
from mechbook.assign_add.phases import PhaseRules, Phases, detect_phases
from mechbook.assign_add.plateau import Plateau, plateau_of, rebuild_case_history
from mechbook.assign_add.probes import ProbeConfig
from mechbook.assign_add.released import release_exact_scores, release_run
from mechbook.assign_add.seeds import Dissected, SeedRuns, dissect
from mechbook.assign_add.task import Task
from mechbook.validation import POSITIVE, at_least, check_fields


@dataclass(frozen=True)
class RunReadings:
    """One run's readings: the run, its phases, progress measures, jump reading, plateau and probe."""

    run: TrainResult
    phases: Phases
    measures: pd.DataFrame
    jump: JumpReading | None
    plateau: Plateau
    probe: ProbeCurve


@dataclass(frozen=True)
class Dynamics:
    """Chapter 8's readings: the opened rebuild (``rebuild``), the released run (``release``, with
    its final model's exact scores ``release_exact`` or None when skipped), every seed of the stack
    (``seeds``, :class:`~mechbook.assign_add.binding_jump.SeedReading`), each seed's plateau where it
    has one (``seed_plateaus``), the stack itself (``dissected``) and the pools' ``baselines``."""

    dissected: Dissected
    rebuild: RunReadings
    release: RunReadings
    release_exact: dict[str, float] | None
    seeds: tuple[SeedReading, ...]
    seed_plateaus: dict[int, Plateau]
    baselines: PoolBaselines


@dataclass(frozen=True)
class ReadSettings:
    """How the readings are taken: the phase rules, the progress measures' batch, the sequences
    per misplaced case, the probe's sequences and training, the released checkpoints read (None:
    all present locally) and whether the released final model is scored on the enumerated pools."""

    rules: PhaseRules
    measures: MeasureConfig
    case_sequences: int = 256
    probe_sequences: int = 512
    probe: ProbeConfig = field(default_factory=ProbeConfig)
    release_steps: Sequence[int] | None = None
    release_exact: bool = True

    def __post_init__(self) -> None:
        check_fields(self, case_sequences=POSITIVE, probe_sequences=POSITIVE, release_steps=at_least(0))


def read_dynamics(dissected: Dissected, released: TrainResult, settings: ReadSettings) -> Dynamics:
    """Every reading of chapter 8 (see the module docstring)."""
    s = settings
    run = dissected.run
    phases = detect_phases(run.history, s.rules)
    measures = measures_over_training(run, s.measures)
    rebuild = RunReadings(
        run,
        phases,
        measures,
        jump_reading(run, phases, measures),
        plateau_of(rebuild_case_history(run, s.case_sequences), phases),
        probe_curve(rebuild_probe_history(run, s.probe_sequences, s.probe), phases),
    )
    release_phases = detect_phases(released.history, s.rules)
    release_measures = measures_over_training(released, s.measures)
    steps = None if s.release_steps is None else tuple(s.release_steps)
    release = RunReadings(
        released,
        release_phases,
        release_measures,
        jump_reading(released, release_phases, release_measures),
        plateau_of(cases.release_case_history(steps, n_per_case=s.case_sequences), release_phases),
        probe_curve(probes.release_probe_history(steps, n_sequences=s.probe_sequences, cfg=s.probe), release_phases),
    )
    seeds = seed_readings(dissected, s.rules, s.measures, s.probe_sequences, s.probe)
    by_seed = {r.config.seed: r for r in dissected.results}
    seed_plateaus = {
        r.seed: plateau_of(rebuild_case_history(by_seed[r.seed], s.case_sequences), r.phases)
        for r in seeds
        if r.phases.plateau is not None
    }
    return Dynamics(
        dissected=dissected,
        rebuild=rebuild,
        release=release,
        release_exact=release_exact_scores() if s.release_exact else None,
        seeds=seeds,
        seed_plateaus=seed_plateaus,
        baselines=pool_baselines(Task(run.config.task)),
    )


def read_training_dynamics(
    runs: SeedRuns, release_steps: Sequence[int] | None, release_per_pool: int, settings: ReadSettings
) -> Dynamics:
    """Chapter 8's readings from its configuration: the seed stack trained or loaded
    (:func:`~mechbook.assign_add.seeds.dissect`), the released run read at ``release_steps`` on
    ``release_per_pool`` sequences a pool, and :func:`read_dynamics` of both."""
    return read_dynamics(dissect(runs), release_run(release_steps, release_per_pool), settings)
