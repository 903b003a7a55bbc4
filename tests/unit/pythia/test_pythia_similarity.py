"""The two similarities of chapter 6 (the paper's row-centred covariance and linear CKA): literal
references, invariances, and synthetic cases that show what each measure can and cannot see."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.pythia.similarity import (
    MEASURES,
    centred_gram,
    covariance_similarity,
    feature_gram,
    matrix_cosine,
    row_normalise,
)

seeds = st.integers(0, 2**32 - 1)
sizes = st.integers(3, 12)
measures = st.sampled_from(MEASURES)


def literal_similarity(rep: np.ndarray, feat: np.ndarray, measure: str) -> float:
    """sim by the definitions, with loops: rows of F divided by their norms; the paper centres each
    row by its own mean, CKA multiplies by H = I - 11^T/k."""
    k = rep.shape[0]
    fhat = np.array([row / np.sqrt(sum(v * v for v in row)) for row in feat])
    if measure == "paper":
        rc = np.array([row - sum(row) / len(row) for row in rep])
        fc = np.array([row - sum(row) / len(row) for row in fhat])
        a, b = rc @ rc.T, fc @ fc.T
    else:
        H = np.eye(k) - np.ones((k, k)) / k
        a, b = H @ rep @ rep.T @ H, H @ fhat @ fhat.T @ H
    a, b = a / np.sqrt((a * a).sum()), b / np.sqrt((b * b).sum())  # Frobenius-normalised
    return sum(a[i, j] * b[i, j] for i in range(k) for j in range(k))


def zipf_feature(rng: np.random.Generator, k: int) -> np.ndarray:
    """A feature shaped like (B Phi)^T on text: every row carries the same frequency profile (a
    shared direction) plus its own part, and row norms fall with the token's rank."""
    rank = np.arange(1, k + 1)
    shared = np.outer(np.ones(k), 5.0 / rank)
    own = 0.3 * rng.normal(size=(k, k)) / np.sqrt(rank)[None, :]
    return (shared + own) / np.sqrt(rank)[:, None]


@settings(max_examples=40, deadline=None)
@given(seeds, sizes, st.integers(2, 8), measures)
def test_matches_literal_reference(seed, k, d, measure):
    rng = np.random.default_rng(seed)
    rep, feat = rng.normal(size=(k, d)), rng.normal(size=(k, k))
    got = covariance_similarity(rep, feat, measure=measure)
    assert got == pytest.approx(literal_similarity(rep, feat, measure), abs=1e-10)


@settings(max_examples=40, deadline=None)
@given(seeds, sizes, measures)
def test_identical_inputs_give_one(seed, k, measure):
    feat = np.random.default_rng(seed).normal(size=(k, k))
    assert covariance_similarity(row_normalise(feat), feat, measure=measure) == pytest.approx(1.0, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(seeds, sizes, st.integers(2, 8), measures)
def test_invariant_to_positive_row_scaling_of_the_feature(seed, k, d, measure):
    rng = np.random.default_rng(seed)
    rep, feat = rng.normal(size=(k, d)), rng.normal(size=(k, k))
    scales = rng.uniform(0.01, 100.0, size=(k, 1))
    got = covariance_similarity(rep, feat * scales, measure=measure)
    assert got == pytest.approx(covariance_similarity(rep, feat, measure=measure), abs=1e-10)


@settings(max_examples=40, deadline=None)
@given(seeds, sizes, st.integers(2, 8))
def test_cka_is_invariant_to_rotations_and_offsets_the_paper_measure_is_not(seed, k, d):
    rng = np.random.default_rng(seed)
    rep, feat = rng.normal(size=(k, d)), rng.normal(size=(k, k))
    U, _ = np.linalg.qr(rng.normal(size=(d, d)))
    offset = 10.0 * rng.normal(size=d)
    base = covariance_similarity(rep, feat, measure="cka")
    for moved in (rep @ U, 3.7 * rep, rep + offset):
        assert covariance_similarity(moved, feat, measure="cka") == pytest.approx(base, abs=1e-9)
    assert covariance_similarity(3.7 * rep, feat, measure="paper") == pytest.approx(
        covariance_similarity(rep, feat, measure="paper"), abs=1e-10
    )


def test_a_shared_offset_inflates_the_paper_measure_only():
    """A random representation plus one vector shared by every token: the paper's measure reads it
    as a near-perfect match with a feature whose rows share a direction; CKA removes the offset."""
    rng = np.random.default_rng(0)
    k, d = 200, 128
    feat = zipf_feature(rng, k)
    random = rng.normal(size=(k, d))
    offset = random + 3.0 * rng.normal(size=d)
    paper = {
        name: covariance_similarity(r, feat, measure="paper") for name, r in (("random", random), ("offset", offset))
    }
    cka = {name: covariance_similarity(r, feat, measure="cka") for name, r in (("random", random), ("offset", offset))}
    assert paper["offset"] > 0.95 and paper["random"] < 0.2
    assert cka["offset"] == pytest.approx(cka["random"], abs=1e-9) and cka["offset"] < 0.5


def test_an_exactly_linear_representation_is_missed_by_cka():
    """R = F W (linear in the unnormalised feature, rows of unequal norm): CKA, comparing with the
    row-normalised feature, falls below a random representation; the paper's measure stays high
    and rises to 1 once the representation's rows are normalised too."""
    rng = np.random.default_rng(1)
    k, d = 200, 128
    feat = zipf_feature(rng, k)
    W = rng.normal(size=(k, d))
    linear, random = feat @ W, rng.normal(size=(k, d))
    assert covariance_similarity(linear, feat, measure="cka") < covariance_similarity(random, feat, measure="cka") < 0.5
    assert (
        covariance_similarity(linear, feat, measure="paper") > covariance_similarity(linear, feat, measure="cka") + 0.4
    )
    assert covariance_similarity(row_normalise(feat) @ W, feat, measure="paper") > 0.99


def test_independent_random_matrices_are_near_zero_under_cka():
    rng = np.random.default_rng(0)
    k, d = 400, 4
    values = [covariance_similarity(rng.normal(size=(k, d)), rng.normal(size=(k, d)), measure="cka") for _ in range(5)]
    assert max(abs(v) for v in values) < 0.05  # about d / (d + k) = 0.01
    structured = rng.normal(size=(k, d))
    assert (
        covariance_similarity(row_normalise(structured) + 0.05 * rng.normal(size=(k, d)), structured, measure="cka")
        > 0.9
    )


def test_grams_are_centred_and_reused_gram_agrees():
    rng = np.random.default_rng(1)
    x, f = rng.normal(size=(6, 3)) + 5.0, rng.normal(size=(6, 6))
    assert np.allclose(centred_gram(x, "cka").sum(0), 0.0)
    assert np.allclose(centred_gram(x, "paper"), (x - x.mean(1, keepdims=True)) @ (x - x.mean(1, keepdims=True)).T)
    for measure in MEASURES:
        assert covariance_similarity(x, gram=feature_gram(f, measure), measure=measure) == covariance_similarity(
            x, f, measure=measure
        )
    assert matrix_cosine(np.zeros((2, 2)), np.eye(2)) == 0.0


def test_bad_input_says_what_to_do():
    with pytest.raises(ValueError, match="same top-k tokens"):
        covariance_similarity(np.ones((4, 2)) + np.eye(4, 2), np.eye(5), measure="cka")
    with pytest.raises(ValueError, match="exactly one"):
        covariance_similarity(np.eye(3), measure="paper")
    with pytest.raises(ValueError, match="non-finite"):
        centred_gram(np.array([[1.0, np.nan], [0.0, 1.0]]), "cka")
    with pytest.raises(ValueError, match="measure must be one of"):
        centred_gram(np.eye(3), "pearson")
