"""Every chart whose data grows with a profile or with where a seed's phases fall, built at the
largest size its profile can produce: the book's row limit (:data:`mechbook.viz.MAX_ROWS`, set in
one place) must hold for any draw. ``to_dict()`` applies the limit, so a chart over it raises
``MaxRowsError`` here, as chapter 8 once did on a seed whose window held more checkpoints."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
import pytest
from test_ch08_training_dynamics import BASELINES, RULES, fake_measures, fake_result
from test_ch11_how_much_data import CHANCE

from mechbook import viz
from mechbook.assign_add import fourier
from mechbook.assign_add.circuits import pattern_frame
from mechbook.assign_add.model import AssignAddModel
from mechbook.assign_add.phases import detect_phases
from mechbook.assign_add.pools import POOL_NAMES
from mechbook.assign_add.task import Task
from mechbook.chapters import ch08_training_dynamics as ch08
from mechbook.chapters import ch09_circuits as ch09
from mechbook.chapters import ch10_why_it_composes as ch10
from mechbook.chapters import ch11_how_much_data as ch11

PROFILES = ("smoke", "cpu", "paper")


def _rows(chart: alt.TopLevelMixin) -> int:
    """The rows of the chart's largest dataset, after the row limit was applied (``to_dict``)."""
    spec = chart.to_dict()
    return max((len(rows) for rows in spec.get("datasets", {}).values()), default=0)


def _evaluations(profile: str) -> list[int]:
    """Every evaluation step of the profile's seed runs: the most checkpoints a run can keep."""
    train = ch08.CONFIGS[profile].train
    return list(range(train.eval_every, train.steps + 1, train.eval_every))


def test_the_limit_is_the_books_not_altairs_default():
    assert alt.data_transformers.options["max_rows"] == viz.MAX_ROWS > 5000


@pytest.mark.parametrize("profile", PROFILES)
def test_chapter8_attention_slider_at_the_most_checkpoints_a_window_holds(profile):
    """A window of ``cfg.window`` steps either side of the jump holds at most one checkpoint per
    evaluation (a run keeps one wherever accuracy moves)."""
    cfg = ch08.CONFIGS[profile]
    train = cfg.train
    task = Task(train.task)
    example = task.eval_pools(1, seed=0)["2var_train"][0][0]
    one = pattern_frame(AssignAddModel(train.model), example, task)
    centre = train.steps // 2
    steps = [s for s in _evaluations(profile) if abs(s - centre) <= cfg.window]
    assert len(steps) == min(2 * cfg.window // train.eval_every + 1, len(_evaluations(profile)))
    patterns = pd.concat([one.assign(step=s) for s in steps], ignore_index=True)
    patterns["layer"] = "layer " + patterns.layer.astype(str)
    assert _rows(ch08.pattern_slider_chart(patterns, steps, 0, "title")) == len(patterns)


@pytest.mark.parametrize("profile", PROFILES)
def test_chapter8_curves_and_measures_at_every_evaluation(profile):
    steps = _evaluations(profile)
    result = fake_result(list(np.linspace(0.05, 1.0, len(steps))), every=steps[0])
    phases = detect_phases(result.history, RULES)
    assert _rows(ch08.curves_chart(result, phases, BASELINES)) >= len(steps) * len(POOL_NAMES)
    assert _rows(ch08.measures_chart(fake_measures(steps), phases, 59)) >= len(steps)


@pytest.mark.parametrize("profile", PROFILES)
def test_chapter9_gallery_at_its_profiles_size(profile, monkeypatch):
    """The static explorer (the built site's) holds every neuron on offer: ``gallery`` maps of N² cells each."""
    monkeypatch.setenv("MECHBOOK_STATIC", "1")
    n = ch09.CONFIGS[profile].gallery
    modulus = ch09.CONFIGS[profile].runs.train.task.modulus
    grid = np.arange(modulus)
    k = np.arange(1, 2 * n + 1) % (modulus // 2) + 1
    maps = np.cos(2 * np.pi * k[:, None, None] * (grid[None, :, None] + grid[None, None, :]) / modulus)
    chart = ch09.gallery(maps, fourier.fourier_neurons(maps), n)
    assert _rows(chart) >= n * modulus**2


@pytest.mark.parametrize("profile", PROFILES)
def test_chapter10_and_11_curves_at_every_evaluation(profile):
    steps = _evaluations(profile)
    over = pd.DataFrame({"step": steps, **{name: np.linspace(0, 1, len(steps)) for name in ch10.OVER_LABELS}})
    assert _rows(ch10.over_training_chart(over, steps[len(steps) // 2])) >= len(steps)
    history = pd.DataFrame([{"step": s, "pool": p, "accuracy": 0.5} for s in steps for p in POOL_NAMES])
    history = pd.concat([history, pd.DataFrame([{"step": steps[-1], "pool": "train", "accuracy": 0.5, "loss": 0.1}])])
    assert _rows(ch11.last_run_chart(history, 0.5, 0, CHANCE)) >= len(steps) * len(POOL_NAMES)
