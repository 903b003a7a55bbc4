"""Top-k restriction of chapter 6 against a literal remapping and the literal statistics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.leading_terms.stats import literal_stats
from mechbook.pythia.features import compute_leading_features, restrict_top_k


def literal_top_k(tokens: np.ndarray, vocab: int, k: int):
    counts = {v: 0 for v in range(vocab)}
    for t in tokens.ravel():
        counts[int(t)] += 1
    kept = sorted(counts, key=lambda v: (-counts[v], v))[:k]
    new = {v: i for i, v in enumerate(kept)}
    return np.array([[new.get(int(t), k) for t in row] for row in tokens]), np.array(kept)


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


def test_features_are_the_stats_of_top_k_plus_other_without_other():
    rng = np.random.default_rng(3)
    tokens = np.minimum(rng.geometric(0.25, size=(6, 9)) - 1, 11)
    k = 4
    feats = compute_leading_features(tokens, 12, k)
    remapped, _ = literal_top_k(tokens, 12, k)
    ref = literal_stats(remapped, k + 1)
    assert np.allclose(feats.BPhi_T, ref.BPhi_T[:k, :k], atol=1e-12)
    assert np.allclose(feats.Q, ref.Q[:k, :k], atol=1e-12)
    assert feats.other_fraction == pytest.approx(float((remapped == k).mean()))
    assert feats.feature("attention") is feats.Q and feats.feature("no_mlp") is feats.BPhi_T


def test_bad_top_k_is_explained():
    tokens = np.array([[0, 1, 2, 1]])
    with pytest.raises(ValueError, match="top_k must be between 2 and the 3"):
        restrict_top_k(tokens, 5, 4)
    with pytest.raises(ValueError, match="vocab_size"):
        restrict_top_k(tokens, 2, 2)
