"""The theorem as stated (mechbook.leading_terms.theorem): the window against its definition, the
conditions at their edges, the distance formula against a literal ||M − P||, the coefficient
identity the bounds use, D.13's start, and a run whose first step is Lemma D.4 exactly."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from lt_markov import markov_tokens

from mechbook.leading_terms.corpus import CORPUS_PROFILES
from mechbook.leading_terms.leading import coefficient
from mechbook.leading_terms.model import AttentionModel, ModelConfig, parameter_names
from mechbook.leading_terms.stats import corpus_stats
from mechbook.leading_terms.theorem import (
    TheoremRunsConfig,
    bound,
    distance,
    gaussian_std,
    theorem_run,
    unmet_conditions,
    window_eta_s,
    window_steps,
)
from mechbook.leading_terms.train import gaussian_start


@given(st.integers(1, 6), st.integers(1, 4000), st.floats(1e-4, 0.5))
@settings(max_examples=200, deadline=None)
def test_window_steps_is_the_last_step_inside_the_window(n_layers, context, lr):
    s = window_steps(lr, n_layers, context)
    limit = min(1 / (12 * n_layers), 5 / (8 * math.sqrt(context)))
    assert window_eta_s(n_layers, context) == limit
    assert s * lr <= limit * (1 + 1e-9) and (s + 1) * lr > limit


def test_window_steps_keeps_an_exact_edge():
    # L = 3, T = 144: the window is sη <= 1/36, so at η = 1/144 it ends at s = 4 exactly
    assert window_steps(1 / 144, 3, 144) == 4


def test_conditions_at_their_edges():
    assert unmet_conditions(500, 144, 3, 1 / 144, gaussian=True) == []
    assert unmet_conditions(499, 144, 3, 0.01, gaussian=False) == ["|V| = 499 < 500"]
    assert unmet_conditions(500, 59, 1, 0.05, gaussian=False) == ["T = 59 < 60"]
    # L <= √T/4: three layers need T >= 144
    assert unmet_conditions(500, 143, 3, 0.01, gaussian=False) == ["L = 3 > √T/4 = 2.99"]
    assert unmet_conditions(500, 144, 3, 0.001, gaussian=False) == []
    # the Gaussian start also needs η >= 1/T and T <= |V|
    assert unmet_conditions(500, 144, 3, 0.001, gaussian=True) == ["η = 0.001 < 1/T = 0.00694"]
    assert unmet_conditions(500, 600, 3, 0.01, gaussian=True) == ["T = 600 > |V| = 500"]


@given(st.integers(0, 300))
def test_the_bounds_coefficient_is_the_checks(s):
    """3 C(s,4) + 2 C(s,3) (the theorem's) equals ½ Σ_{k<s} k²(k−1) (the check's)."""
    exact = 3 * math.comb(s, 4) + 2 * math.comb(s, 3)
    assert coefficient("W", 1.0, s) == pytest.approx(exact, rel=1e-12, abs=0)


def test_bounds_grow_as_the_theorem_says():
    s = np.arange(1, 6)
    assert np.allclose(bound("W_O", 0.01, s, 64) / s**2, 3e-4)
    assert np.allclose(bound("V", 0.01, s, 64) / s**3, 12e-6)
    assert np.allclose(bound("P", 0.01, s, 64) / s**5, 13e-10 * 64)
    with pytest.raises(ValueError, match="kind must be one of"):
        bound("Q", 0.01, 1, 64)


@given(st.floats(1e-12, 1.0), st.floats(1e-9, 1e3), st.integers(0, 2**31 - 1))
@settings(max_examples=150, deadline=None)
def test_distance_is_the_norm_of_the_difference(rel, scale, seed):
    """From norms and cosine, as far as float64 resolves 1 − cos (about 1e-8 of the norms)."""
    rng = np.random.default_rng(seed)
    term = rng.standard_normal((12, 12)) * scale
    m = term * (1 + rel * rng.standard_normal()) + rel * scale * rng.standard_normal((12, 12))
    n, p = np.linalg.norm(m), np.linalg.norm(term)
    cos = float(np.sum(m * term) / (n * p))
    got = float(distance(n, p, cos))
    assert abs(got - np.linalg.norm(m - term)) <= 3e-8 * max(n, p)


def test_distance_where_a_matrix_is_zero():
    assert distance(0.0, 2.5, float("nan")) == 2.5 and distance(1.5, 0.0, float("nan")) == 1.5


def test_gaussian_start_draws_d13s_variance_the_same_way_each_time():
    assert gaussian_std(0.01, 100, 500) == pytest.approx(1e-8 / 500)
    assert gaussian_std(0.01, 100, 500, xi=0.5) == pytest.approx(1e-8 / 500**1.5)
    with pytest.raises(ValueError, match="ξ must be >= 0"):
        gaussian_std(0.01, 100, 500, xi=-1)
    cfg = ModelConfig(d_vocab=64, n_ctx=16, dtype="float64")
    nets = [AttentionModel(cfg, device="cpu") for _ in range(3)]
    for net, seed in zip(nets, (3, 3, 4)):
        gaussian_start(net, 0.25, seed)
    values = torch.cat([p.detach().flatten() for p in nets[0].parameters()])
    assert abs(float(values.std()) / 0.25 - 1) < 0.05 and abs(float(values.mean())) < 0.02
    for name in parameter_names(cfg):
        assert torch.equal(nets[0].get_parameter(name), nets[1].get_parameter(name))
        assert not torch.equal(nets[0].get_parameter(name), nets[2].get_parameter(name))


@pytest.fixture(scope="module")
def run():
    tokens = markov_tokens(n=16, length=9, vocab=10, seed=2)
    stats = corpus_stats(tokens, 10)
    cfg = TheoremRunsConfig(CORPUS_PROFILES["smoke"], n_sequences=16, zero_lr=0.01, steps=6)
    return {init: theorem_run(tokens, stats, 10, cfg, init) for init in ("zero", "gaussian")}


def test_the_first_step_from_zero_is_lemma_d4(run):
    """After one step from zero W_O = ηB and every other matrix is zero: no distance, to within what
    the norms and cosine resolve (3e-8 of the norm); a step later W_O has moved off 2ηB."""
    first = run["zero"][run["zero"]["step"] == 1]
    assert (first["distance"] <= 3e-8 * first["norm"].max()).all() and (first["ratio"] <= 1e-6).all()
    second = run["zero"][(run["zero"]["step"] == 2) & (run["zero"]["kind"] == "W_O")]
    assert float(second["distance"].iloc[0]) > 1e-5 * float(second["norm"].iloc[0])


def test_the_gaussian_start_is_d13s(run):
    """At step 0 each |V| x |V| matrix has the Frobenius norm of |V|² draws of std η²/(T²|V|)."""
    g = run["gaussian"]
    start = g[(g["step"] == 0) & (g["kind"] == "W_O")]
    lr, context = 1 / 8, 8
    assert float(g["lr"].iloc[0]) == lr
    assert float(start["norm"].iloc[0]) == pytest.approx(gaussian_std(lr, context, 10) * 10, rel=0.3)
    # the window at η = 1/T and L = 3 is s <= T/36: empty at T = 8
    assert not g["in_window"].any() and run["zero"]["in_window"].sum() > 0
