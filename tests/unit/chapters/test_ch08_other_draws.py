"""Chapter 8's pages on another processor's draws: the six cpu-profile seeds as an Intel Xeon trained
them (``../shared/data/part2-seed-curves``; other bits than the AMD CPUs', so the phases fall
elsewhere). Every part of the page that reads only the curves (the phases, the curves chart, the
seeds chart and prose, the slider's window) must build on every seed, whatever its phases."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
from conftest import ROOT
from test_ch08_training_dynamics import BASELINES

from mechbook import viz
from mechbook.assign_add.binding_jump import window_steps
from mechbook.assign_add.config import TrainResult, keep_steps
from mechbook.assign_add.phases import detect_phases
from mechbook.assign_add.seeds import example_seed, seed_summary
from mechbook.assign_add.task import Task
from mechbook.chapters import ch08_training_dynamics as ch08

CURVES = ROOT.parent / "shared" / "data" / "part2-seed-curves" / "intel-xeon-model167-cpu-seeds.csv"
CFG = ch08.CONFIGS["cpu"]
PATTERN_ROWS = 272
"""Rows of one checkpoint's attention frame at the paper's size (both layers, 16 positions)."""

pytestmark = pytest.mark.skipif(not CURVES.is_file(), reason=f"no seed curves at {CURVES}")


@pytest.fixture(scope="module")
def results() -> list[TrainResult]:
    """One TrainResult per seed of the other draw: its history, and the checkpoints it would keep
    (their weights are not in the data; the curve-only parts of the page do not read them)."""
    curves = pd.read_csv(CURVES)
    out = []
    for seed, history in curves.groupby("seed"):
        history = history.drop(columns="seed").reset_index(drop=True)
        config = dataclasses.replace(CFG.train, seed=int(seed))
        out.append(TrainResult(history, {s: {} for s in keep_steps(history, config)}, {}, config, 0.0))
    return out


def test_the_draw_is_the_six_seeds_of_the_profile(results):
    assert sorted(r.config.seed for r in results) == sorted(CFG.runs.seeds)
    assert all(r.history.step.max() == CFG.train.steps for r in results)


def test_every_seeds_curves_chart_builds_whatever_its_phases(results):
    for result in results:
        phases = detect_phases(result.history, CFG.rules)
        spec = ch08.curves_chart(result, phases, BASELINES).to_dict()
        assert spec["title"]["text"], result.config.seed
        assert ch08.training_prose(result) and ch08.phases_prose(phases, CFG.rules)


def test_the_attention_sliders_window_fits_the_row_limit_on_every_seed(results):
    """The window around each seed's jump (the last checkpoint where it never binds) holds few
    enough checkpoints for one chart, as on the Intel draw that once broke chapter 8."""
    for result in results:
        phases = detect_phases(result.history, CFG.rules)
        centre = phases.phase2 if phases.phase2 is not None else max(result.checkpoints)
        steps = window_steps(list(result.checkpoints), centre, CFG.window)
        assert 1 <= len(steps) <= 2 * CFG.window // CFG.train.eval_every + 1
        assert len(steps) * PATTERN_ROWS <= viz.MAX_ROWS


def test_the_seeds_summary_chart_and_pick_build_on_the_other_draw(results):
    summary = seed_summary(results, CFG.rules)
    assert example_seed(summary) in set(summary.seed)
    release = detect_phases(results[0].history, CFG.rules)
    spec = ch08.seeds_chart(summary, release).to_dict()
    assert f"of {len(results)} seeds" in " ".join(spec["title"]["text"])
    for result in results:
        assert 0 <= ch08.final_union(result.accuracy(), Task(result.config.task)) <= 1
        assert not ch08.final_table(result.accuracy(), BASELINES).empty
