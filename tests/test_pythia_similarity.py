"""The covariance similarity of chapter 6: identity, invariances, independence, and a literal
reference with the centring matrix H = I - 11^T/k."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.pythia.similarity import centred_gram, covariance_similarity, feature_gram, matrix_cosine, row_normalise

seeds = st.integers(0, 2**32 - 1)
sizes = st.integers(3, 12)


def literal_similarity(rep: np.ndarray, feat: np.ndarray) -> float:
    """sim by the definitions, with loops: H X X^T H, rows of F divided by their norms."""
    k = rep.shape[0]
    H = np.eye(k) - np.ones((k, k)) / k
    fhat = np.array([row / np.sqrt(sum(v * v for v in row)) for row in feat])
    a = H @ rep @ rep.T @ H
    b = H @ fhat @ fhat.T @ H
    num = sum(a[i, j] * b[i, j] for i in range(k) for j in range(k))
    return num / np.sqrt((a * a).sum() * (b * b).sum())


@settings(max_examples=40, deadline=None)
@given(seeds, sizes, st.integers(1, 8))
def test_matches_literal_reference(seed, k, d):
    rng = np.random.default_rng(seed)
    rep, feat = rng.normal(size=(k, d)), rng.normal(size=(k, k))
    assert covariance_similarity(rep, feat) == pytest.approx(literal_similarity(rep, feat), abs=1e-10)


@settings(max_examples=40, deadline=None)
@given(seeds, sizes)
def test_identical_inputs_give_one(seed, k):
    feat = np.random.default_rng(seed).normal(size=(k, k))
    assert covariance_similarity(row_normalise(feat), feat) == pytest.approx(1.0, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(seeds, sizes, st.integers(2, 8))
def test_invariant_to_positive_row_scaling_of_the_feature(seed, k, d):
    rng = np.random.default_rng(seed)
    rep, feat = rng.normal(size=(k, d)), rng.normal(size=(k, k))
    scales = rng.uniform(0.01, 100.0, size=(k, 1))
    assert covariance_similarity(rep, feat * scales) == pytest.approx(covariance_similarity(rep, feat), abs=1e-10)


@settings(max_examples=40, deadline=None)
@given(seeds, sizes, st.integers(2, 8))
def test_invariant_to_rotations_of_the_representation(seed, k, d):
    rng = np.random.default_rng(seed)
    rep, feat = rng.normal(size=(k, d)), rng.normal(size=(k, k))
    U, _ = np.linalg.qr(rng.normal(size=(d, d)))
    assert covariance_similarity(rep @ U, feat) == pytest.approx(covariance_similarity(rep, feat), abs=1e-10)
    assert covariance_similarity(3.7 * rep, feat) == pytest.approx(covariance_similarity(rep, feat), abs=1e-10)


def test_independent_random_matrices_are_near_zero():
    rng = np.random.default_rng(0)
    k, d = 400, 4
    values = [covariance_similarity(rng.normal(size=(k, d)), rng.normal(size=(k, d))) for _ in range(5)]
    assert max(abs(v) for v in values) < 0.05  # about d / (d + k) = 0.01
    structured = rng.normal(size=(k, d))
    assert covariance_similarity(row_normalise(structured) + 0.05 * rng.normal(size=(k, d)), structured) > 0.9


def test_gram_is_centred_and_reused_gram_agrees():
    rng = np.random.default_rng(1)
    x, f = rng.normal(size=(6, 3)) + 5.0, rng.normal(size=(6, 6))
    assert np.allclose(centred_gram(x).sum(0), 0.0)
    assert covariance_similarity(x, gram=feature_gram(f)) == covariance_similarity(x, f)
    assert matrix_cosine(np.zeros((2, 2)), np.eye(2)) == 0.0


def test_bad_input_says_what_to_do():
    with pytest.raises(ValueError, match="same top-k tokens"):
        covariance_similarity(np.ones((4, 2)) + np.eye(4, 2), np.eye(5))
    with pytest.raises(ValueError, match="exactly one"):
        covariance_similarity(np.eye(3))
    with pytest.raises(ValueError, match="non-finite"):
        centred_gram(np.array([[1.0, np.nan], [0.0, 1.0]]))
