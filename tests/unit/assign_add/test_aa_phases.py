"""Phase detection of chapter 8 on synthetic accuracy curves."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.assign_add.baselines import pool_baselines
from mechbook.assign_add.phases import MISPLACED_POOLS, PhaseRules, detect_phases, plateaus, sharpest_rise
from mechbook.assign_add.task import POOL_NAMES, Task


def sigmoid(steps, mid, width):
    return 1 / (1 + np.exp(-(steps - mid) / width))


def synthetic(t1=500, t2=5300, t3=15000, plateau=0.75, noise=0.0, seed=0, end=20000, every=100):
    """Curves shaped like the paper's: addition, a sharp binding jump, a misplaced plateau."""
    steps = np.arange(0, end + 1, every)
    rng = np.random.default_rng(seed)
    curves = {name: np.full(len(steps), 1.0) for name in POOL_NAMES}
    curves["0var_train"] = 1 / 59 + (1 - 1 / 59) * sigmoid(steps, t1 - 150, 60)
    for name in ("1var_train", "1var_heldout", "2var_train", "2var_heldout"):
        curves[name] = 0.3 + 0.7 * sigmoid(steps, t2, 20)
    curves["2var_misplaced_one"] = 0.3 + 0.68 * sigmoid(steps, t2, 20)
    if t3 is None:
        curves["1var_misplaced"] = 0.3 + (plateau - 0.3) * sigmoid(steps, t2, 20)
    else:
        curves["1var_misplaced"] = (
            0.3 + (plateau - 0.3) * sigmoid(steps, t2, 20) + (1 - plateau) * sigmoid(steps, t3, 200)
        )
    curves["2var_misplaced_both"] = curves["1var_misplaced"]
    rows = []
    for name, acc in curves.items():
        acc = np.clip(acc + noise * rng.standard_normal(len(steps)), 0, 1)
        rows += [{"step": int(s), "pool": name, "accuracy": float(a)} for s, a in zip(steps, acc)]
    return pd.DataFrame(rows)


def crossing(h, pool, level):
    part = h[h.pool == pool].sort_values("step")
    return int(part.step[part.accuracy >= level].iloc[0])


def test_three_phases_found_where_the_curves_put_them():
    h = synthetic()
    ph = detect_phases(h)
    assert ph.phase1 == crossing(h, "0var_train", 0.9)
    assert 5200 <= ph.phase2 <= 5400 and ph.phase2_jump > 0.6
    assert ph.phase3_status == "refined" and ph.phase3_pool in MISPLACED_POOLS
    start, end, level = ph.plateau
    assert 5300 < start < 6500 and 13500 < end < 15000 and abs(level - 0.75) < 0.02
    assert abs(ph.phase3 - crossing(h, ph.phase3_pool, PhaseRules().refined)) <= 100
    assert ph.phase1 < ph.phase2 < ph.phase3


@settings(max_examples=15, deadline=None)
@given(t2=st.integers(2000, 8000), gap=st.integers(3000, 9000), seed=st.integers(0, 1000))
def test_detection_follows_the_curves_under_noise(t2, gap, seed):
    t2 = t2 // 100 * 100
    h = synthetic(t2=t2, t3=t2 + gap, noise=0.01, seed=seed)
    ph = detect_phases(h)
    assert abs(ph.phase2 - t2) <= 200
    assert ph.phase3 is not None and abs(ph.plateau[2] - 0.75) < 0.03
    assert abs(ph.phase3 - crossing(h, ph.phase3_pool, PhaseRules().refined)) <= 200


def test_the_co_rise_while_addition_is_learned_is_not_the_binding_phase():
    """As in the released run: 1-var accuracy gains 0.35 as addition forms (steps 300-500),
    climbs slowly to 0.75, then binds by 0.24 at 5,300: phase 2 is the later, smaller jump."""
    h = synthetic()
    ones = h.pool == "1var_train"
    steps = h.loc[ones, "step"].to_numpy()
    slow = 0.37 * np.clip((steps - 500) / 4800, 0, 1)
    h.loc[ones, "accuracy"] = 0.03 + 0.35 * sigmoid(steps, 400, 30) + slow + 0.24 * sigmoid(steps, 5300, 20)
    ph = detect_phases(h)
    assert 5200 <= ph.phase2 <= 5400 and 0.2 < ph.phase2_jump < 0.3


def test_refinement_is_the_climb_off_the_last_stage():
    """A pool that climbs in stages (0.2, then 0.47 from step 10,000, then 1.0 at 15,000) dates
    phase 3 at the last climb, not at the intermediate one."""
    h = synthetic(t3=15000)
    both = h.pool == "2var_misplaced_both"
    steps = h.loc[both, "step"].to_numpy()
    h.loc[both, "accuracy"] = (
        0.2 * sigmoid(steps, 5300, 20) + 0.27 * sigmoid(steps, 10000, 50) + 0.53 * sigmoid(steps, 15000, 200)
    )
    h.loc[h.pool == "1var_misplaced", "accuracy"] = h.loc[both, "accuracy"].to_numpy()
    ph = detect_phases(h)
    assert abs(ph.plateau[2] - 0.47) < 0.02 and 10000 < ph.plateau[0] < 11000
    assert 14500 < ph.phase3 < 15500


def test_phase3_absent_without_a_plateau():
    ph = detect_phases(synthetic(plateau=1.0, t3=None))
    assert ph.phase3 is None and ph.phase3_status == "absent"
    assert list(ph.marks().phase) == ["phase 1: addition", "phase 2: binding"]


def test_plateau_that_never_rises_is_reported_as_such():
    ph = detect_phases(synthetic(t3=None))
    assert ph.phase3 is None and ph.phase3_status == "plateau, not refined" and ph.plateau is not None


def test_a_recovery_from_a_collapse_is_no_refinement():
    """Like the cpu rebuild's seed 2 on the Intel: the both-misplaced pool collapses from 0.5 to 0.02
    and recovers to 0.5 (a rise of 0.48), then every misplaced pool sits on its plateau to the end."""
    h = synthetic(t3=None)
    both = h.pool == "2var_misplaced_both"
    steps = h.loc[both, "step"].to_numpy()
    h.loc[both, "accuracy"] = np.interp(
        steps, [0, 5400, 7000, 7200, 8100, 8400, 20000], [0.3, 0.5, 0.5, 0.02, 0.02, 0.5, 0.5]
    )
    ph = detect_phases(h)
    assert ph.phase3 is None and ph.phase3_status == "plateau, not refined"
    assert ph.plateau[1] >= 19_000, "the plateau reported is the one the run sits on at its end"


def test_a_lift_must_reach_the_refined_level():
    """A climb from 0.5 to 0.85 is a new stage, not a refinement; the same climb to 0.95 is."""
    for top, refined in ((0.85, False), (0.95, True)):
        h = synthetic(t3=None)
        for pool in MISPLACED_POOLS:
            rows = h.pool == pool
            steps = h.loc[rows, "step"].to_numpy()
            h.loc[rows, "accuracy"] = np.interp(steps, [0, 5400, 9000, 9300, 20000], [0.3, 0.5, 0.5, top, top])
        ph = detect_phases(h)
        assert (ph.phase3_status == "refined") == refined
        if refined:
            assert 9000 < ph.phase3 <= 9400 and abs(ph.plateau[2] - 0.5) < 0.02


@settings(max_examples=25, deadline=None)
@given(
    acc=st.lists(st.floats(0, 1), min_size=3, max_size=60),
    length=st.integers(100, 2000),
    tol=st.floats(0.01, 0.2),
)
def test_plateaus_are_disjoint_long_flat_and_below_refined(acc, length, tol):
    rules = PhaseRules(plateau_len=length, plateau_tol=tol)
    steps = np.arange(len(acc)) * 100
    smooth = pd.Series(acc).rolling(rules.smooth, center=True, min_periods=1).mean().to_numpy()
    found = plateaus(steps, np.array(acc), rules, after=0)
    for (a, b, level), nxt in zip(found, found[1:] + [None]):
        part = smooth[(steps >= a) & (steps <= b)]
        assert b - a >= length and part.max() - part.min() <= 2 * tol + 1e-12 and part.max() < rules.refined
        assert level == pytest.approx(part.mean())
        assert nxt is None or nxt[0] > b


def test_empty_pools_are_refused():
    with pytest.raises(ValueError, match="phase3_pools"):
        PhaseRules(phase3_pools=())


STORED = Path(__file__).resolve().parents[2] / "data" / "part2-seed-curves-intel-xeon-model167.csv.gz"


def test_the_rule_dates_each_stored_seed_as_the_paper_defines_refinement():
    """Chapter 8's six cpu seeds as trained on an Intel Xeon (family 6 model 167): the misplaced
    pools' lift to near 1, read by eye from the curves, is near 7,000 on seed 42, 7,000-7,600 on seed
    1 and 8,500-9,100 on seed 4; seed 2 recovers from a collapse near 8,100 and then sits on its
    0.77 plateau to step 20,000; seeds 0 and 3 never bind."""
    curves = pd.read_csv(STORED)
    phases = {int(s): detect_phases(h) for s, h in curves.groupby("seed")}
    lifts = {42: (6_800, 7_300), 1: (7_000, 7_700), 4: (8_400, 9_300)}
    for seed, (lo, hi) in lifts.items():
        ph = phases[seed]
        assert ph.phase3_status == "refined" and lo <= ph.phase3 <= hi, (seed, ph)
        assert ph.phase2 < ph.plateau[0] < ph.plateau[1] < ph.phase3
    seed2 = phases[2]
    assert seed2.phase3 is None and seed2.phase3_status == "plateau, not refined"
    assert 0.7 < seed2.plateau[2] < 0.8 and seed2.plateau[1] >= 19_000
    assert phases[0].phase3_status == phases[3].phase3_status == "absent" and phases[0].phase2 is None


def test_a_small_rise_is_not_a_binding_phase():
    h = synthetic()
    ones = h.pool == "1var_train"
    h.loc[ones, "accuracy"] = 0.3 + 0.5 * h.loc[ones, "step"] / h.step.max()  # past phase2_end, slowly
    ph = detect_phases(h)
    assert ph.phase2 is None and ph.phase2_jump < 0.1 and ph.phase3 is None
    h.loc[ones, "accuracy"] = 0.02 + 0.05 * h.loc[ones, "step"] / h.step.max()  # never past it
    ph = detect_phases(h)
    assert ph.phase2 is None and ph.phase2_jump is None and ph.phase3 is None


def with_1var_train(h: pd.DataFrame, curve) -> pd.DataFrame:
    ones = h.pool == "1var_train"
    h.loc[ones, "accuracy"] = curve(h.loc[ones, "step"].to_numpy())
    return h


def test_addition_co_rise_up_to_the_any_value_control_is_not_binding():
    """Like the cpu rebuild's seed 0: 1-var accuracy rises 0.28 -> 0.43 as addition forms (more than
    ``min_jump`` within the window), then creeps to 0.59 over 20,000 steps: it never binds."""
    h = with_1var_train(synthetic(), lambda s: np.interp(s, [0, 400, 900, 20000], [0.02, 0.28, 0.43, 0.59]))
    ph = detect_phases(h)
    assert ph.phase2 is None and ph.phase3 is None
    assert sharpest_rise(*curve_of(h, "1var_train"), 500)[1] > PhaseRules().min_jump  # the old rule's false jump


def test_a_binding_jump_smaller_than_the_co_rise_is_still_found():
    """The co-rise (0.3 within 500 steps) beats the later binding jump (0.2, 0.7 -> 0.9) but ends below
    ``phase2_end``: phase 2 is the later jump."""
    h = with_1var_train(
        synthetic(), lambda s: np.interp(s, [0, 300, 700, 3900, 4100, 20000], [0.02, 0.1, 0.4, 0.7, 0.9, 0.95])
    )
    ph = detect_phases(h)
    assert 3900 < ph.phase2 <= 4100 and 0.2 <= ph.phase2_jump < 0.3


def test_phase2_end_sits_above_the_any_value_control():
    """The rule's constant is the computed control plus ``min_jump``: a change of the task that moves
    the control fails here."""
    rules = PhaseRules()
    control = pool_baselines(Task()).control(rules.phase2_pool)
    assert control + rules.min_jump <= rules.phase2_end < control + rules.min_jump + 0.05


def curve_of(h: pd.DataFrame, pool: str) -> tuple[np.ndarray, np.ndarray]:
    part = h[h.pool == pool].sort_values("step")
    return part.step.to_numpy(), part.accuracy.to_numpy()


def test_no_addition_means_no_phase1():
    h = synthetic()
    h.loc[h.pool == "0var_train", "accuracy"] = 0.5
    assert detect_phases(h).phase1 is None


def test_sharpest_rise_jump_is_limited_to_the_window():
    steps = np.arange(0, 2001, 100)
    acc = np.minimum(1.0, steps / 2000)  # a slow ramp: 0.05 per eval
    acc[10] += 0.1  # one sharper step, 0.15
    step, jump = sharpest_rise(steps, acc, window=500)
    assert step == 1000
    spans = [acc[j] - acc[i] for i in range(21) for j in range(i + 1, 21) if steps[j] - steps[i] <= 500]
    assert jump == pytest.approx(max(spans))
    assert jump < 0.5
    assert sharpest_rise(steps, acc, window=500, end_at_least=1.01) == (None, None)
    high_step, high_jump = sharpest_rise(steps, acc, window=500, end_at_least=0.9)
    ends = [
        acc[j] - acc[i] for i in range(21) for j in range(i + 1, 21) if steps[j] - steps[i] <= 500 and acc[j] >= 0.9
    ]
    assert high_jump == pytest.approx(max(ends)) and high_step >= 1400


def test_a_sharp_jump_beats_an_earlier_slow_climb_of_steeper_single_steps():
    """Like the real run: 1-var accuracy climbs with addition (0 -> 0.4 over 600 steps, one
    interval of 0.16), then binding jumps 0.45 -> 0.99 over 300 steps (intervals of 0.15-0.2)."""
    steps = np.arange(0, 6001, 100)
    early = np.interp(steps, [0, 200, 300, 400, 800], [0.02, 0.05, 0.21, 0.3, 0.42])
    acc = np.where(
        steps < 5000, early + 0.03 * steps / 5000, np.interp(steps, [5000, 5100, 5200, 5300], [0.45, 0.62, 0.8, 0.99])
    )
    step, jump = sharpest_rise(steps, acc, window=500)
    assert 5100 <= step <= 5300 and jump > 0.5


def test_bad_history_is_a_clear_error():
    with pytest.raises(ValueError, match="columns"):
        detect_phases(pd.DataFrame({"x": [1]}))
    with pytest.raises(ValueError, match="no pool"):
        detect_phases(synthetic().query("pool != '1var_train'"))
    assert PhaseRules().jump_window == 500


def test_on_the_stored_seeds_half_show_three_phases_so_most_seeds_is_not_reproduced():
    from mechbook.assign_add.claims import CH08_CLAIMS
    from mechbook.claims import by_id

    curves = pd.read_csv(STORED)
    three = [detect_phases(h).phase3 is not None for _, h in curves.groupby("seed")]
    share = sum(three) / len(three)
    assert share == 0.5
    assert by_id(CH08_CLAIMS)["ch08.three_phases_most_seeds"].evidence(share).verdict == "not reproduced"
