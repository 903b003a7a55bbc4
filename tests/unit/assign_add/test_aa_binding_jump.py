"""Readings across the binding jump: the progress measures either side of it, when the probe first
reads the variable, and the helpers they rest on, on hand-built histories."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mechbook.assign_add import binding_jump as bj
from mechbook.assign_add.config import TrainResult
from mechbook.assign_add.phases import PhaseRules, Phases, detect_phases
from mechbook.assign_add.runs import TRAIN_PROFILES
from mechbook.assign_add.task import POOL_NAMES

NAMES = ["adder", "prev_token", "qk_identity", "l1_operands_top2", "l1_operands_mass", "l2_needed_top2"]


def fake_result(one_var: list[float], every: int = 100) -> TrainResult:
    """A run whose 1-var pools follow ``one_var`` every ``every`` steps (0-var at 1.0 from the second
    evaluation), checkpoints at every evaluation."""
    steps = [every * (i + 1) for i in range(len(one_var))]
    rows = [
        {
            "step": s,
            "pool": p,
            "accuracy": (0.5 if i == 0 else 1.0) if p.startswith("0var") else one_var[i],
            "loss": 1.0,
        }
        for i, s in enumerate(steps)
        for p in [*POOL_NAMES, "train"]
    ]
    return TrainResult(pd.DataFrame(rows), {s: {} for s in steps}, {}, TRAIN_PROFILES["smoke"], 0.0)


def fake_measures(steps: list[int]) -> pd.DataFrame:
    """Every measure at ``step / 1000`` (so each checkpoint's value names its step)."""
    return pd.DataFrame([{"step": s, "measure": m, "value": s / 1000} for s in steps for m in NAMES])


def test_measure_at_adder_first_step_and_final():
    measures = fake_measures([100, 200, 300, 400])
    assert bj.measure_at(measures, "adder", 250) == pytest.approx(0.2)
    assert np.isnan(bj.measure_at(measures, "adder", 50))
    assert bj.adder_first_step(measures, level=0.3) == 300 and bj.adder_first_step(measures, level=0.5) is None
    assert bj.final_measures(measures)["prev_token"] == pytest.approx(0.4)


def test_window_steps():
    assert bj.window_steps([100, 200, 300, 900], centre=250, window=100) == [200, 300]
    assert bj.window_steps([100, 900], centre=500, window=10) == [100, 900]


def test_jump_reading_names_the_checkpoints_either_side():
    result = fake_result([0.05, 0.05, 0.1, 0.8, 0.9, 0.97, 0.99, 0.99])
    phases = detect_phases(result.history, PhaseRules())
    reading = bj.jump_reading(result, phases, fake_measures(sorted(result.checkpoints)))
    assert (reading.jump, reading.before, reading.after, reading.reached) == (400, 300, 600, True)
    assert reading.at_before["l1_operands_top2"] == pytest.approx(0.3)
    assert reading.at_after["l1_operands_top2"] == pytest.approx(0.6)


def test_jump_reading_of_a_run_that_never_reaches_the_level():
    result = fake_result([0.05, 0.05, 0.1, 0.8, 0.85, 0.9, 0.9, 0.9])
    phases = detect_phases(result.history, PhaseRules())
    reading = bj.jump_reading(result, phases, fake_measures(sorted(result.checkpoints)))
    assert not reading.reached and reading.after == 800 and reading.final_1var == pytest.approx(0.9)
    flat = fake_result([0.05] * 6)
    assert bj.jump_reading(flat, detect_phases(flat.history, PhaseRules()), fake_measures([100])) is None


def probe_frame(after: list[float]) -> pd.DataFrame:
    steps = [500 * (i + 1) for i in range(len(after))]
    rows = [{"step": s, "where": "after layer 1", "accuracy": a, "chance": 0.1, "n": 9} for s, a in zip(steps, after)]
    return pd.DataFrame(
        rows + [{"step": s, "where": "embedding", "accuracy": 0.99, "chance": 0.1, "n": 9} for s in steps]
    )


@pytest.mark.parametrize(
    "after, jump, first, lead",
    [
        ([0.5, 0.99, 1.0], 1500, 1000, 500),  # readable a checkpoint before the jump
        ([0.5, 0.5, 0.96], 1500, 1500, 0),  # readable at the jump itself: no lead
        ([0.5, 0.5, 0.5, 0.97], 1500, 2000, -500),  # after it
        ([0.2, 0.3], 1500, None, None),  # never (the embedding's 0.99 does not count)
        ([0.99], None, 500, None),  # no jump to compare with
    ],
)
def test_probe_curve_dates_the_readable_step_against_the_jump(after, jump, first, lead):
    phases = Phases(100, jump, 0.3 if jump else None, None, "absent", None, None)
    curve = bj.probe_curve(probe_frame(after), phases)
    assert curve.first == first and curve.lead == lead
