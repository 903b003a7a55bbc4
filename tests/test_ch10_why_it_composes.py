"""Chapter 10's module: shared run and knobs, direction_spread against a literal loop, the
premise prose in each of its four cases, the verdict table, key split, records."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import ROOT

from mechbook.assign_add import circuits, release, theory
from mechbook.assign_add.model import AssignAddModel
from mechbook.assign_add.phases import detect_phases
from mechbook.assign_add.scores import pool_scores
from mechbook.assign_add.task import Task, TaskConfig
from mechbook.assign_add.train import TrainResult, load_model
from mechbook.book.checks import check_spread, check_thresholds, load_spread, load_thresholds
from mechbook.chapters import ch08_training_dynamics as ch08
from mechbook.chapters import ch10_why_it_composes as ch10

TC = TaskConfig()


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(1)
    return AssignAddModel(ch08.CONFIGS["smoke"].train.model).double().eval()


def test_chapter_10_reads_chapter_8s_run_and_its_seed():
    for profile, cfg in ch10.CONFIGS.items():
        assert cfg.runs is ch08.CONFIGS[profile].runs
    cfg = ch10.resolve("smoke", seed=3, per_pool=10)
    assert (cfg.runs.pick, cfg.per_pool) == (3, 10)
    with pytest.raises(ValueError, match="per_pool"):
        ch10.resolve("smoke", per_pool=0)


def test_direction_spread_against_a_literal_loop(model):
    u = circuits.variable_directions(model, TC).numpy()
    cosines = [
        abs(float(u[i] @ u[j]) / (np.linalg.norm(u[i]) * np.linalg.norm(u[j])))
        for i, j in itertools.permutations(range(len(u)), 2)
    ]
    lengths = [float(np.linalg.norm(row)) for row in u]
    got = ch10.direction_spread(model, TC)
    assert got["mean |cos| (different variables)"] == pytest.approx(sum(cosines) / len(cosines), rel=1e-9)
    assert got["longest / shortest u_v"] == pytest.approx(max(lengths) / min(lengths), rel=1e-9)


def _spread(early_cos: float, final_cos: float) -> pd.DataFrame:
    return pd.DataFrame({"mean |cos|": [early_cos, final_cos], "longest / shortest": [2.0, 1.5]}, index=["a", "b"])


@pytest.mark.parametrize(
    "similarity, ratio, early_cos, expected, form",
    [
        (0.95, 6.0, 0.5, "already has the identity shape", "the form holds"),
        (0.95, 1.7, 0.5, "layer 1 has not yet made the variables distinct", "the form holds"),
        (0.95, 1.7, 0.05, "their spread does not explain", "the form holds"),
        (0.7, 1.7, 0.5, "does not describe this checkpoint", "the form holds only loosely"),
        (0.2, 1.7, 0.5, "does not describe this checkpoint", "the form does not hold"),
    ],
)
def test_premise_prose_picks_the_case_the_numbers_show(similarity, ratio, early_cos, expected, form):
    text = ch10.premise_prose(similarity, ratio, _spread(early_cos, 0.1), step=1200)
    assert expected in text and f"({form})" in text and "At step 1,200" in text
    assert f"**{early_cos:.2f}**" in text


def _stats(ratio: float, rows: float, predicted: float, learned: float) -> pd.DataFrame:
    stats = pd.DataFrame(
        {"diag_mean": 1.0, "offdiag_abs_mean": 1.0, "ratio": ratio, "margin": 0.0, "rows_diag_max": rows},
        index=[ch10.GRADIENT, ch10.STEP, ch10.PREDICTED, ch10.LEARNED],
    )
    stats["similarity"] = [1.0, 0.5, predicted, learned]
    return stats


def test_checks_table_holds_only_what_the_numbers_say():
    split = pd.DataFrame({"ratio": [6.0, -1.0], "rows_diag_max": [0.9, 0.0]}, index=["context", "query"])
    checks = ch10.checks_table(_stats(4.9, 1.0, 0.98, 0.3), split)
    assert list(checks["holds"]) == [False, True, True, False]
    checks = ch10.checks_table(_stats(5.0, 0.6, 0.4, 0.6), split)
    assert list(checks["holds"]) == [True, True, False, True]


def test_blocks_title_states_the_ratios():
    title = ch10.blocks_title(_stats(1.72, 0.5, 0.98, 0.3), step=2500)
    assert title[0] == "At step 2,500 the gradient is 1.7× diagonal (correlation 0.98 with the prediction);"


def test_first_identity_step_and_its_prose():
    over = pd.DataFrame({"step": [100, 200, 300], "rows_diag_max": [0.1, 0.6, 0.9]})
    assert ch10.first_identity_step(over) == 200
    assert ch10.first_identity_step(over.assign(rows_diag_max=0.0)) is None
    assert "step **never**" in ch10.over_training_prose(None, None) and "not detected" in ch10.over_training_prose(
        None, None
    )
    assert "step **1,200**; the binding jump is at step 2,800" in ch10.over_training_prose(1200, 2800)


def test_key_split_adds_up_to_the_whole_gradient(model):
    task = Task(TC)
    tokens, labels = (torch.from_numpy(x) for x in task.sample(24, np.random.default_rng(0)))
    parts = ch10.key_split_blocks(model, TC, tokens, labels)
    whole = theory.gradient_variable_block(model, TC, tokens, labels)
    assert list(parts) == ["context keys (0-11)", "query keys (12-15)"]
    np.testing.assert_allclose(sum(parts.values()), whole, rtol=1e-6, atol=1e-9 * np.abs(whole).max())


def test_zero_var_table():
    a, b = np.diag([3.0, 3.0]) + 1.0, np.ones((2, 2))
    table = ch10.zero_var_table(a, b)
    assert table["diagonal mean"].tolist() == [4.0, 1.0]
    assert table.loc[1, "diag / |off-diag|"] == pytest.approx(circuits.block_diagonality(b)["ratio"])


def test_record_all_covers_the_thresholds(monkeypatch):
    seen = {}
    monkeypatch.setattr(ch10.mechbook, "record", lambda name, value: seen.setdefault(name, value))
    stats = _stats(1.7, 0.5, 0.98, 0.3)
    split = pd.DataFrame({"ratio": [6.0, -1.0], "rows_diag_max": [0.9, 0.0]}, index=["context", "query"])
    over = pd.DataFrame(
        {"step": [100, 200], "ratio": [1.0, 7.9], "rows_diag_max": [0.2, 0.9], "similarity": [0.1, 0.9]}
    )
    zero = ch10.zero_var_table(np.eye(2), np.ones((2, 2)))
    values = ch10.record_all(200, stats, zero, split, over, ch10.checks_table(stats, split), _spread(0.48, 0.11))
    assert values == seen and values["gradient_block_ratio_last_checkpoint"] == 7.9
    assert values["gradient_identity_first_step"] == 200 and values["theory_predictions_holding"] == 2
    bounds = yaml.safe_load((ROOT / "book" / "thresholds" / "10_why_it_composes.yml").read_text())
    table = pd.DataFrame({"seed": [0], "step": [100], "ratio": [2.0], "similarity": [0.5], "form": [False]})
    seeds = ch10.record_seeds(table)
    assert seeds["seeds_predicted_form_holding"] == 0 and seeds["seeds_gradient_block_ratio_max"] == 2.0
    for profile in ("smoke", "cpu"):
        assert {n for n in bounds[profile] if not n.startswith("release_")} <= set(values) | set(seeds)
        assert {n for n in bounds[profile] if n.startswith("release_")} <= set(
            ch10.record_release(ch10.Reading(5301, stats, split, ch10.checks_table(stats, split), _spread(0.3, 0.1)))
        )


def test_release_config_matches_chapter_8s_reading():
    for profile, cfg in ch10.CONFIGS.items():
        dyn = ch08.CONFIGS[profile]
        assert (cfg.release_steps, cfg.release_per_pool) == (dyn.release_steps, dyn.release_per_pool)


def test_read_run_comparison_and_release_records(model, monkeypatch):
    task = Task(TC)
    tokens, labels = (torch.from_numpy(x) for x in task.sample(16, np.random.default_rng(1)))
    torch.manual_seed(2)
    late = AssignAddModel(ch08.CONFIGS["smoke"].train.model).double().eval()
    a = ch10.read_run(model, late, TC, tokens, labels, step=300, final_step=900)
    b = ch10.read_run(late, late, TC, tokens, labels, step=900, final_step=900)
    grad = theory.gradient_variable_block(late, TC, tokens, labels)
    assert b.stats.loc[ch10.LEARNED, "similarity"] == pytest.approx(
        theory.block_similarity(grad, circuits.variable_qk_block(late, TC))
    )
    table = ch10.comparison_table(a, b).set_index("")
    assert table.loc["checkpoint (before the binding jump)"].tolist() == ["900", "300"]
    assert table.loc["predictions holding", "this rebuild"] == f"{int(a.checks['holds'].sum())} of 4"
    seen = {}
    monkeypatch.setattr(ch10.mechbook, "record", lambda name, value: seen.setdefault(name, value))
    values = ch10.record_release(b)
    assert values["release_gradient_checkpoint_step"] == 900
    assert values["release_gradient_block_ratio"] == pytest.approx(b.stats.loc[ch10.GRADIENT, "ratio"])
    assert f"{int(b.checks['holds'].sum())} of the 4 predictions hold" in ch10.release_prose(b)


SMOKE_BOUNDS = load_thresholds("10_why_it_composes")["smoke"]
needs_release = pytest.mark.skipif(
    not release.available_steps(), reason=f"no local copy of the authors' release (set {release.ENV_VAR})"
)


def smoke_batch(task: Task) -> tuple[torch.Tensor, torch.Tensor]:
    """The notebook's gradient batch: smoke's 1-var and 2-var training pools."""
    pools = task.eval_pools(ch10.CONFIGS["smoke"].per_pool, seed=5)
    return tuple(torch.from_numpy(np.concatenate([pools[p][i] for p in ("1var_train", "2var_train")])) for i in (0, 1))


def untrained_result(model_seed: int) -> TrainResult:
    """Smoke's run as if it never stepped: the initial model (of ``model_seed``) scored on the
    run's pools at every evaluation and kept at every checkpoint step."""
    train = ch10.CONFIGS["smoke"].runs.train
    train = dataclasses.replace(train, model=dataclasses.replace(train.model, seed=model_seed))
    model = AssignAddModel(train.model)
    scored = pool_scores(model, Task(train.task).eval_pools(train.eval_per_pool, seed=train.eval_seed))
    steps = range(train.eval_every, train.steps + 1, train.eval_every)
    history = pd.DataFrame(
        [{"step": s, "pool": p, "accuracy": a, "loss": l} for s in steps for p, (a, l) in scored.items()]
    )
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return TrainResult(history, {s: state for s in steps if s % train.keep_every == 0}, state, train, 0.0)


def test_the_measured_seed_spread_passes_the_smoke_bounds():
    assert check_spread(SMOKE_BOUNDS, load_spread("10_why_it_composes")["smoke"]) == []


@pytest.mark.parametrize("model_seed", [0, 3, 42])
def test_smoke_bounds_reject_an_untrained_model(model_seed):
    """The rebuild's records, computed as the notebook computes them, for a run that never
    trained: its variable directions are as distinct as random vectors, less aligned than after
    300 steps of any seed."""
    result = untrained_result(model_seed)
    task = Task(result.config.task)
    tokens, labels = smoke_batch(task)
    step = theory.after_phase1_step(result.history, list(result.checkpoints))
    early, late = load_model(result, step).double(), load_model(result).double()
    blocks = ch10.gradient_blocks(early, late, task.cfg, tokens, labels)
    stats = ch10.block_stats(blocks)
    split = ch10.block_stats(ch10.key_split_blocks(early, task.cfg, tokens, labels), reference=None)
    zero_tokens, zero_labels = (
        torch.from_numpy(x) for x in task.eval_pools(ch10.CONFIGS["smoke"].per_pool, seed=5)["0var_train"]
    )
    zero = ch10.zero_var_table(
        blocks[ch10.GRADIENT], theory.gradient_variable_block(early, task.cfg, zero_tokens, zero_labels)
    )
    over = theory.gradient_block_over_training(result, tokens, labels)
    assert detect_phases(result.history).phase2 is None
    spread = ch10.spread_table(early, late, task.cfg, step, result.config.steps)
    records = ch10.record_all(step, stats, zero, split, over, ch10.checks_table(stats, split), spread)
    bounds = {n: b for n, b in SMOKE_BOUNDS.items() if not n.startswith("release_")}
    assert {p.split()[0] for p in check_thresholds(records, bounds)} == {"variable_directions_cos_checkpoint"}


@needs_release
def test_release_bound_rejects_the_released_run_cut_before_binding():
    """The released run read at 16 checkpoints that all come before its binding jump: with no
    jump to find, the reading falls on the last of them, not on step 5,301."""
    early = tuple(s for s in release.available_steps() if s < 5000)[:16]
    cfg = dataclasses.replace(ch10.CONFIGS["smoke"], release_steps=early)
    task = Task(cfg.runs.train.task)
    records = ch10.record_release(ch10.release_reading(cfg, task.cfg, *smoke_batch(task)))
    bounds = {n: b for n, b in SMOKE_BOUNDS.items() if n.startswith("release_")}
    assert [p.split()[0] for p in check_thresholds(records, bounds)] == ["release_gradient_checkpoint_step"]
    assert records["release_gradient_checkpoint_step"] == early[-1]


def test_seeds_table_reads_each_run_at_its_own_checkpoint():
    task = Task(TaskConfig())
    tokens, labels = smoke_batch(task)
    runs = [untrained_result(1), untrained_result(2)]
    runs[1].config = dataclasses.replace(runs[1].config, seed=7)
    table = ch10.seeds_table(runs, task.cfg, tokens, labels)
    assert table.seed.tolist() == [runs[0].config.seed, 7]
    for run, row in zip(runs, table.itertuples()):
        step = theory.after_phase1_step(run.history, list(run.checkpoints))
        early = load_model(run, step).double()
        grad = theory.gradient_variable_block(early, task.cfg, tokens, labels)
        expected = theory.block_similarity(grad, theory.associative_memory_block(early, task.cfg))
        assert row.step == step and row.similarity == pytest.approx(expected)
        assert row.ratio == pytest.approx(circuits.block_diagonality(grad)["ratio"])
        assert row.form == (expected >= ch10.FORM_HOLDS)


@pytest.mark.parametrize(
    "similarities, words",
    [
        ([0.95, 0.97, 0.91], "a property of these runs"),
        ([0.86, -0.15, 0.93], "not a property of these runs at this scale"),
        ([0.2, -0.5, 0.1], "does not appear before the jump in any of them"),
    ],
)
def test_seeds_prose_says_whether_the_form_holds_over_seeds(similarities, words):
    table = pd.DataFrame(
        {"seed": [0, 1, 2], "step": [100, 200, 300], "ratio": [2.0, 0.5, -1.0], "similarity": similarities}
    )
    table["form"] = table.similarity >= ch10.FORM_HOLDS
    text = ch10.seeds_prose(table, 1)
    assert words in text and f"(seed 1, the one above: {similarities[1]:.2f})" in text
    assert f"reaches {ch10.FORM_HOLDS} in {int(table.form.sum())} of 3" in text
