"""The phase-3 plateau traced to its cases: which cases lag, and how many (variable, never-seen
slot) cases they name (the paper's structure: exactly one; b as the right operand in its released
run)."""

from __future__ import annotations

import pandas as pd
import pytest

from mechbook.assign_add import plateau
from mechbook.assign_add.phases import Phases

PLATEAU = Phases(500, 1500, 0.4, 4500, "refined", "1var_misplaced", (2000, 4000, 0.4))
NO_PLATEAU = Phases(500, 1500, 0.4, None, "absent", None, None)
CASES = [
    ("1var_misplaced", "b right"),
    ("1var_misplaced", "k left"),
    ("2var_misplaced_one", "b right"),
    ("2var_misplaced_both", "k left, b right"),
]


def case_history(low: set[str], level: float = 0.1) -> pd.DataFrame:
    """Cases over steps 1,000-5,000: those in ``low`` stay at ``level``, the others at 0.9."""
    return pd.DataFrame(
        [
            {"step": s, "pool": p, "case": c, "accuracy": level if c in low else 0.9}
            for s in range(1000, 6000, 1000)
            for p, c in CASES
        ]
    )


def test_the_lagging_cases_are_those_below_the_bound():
    lag = plateau.plateau_cases(case_history({"b right"}), PLATEAU)
    assert lag.lags.tolist() == [True, True, False, False] and lag.accuracy.is_monotonic_increasing
    at_bound = plateau.plateau_cases(case_history({"b right"}, level=plateau.PLATEAU_LAG), PLATEAU)
    assert not at_bound.lags.any()
    assert plateau.plateau_cases(case_history({"b right"}), NO_PLATEAU) is None


@pytest.mark.parametrize(
    "low, slots",
    [
        ({"b right"}, ["b right"]),
        ({"b right", "k left"}, ["b right", "k left"]),
        ({"k left"}, ["k left"]),
        ({"k left, b right"}, []),  # a both-misplaced case names no single slot
        (set(), []),
    ],
)
def test_the_lagging_slots_are_the_single_misplaced_cases_below_the_bound(low, slots):
    run = plateau.plateau_of(case_history(low), PLATEAU)
    assert run.lagging_slots == slots and run.n_lagging_slots == len(slots)
    assert set(run.lagging) == {f"{p}: {c}" for p, c in CASES if c in low}


def test_without_a_plateau_there_is_nothing_to_trace():
    run = plateau.plateau_of(case_history({"b right"}), NO_PLATEAU)
    assert run.lag is None and run.lagging is None and run.lagging_slots is None and run.n_lagging_slots is None
