"""Test-only stand-in for the corpus statistics: the spec's definitions computed literally."""

from __future__ import annotations

from types import SimpleNamespace

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


def literal_stats(tokens: np.ndarray, vocab: int) -> SimpleNamespace:
    """B, Phi, (B Phi)^T, G, Q, P by the spec's sums with a literal softmax Jacobian J_t."""
    n, length = tokens.shape
    T = length - 1
    eye = np.eye(vocab)
    B = np.zeros((vocab, vocab))
    Phi = np.zeros((vocab, vocab))
    for seq in tokens:
        for t in range(T):
            r = eye[seq[t + 1]] - 1.0 / vocab
            B += np.outer(eye[seq[t]], r)
            Phi += np.outer(r, eye[seq[: t + 1]].mean(0))
    B /= n * T
    Phi /= n * T
    BPhi_T = (B @ Phi).T
    G = BPhi_T @ B
    Q = np.zeros((vocab, vocab))
    P = np.zeros(T)
    for seq in tokens:
        for t in range(T):
            r = eye[seq[t + 1]] - 1.0 / vocab
            J = (np.eye(t + 1) - 1.0 / (t + 1)) / (t + 1)
            g = np.array([eye[seq[j]] @ G @ r for j in range(t + 1)])
            Jg = J @ g
            for i in range(t + 1):
                Q += np.outer(eye[seq[t]], eye[seq[i]]) * Jg[i]
            for d in range(t + 1):
                P[d] += Jg[t - d]
    Q /= n * T
    P /= n * T
    return SimpleNamespace(B=B, Phi=Phi, BPhi_T=BPhi_T, G=G, Q=Q, P=P)
