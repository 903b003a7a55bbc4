"""Chapter 8's module: the shared training configs, knobs, the computed prose in each of its
branches (it must stay true whichever way the run falls), charts without warnings, records."""

from __future__ import annotations

import dataclasses
import json
import warnings

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ROOT

from mechbook.assign_add.circuits import pattern_frame
from mechbook.assign_add.measures import measures_over_training
from mechbook.assign_add.model import AssignAddModel
from mechbook.assign_add.phases import PhaseRules, Phases, detect_phases
from mechbook.assign_add.runs import CPU_RUN, TRAIN_PROFILES
from mechbook.assign_add.scores import pool_scores
from mechbook.assign_add.seeds import Dissected, SeedRuns
from mechbook.assign_add.task import GENERALISATION_UNION, POOL_NAMES, Task
from mechbook.assign_add.train import TrainConfig, TrainResult
from mechbook.book.checks import check_spread, check_thresholds, load_spread, load_thresholds
from mechbook.chapters import ch08_training_dynamics as ch08

RULES = PhaseRules()


def fake_result(one_var: list[float], zero_var: list[float] | None = None, every: int = 100) -> TrainResult:
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
    return TrainResult(pd.DataFrame(rows), {s: {} for s in steps}, {}, TRAIN_PROFILES["smoke"], 90.0)


def fake_measures(steps: list[int], value: float = 0.5) -> pd.DataFrame:
    names = [
        "adder",
        "prev_token",
        "qk_identity",
        "l1_operands_top2",
        "l1_operands_mass",
        "l2_needed_top2",
        "l2_needed_mass",
    ]
    return pd.DataFrame([{"step": s, "measure": m, "value": value * s / steps[-1]} for s in steps for m in names])


def test_the_seed_runs_are_sized_per_profile():
    assert ch08.CONFIGS["smoke"].train is TRAIN_PROFILES["smoke"]
    assert ch08.CONFIGS["paper"].train is TRAIN_PROFILES["paper"]
    assert ch08.CONFIGS["cpu"].train is CPU_RUN
    assert all(cfg.rules is cfg.runs.rules for cfg in ch08.CONFIGS.values())
    sizes = [ch08.CONFIGS[p].measures.n_sequences for p in ("smoke", "cpu", "paper")]
    assert sizes == sorted(sizes)


def test_knobs_reach_the_seed_runs():
    cfg = ch08.resolve("smoke", steps=120, seed=7, measure_sequences=64)
    assert (cfg.train.steps, cfg.runs.pick, cfg.measures.n_sequences) == (120, 7, 64)
    assert cfg.train.batch_size == TRAIN_PROFILES["smoke"].batch_size
    assert cfg.runs.seeds == ch08.CONFIGS["smoke"].runs.seeds
    assert ch08.resolve("smoke") is ch08.CONFIGS["smoke"]


def test_bad_config_is_refused():
    with pytest.raises(ValueError, match="window"):
        ch08.DynamicsChapterConfig(ch08.CONFIGS["smoke"].runs, ch08.CONFIGS["smoke"].measures, window=0)
    with pytest.raises(TypeError, match="SeedRuns"):
        ch08.DynamicsChapterConfig("smoke", ch08.CONFIGS["smoke"].measures, window=10)


def test_setup_prose_counts_the_parameters():
    n = sum(p.numel() for p in AssignAddModel(CPU_RUN.model).parameters())
    text = ch08.setup_prose(CPU_RUN)
    assert f"{n:,} parameters" in text and "8,000 steps" in text and "seed 42" in text


@pytest.mark.parametrize("status", ["detected", "plateau without rise", "absent"])
def test_phases_prose_follows_the_status(status):
    plateau = (1000, 2500, 0.5) if status != "absent" else None
    phases = Phases(
        400, 800, 0.6, 3000 if status == "detected" else None, status, "1var_misplaced" if plateau else None, plateau
    )
    text = ch08.phases_prose(phases, RULES)
    assert "step 400" in text and "step 800" in text and "rises by 0.60" in text
    assert ("then rose past 0.70" in text) == (status == "detected")
    assert ("does not rise" in text) == (status == "plateau without rise")
    assert ("absent" in text) == (status == "absent")


def test_phases_prose_without_a_jump():
    text = ch08.phases_prose(Phases(None, None, None, None, "absent", None, None), RULES)
    assert "phase 1**: not reached" in text and "phase 2**: not found" in text and "not looked for" in text


def test_jump_prose_never_claims_a_level_the_run_did_not_reach():
    # 1-var train jumps at step 400 but ends at 0.90: the contradiction
    result = fake_result([0.05, 0.05, 0.1, 0.8, 0.85, 0.9, 0.9, 0.9])
    phases = detect_phases(result.history, RULES)
    assert phases.phase2 == 400
    measures = fake_measures(sorted(result.checkpoints))
    text = ch08.jump_prose(result, phases, measures)
    assert "never reaches 0.95" in text and "ends at 0.90" in text and "step 800, the last checkpoint" in text
    assert "the first checkpoint where" not in text


def test_jump_prose_names_the_first_step_at_the_level():
    result = fake_result([0.05, 0.05, 0.1, 0.8, 0.9, 0.97, 0.99, 0.99])
    phases = detect_phases(result.history, RULES)
    measures = fake_measures(sorted(result.checkpoints))
    text = ch08.jump_prose(result, phases, measures)
    assert "from step 300 (the last checkpoint before it) to step 600 (the first checkpoint where" in text
    before, after = (
        ch08.measure_at(measures, "l1_operands_mass", 300),
        ch08.measure_at(measures, "l1_operands_mass", 600),
    )
    assert f"goes from {before:.2f} to {after:.2f}" in text


def test_jump_prose_without_a_jump():
    result = fake_result([0.05] * 6)
    phases = detect_phases(result.history, RULES)
    assert phases.phase2 is None
    assert "No binding jump was detected" in ch08.jump_prose(result, phases, fake_measures(sorted(result.checkpoints)))


def test_measure_at_and_adder_first_step():
    measures = fake_measures([100, 200, 300, 400], value=1.0)
    assert ch08.measure_at(measures, "adder", 250) == pytest.approx(0.5)
    assert np.isnan(ch08.measure_at(measures, "adder", 50))
    assert ch08.adder_first_step(measures, level=0.7) == 300
    assert ch08.adder_first_step(measures, level=1.1) is None


def test_union_and_final_table():
    result = fake_result([0.1, 0.5, 0.7])
    acc = result.accuracy()
    assert ch08.union_score(acc) == pytest.approx(np.mean([acc.iloc[-1][p] for p in GENERALISATION_UNION]))
    table = ch08.final_table(acc)
    assert list(table.pool) == list(POOL_NAMES) and table["final accuracy"].iloc[2] == pytest.approx(0.7)


def test_window_steps():
    assert ch08.window_steps([100, 200, 300, 900], centre=250, window=100) == [200, 300]
    assert ch08.window_steps([100, 900], centre=500, window=10) == [100, 900]


def test_curves_frame_labels_every_pool():
    frame = ch08.curves_frame(fake_result([0.1, 0.2]).history)
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
def test_charts_build_without_warnings_and_state_the_finding(curve, zero_var):
    result = fake_result(curve, zero_var=zero_var)
    phases = detect_phases(result.history, RULES)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spec = ch08.curves_chart(result, phases).to_dict()
        measures = ch08.measures_chart(fake_measures(sorted(result.checkpoints), 1.0), phases).to_dict()
    if phases.phase2 is None:
        assert spec["title"].startswith("After 600 steps")
    else:
        assert "phase 2 at step 400" in spec["title"]
    assert len(spec["layer"]) == 1 + 2 * (not phases.marks().empty)
    assert "adder alone is right on 100%" in measures["title"]
    assert spec["width"] == "container"


def test_pattern_slider_chart_has_one_frame_per_step():
    task = Task()
    model = AssignAddModel(TRAIN_PROFILES["smoke"].model)
    seq = task.eval_pools(1, seed=0)["2var_train"][0][0]
    frames = [pattern_frame(model, seq, task).assign(step=s) for s in (100, 200)]
    patterns = pd.concat(frames, ignore_index=True)
    patterns["layer"] = "layer " + patterns.layer.astype(str)
    spec = ch08.pattern_slider_chart(patterns, [100, 200], 0, "title").to_dict()
    assert spec["params"][0]["bind"]["max"] == 1 and spec["facet"]["field"] == "layer"


def test_record_all_covers_the_thresholds(monkeypatch):
    seen = {}
    monkeypatch.setattr(ch08.mechbook, "record", lambda name, value: seen.setdefault(name, value))
    result = fake_result([0.05, 0.05, 0.1, 0.8, 0.9, 0.97])
    phases = detect_phases(result.history, RULES)
    values = ch08.record_all(result, phases, fake_measures(sorted(result.checkpoints)), pattern_checkpoints=3)
    bounds = yaml.safe_load((ROOT / "book" / "thresholds" / "08_training_dynamics.yml").read_text())
    for profile in ("smoke", "cpu"):
        assert {n for n in bounds[profile] if not n.startswith(("release_", "seeds_"))} <= set(values)
    assert values["phase2_step"] == 400 and values["steps"] == 600 and values["phase3_step"] == "absent"


def test_release_config_is_checked():
    with pytest.raises(ValueError, match="not released checkpoints"):
        ch08.DynamicsChapterConfig(
            ch08.CONFIGS["smoke"].runs, ch08.CONFIGS["smoke"].measures, window=10, release_steps=(1, 150)
        )
    assert set(ch08.SMOKE_RELEASE_STEPS) <= set(ch08.release.RELEASE_STEPS)


def test_side_by_side_and_release_prose_read_both_runs():
    rebuild = fake_result([0.05, 0.05, 0.1, 0.8, 0.9, 0.97])
    released = fake_result([0.05, 0.06, 0.07, 0.08, 0.9, 0.99, 0.99, 1.0])
    a, b = detect_phases(rebuild.history, RULES), detect_phases(released.history, RULES)
    table = ch08.side_by_side(rebuild, a, released, b).set_index("")
    assert table.loc["phase 2 (binding)", "this rebuild"] == "400"
    assert table.loc["phase 2 (binding)", "paper's run, as released"] == "500"
    assert table.loc["1var_train at the last evaluation", "paper's run, as released"] == "1.000"
    sampled = ch08.release_prose(b, released, None, 1045)
    assert "phase 2 at step 500" in sampled and "skips the exactly enumerated pools" in sampled
    exact = {"0var_heldout_all": 0.994, "2var_union_paper": 0.981, "2var_union_equal": 0.985}
    text = ch08.release_prose(b, released, exact, 1045)
    assert "**99.4%** of all 1,045 held-out pairs" in text and "98.5% with the three parts weighted equally" in text


def test_record_release(monkeypatch):
    seen = {}
    monkeypatch.setattr(ch08.mechbook, "record", lambda name, value: seen.setdefault(name, value))
    released = fake_result([0.05, 0.06, 0.07, 0.08, 0.9, 0.99])
    values = ch08.record_release(released, detect_phases(released.history, RULES), {"2var_union_paper": 0.98})
    assert values["release_phase2_step"] == 500 and values["release_checkpoints"] == 6
    assert values["release_final_2var_union_paper"] == 0.98 and values["release_last_1var_train"] == 0.99
    bounds = yaml.safe_load((ROOT / "book" / "thresholds" / "08_training_dynamics.yml").read_text())
    names = {n for p in ("smoke", "cpu") for n in bounds[p] if n.startswith("release_")}
    assert names - set(values) == {"release_final_0var_heldout_all", "release_plateau_b_right_only"}
    assert "release_plateau_b_right_only" in ch08.record_analyses(
        {r: ch08.Plateau(_case_history(set()), NO_PLATEAU, None) for r in ch08.RUNS},
        {r: (_probe([0.5]), NO_PLATEAU) for r in ch08.RUNS},
    )


def test_union_prose_shows_both_weightings():
    result = fake_result([0.1, 0.5, 0.7])
    acc = result.accuracy()
    acc.loc[acc.index.max(), "2var_misplaced_both"] = 0.1
    text = ch08.union_prose(acc, Task())
    assert f"**{ch08.union_paper(acc, Task()):.3f}**" in text and f"{ch08.union_score(acc):.3f} with the three" in text
    assert ch08.union_paper(acc, Task()) > ch08.union_score(acc)


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


def test_seeds_are_checked():
    with pytest.raises(ValueError, match="at least 4 distinct seeds"):
        SeedRuns(TRAIN_PROFILES["smoke"], seeds=(1, 2, 2, 3))
    with pytest.raises(TypeError, match="runs must be a SeedRuns"):
        ch08.DynamicsChapterConfig(TRAIN_PROFILES["smoke"], ch08.CONFIGS["smoke"].measures, window=10)


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
    assert f"picks seed {example}" in text and "(the median binding jump)" in text and words in text
    unbound = ch08.seeds_prose(_dissected([None] * 4, 1, 1, 100))
    assert "no seed reached the binding jump" in unbound and "median final 1-var training accuracy" in unbound


def test_seed_frame_and_chart_with_the_release_marked():
    frame = ch08.seed_frame(_summary([2800.0, None, 400.0, 9000.0]))
    assert len(frame) == 4 + 3 and set(frame.phase) == {"phase 1: addition", "phase 2: binding"}
    release = Phases(501, 5401, 0.2, 15001, "detected", "2var_misplaced_both", (10001, 13001, 0.4))
    spec = ch08.seeds_chart(_summary([2800.0, None, 400.0, 9000.0]), release).to_dict()
    assert len(spec["layer"]) == 2 and "detected in 3 of 4 seeds" in spec["title"]["text"][0]


def test_record_seeds(monkeypatch):
    seen = {}
    monkeypatch.setattr(ch08.mechbook, "record", lambda name, value: seen.setdefault(name, value))
    values = ch08.record_seeds(_dissected([2800.0, None, 400.0, 9000.0], 0, 2))
    assert values["seeds_bound"] == 3 and values["seeds_phase2_steps"] == [2800, 400, 9000]
    assert values["seeds_min_final_2var_union"] == 0.5 and values["example_seed"] == 0
    assert values["dissected_seed"] == 2


needs_release = pytest.mark.skipif(
    not ch08.release.available_steps(), reason=f"no local copy of the authors' release (set {ch08.release.ENV_VAR})"
)
SMOKE_BOUNDS = load_thresholds("08_training_dynamics")["smoke"]


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


def test_the_measured_seed_spread_passes_the_smoke_bounds():
    assert check_spread(SMOKE_BOUNDS, load_spread("08_training_dynamics")["smoke"]) == []


def test_smoke_bounds_reject_an_untrained_model():
    """The rebuild's records, computed as the notebook computes them, for a model that was never
    trained: at chance (1/59) on the 0-var training pairs, below every seed's 300-step score."""
    cfg = ch08.CONFIGS["smoke"]
    result = untrained_run(cfg.train)
    phases = detect_phases(result.history, cfg.rules)
    measures = measures_over_training(result, cfg.measures)
    centre = phases.phase2 if phases.phase2 is not None else max(result.checkpoints)
    shown = ch08.window_steps(list(result.checkpoints), centre, cfg.window)
    records = ch08.record_all(result, phases, measures, pattern_checkpoints=len(shown))
    rebuild_bounds = {n: b for n, b in SMOKE_BOUNDS.items() if not n.startswith(("release_", "seeds_"))}
    flagged = {p.split()[0] for p in check_thresholds(records, rebuild_bounds)}
    assert flagged == {"final_0var_train"}, check_thresholds(records, rebuild_bounds)


@needs_release
def test_smoke_bounds_reject_the_released_run_cut_before_binding():
    """The released run read as the chapter reads it, but at 16 checkpoints that all come before
    its binding jump (steps 1 to 4,201): no phase 2, no phase 3, and the last model cannot bind."""
    early = tuple(s for s in sorted(ch08.release.available_steps()) if s < 5000)[: len(ch08.SMOKE_RELEASE_STEPS)]
    cfg = dataclasses.replace(ch08.CONFIGS["smoke"], release_steps=early)
    released = ch08.release_run(cfg)
    phases = detect_phases(released.history, cfg.rules)
    records = ch08.record_release(released, phases, ch08.release_exact_scores(cfg))
    release_bounds = {n: b for n, b in SMOKE_BOUNDS.items() if n.startswith("release_")}
    flagged = {p.split()[0] for p in check_thresholds(records, release_bounds)}
    assert {"release_phase2_step", "release_phase3_step", "release_last_1var_train"} <= flagged, flagged
    assert "release_checkpoints" not in flagged


def _case_history(low: set[str]) -> pd.DataFrame:
    """Cases of two pools over steps 1,000-5,000: those in ``low`` stay at 0.1, the others at 0.9."""
    cases = [("1var_misplaced", "b right"), ("1var_misplaced", "k left"), ("2var_misplaced_one", "b right")]
    return pd.DataFrame(
        [
            {"step": s, "pool": p, "case": c, "accuracy": 0.1 if c in low else 0.9}
            for s in range(1000, 6000, 1000)
            for p, c in cases
        ]
    )


PLATEAU = Phases(500, 1500, 0.4, 4500, "detected", "1var_misplaced", (2000, 4000, 0.4))
NO_PLATEAU = Phases(500, 1500, 0.4, None, "absent", None, None)


def test_the_plateau_is_traced_to_its_cases():
    lag = ch08.plateau_cases(_case_history({"b right"}), PLATEAU)
    assert lag.lags.tolist() == [True, True, False] and lag.accuracy.is_monotonic_increasing
    assert ch08.b_right_only(lag) is True
    assert ch08.b_right_only(ch08.plateau_cases(_case_history({"b right", "k left"}), PLATEAU)) is False
    assert ch08.b_right_only(ch08.plateau_cases(_case_history(set()), PLATEAU)) is False
    assert ch08.plateau_cases(_case_history({"b right"}), NO_PLATEAU) is None and ch08.b_right_only(None) is None


def test_cases_prose_and_chart_say_what_the_plateau_is():
    runs = {
        ch08.RUNS[0]: ch08.Plateau(
            _case_history({"b right"}), PLATEAU, ch08.plateau_cases(_case_history({"b right"}), PLATEAU)
        ),
        ch08.RUNS[1]: ch08.Plateau(_case_history(set()), NO_PLATEAU, None),
    }
    text = ch08.cases_prose(runs)
    assert (
        "over the plateau (steps 2,000-4,000, `1var_misplaced` at 0.40) the cases below 0.5 are `1var_misplaced` b right (0.10)"
        in text
    )
    assert "every other case averages at least 0.90" in text and "no phase-3 plateau" in text.splitlines()[1]
    spec = ch08.cases_chart(runs).to_dict()
    assert spec["resolve"]["scale"]["x"] == "independent"
    assert "only the cases with b as the right operand lag" in json.dumps(spec["title"])
    values = ch08.record_analyses(
        runs, {ch08.RUNS[0]: (_probe([0.5, 0.99]), PLATEAU), ch08.RUNS[1]: (_probe([0.2, 0.3]), NO_PLATEAU)}
    )
    assert values["release_plateau_b_right_only"] is True and values["plateau_lagging"] is None
    assert values["release_plateau_lagging"] == ["1var_misplaced: b right", "2var_misplaced_one: b right"]
    assert values["release_identity_probe_step"] == 1000 and values["identity_probe_step"] is None


def _probe(after: list[float]) -> pd.DataFrame:
    steps = [500 * (i + 1) for i in range(len(after))]
    rows = [{"step": s, "where": "after layer 1", "accuracy": a, "chance": 0.1, "n": 9} for s, a in zip(steps, after)]
    return pd.DataFrame(
        rows + [{"step": s, "where": "embedding", "accuracy": 0.99, "chance": 0.1, "n": 9} for s in steps]
    )


def test_probe_prose_and_chart_place_the_readable_step_against_the_jump():
    early = {ch08.RUNS[0]: (_probe([0.5, 0.99, 1.0]), PLATEAU), ch08.RUNS[1]: (_probe([0.96, 1.0]), PLATEAU)}
    assert ch08.identity_step(_probe([0.5, 0.99, 1.0])) == 1000
    text = ch08.probe_prose(early)
    assert "from step 1,000, before the binding jump at step 1,500" in text and "from step 500, before" in text
    assert "In both runs the variable can be read after layer 1 before" in json.dumps(
        ch08.probe_chart(early).to_dict()["title"]
    )
    late = {ch08.RUNS[0]: (_probe([0.5, 0.5, 0.5, 0.97]), PLATEAU), ch08.RUNS[1]: (_probe([0.2]), NO_PLATEAU)}
    text = ch08.probe_prose(late)
    assert "from step 2,000, at or after the binding jump" in text and "never reads the variable" in text
    assert "When the variable can be read" in json.dumps(ch08.probe_chart(late).to_dict()["title"])
    unbound = Phases(500, None, None, None, "absent", None, None)
    assert "no binding jump" in ch08.probe_prose({ch08.RUNS[1]: (_probe([0.99]), unbound)})


def test_attention_slider_shows_the_checkpoints_around_the_jump():
    cfg = ch08.CONFIGS["smoke"]
    result = untrained_run(cfg.train)
    jump = Phases(None, 200, 0.3, None, "absent", None, None)
    chart, n = ch08.attention_slider(result, jump, cfg)
    assert n == len(ch08.window_steps(list(result.checkpoints), 200, cfg.window)) and n >= 2
    spec = chart.to_dict()
    slider = next(p for p in spec["params"] if p["name"] == "checkpoint")
    assert slider["bind"]["max"] == n - 1 and slider["value"] == max(
        i for i, s in enumerate(sorted(result.checkpoints)[:n]) if s < 200
    )


def test_differences_from_the_paper_list_every_changed_setting():
    assert ch08.differences_from_paper(TRAIN_PROFILES["paper"]).empty
    table = ch08.differences_from_paper(CPU_RUN).set_index("setting")
    assert table.loc["model.d_model", "the paper"] == "128" and table.loc["model.d_model", "this run"] == "64"
    assert table.loc["steps", "this run"] == "8000" and table.loc["lr", "this run"] == "0.003"
    assert "model.seed" not in table.index and "task" not in table.index
    other_task = dataclasses.replace(
        TRAIN_PROFILES["paper"], task=dataclasses.replace(CPU_RUN.task, train_pair_fraction=0.5)
    )
    assert ch08.differences_from_paper(other_task).setting.tolist() == ["task"]
