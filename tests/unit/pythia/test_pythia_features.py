"""Top-k features of chapter 6: the remapping against a literal one, the dropped-token statistics
against the formulas evaluated with dense one-hots (a dropped token's one-hot is zero) and the
literal softmax-Jacobian tensor, and against chapter 1's statistics when nothing is dropped."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.leading_terms.stats import corpus_stats, softmax_jacobian_tensor
from mechbook.pythia.features import (
    compute_leading_features,
    restrict_top_k,
    top_k_maps,
)


def literal_top_k(tokens: np.ndarray, vocab: int, k: int):
    counts = {v: 0 for v in range(vocab)}
    for t in tokens.ravel():
        counts[int(t)] += 1
    kept = sorted(counts, key=lambda v: (-counts[v], v))[:k]
    new = {v: i for i, v in enumerate(kept)}
    return np.array([[new.get(int(t), k) for t in row] for row in tokens]), np.array(kept)


def literal_dropped_maps(remapped: np.ndarray, k: int):
    """B, Phi, (B Phi)^T, Q as written, with one-hots in R^k and a zero vector for id k."""
    N, T = remapped.shape[0], remapped.shape[1] - 1
    E = np.vstack([np.eye(k), np.zeros((1, k))])
    X, R = E[remapped[:, :-1]], E[remapped[:, 1:]] - 1.0 / k
    A_bar = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    B = sum(X[n].T @ R[n] for n in range(N)) / (N * T)
    Phi = sum(R[n].T @ A_bar @ X[n] for n in range(N)) / (N * T)
    BPhi_T = (B @ Phi).T
    G = BPhi_T @ B
    J = softmax_jacobian_tensor(T)
    Q = np.zeros((k, k))
    for n in range(N):
        S = X[n] @ G @ R[n].T  # S[j, t]
        for t in range(T):
            for i in range(t + 1):
                Q += np.outer(X[n][t], X[n][i]) * sum(J[t, i, j] * S[j, t] for j in range(t + 1))
    return B, Phi, BPhi_T, Q / (N * T)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(3, 15), st.integers(2, 6))
def test_restrict_top_k_matches_literal(seed, vocab, n):
    tokens = np.random.default_rng(seed).integers(0, vocab, size=(n, 7))
    k = min(3, len(np.unique(tokens)))
    if k < 2:
        return
    got, kept = restrict_top_k(tokens, vocab, k)
    want, want_kept = literal_top_k(tokens, vocab, k)
    assert np.array_equal(got, want) and np.array_equal(kept, want_kept)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 5), st.integers(1, 5), st.integers(1, 7))
def test_dropped_maps_match_the_literal_formulas(seed, k, n, T):
    rng = np.random.default_rng(seed)
    remapped = rng.integers(0, k + 1, size=(n, T + 1))  # id k: dropped
    got = top_k_maps(remapped, k, chunk=2)
    for g, w in zip(got, literal_dropped_maps(remapped, k)):
        assert np.allclose(g, w, atol=1e-14, rtol=1e-10)


def test_nothing_dropped_gives_chapter_one_statistics():
    tokens = np.minimum(np.random.default_rng(5).geometric(0.3, size=(9, 12)) - 1, 5)
    k = 6
    B, Phi, BPhi_T, Q = top_k_maps(tokens, k, chunk=4)
    ref = corpus_stats(tokens, k)
    for got, want in ((B, ref.B), (Phi, ref.Phi), (BPhi_T, ref.BPhi_T), (Q, ref.Q)):
        assert np.allclose(got, want, atol=1e-15, rtol=1e-10)


def test_dropped_tokens_take_no_part_in_the_products():
    """Folding the dropped tokens into an extra 'other' token that stays in the product B Phi
    gives a different (B Phi)^T; the features here do not depend on which rare token was which."""
    rng = np.random.default_rng(3)
    tokens = np.minimum(rng.geometric(0.2, size=(12, 10)) - 1, 14)
    k = 4
    feats = compute_leading_features(tokens, 15, k)
    remapped, _ = literal_top_k(tokens, 15, k)
    assert feats.other_fraction == pytest.approx(float((remapped == k).mean())) and feats.other_fraction > 0.2
    folded = corpus_stats(remapped, k + 1).BPhi_T[:k, :k]
    assert not np.allclose(folded, feats.BPhi_T, rtol=0.05)
    relabelled = np.where(tokens >= 8, 8 + (tokens + 3) % 7, tokens)  # permute the rare ids among themselves
    again = compute_leading_features(relabelled, 15, k)
    assert np.allclose(again.BPhi_T, feats.BPhi_T, atol=1e-15) and np.allclose(again.Q, feats.Q, atol=1e-15)
    assert feats.feature("attention") is feats.Q and feats.feature("attention_resid_pre") is feats.Q
    assert feats.feature("no_mlp") is feats.BPhi_T


def test_bad_top_k_is_explained():
    tokens = np.array([[0, 1, 2, 1]])
    with pytest.raises(ValueError, match="top_k must be between 2 and the 3"):
        restrict_top_k(tokens, 5, 4)
    with pytest.raises(ValueError, match="vocab_size"):
        restrict_top_k(tokens, 2, 2)
