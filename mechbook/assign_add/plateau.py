"""The phase-3 plateau traced to its cases (chapter 8): which misplaced cases lag while a
misplaced pool plateaus, on a rebuild or on the authors' released run.

:func:`plateau_of` reads one run's case history (:mod:`mechbook.assign_add.cases`) over the
plateau the phase-3 rule found (:func:`mechbook.assign_add.phases.detect_phases`);
:func:`rebuild_case_history` is the cached case history of a rebuild's kept checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from mechbook.assign_add import cases
from mechbook.assign_add.config import TrainResult, load_model
from mechbook.assign_add.phases import Phases
from mechbook.assign_add.task import Task
from mechbook.cache import cached

PLATEAU_LAG = 0.5
"""A misplaced case lags in the plateau when its mean accuracy there is below this."""

SINGLE_POOLS: tuple[str, ...] = ("1var_misplaced", "2var_misplaced_one")
"""The pools whose cases misplace one variable in one slot, so that a lagging case names them."""


@dataclass(frozen=True)
class Plateau:
    """One run's misplaced cases over training (``history``: ``step``, ``pool``, ``case``,
    ``accuracy``), its phases, and each case's mean over the phase-3 plateau (``lag``, lowest
    first, ``lags`` below :data:`PLATEAU_LAG`; None without a plateau)."""

    history: pd.DataFrame
    phases: Phases
    lag: pd.DataFrame | None

    @property
    def lagging(self) -> list[str] | None:
        """The lagging cases as ``"pool: case"``, lowest first; None without a plateau."""
        return None if self.lag is None else case_names(self.lag[self.lag.lags])

    @property
    def lagging_slots(self) -> list[str] | None:
        """The (variable, never-seen slot) cases that lag where one variable alone is misplaced
        (``1var_misplaced`` and ``2var_misplaced_one``: ``"b right"``, ``"k left"``), sorted; None
        without a plateau. The paper's plateau is one of them: b as the right operand in its
        released run."""
        if self.lag is None:
            return None
        single = self.lag[self.lag.lags & self.lag.pool.isin(SINGLE_POOLS)]
        return sorted(set(single.case))

    @property
    def n_lagging_slots(self) -> int | None:
        """How many (variable, slot) cases lag over the plateau (:attr:`lagging_slots`); the
        paper's structure is exactly one. None without a plateau."""
        slots = self.lagging_slots
        return None if slots is None else len(slots)


def case_names(lag: pd.DataFrame) -> list[str]:
    """``"pool: case"`` for every row of a case table."""
    return [f"{r.pool}: {r.case}" for r in lag.itertuples()]


def plateau_cases(history: pd.DataFrame, phases: Phases) -> pd.DataFrame | None:
    """Every case's mean accuracy over the phase-3 plateau, lowest first, with ``lags`` (below
    :data:`PLATEAU_LAG`); None when the rules found no plateau."""
    if phases.plateau is None:
        return None
    start, end, _ = phases.plateau
    lag = cases.lagging_cases(history, start, end)
    return lag.assign(lags=lag.accuracy < PLATEAU_LAG)


def plateau_of(history: pd.DataFrame, phases: Phases) -> Plateau:
    """One run's :class:`Plateau` from its case history and its phases."""
    return Plateau(history, phases, plateau_cases(history, phases))


def rebuild_case_history(result: TrainResult, n_per_case: int = 256) -> pd.DataFrame:
    """:func:`mechbook.assign_add.cases.case_history` at every kept checkpoint of a rebuild,
    cached on the run's config, steps and final weights and the number of sequences per case."""
    steps = sorted(result.checkpoints)
    key = {"train": result.config, "steps": steps, "final": result.final_state, "n_per_case": n_per_case}
    return cached(
        "assign_add/rebuild_cases",
        key,
        lambda: cases.case_history(lambda s: load_model(result, s), steps, Task(result.config.task), n_per_case),
    )
