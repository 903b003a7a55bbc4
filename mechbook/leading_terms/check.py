"""The autograd check of the leading terms (chapter 2): full-batch SGD from zero, every matrix
after every step compared with its closed form of :mod:`.leading`, in direction and in size."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mechbook.cache import cached, fingerprint
from mechbook.leading_terms import train
from mechbook.leading_terms.leading import bases, coefficient
from mechbook.leading_terms.model import ModelConfig
from mechbook.leading_terms.train import TrainConfig


@dataclass(frozen=True)
class CheckConfig:
    """Autograd check of chapter 2: learning rates, steps per rate, layers, dtype (float64)."""

    lrs: tuple[float, ...] = (0.1,)
    steps: int = 20
    n_layers: int = 3
    dtype: str = "float64"


def autograd_check(tokens: np.ndarray, stats: Any, vocab_size: int, cfg: CheckConfig) -> pd.DataFrame:
    """Run full-batch SGD from zero with autograd for every lr in ``cfg.lrs`` and compare each
    matrix after s = 0..steps steps with its closed form.

    Columns: lr, step, eta_s, loss, matrix, kind, layer, cosine (with the basis), norm,
    predicted_norm = c(eta, s) ||basis|| and ratio = norm / predicted_norm (NaN where the
    prediction is zero: W and P vanish for s <= 2, V for s <= 1). A rate whose loss stops being
    finite ends early: its last logged step is below ``steps``.
    """
    tokens = np.asarray(tokens)
    model_cfg = ModelConfig(d_vocab=vocab_size, n_ctx=tokens.shape[1] - 1, n_layers=cfg.n_layers, dtype=cfg.dtype)
    basis_norm = {kind: float(np.linalg.norm(b)) for kind, b in bases(stats).items()}
    frames = []
    for lr in cfg.lrs:
        run = TrainConfig(lr=lr, steps=cfg.steps, stop_on_divergence=True)
        hist = train.train(tokens, stats, model_cfg, run).history
        hist["predicted_norm"] = [coefficient(k, lr, s) * basis_norm[k] for k, s in zip(hist["kind"], hist["step"])]
        predicted = hist["predicted_norm"].to_numpy()
        hist["ratio"] = np.divide(
            hist["norm"].to_numpy(), predicted, out=np.full(len(hist), np.nan), where=predicted > 0
        )
        frames.append(hist)
    return pd.concat(frames, ignore_index=True)


def cached_autograd_check(tokens: np.ndarray, stats: Any, vocab_size: int, cfg: CheckConfig) -> pd.DataFrame:
    """:func:`autograd_check` through the disk cache (key: config, tokens, bases)."""
    tokens = np.ascontiguousarray(tokens, dtype=np.int64)
    basis = bases(stats)
    key = {
        "cfg": cfg,
        "vocab": vocab_size,
        "tokens": fingerprint(tokens),
        "bases": fingerprint(*(basis[k] for k in sorted(basis))),
    }
    return cached("leading_terms/check", key, lambda: autograd_check(tokens, stats, vocab_size, cfg))
