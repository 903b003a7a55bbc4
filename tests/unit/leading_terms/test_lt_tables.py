"""The paper's tables read off a run's history (mechbook.leading_terms.tables): the minimum over
epochs against a literal loop, the errors of a run too short or logged too sparsely, Table 3's rows,
and the first batch's statistics."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.leading_terms import tables
from mechbook.leading_terms.model import ModelConfig
from mechbook.leading_terms.stats import corpus_stats
from mechbook.leading_terms.train import TrainConfig, TrainResult, batch_indices

KINDS = (("W_O", None), *((k, layer) for layer in range(3) for k in ("W", "V", "P")))


def history_run(values: np.ndarray, per_epoch: int, loss: float = 5.0) -> TrainResult:
    """A run logged at step 0 and every epoch's end: ``values[e, m, c]`` is matrix ``m``'s cosine
    (``c`` 0: whole set, 1: first batch) at the end of epoch ``e + 1``."""
    rows = []
    for e in range(values.shape[0] + 1):
        for m, (kind, layer) in enumerate(KINDS):
            whole, first = (float("nan"), float("nan")) if e == 0 else values[e - 1, m]
            name = "W_O" if layer is None else f"blocks.{layer}.attn.{kind}"
            rows.append(
                {"step": e * per_epoch, "loss": loss, "matrix": name, "kind": kind, "layer": layer}
                | {"cosine": whole, "cosine_first": first}
            )
    steps = values.shape[0] * per_epoch
    return TrainResult(
        pd.DataFrame(rows), {}, ModelConfig(16, 8), TrainConfig(lr=0.005, steps=steps, log_every=per_epoch)
    )


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_epoch_minima_are_the_literal_minimum_over_layers_and_epochs(epochs, seed):
    values = np.random.default_rng(seed).uniform(-1, 1, (epochs + 2, len(KINDS), 2))
    run = history_run(values, per_epoch=4)
    for column, c in ((tables.WHOLE, 0), (tables.FIRST, 1)):
        got = tables.epoch_minima(run, 4, epochs, column)
        for kind in ("W", "V", "W_O"):
            literal = min(values[e, m, c] for e in range(epochs) for m, (k, _) in enumerate(KINDS) if k == kind)
            assert got[kind] == literal


def test_a_run_that_does_not_log_every_epoch_is_refused():
    run = history_run(np.full((3, len(KINDS), 2), 0.99), per_epoch=4)
    with pytest.raises(ValueError, match="logs 3 of the first 5 epochs"):
        tables.epoch_minima(run, 4, 5)
    with pytest.raises(ValueError, match="logs 0 of the first 1 epochs"):
        tables.epoch_minima(run, 3, 1)
    with pytest.raises(ValueError, match="not logged"):
        tables.cosines_at(run, 5)


def test_cosines_at_a_step_and_the_final_loss():
    values = np.full((2, len(KINDS), 2), 0.9)
    values[1, KINDS.index(("P", 2))] = (0.1, 0.2)
    run = history_run(values, per_epoch=4, loss=4.25)
    assert tables.cosines_at(run, 8, tables.FIRST)["P"] == 0.2
    assert tables.final_cosines(run)["P"] == 0.1 and tables.final_cosines(run)["W"] == 0.9
    assert tables.final_loss(run) == 4.25


def test_table_frame_sets_the_paper_beside_both_terms():
    values = np.full((2, len(KINDS), 2), 0.9)
    values[0, KINDS.index(("V", 1))] = (0.8, 0.7)
    frame = tables.table_frame(history_run(values, 4), 4, 2, tables.TABLE1)
    row = frame.set_index("matrix").loc["value (V)"]
    assert row["the paper"] == tables.TABLE1["V"] and row[tables.TERMS[tables.WHOLE]] == 0.8
    assert row[tables.TERMS[tables.FIRST]] == 0.7


def test_table3_rows_and_deltas_come_from_the_ablation_table():
    names = ["W_O", *(f"blocks.{l}.attn.{k}" for l in range(3) for k in ("W", "V", "P"))]
    rows = [{"ablation": "full model", "matrix": None, "loss": 2.0}]
    rows += [
        {"ablation": f"remove leading term of {n}", "matrix": n, "loss": 2.0 + i / 10} for i, n in enumerate(names)
    ]
    rows += [{"ablation": "zero model", "matrix": None, "loss": 5.0}]
    matrices = pd.DataFrame(rows).assign(delta_loss=lambda d: d["loss"] - 2.0)
    frame = tables.table3_frame(matrices, 5.0)
    assert len(frame) == len(tables.TABLE3) + 1 and frame["this run"].iloc[-1] == 5.0
    assert not frame["ablation"].str.contains(r"\.P$").any()
    deltas = tables.table3_deltas(matrices)
    assert set(deltas) == set(tables.TABLE3) - {"full model"}
    assert deltas["W_O"] == pytest.approx(0.0) and deltas["blocks.2.attn.V"] == pytest.approx(0.8)


def test_the_first_batch_is_the_one_the_run_draws_and_a_full_batch_is_the_whole_set():
    tokens = np.random.default_rng(0).integers(0, 12, (16, 6))
    whole = corpus_stats(tokens, 12)
    run = TrainResult(pd.DataFrame(), {}, ModelConfig(12, 5), TrainConfig(lr=0.01, steps=3, batch_size=4, seed=2))
    first = next(batch_indices(16, run.train_cfg)).numpy()
    got = tables.first_batch_stats(tokens, whole, run)
    np.testing.assert_array_equal(got.B, corpus_stats(tokens[first], 12).B)
    full = TrainResult(pd.DataFrame(), {}, ModelConfig(12, 5), TrainConfig(lr=0.01, steps=3))
    assert tables.first_batch_stats(tokens, whole, full) is whole


def test_the_papers_numbers_are_its_own():
    assert min(tables.TABLE1.values()) == 0.998486 and min(tables.TABLE2.values()) == 0.997891
    assert tables.FIGURE4.loss_ratio == pytest.approx(5.35 / math.log(3000))
    assert tables.TABLE3["W_O"] > tables.TABLE3_UNIFORM > max(v for k, v in tables.TABLE3.items() if k != "W_O")
    assert tables.epoch_steps(65_536, 2048) == 32 and tables.epoch_steps(2048, 64) == 32
    with pytest.raises(ValueError):
        tables.epoch_steps(10, 64)
