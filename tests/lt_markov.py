"""Test corpora for Part I: token sequences from a random Markov chain (structured B, Phi, Q)."""

from __future__ import annotations

import numpy as np


def markov_tokens(n: int, length: int, vocab: int, seed: int) -> np.ndarray:
    """(n, length) tokens from a random sparse-ish Markov chain, so B, Phi and Q have structure."""
    rng = np.random.default_rng(seed)
    trans = rng.dirichlet(np.full(vocab, 0.3), size=vocab)
    out = np.empty((n, length), dtype=np.int64)
    out[:, 0] = rng.integers(vocab, size=n)
    for t in range(1, length):
        u = rng.random(n)[:, None]
        out[:, t] = np.minimum((u > np.cumsum(trans[out[:, t - 1]], axis=1)).sum(1), vocab - 1)
    return out
