"""Test data for Part I: token sequences from a random Markov chain (structured B, Phi, Q), and a
synthetic validity sweep (chapters 2 and 3)."""

from __future__ import annotations

import numpy as np
import pandas as pd


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


def sweep_frame(drops: dict[str, float], lrs=(0.5, 1.0), steps=8) -> pd.DataFrame:
    """A sweep whose kind k falls as 1 - drops[k] * η·s in layer 1 (layer 0 stays at 1): only
    the lowest cosine over the layers sees the fall."""
    rows = []
    for lr in lrs:
        for step in range(steps):
            eta_s = lr * step
            for kind in ("W_O", "V", "W", "P"):
                layers = [None] if kind == "W_O" else [0, 1]
                for layer in layers:
                    cos = 1.0 - drops.get(kind, 0) * eta_s if layer in (None, 1) else 1.0
                    rows.append(
                        {
                            "lr": lr,
                            "step": step,
                            "eta_s": eta_s,
                            "kind": kind,
                            "layer": layer,
                            "cosine": cos,
                            "loss": 3.0 - 0.1 * eta_s,
                        }
                    )
    return pd.DataFrame(rows)
