"""Fourier analysis of the adder (mechbook.assign_add.fourier, chapter 9)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.assign_add.fourier import (
    fourier_basis,
    frequency_fve,
    key_frequencies,
    neuron_frequency_table,
    output_fourier_norms,
    two_cosine_fit,
)

N = 59


def planted(k: int, a: float, alpha: float, b: float, beta: float, c: float, modulus: int = N) -> np.ndarray:
    n = np.arange(modulus)
    return c + a * np.cos(2 * math.pi * k * n / modulus + alpha)[:, None] + b * np.cos(2 * math.pi * k * n / modulus + beta)[None, :]


def test_basis_is_orthonormal():
    basis, ks = fourier_basis(N)
    assert basis.shape == (N, N - 1) and list(ks) == list(range(1, 30))
    np.testing.assert_allclose(basis.T @ basis, np.eye(N - 1), atol=1e-12)
    np.testing.assert_allclose(basis.sum(axis=0), 0, atol=1e-12)  # orthogonal to constants


def test_even_modulus_is_refused():
    with pytest.raises(ValueError, match="odd"):
        fourier_basis(58)


@settings(max_examples=30, deadline=None)
@given(
    k=st.integers(1, 29),
    a=st.floats(0.5, 5),
    b=st.floats(0.5, 5),
    alpha=st.floats(-3.1, 3.1),
    beta=st.floats(-3.1, 3.1),
    c=st.floats(-3, 3),
)
def test_planted_frequency_and_phase_are_recovered_exactly(k, a, b, alpha, beta, c):
    row = neuron_frequency_table(planted(k, a, alpha, b, beta, c)).iloc[0]
    assert row["k"] == k
    assert row["fve"] == pytest.approx(1.0, abs=1e-9)
    assert row["a"] == pytest.approx(a, rel=1e-9) and row["b"] == pytest.approx(b, rel=1e-9)
    assert np.angle(np.exp(1j * (row["alpha"] - alpha))) == pytest.approx(0, abs=1e-9)
    assert np.angle(np.exp(1j * (row["beta"] - beta))) == pytest.approx(0, abs=1e-9)


def test_fve_matches_a_least_squares_fit_per_neuron():
    """Slow literal reference: regress each centred map on the four grid functions of frequency k."""
    rng = np.random.default_rng(0)
    maps = rng.normal(size=(4, N, N)) + planted(11, 2.0, 0.3, 1.0, -1.0, 0.5)
    fve, ks = frequency_fve(maps)
    n, m = np.meshgrid(np.arange(N), np.arange(N), indexing="ij")
    for i in range(len(maps)):
        y = (maps[i] - maps[i].mean()).ravel()
        for k in (1, 5, 11, 29):
            t = 2 * math.pi * k / N
            X = np.stack([np.cos(t * n), np.sin(t * n), np.cos(t * m), np.sin(t * m)], axis=-1).reshape(-1, 4)
            coef, *_ = np.linalg.lstsq(X, y, rcond=None)
            explained = 1 - ((y - X @ coef) ** 2).sum() / (y**2).sum()
            assert fve[i, k - 1] == pytest.approx(explained, abs=1e-9)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_fve_is_a_fraction_and_frequencies_do_not_overlap(seed):
    maps = np.random.default_rng(seed).normal(size=(3, N, N))
    fve, _ = frequency_fve(maps)
    assert np.all(fve >= 0) and np.all(fve <= 1)
    assert np.all(fve.sum(axis=1) <= 1 + 1e-9)  # orthogonal parts of one variance


def test_two_cosine_fit_reproduces_a_planted_map_and_leaves_orthogonal_residual():
    target = planted(7, 3.0, 0.4, 2.0, -1.1, 5.0)
    rng = np.random.default_rng(1)
    noisy = target + rng.normal(size=target.shape) * 0.1
    np.testing.assert_allclose(two_cosine_fit(target, 7), target, atol=1e-9)
    residual = noisy - two_cosine_fit(noisy, 7)
    assert np.abs(two_cosine_fit(residual, 7) - residual.mean()).max() < 1e-9
    with pytest.raises(ValueError, match="k must be"):
        two_cosine_fit(target, 30)


def test_constant_map_explains_nothing():
    fve, _ = frequency_fve(np.ones((1, N, N)))
    assert np.all(fve == 0)


def test_key_frequencies_counts_only_good_neurons():
    maps = np.stack([planted(11, 1, 0, 1, 0, 0), planted(11, 1, 1, 2, 0, 0), planted(5, 1, 0, 1, 0, 0), np.random.default_rng(0).normal(size=(N, N))])
    counts = key_frequencies(neuron_frequency_table(maps), min_fve=0.9)
    assert counts.to_dict("list") == {"k": [11, 5], "neurons": [2, 1]}


def test_output_fourier_norms_obey_parseval_and_find_a_planted_frequency():
    rng = np.random.default_rng(2)
    W_out, W_U = rng.normal(size=(16, 8)), rng.normal(size=(8, N))
    norms = output_fourier_norms(W_out, W_U)
    assert (norms["norm"] ** 2).sum() == pytest.approx(((W_out @ W_U) ** 2).sum(), rel=1e-9)
    wave = np.cos(2 * math.pi * 19 * np.arange(N) / N + 0.7)
    planted_norms = output_fourier_norms(np.ones((3, 1)), wave[None, :])
    assert planted_norms.loc[planted_norms["norm"].idxmax(), "k"] == 19
