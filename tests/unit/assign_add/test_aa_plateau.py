"""The phase-3 plateau traced to its cases: which cases lag, and whether they are exactly the
cases with b as the right operand (the paper's account)."""

from __future__ import annotations

import pandas as pd
import pytest

from mechbook.assign_add import plateau
from mechbook.assign_add.phases import Phases

PLATEAU = Phases(500, 1500, 0.4, 4500, "detected", "1var_misplaced", (2000, 4000, 0.4))
NO_PLATEAU = Phases(500, 1500, 0.4, None, "absent", None, None)
CASES = [("1var_misplaced", "b right"), ("1var_misplaced", "k left"), ("2var_misplaced_one", "b right")]


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
    assert lag.lags.tolist() == [True, True, False] and lag.accuracy.is_monotonic_increasing
    at_bound = plateau.plateau_cases(case_history({"b right"}, level=plateau.PLATEAU_LAG), PLATEAU)
    assert not at_bound.lags.any()
    assert plateau.plateau_cases(case_history({"b right"}), NO_PLATEAU) is None


@pytest.mark.parametrize(
    "low, b_right_only",
    [({"b right"}, True), ({"b right", "k left"}, False), ({"k left"}, False), (set(), False)],
)
def test_b_right_only_holds_exactly_for_the_b_right_cases(low, b_right_only):
    run = plateau.plateau_of(case_history(low), PLATEAU)
    assert run.b_right_only is b_right_only
    assert set(run.lagging) == {f"{p}: {c}" for p, c in CASES if c in low}


def test_without_a_plateau_there_is_nothing_to_trace():
    run = plateau.plateau_of(case_history({"b right"}), NO_PLATEAU)
    assert run.lag is None and run.lagging is None and run.b_right_only is None
