"""Several seeds of the rebuild, trained together, and the rule that picks the example run
(chapters 8-10).

The binding jump's timing moves widely with the seed, so claims about training dynamics are made
over seeds. :func:`train_seeds` trains one run per seed as one stacked model
(:mod:`mechbook.assign_add.train`); a seed changes both the initialisation (``model.seed``) and
the data stream (``seed``), never the task or its split. :func:`seed_summary` detects each run's
phases and final scores; :func:`example_seed` picks the run the chapters dissect by a rule stated
in advance, never by its result:

    among the seeds whose binding jump (phase 2) was detected, the one at the median jump step
    (the lower median for an even count; of several seeds at that step, the smallest); if no
    seed binds, the seed at the median final ``1var_train`` accuracy (same rules).

:class:`SeedRuns` holds what chapters 8-10 share (the run's config, the seeds, the rules) and
:func:`dissect` gives the run they open: the picked seed's own run out of the stack, with its
kept checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import pandas as pd

from mechbook.assign_add.config import TrainConfig, TrainResult, with_overrides
from mechbook.assign_add.phases import PhaseRules, detect_phases
from mechbook.assign_add.run_cache import load_or_train_runs
from mechbook.assign_add.sweeps import final_accuracies
from mechbook.assign_add.task import Task, union_accuracy
from mechbook.assign_add.train import load_or_train
from mechbook.validation import SEED, at_least, check_fields

T = TypeVar("T")


def seed_configs(base: TrainConfig, seeds: Sequence[int]) -> list[TrainConfig]:
    """``base`` once per seed, with both the data seed and the initialisation seed set to it."""
    if len(seeds) == 0 or len(set(seeds)) != len(seeds):
        raise ValueError(f"give at least one seed and no seed twice, got {list(seeds)}")
    return [with_overrides(base, seed=int(s), model__seed=int(s)) for s in seeds]


def train_seeds(
    base: TrainConfig, seeds: Sequence[int], device: str | None = None, keep: bool = False
) -> list[TrainResult]:
    """The runs of ``base`` for every seed, trained as stacked models, each cached under its own entry; with
    ``keep``, each keeps the checkpoints a run trained alone keeps."""
    return load_or_train_runs(seed_configs(base, seeds), device, desc=f"{len(seeds)} seeds", keep=keep)


def seed_summary(results: Sequence[TrainResult], rules: PhaseRules | None = None) -> pd.DataFrame:
    """One row per run: ``seed``, the detected ``phase1``, ``phase2``, ``phase2_jump``,
    ``phase3`` and ``phase3_status``, ``three_phases`` (all three detected), and the final
    accuracy of every pool plus ``2var_union`` (the parts weighted as in the paper's union)."""
    rules = rules or PhaseRules()
    rows = []
    for result in results:
        ph = detect_phases(result.history, rules)
        final = final_accuracies(result.history)
        final.pop("train", None)
        union = union_accuracy(final, Task(result.config.task))
        rows.append(
            {
                "seed": result.config.seed,
                "phase1": ph.phase1,
                "phase2": ph.phase2,
                "phase2_jump": ph.phase2_jump,
                "phase3": ph.phase3,
                "phase3_status": ph.phase3_status,
                "three_phases": None not in (ph.phase1, ph.phase2, ph.phase3),
                **{f"final_{k}": v for k, v in final.items()},
                "final_2var_union": union,
            }
        )
    return pd.DataFrame(rows)


def example_seed(summary: pd.DataFrame) -> int:
    """The seed the chapters dissect, by the rule in the module docstring: the lower median
    value of the phase-2 steps of the seeds that bound, and the smallest seed at that value."""
    if summary.empty:
        raise ValueError("the summary holds no run")
    bound = summary[summary["phase2"].notna()]
    column, runs = ("phase2", bound) if len(bound) else ("final_1var_train", summary)
    values = sorted(runs[column])
    median = values[(len(values) - 1) // 2]
    return int(runs.loc[runs[column] == median, "seed"].min())


@dataclass(frozen=True)
class SeedRuns:
    """The runs chapters 8-10 share: ``train`` once per seed of ``seeds``, phases detected by
    ``rules``. The run they dissect is the rule's pick (:func:`example_seed`), or seed ``pick``
    when a reader sets one (trained alone when it is not among ``seeds``)."""

    train: TrainConfig
    seeds: tuple[int, ...] = (42, 1, 2, 3)
    rules: PhaseRules = field(default_factory=PhaseRules)
    pick: int | None = None

    def __post_init__(self) -> None:
        check_fields(self, seeds=SEED, pick=at_least(0, "or None for the rule's pick"))
        if len(self.seeds) < 4 or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(
                f"seeds must be at least 4 distinct seeds (claims about dynamics hold over seeds), got {self.seeds}"
            )


@dataclass
class Dissected:
    """What :func:`dissect` returns: every seed's run (in ``seeds`` order), their
    :func:`seed_summary`, the rule's pick ``example``, and ``run``, the run the chapters open."""

    results: list[TrainResult]
    summary: pd.DataFrame
    example: int
    run: TrainResult

    @property
    def picked_by_rule(self) -> bool:
        """Whether the opened run is the rule's pick (not a seed the reader chose)."""
        return self.run.config.seed == self.example


def dissect(runs: SeedRuns, device: str | None = None) -> Dissected:
    """Train (or load) every seed of ``runs`` with its checkpoints, pick the example by the rule,
    and return the run to open: the example's, or ``runs.pick``'s (chapters 8-10)."""
    results = train_seeds(runs.train, runs.seeds, device, keep=True)
    summary = seed_summary(results, runs.rules)
    example = example_seed(summary)
    chosen = example if runs.pick is None else runs.pick
    by_seed = {r.config.seed: r for r in results}
    run = by_seed.get(chosen) or load_or_train(seed_configs(runs.train, [chosen])[0], device)
    return Dissected(results, summary, example, run)


def bound_seeds(summary: pd.DataFrame) -> list[int]:
    """The seeds of a seed summary (:func:`~mechbook.assign_add.seeds.seed_summary`) whose binding
    jump chapter 8's phase-2 rule found, in the summary's order."""
    return [int(s) for s in summary.loc[summary["phase2"].notna(), "seed"]]


def of_bound_seeds(readings: Mapping[int, T], summary: pd.DataFrame) -> dict[int, T]:
    """``readings`` (by seed) of the seeds that bound (:func:`bound_seeds`). Chapters 9 and 10 judge
    their claims on these alone: the paper's circuit and its gradient argument describe a model that
    binds, and a seed that has not bound by its last step has no binding circuit, nor a checkpoint
    before its jump, to read (chapter 8 counts it against its phase claims instead)."""
    bound = set(bound_seeds(summary))
    return {s: r for s, r in readings.items() if s in bound}
