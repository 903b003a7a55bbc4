"""mechbook.leading_terms.check's readings (chapters 2 and 3): the check's summary and slopes against
literal loops, where the terms first stop holding, the sweep read at an η·s, the learned rule."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from lt_markov import markov_tokens, sweep_frame

from mechbook.leading_terms import check
from mechbook.leading_terms.check import TRAINED_NATS, CheckConfig, autograd_check, decisive_run, run_drops, run_label
from mechbook.leading_terms.stats import corpus_stats

VOCAB = 8


@pytest.fixture(scope="module")
def runs():
    tokens = markov_tokens(n=30, length=9, vocab=VOCAB, seed=1)
    stats = corpus_stats(tokens, VOCAB)
    return autograd_check(tokens, stats, VOCAB, CheckConfig(lrs=(0.01, 0.03), steps=8))


def test_summary_and_slopes_equal_literal_loops(runs):
    small = runs[(runs["lr"] == 0.01) & (runs["predicted_norm"] > 0)]
    min_cos, max_err = check.check_summary(runs)
    assert min_cos == min(small["cosine"]) and max_err == max(abs(r - 1) for r in small["ratio"])
    table = check.slopes(runs, 8)
    for kind in ("W_O", "V", "W", "P"):
        rows = runs[(runs["kind"] == kind) & ((runs["layer"] == 0) | runs["layer"].isna()) & (runs["step"] >= 4)]
        x, y = np.log(rows["step"].to_numpy(float)), np.log(rows["norm"].to_numpy())
        slope = ((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()
        assert table.iloc[:, 0][kind] == pytest.approx(slope, rel=1e-9)
    assert table.iloc[:, 1].to_numpy() == pytest.approx([1, 2, 4, 4], abs=0.02)


def test_first_departure_is_the_first_eta_s_below_the_line_over_every_layer():
    sweep = sweep_frame({"P": 0.004, "W": 0.002})
    # literal: P's cosine 1 - 0.004 η·s < 0.99 once η·s > 2.5; W's once η·s > 5
    found = {d.lr: d for d in check.departures(sweep)}
    assert found[0.5].eta_s == 3.0 and found[0.5].kinds == ("P",) and found[0.5].step == 6
    assert found[1.0].eta_s == 3.0 and found[1.0].loss == pytest.approx(2.7)
    first = check.first_departure(sweep)
    assert (first.lr, first.eta_s, first.kinds) == (0.5, 3.0, ("P",))
    both = check.first_departure(sweep_frame({"P": 0.004, "W": 0.004}))
    assert both.kinds == ("W", "P")
    assert check.first_departure(sweep_frame({})) is None and check.departures(sweep_frame({})) == []


def test_departure_steps_are_each_terms_first_step_below_the_line():
    sweep = sweep_frame({"P": 0.004, "V": 0.003, "W": 0.002})
    order = check.departure_steps(sweep)
    # literal: a kind with drop d falls below 0.99 at the first step with d * lr * step > 0.01
    for lr in (0.5, 1.0):
        for kind, d in (("P", 0.004), ("V", 0.003), ("W", 0.002)):
            expected = next((s for s in range(8) if 1.0 - d * lr * s < 0.99), None)
            assert order.loc[lr, kind] == expected if expected is not None else np.isnan(order.loc[lr, kind])
        assert np.isnan(order.loc[lr, "W_O"])
    assert np.isnan(order.loc[0.5, "W"]) and order.loc[1.0, "W"] == 6
    assert list(order.columns) == ["W_O", "V", "W", "P"]
    assert check.departure_steps(sweep_frame({})).isna().all().all()


def test_cosines_at_reads_the_nearest_step_of_rates_that_reach_it():
    sweep = sweep_frame({"V": 0.01}, lrs=(0.5, 1.0), steps=8)  # η·s up to 3.5 and 7
    at = check.cosines_at(sweep, 5.0)
    assert set(at["lr"]) == {1.0} and set(at["step"]) == {5}
    assert float(at.loc[at["kind"] == "V", "cosine"].iloc[0]) == pytest.approx(0.95)
    assert check.cosines_at(sweep, 50.0).empty


def test_learned_rule_and_loss_drop():
    assert check.loss_drop(np.log(256) - 0.05, 256) == pytest.approx(0.05)
    assert not check.has_learned(check.LEARNED_NATS - 1e-9) and check.has_learned(check.LEARNED_NATS)


def test_the_decisive_run_is_the_one_that_fell_furthest_if_it_trained():
    def result(losses, vocab=64):
        history = pd.DataFrame(
            {"step": [0, 0, 10, 10], "matrix": list("abab"), "loss": [*losses[:1] * 2, *losses[1:] * 2]}
        )
        return SimpleNamespace(history=history, model_cfg=SimpleNamespace(d_vocab=vocab))

    runs = SimpleNamespace(results={0.005: result([4.16, 4.1]), 0.1: result([4.16, 2.0])})
    drops = run_drops(runs)
    assert drops == pytest.approx({0.005: np.log(64) - 4.1, 0.1: np.log(64) - 2.0})
    assert decisive_run(drops) == 0.1
    assert decisive_run({0.005: TRAINED_NATS, 0.1: TRAINED_NATS / 2}) == 0.005
    assert decisive_run({0.005: 0.05, 0.1: TRAINED_NATS - 1e-9}) is None
    assert decisive_run({}) is None
    assert run_label(0.1, 2.0) == "the η = 0.1 run (its loss fell 2.00 nats below log |V|)"
