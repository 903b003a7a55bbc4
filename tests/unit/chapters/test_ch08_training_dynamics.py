"""Chapter 8's module: config and knobs, the phase dates the page reads, the computed prose in each
of its branches (it must stay true whichever way the run falls; comparison words never contradict
the printed numbers), charts without warnings, records and the smoke bounds that reject a broken
run (what each claim reads: assign_add/test_aa_claims.py; the runs: assign_add/test_aa_runs.py)."""

from __future__ import annotations

import dataclasses
import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st
from test_aa_release import needs_release

from mechbook.assign_add import release
from mechbook.assign_add.baselines import PoolBaselines
from mechbook.assign_add.binding_jump import JumpReading, SeedReading, jump_reading, probe_curve
from mechbook.assign_add.circuits import pattern_frame
from mechbook.assign_add.claims import CH08_CLAIMS
from mechbook.assign_add.config import TrainConfig, TrainResult
from mechbook.assign_add.dynamics import Dynamics, RunReadings
from mechbook.assign_add.measures import measures_over_training
from mechbook.assign_add.model import AssignAddModel
from mechbook.assign_add.phases import PhaseRules, Phases, detect_phases
from mechbook.assign_add.plateau import plateau_of
from mechbook.assign_add.released import release_run
from mechbook.assign_add.runs import CPU_RUN, QUARTER_RUN, TRAIN_PROFILES, on_the_papers_dates
from mechbook.assign_add.scores import pool_scores
from mechbook.assign_add.seeds import Dissected, SeedRuns, seed_summary
from mechbook.assign_add.task import GENERALISATION_UNION, POOL_NAMES, Task
from mechbook.book.checks import check_spread, check_thresholds, load_spread, load_thresholds
from mechbook.chapters import ch08_training_dynamics as ch08
from mechbook.claims import by_id, evidence

RULES = PhaseRules()
NOTEBOOK = ROOT / "book" / "part2" / "08_training_dynamics.ipynb"
MEASURE_NAMES = [
    "adder",
    "prev_token",
    "qk_identity",
    "l1_operands_top2",
    "l1_operands_mass",
    "l2_needed_top2",
    "l2_needed_mass",
]
BASELINES = PoolBaselines(
    chance=1 / 59,
    best_constant={p: 0.03 for p in POOL_NAMES},
    any_value={p: (0.43 if p.startswith("1var") else 0.25) for p in POOL_NAMES if not p.startswith("0var")},
    n_per_pool=64,
)


def fake_result(
    one_var: list[float], zero_var: list[float] | None = None, every: int = 100, seed: int = 0
) -> TrainResult:
    """A TrainResult whose 1var_train curve is ``one_var`` (other pools follow it) every ``every``
    steps; checkpoints at every evaluation."""
    steps = [every * (i + 1) for i in range(len(one_var))]
    zero_var = zero_var or [0.5] + [1.0] * (len(one_var) - 1)
    rows = []
    for i, s in enumerate(steps):
        for pool in POOL_NAMES:
            acc = zero_var[i] if pool.startswith("0var") else one_var[i]
            rows.append({"step": s, "pool": pool, "accuracy": acc, "loss": 1.0})
        rows.append({"step": s, "pool": "train", "accuracy": one_var[i], "loss": 1.0})
    config = dataclasses.replace(TRAIN_PROFILES["smoke"], seed=seed)
    return TrainResult(pd.DataFrame(rows), {s: {} for s in steps}, {}, config, 90.0)


def fake_measures(steps: list[int], value: float = 0.5) -> pd.DataFrame:
    return pd.DataFrame(
        [{"step": s, "measure": m, "value": value * s / steps[-1]} for s in steps for m in MEASURE_NAMES]
    )


def case_history(low: set[str], steps: range = range(100, 900, 100)) -> pd.DataFrame:
    """Cases of two pools over ``steps``: those in ``low`` stay at 0.1, the others at 0.9."""
    cases = [("1var_misplaced", "b right"), ("1var_misplaced", "k left"), ("2var_misplaced_one", "b right")]
    return pd.DataFrame(
        [{"step": s, "pool": p, "case": c, "accuracy": 0.1 if c in low else 0.9} for s in steps for p, c in cases]
    )


def probe_frame(after: list[float], every: int = 100) -> pd.DataFrame:
    steps = [every * (i + 1) for i in range(len(after))]
    rows = [
        {"step": s, "where": "after layer 1", "accuracy": a, "chance": 1 / 12, "n": 9} for s, a in zip(steps, after)
    ]
    return pd.DataFrame(
        rows + [{"step": s, "where": "embedding", "accuracy": 0.1, "chance": 1 / 12, "n": 9} for s in steps]
    )


def readings(run: TrainResult, probe: list[float] | None = None, low: set[str] | None = None) -> RunReadings:
    """A run's readings from its curves: fake measures, a case history with ``low`` lagging, a probe."""
    phases = detect_phases(run.history, RULES)
    measures = fake_measures(sorted(run.checkpoints))
    measures.loc[measures.measure == "prev_token", "value"] = 0.9  # the previous-token head forms early
    steps = sorted(run.checkpoints)
    return RunReadings(
        run,
        phases,
        measures,
        jump_reading(run, phases, measures),
        plateau_of(case_history(low or set(), range(steps[0], steps[-1] + 1, 100)), phases),
        probe_curve(probe_frame(probe or [0.5] * len(steps)), phases),
    )


JUMP = [0.05, 0.05, 0.1, 0.8, 0.9, 0.97, 0.99, 0.99]
PLATEAU = [0.05, 0.05, 0.1] + [0.6] * 15 + [0.95, 1.0, 1.0]
"""Binding at step 400, a plateau at 0.6 to step 1,800, then a refinement (phase 3)."""


def fake_dynamics(curves: list[list[float]] | None = None, release_exact: dict | None = None) -> Dynamics:
    """Four seeds (the first opened), a released run that binds at step 400 with the variable
    readable from step 200, and fixed baselines."""
    curves = curves or [JUMP, JUMP, [0.05] * 8, JUMP]
    results = [fake_result(c, seed=i) for i, c in enumerate(curves)]
    seeds = []
    for r in results:
        rr = readings(r, probe=[0.5, 0.99] + [1.0] * 6)
        seeds.append(SeedReading(r.config.seed, rr.phases, rr.jump, rr.probe if rr.jump else None))
    dissected = Dissected(results, seed_summary(results, RULES), 0, results[0])
    release = readings(fake_result(PLATEAU), probe=[0.5, 0.99] + [1.0] * 19, low={"b right"})
    return Dynamics(
        dissected, readings(results[0], probe=[0.5] * 8), release, release_exact, tuple(seeds), {}, BASELINES
    )


# ---------------------------------------------------------------- config


def test_the_seed_runs_are_sized_per_profile():
    assert ch08.CONFIGS["smoke"].train is TRAIN_PROFILES["smoke"]
    assert ch08.CONFIGS["paper"].train is TRAIN_PROFILES["paper"]
    assert ch08.CONFIGS["cpu"].train is CPU_RUN
    assert all(cfg.rules is cfg.runs.rules for cfg in ch08.CONFIGS.values())
    sizes = [ch08.CONFIGS[p].measures.n_sequences for p in ("smoke", "cpu", "paper")]
    assert sizes == sorted(sizes)
    settings_ = ch08.CONFIGS["smoke"].settings
    assert settings_.release_steps == ch08.SMOKE_RELEASE_STEPS and settings_.case_sequences == 64


def test_knobs_reach_the_seed_runs():
    cfg = ch08.resolve("smoke", steps=120, seed=7, measure_sequences=64)
    assert (cfg.train.steps, cfg.runs.pick, cfg.measures.n_sequences) == (120, 7, 64)
    assert cfg.train.batch_size == TRAIN_PROFILES["smoke"].batch_size
    assert cfg.runs.seeds == ch08.CONFIGS["smoke"].runs.seeds
    assert ch08.resolve("smoke") is ch08.CONFIGS["smoke"]


def test_bad_config_is_refused():
    smoke = ch08.CONFIGS["smoke"]
    with pytest.raises(ValueError, match="window"):
        ch08.ChapterConfig(smoke.runs, smoke.measures, window=0)
    with pytest.raises(TypeError, match="SeedRuns"):
        ch08.ChapterConfig("smoke", smoke.measures, window=10)
    with pytest.raises(ValueError, match="not released checkpoints"):
        ch08.ChapterConfig(smoke.runs, smoke.measures, window=10, release_steps=(1, 150))
    with pytest.raises(ValueError, match="at least 4 distinct seeds"):
        SeedRuns(TRAIN_PROFILES["smoke"], seeds=(1, 2, 2, 3))


def test_setup_prose_counts_the_parameters():
    n = sum(p.numel() for p in AssignAddModel(QUARTER_RUN.model).parameters())
    text = ch08.setup_prose(QUARTER_RUN)
    assert f"{n:,} parameters" in text and "8,000 steps" in text and "seed 42" in text


def test_a_shorter_paper_run_is_held_to_the_papers_dates():
    paper = TRAIN_PROFILES["paper"]
    assert on_the_papers_dates(paper) and on_the_papers_dates(dataclasses.replace(paper, steps=20_000))
    assert not on_the_papers_dates(dataclasses.replace(paper, steps=paper.steps + 100))
    assert not on_the_papers_dates(dataclasses.replace(paper, steps=20_000, lr=2e-3))
    assert not on_the_papers_dates(QUARTER_RUN)
    assert "20,000 of its 40,000 steps" in ch08.timing_prose(dataclasses.replace(paper, steps=20_000))


# ---------------------------------------------------------------- claims


def test_the_phase_dates_count_the_seeds_when_the_rebuild_is_the_papers_run():
    d = fake_dynamics()
    paper = [
        dataclasses.replace(r, config=dataclasses.replace(TRAIN_PROFILES["paper"], seed=i))
        for i, r in enumerate(d.dissected.results)
    ]
    opened = dataclasses.replace(d.rebuild, run=paper[0])
    d = dataclasses.replace(d, rebuild=opened, dissected=Dissected(paper, d.dissected.summary, 0, paper[0]))
    ev = evidence(CH08_CLAIMS, d)
    assert ev["ch08.phase1_step"].values == [200, 200, 200, 200]
    # seed 2 never binds: its jump is dated at the last step, as near the window as it can be
    last = TRAIN_PROFILES["paper"].steps
    assert ev["ch08.phase2_window"].values == [5300 - 400, 5300 - 400, last - 5400, 5300 - 400]
    assert "held to the paper's dates too" in ch08.timing_prose(paper[0].config)
    assert "not held to the paper's dates" in ch08.timing_prose(QUARTER_RUN)


# ---------------------------------------------------------------- prose and charts, page order


def test_training_prose_and_curves_frame():
    result = fake_result([0.1, 0.2])
    assert "2 evaluations over 200 steps" in ch08.training_prose(result)
    frame = ch08.curves_frame(result.history)
    assert set(frame.pool) == set(POOL_NAMES) and frame.question.notna().all()
    row = frame[frame.pool == "2var_misplaced_both"].iloc[0]
    assert (row.variables, row.question) == ("2-var", "misplaced (both)")


@pytest.mark.parametrize(
    "curve, zero_var",
    [
        ([0.05] * 6, [0.1] * 6),
        ([0.05] * 6, [0.2, 0.95, 1, 1, 1, 1]),
        ([0.05, 0.05, 0.1, 0.8, 0.9, 0.97], [0.2, 0.95, 1, 1, 1, 1]),
    ],
)
def test_accuracy_charts_show_chance_and_the_control(curve, zero_var):
    result = fake_result(curve, zero_var=zero_var)
    phases = detect_phases(result.history, RULES)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spec = ch08.curves_chart(result, phases, BASELINES).to_dict()
        measures = ch08.measures_chart(fake_measures(sorted(result.checkpoints), 1.0), phases, 59).to_dict()
    if phases.phase2 is None:
        assert spec["title"]["text"][0].startswith("After 600 steps") and "chance 1.7%" in spec["title"]["text"][0]
    else:
        assert "before binding in a jump (phase 2, step 400)" in spec["title"]["text"][0]
    assert len(spec["layer"]) == 3 + 2 * (not phases.marks().empty)  # curves, level rules and labels, phase marks
    levels = json.dumps(spec)
    assert "chance (1/59)" in levels and "1-var: adds any context value" in levels
    assert "adder alone is right on 100% of pairs (chance 1.7%)" in measures["title"]["text"]
    assert spec["width"] == "container"


def test_curves_title_names_phase_3_or_the_plateau_the_run_ends_on():
    acc = pd.DataFrame({"0var_train": [1.0], "1var_train": [1.0]}, index=[20000])
    refined = Phases(400, 3500, 0.2, 7100, "refined", "1var_misplaced", (5200, 6500, 0.8))
    assert ch08.curves_title(refined, acc, 59)[1] == "then refinement (phase 3, step 7,100)"
    stuck = Phases(400, 3500, 0.2, None, "plateau, not refined", "1var_misplaced", (8200, 19000, 0.765))
    assert ch08.curves_title(stuck, acc, 59)[1] == "then the misplaced pools stay on their plateau (0.77) to the end"
    none = Phases(400, 3500, 0.2, None, "absent", None, None)
    title = ch08.curves_title(none, acc, 59)
    assert len(title) == 1 and title[0].endswith("(phase 2, step 3,500)")


@pytest.mark.parametrize("status", ["refined", "plateau, not refined", "absent"])
def test_phases_prose_follows_the_status(status):
    plateau = (1000, 2500, 0.5) if status != "absent" else None
    phases = Phases(
        400, 800, 0.6, 3000 if status == "refined" else None, status, "1var_misplaced" if plateau else None, plateau
    )
    text = ch08.phases_prose(phases, RULES)
    assert "step 400" in text and "step 800" in text and "rises by 0.60" in text
    assert (f"then was lifted to {RULES.refined} or above" in text) == (status == "refined")
    assert ("a plateau, not refined" in text) == (status == "plateau, not refined")
    assert ("absent" in text) == (status == "absent")
    unbound = ch08.phases_prose(Phases(None, None, None, None, "absent", None, None), RULES)
    assert "phase 1**: not reached" in unbound and "phase 2**: not found" in unbound and "not looked for" in unbound


def test_control_prose_places_the_last_evaluation_before_the_jump():
    d = fake_dynamics()
    text = ch08.control_prose(ch08.both(d), BASELINES)
    assert "would score 0.43 on the 1-var training pool (0.25 on the 2-var one; chance is 0.017)" in text
    assert "at step 300, the last evaluation before the jump, 1-var training accuracy is 0.10, lower than" in text
    flat = dataclasses.replace(d, rebuild=readings(fake_result([0.5] * 4)))
    assert "no evaluation before a binding jump; 1-var training accuracy ends at 0.50, higher than" in (
        ch08.control_prose(ch08.both(flat), BASELINES)
    )


@settings(max_examples=60, deadline=None)
@given(value=st.floats(0, 1), control=st.floats(0, 1))
def test_control_words_never_contradict_the_printed_numbers(value, control):
    run = readings(fake_result([0.05, 0.05, value * 0.05, 0.8, 0.97, 0.99]))
    b = dataclasses.replace(BASELINES, any_value={**BASELINES.any_value, "1var_train": control})
    text = ch08.control_prose({"run": run}, b)
    shown = float(re.search(r"would score ([\d.]+)", text).group(1))
    m = re.search(r"accuracy is ([\d.]+), (higher than|lower than|the same as) that control", text)
    assert m, text
    got = float(m.group(1))
    expected = "the same as" if got == shown else ("higher than" if got > shown else "lower than")
    assert m.group(2) == expected


def test_final_table_and_union_prose_show_the_baselines():
    result = fake_result([0.1, 0.5, 0.7])
    acc = result.accuracy()
    equal = ch08.final_union(acc, Task(), "equal")
    assert equal == pytest.approx(np.mean([acc.iloc[-1][p] for p in GENERALISATION_UNION]))
    table = ch08.final_table(acc, BASELINES).set_index("pool")
    assert table.loc["1var_train", "final accuracy"] == pytest.approx(0.7)
    assert table.loc["1var_train", "adds any context value"] == 0.43
    assert np.isnan(table.loc["0var_train", "adds any context value"]) and (table.chance == 1 / 59).all()
    acc.loc[acc.index.max(), "2var_misplaced_both"] = 0.1
    text = ch08.union_prose(acc, Task(), BASELINES)
    paper, equal = ch08.final_union(acc, Task()), ch08.final_union(acc, Task(), "equal")
    assert paper > equal and f"**{paper:.3f}**" in text and f"{equal:.3f} with the three" in text
    assert "chance is 1/59 = 0.017" in text and "any two context values would score 0.250" in text


def test_side_by_side_and_release_prose_read_both_runs():
    d = fake_dynamics()
    rebuild = readings(fake_result([0.05, 0.05, 0.1, 0.8, 0.9, 0.97]))
    table = ch08.side_by_side(rebuild.run, rebuild.phases, d.release.run, d.release.phases, BASELINES).set_index("")
    assert table.loc["phase 2 (binding)", "this rebuild"] == "400"
    assert table.loc["1var_train at the last evaluation (baseline 0.430)", "paper's run, as released"] == "1.000"
    sampled = ch08.release_prose(d.release, None, 1045, 59)
    assert "phase 2 at step 400" in sampled and "skips the exactly enumerated pools" in sampled
    assert "(chance 1.7%)" in sampled
    exact = {"0var_heldout_all": 0.994, "2var_union_paper": 0.981, "2var_union_equal": 0.985}
    text = ch08.release_prose(d.release, exact, 1045, 59)
    assert "**99.4%** of all 1,045 held-out pairs" in text and "98.5% with the three parts weighted equally" in text


def test_jump_prose_states_the_top2_share_with_its_direction():
    d = fake_dynamics()
    run = readings(fake_result(JUMP))
    text = ch08.jump_prose("the released run", run, 59)
    j = run.jump
    a, b = j.at_before["l1_operands_top2"], j.at_after["l1_operands_top2"]
    assert f"the operand positions rises from {a:.2f} to {b:.2f}" in text
    assert "from step 300 (the last checkpoint before it) to step 600 (the first checkpoint where" in text
    short = readings(fake_result([0.05, 0.05, 0.1, 0.8, 0.85, 0.9, 0.9, 0.9]))
    text = ch08.jump_prose("run", short, 59)
    assert "never reaches 0.95" in text and "ends at 0.90" in text and "step 800, the last checkpoint" in text
    flat = ch08.jump_prose("run", readings(fake_result([0.05] * 6)), 59)
    assert "no binding jump was detected" in flat and "(chance 1.7%)" in flat
    assert ch08.jumps_prose(d).count("**") == 4


@settings(max_examples=80, deadline=None)
@given(values=st.lists(st.floats(0, 1), min_size=8, max_size=8))
def test_jump_words_never_contradict_the_printed_numbers(values):
    names = ["l1_operands_top2", "l1_operands_mass", "l2_needed_top2", "prev_token"]
    reading = JumpReading(
        400, 300, 600, True, 0.99, dict(zip(names, values[:4]), adder=1.0), dict(zip(names, values[4:]), adder=1.0)
    )
    run = dataclasses.replace(readings(fake_result(JUMP)), jump=reading)
    text = ch08.jump_prose("run", run, 59)
    number = r"(\d+(?:\.\d+)?%?)"
    moves = re.findall(rf"(rises|falls) from {number} to {number}", text)
    stays = re.findall(rf"stays at {number}", text)
    assert len(moves) + len(stays) == 4
    for word, a, b in moves:
        x, y = float(a.rstrip("%")), float(b.rstrip("%"))
        assert a != b and word == ("rises" if y > x else "falls"), (word, a, b)
    printed = {n: (format(values[i], ".2f"), format(values[i + 4], ".2f")) for i, n in enumerate(names)}
    printed["l2_needed_top2"] = (f"{values[2]:.0%}", f"{values[6]:.0%}")
    assert len(stays) == sum(a == b for a, b in printed.values())


def test_cases_prose_and_chart_say_what_the_plateau_is():
    d = fake_dynamics()
    plateau = {ch08.RUNS[0]: d.release.plateau, ch08.RUNS[1]: plateau_of(case_history(set()), d.rebuild.phases)}
    release_plateau = d.release.phases.plateau
    text = ch08.cases_prose(plateau, BASELINES)
    assert "chance 0.017" in text and "`1var_misplaced` 0.43" in text
    if release_plateau is None:
        assert "no phase-3 plateau" in text
    ev = evidence(CH08_CLAIMS, d)["ch08.plateau_one_slot"]
    spec = ch08.cases_chart(plateau, BASELINES, ev).to_dict()
    assert spec["resolve"]["scale"]["x"] == "independent" and "chance 0.017" in json.dumps(spec["title"])
    assert "chance" not in json.dumps(spec["data"] if "data" in spec else spec.get("datasets", {})), "chance is no case"


def test_cases_prose_names_the_lagging_cases():
    phases = Phases(500, 1500, 0.4, 4500, "refined", "1var_misplaced", (200, 600, 0.4))
    run = plateau_of(case_history({"b right"}), phases)
    text = ch08.cases_prose({ch08.RUNS[0]: run}, BASELINES)
    assert "over the plateau (steps 200-600, `1var_misplaced` at 0.40) the cases below 0.5 are" in text
    assert "`1var_misplaced` b right (0.10)" in text and "every other case averages at least 0.90" in text
    assert "The lag is one variable in one never-seen slot: b right." in text
    ev = by_id(CH08_CLAIMS)["ch08.plateau_one_slot"].evidence({}, release=run.n_lagging_slots)
    spec = ch08.cases_chart({ch08.RUNS[0]: run}, BASELINES, ev).to_dict()
    assert "one variable in one never-seen slot lags: b right" in json.dumps(spec["title"])
    assert "One slot lags in 1 of the 1 runs with a plateau (reproduced)" in json.dumps(spec["title"])
    two = plateau_of(case_history({"b right", "k left"}), phases)
    assert "2 (variable, slot) cases: b right, k left" in ch08.cases_prose({ch08.RUNS[0]: two}, BASELINES)


def test_probe_prose_and_chart_place_the_readable_step_against_the_jump():
    d = fake_dynamics()
    runs = ch08.both(d, "probe")
    text = ch08.probe_prose(runs)
    assert (
        "from step 200, before the binding jump at step 400 (chance 0.08; from the embedding alone it reads 0.10"
        in text
    )
    assert "never reads the variable after layer 1 with 95% accuracy (chance 0.08)" in text
    ev = evidence(CH08_CLAIMS, d)["ch08.readable_before_jump"]
    assert "In every run read the variable can be read" in json.dumps(ch08.probe_chart(runs, ev).to_dict()["title"])
    late = by_id(CH08_CLAIMS)["ch08.readable_before_jump"].evidence([-100, 200])
    assert "In some runs" in json.dumps(ch08.probe_chart(runs, late).to_dict()["title"])
    unbound = probe_curve(probe_frame([0.99]), Phases(500, None, None, None, "absent", None, None))
    assert "no binding jump" in ch08.probe_prose({"run": unbound})


@settings(max_examples=60, deadline=None)
@given(first=st.integers(1, 40), jump=st.integers(1, 40))
def test_probe_order_words_never_contradict_the_steps(first, jump):
    after = [0.5] * (first - 1) + [0.99] * (41 - first)
    phases = Phases(100, jump * 100, 0.3, None, "absent", None, None)
    text = ch08.probe_prose({"run": probe_curve(probe_frame(after), phases)})
    m = re.search(r"from step ([\d,]+), (before|after|at the same step as) the binding jump at step ([\d,]+)", text)
    a, b = (int(m.group(i).replace(",", "")) for i in (1, 3))
    assert m.group(2) == ("before" if a < b else "after" if a > b else "at the same step as")


def _summary(phase2: list[float | None]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "seed": range(len(phase2)),
            "phase1": [100.0] * len(phase2),
            "phase2": phase2,
            "phase3": [None] * len(phase2),
            "three_phases": [False] * len(phase2),
            "final_2var_union": np.linspace(0.5, 0.9, len(phase2)),
        }
    )


def _dissected(phase2: list[float | None], example: int, opened: int, steps: int = 20000) -> Dissected:
    run = fake_result([0.5, 0.9])
    run.config = dataclasses.replace(TRAIN_PROFILES["smoke"], seed=opened, steps=steps)
    return Dissected([], _summary(phase2), example, run)


@pytest.mark.parametrize(
    "example, opened, words",
    [
        (3, 3, "the run that this chapter and chapters 9 and 10 open"),
        (3, 42, "this page opens seed 42 instead, as the reader asked"),
    ],
)
def test_seeds_prose(example, opened, words):
    text = ch08.seeds_prose(_dissected([2800.0, None, 400.0, 9000.0], example, opened))
    assert "Over 4 seeds of 20,000 steps" in text
    assert "binding jump came at steps 400, 2,800, 9,000" in text and "0 of 4 show all three" in text
    assert f"picks seed {example}" in text and "(the median binding jump; it reads only the phase-2 steps" in text
    assert words in text
    unbound = ch08.seeds_prose(_dissected([None] * 4, 1, 1, 100))
    assert "no seed reached the binding jump" in unbound and "median final 1-var training accuracy" in unbound
    assert "never the final scores" not in unbound


def test_seed_frame_and_chart_with_the_release_marked():
    frame = ch08.seed_frame(_summary([2800.0, None, 400.0, 9000.0]))
    assert len(frame) == 4 + 3 and set(frame.phase) == {"phase 1: addition", "phase 2: binding"}
    release = Phases(501, 5401, 0.2, 15001, "refined", "2var_misplaced_both", (10001, 13001, 0.4))
    spec = ch08.seeds_chart(_summary([2800.0, None, 400.0, 9000.0]), release).to_dict()
    assert len(spec["layer"]) == 2 and "detected in 3 of 4 seeds" in spec["title"]["text"][0]


def test_seed_outcomes_name_the_lagging_slots_or_say_no_seed_plateaued():
    d = fake_dynamics()
    assert not d.seed_plateaus
    text = ch08.seed_outcomes_prose(d)
    assert "No phase-3 plateau is found in any of the 4 seeds." in text and "lag on it: ." not in text
    phases = Phases(500, 1500, 0.4, 4500, "refined", "1var_misplaced", (200, 600, 0.4))
    with_one = dataclasses.replace(d, seed_plateaus={1: plateau_of(case_history({"k left"}), phases)})
    assert "found in 1 of 4 seeds; the (variable, slot) cases that lag on it: seed 1: k left." in (
        ch08.seed_outcomes_prose(with_one)
    )


def test_seed_curves_chart_shows_every_seed_with_its_phases():
    d = fake_dynamics()
    spec = ch08.seed_curves_chart(d.dissected).to_dict()
    text = json.dumps(spec)
    summary = d.dissected.summary
    bound = int(summary.phase2.notna().sum())
    assert f"{bound} of {len(summary)} seeds bind" in spec["title"]["text"][0]
    for row in summary.itertuples():
        assert ch08.seed_panel(pd.Series(row._asdict())) in text
    assert "seed 2: never binds" in text and "seed 0: binds at 400" in text
    row = pd.Series({"seed": 5, "phase2": 3000.0, "phase3": None, "phase3_status": "plateau, not refined"})
    assert ch08.seed_panel(row) == "seed 5: binds at 3,000, plateau, not refined"


def test_pattern_slider_chart_has_one_frame_per_step():
    task = Task()
    model = AssignAddModel(TRAIN_PROFILES["smoke"].model)
    seq = task.eval_pools(1, seed=0)["2var_train"][0][0]
    frames = [pattern_frame(model, seq, task).assign(step=s) for s in (100, 200)]
    patterns = pd.concat(frames, ignore_index=True)
    patterns["layer"] = "layer " + patterns.layer.astype(str)
    spec = ch08.pattern_slider_chart(patterns, [100, 200], 0, "title").to_dict()
    assert spec["params"][0]["bind"]["max"] == 1 and spec["facet"]["field"] == "layer"


def test_takeaway_is_computed_from_the_claims():
    d = fake_dynamics()
    ev = evidence(CH08_CLAIMS, d)
    text = ch08.takeaway_prose(d, ev)
    assert (
        "comes before binding in 4 of 4 seeds (in 1 of them binding has not come by the last step), "
        "and in the released run" in text
    )
    assert "previous-token head is in place before the binding jump in 4 of the 4 runs" in text
    assert (
        "on the released run the probe reads the variable after layer 1 from step 200, before the jump at step 400"
        in text
    )
    late = dict(
        ev,
        **{"ch08.readable_before_jump": by_id(CH08_CLAIMS)["ch08.readable_before_jump"].evidence([-100], release=-300)},
    )
    assert "readable after layer 1 before the jump in 0 of the 2 runs" in ch08.takeaway_prose(d, late)
    assert "switch on at the same time" not in text
    before, after, plateau = (ev[f"ch08.{k}"] for k in ("l1_top2_before", "l1_top2_after", "plateau_one_slot"))
    assert f"it is {before.summary()} before and {after.summary()} after" in text
    assert f'the claim before the jump reads "{before.word()}", the claim after it "{after.word()}".' in text
    forms_early = any(before.claim.rule.holds(v) for v in before.values if v is not None)
    assert ("the attention forms before binding" in text) == (bool(before.values) and not forms_early)
    early = dict(
        ev, **{"ch08.l1_top2_before": by_id(CH08_CLAIMS)["ch08.l1_top2_before"].evidence([0.8, 0.9], release=0.1)}
    )
    early_text = ch08.takeaway_prose(d, early)
    assert 'the claim before the jump reads "not reproduced by the rebuild; holds on the released run"' in early_text
    assert "the attention forms before binding" in early_text
    assert f"one variable in one never-seen slot, over the runs with a plateau: {plateau.word()}" in text


# ---------------------------------------------------------------- records and bounds


def test_record_all_covers_the_thresholds_and_every_claim(monkeypatch):
    seen = {}
    monkeypatch.setattr(ch08.mechbook, "record", lambda name, value: seen.setdefault(name, value))
    d = fake_dynamics(release_exact={"0var_heldout_all": 0.994, "2var_union_paper": 0.981, "2var_union_equal": 0.985})
    values = ch08.record_all(d, evidence(CH08_CLAIMS, d), pattern_checkpoints=3)
    bounds = yaml.safe_load((ROOT / "book" / "thresholds" / "08_training_dynamics.yml").read_text())
    for profile in ("smoke", "cpu"):
        assert set(bounds[profile]) <= set(values), set(bounds[profile]) - set(values)
    assert values["phase2_step"] == 400 and values["steps"] == 800 and values["release_plateau_slots"] == ["b right"]
    assert values["release_identity_probe_step"] == 200 and values["seeds_bound"] == 3
    assert {f"claim.{c.id}" for c in CH08_CLAIMS} <= set(values) and values == seen


SMOKE_BOUNDS = load_thresholds("08_training_dynamics")["smoke"]


def test_the_measured_seed_spread_passes_the_smoke_bounds():
    assert check_spread(SMOKE_BOUNDS, load_spread("08_training_dynamics")["smoke"]) == []


def untrained_run(train: TrainConfig) -> TrainResult:
    """A 'run' of ``train`` that never stepped: the initial model scored on the run's own pools
    at every evaluation step, its weights kept at every checkpoint step."""
    model = AssignAddModel(train.model)
    pools = Task(train.task).eval_pools(train.eval_per_pool, seed=train.eval_seed)
    scored = pool_scores(model, pools)
    steps = range(train.eval_every, train.steps + 1, train.eval_every)
    rows = [{"step": s, "pool": p, "accuracy": a, "loss": l} for s in steps for p, (a, l) in scored.items()]
    rows += [
        {"step": s, "pool": "train", "accuracy": scored["1var_train"][0], "loss": scored["1var_train"][1]}
        for s in steps
    ]
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    kept = {s: state for s in steps if s % train.keep_every == 0}
    return TrainResult(pd.DataFrame(rows), kept, state, train, 0.0)


def _records(d: Dynamics, monkeypatch, pattern_checkpoints: int = 2) -> dict:
    monkeypatch.setattr(ch08.mechbook, "record", lambda name, value: value)
    return ch08.record_all(d, evidence(CH08_CLAIMS, d), pattern_checkpoints=pattern_checkpoints)


def test_smoke_bounds_reject_an_untrained_model(monkeypatch):
    """The rebuild's records, computed as the notebook computes them, for a model that was never
    trained: at chance (1/59) on the 0-var training pairs, below every seed's 300-step score."""
    cfg = ch08.CONFIGS["smoke"]
    result = untrained_run(cfg.train)
    phases = detect_phases(result.history, cfg.rules)
    measures = measures_over_training(result, cfg.measures)
    base = fake_dynamics()
    rebuild = dataclasses.replace(base.rebuild, run=result, phases=phases, measures=measures, jump=None)
    d = dataclasses.replace(base, rebuild=rebuild)
    shown = ch08.window_steps(list(result.checkpoints), max(result.checkpoints), cfg.window)
    records = _records(d, monkeypatch, len(shown))
    rebuild_bounds = {n: b for n, b in SMOKE_BOUNDS.items() if not n.startswith(("release_", "seeds_"))}
    flagged = {p.split()[0] for p in check_thresholds(records, rebuild_bounds)}
    assert flagged == {"final_0var_train"}, check_thresholds(records, rebuild_bounds)


@needs_release
def test_smoke_bounds_reject_the_released_run_cut_before_binding(monkeypatch):
    """The released run read as the chapter reads it, but at 16 checkpoints that all come before
    its binding jump: no phase 2, no phase 3, and the last model cannot bind."""
    early = tuple(s for s in sorted(release.available_steps()) if s < 5000)[: len(ch08.SMOKE_RELEASE_STEPS)]
    released = release_run(early, per_pool=128)
    phases = detect_phases(released.history, RULES)
    base = fake_dynamics()
    cut = dataclasses.replace(base.release, run=released, phases=phases, jump=None)
    records = _records(dataclasses.replace(base, release=cut), monkeypatch)
    release_bounds = {n: b for n, b in SMOKE_BOUNDS.items() if n.startswith("release_") and "plateau" not in n}
    flagged = {p.split()[0] for p in check_thresholds(records, release_bounds)}
    assert {"release_phase2_step", "release_phase3_step", "release_last_1var_train"} <= flagged, flagged
    assert "release_checkpoints" not in flagged


def test_the_training_line_gives_the_runs_share_of_its_stack():
    """train_seconds is a run's share of its stack's wall time, and the page says so."""
    text = ch08.training_prose(fake_result([0.1, 0.5, 0.9]))
    assert text.startswith("3 evaluations over 300 steps")
    assert "this run's share of its stack's training time was 1.5 minutes" in text
