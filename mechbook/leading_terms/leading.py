"""Closed-form leading terms of SGD from zero, and their check by autograd (chapter 2; chapters
3 and 5 compare trained weights with them).

After s full-batch SGD steps of learning rate eta from zero, to leading order in eta:

    W_O(s)    = eta s B
    V^(l)(s)  = eta^2 s(s-1)/2 (B Phi)^T
    W^(l)(s)  = (eta^4 / 2) sum_{k<s} k^2 (k-1) Q      ~ (eta^4 s^4 / 8) Q
    P^(l)(s)  = (eta^4 / 2) sum_{k<s} k^2 (k-1) P      ~ (eta^4 s^4 / 8) P

with B, (B Phi)^T, Q, P as in ``CorpusStats`` (Q and P already divided by N T). The coefficients
follow from the chain: W_O(k) = eta k B feeds V's gradient (B Phi)^T W_O-ish, so V grows as
eta^2 sum_{k<s} k; the attention gradient needs the value-output product
V(k) W_O(k) = eta^3 k^2 (k-1)/2 (B Phi)^T B, so W and P grow as eta^4/2 sum_{k<s} k^2 (k-1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mechbook.leading_terms.corpus import CORPUS_PROFILES, CorpusConfig

KINDS = ("W_O", "V", "W", "P")
BASIS_ATTR = {"W_O": "B", "V": "BPhi_T", "W": "Q", "P": "P"}
BASIS_LABEL = {"W_O": "B", "V": "(B Phi)^T", "W": "Q", "P": "P-term"}


def kind_of(name: str) -> tuple[str, int | None]:
    """Split a parameter name (``W_O`` or ``blocks.{l}.attn.{W,V,P}``) into (kind, layer)."""
    if name == "W_O":
        return "W_O", None
    parts = name.split(".")
    if len(parts) == 4 and parts[0] == "blocks" and parts[2] == "attn" and parts[3] in ("W", "V", "P"):
        return parts[3], int(parts[1])
    raise ValueError(f"{name!r} is not a parameter of the attention model (W_O or blocks.l.attn.W/V/P)")


def cosine(a: Any, b: Any) -> float:
    """cos(A, B) = tr(A^T B) / (||A||_F ||B||_F) in float64; NaN when either is zero."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"cosine needs equal shapes, got {a.shape} and {b.shape}")
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return float("nan")
    return float(a @ b / (na * nb))


def bases(stats: Any) -> dict[str, np.ndarray]:
    """The leading-term directions {W_O: B, V: (B Phi)^T, W: Q, P: P} of a CorpusStats, float64."""
    missing = [attr for attr in BASIS_ATTR.values() if not hasattr(stats, attr)]
    if missing:
        raise TypeError(f"stats lack {missing}: pass the CorpusStats of mechbook.leading_terms.stats")
    return {kind: np.asarray(getattr(stats, attr), dtype=np.float64) for kind, attr in BASIS_ATTR.items()}


def coefficient(kind: str, eta: float, s: int, exact: bool = True) -> float:
    """The scalar c(eta, s) with M(s) ~ c * basis: eta s, eta^2 s(s-1)/2, or for W and P
    (eta^4/2) sum_{k<s} k^2(k-1) (``exact``) or its large-s form eta^4 s^4 / 8."""
    if kind == "W_O":
        return eta * s
    if kind == "V":
        return eta**2 * s * (s - 1) / 2
    if kind in ("W", "P"):
        if not exact:
            return eta**4 * s**4 / 8
        k = np.arange(s, dtype=np.float64)
        return float(eta**4 / 2 * np.sum(k**2 * (k - 1)))
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def leading_term(stats: Any, kind: str, eta: float, s: int, exact: bool = True) -> np.ndarray:
    """The predicted matrix (or vector, for P) after s SGD steps: coefficient(kind, eta, s) * basis."""
    return coefficient(kind, eta, s, exact) * bases(stats)[kind]


@dataclass(frozen=True)
class CheckConfig:
    """Autograd check of chapter 2: learning rates, steps per rate, layers, dtype (float64)."""

    lrs: tuple[float, ...] = (0.1,)
    steps: int = 20
    n_layers: int = 3
    dtype: str = "float64"


@dataclass(frozen=True)
class LeadingConfig:
    """Chapter 2: the corpus, how many of its sequences the full-batch runs use, the small learning
    rates of the step-by-step check and the larger ones of the validity sweep."""

    corpus: CorpusConfig
    n_sequences: int
    check_lrs: tuple[float, ...]
    check_steps: int
    sweep_lrs: tuple[float, ...]
    sweep_steps: int
    n_layers: int = 3

    def check(self) -> CheckConfig:
        return CheckConfig(lrs=self.check_lrs, steps=self.check_steps, n_layers=self.n_layers)

    def sweep(self) -> CheckConfig:
        return CheckConfig(lrs=self.sweep_lrs, steps=self.sweep_steps, n_layers=self.n_layers)


LEADING_PROFILES: dict[str, LeadingConfig] = {
    "smoke": LeadingConfig(CORPUS_PROFILES["smoke"], n_sequences=32, check_lrs=(0.03, 0.1), check_steps=12, sweep_lrs=(1.0, 2.0), sweep_steps=16),
    "cpu": LeadingConfig(CORPUS_PROFILES["cpu"], n_sequences=256, check_lrs=(0.01, 0.03, 0.1), check_steps=20, sweep_lrs=(0.25, 0.5, 1.0, 2.0), sweep_steps=40),
    "paper": LeadingConfig(CORPUS_PROFILES["paper"], n_sequences=512, check_lrs=(0.01, 0.03, 0.1), check_steps=20, sweep_lrs=(0.25, 0.5, 1.0, 2.0), sweep_steps=80),
}


def loglog_slope(x: Any, y: Any) -> float:
    """Least-squares slope of log y against log x (the exponent p of y ~ x^p)."""
    return float(np.polyfit(np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float)), 1)[0])


def autograd_check(tokens: np.ndarray, stats: Any, vocab_size: int, cfg: CheckConfig) -> pd.DataFrame:
    """Run full-batch SGD from zero with autograd for every lr in ``cfg.lrs`` and compare each
    matrix after s = 0..steps steps with its closed form.

    Columns: lr, step, eta_s, loss, matrix, kind, layer, cosine (with the basis), norm,
    predicted_norm = c(eta, s) ||basis|| and ratio = norm / predicted_norm (NaN where the
    prediction is zero: W and P vanish for s <= 2, V for s <= 1). A rate whose loss stops being
    finite ends early: its last logged step is below ``steps``.
    """
    from mechbook.leading_terms.model import ModelConfig
    from mechbook.leading_terms.train import TrainConfig, train

    tokens = np.asarray(tokens)
    model_cfg = ModelConfig(vocab_size=vocab_size, context=tokens.shape[1] - 1, n_layers=cfg.n_layers, dtype=cfg.dtype)
    basis_norm = {kind: float(np.linalg.norm(b)) for kind, b in bases(stats).items()}
    frames = []
    for lr in cfg.lrs:
        run = TrainConfig(lr=lr, steps=cfg.steps, stop_on_divergence=True)
        hist = train(tokens, stats, model_cfg, run).history
        hist["predicted_norm"] = [coefficient(k, lr, s) * basis_norm[k] for k, s in zip(hist["kind"], hist["step"])]
        predicted = hist["predicted_norm"].to_numpy()
        hist["ratio"] = np.divide(hist["norm"].to_numpy(), predicted, out=np.full(len(hist), np.nan), where=predicted > 0)
        frames.append(hist)
    return pd.concat(frames, ignore_index=True)


def cached_autograd_check(tokens: np.ndarray, stats: Any, vocab_size: int, cfg: CheckConfig) -> pd.DataFrame:
    """:func:`autograd_check` through the disk cache (key: config, tokens, bases)."""
    from mechbook.cache import cached, fingerprint

    tokens = np.ascontiguousarray(tokens, dtype=np.int64)
    basis = bases(stats)
    key = {
        "cfg": cfg,
        "vocab": vocab_size,
        "tokens": fingerprint(tokens),
        "bases": fingerprint(*(basis[k] for k in sorted(basis))),
    }
    return cached("leading_terms/check", key, lambda: autograd_check(tokens, stats, vocab_size, cfg))


def ranking_overlap(theory: Any, trained: Any, rows: list[int], k: int = 10, exclude: list[int] | tuple[int, ...] = (), positive: bool = False) -> float:
    """Mean over ``rows`` of |top-k(theory[a]) ∩ top-k(trained[a])| / k, the columns in ``exclude``
    left out of both rankings (chapter 4: do trained weights rank the same tokens as their terms?).

    With ``positive`` (for the centred map B, whose entries below the uniform baseline are all tied
    at -p(a)/|V|), a row's k is cut to its number of positive theory entries, rows with none are
    skipped, and the trained top-k uses the same cut k.
    """
    theory, trained = np.asarray(theory, dtype=np.float64), np.asarray(trained, dtype=np.float64)
    if theory.shape != trained.shape:
        raise ValueError(f"ranking_overlap needs equal shapes, got {theory.shape} and {trained.shape}")
    if not rows:
        raise ValueError("ranking_overlap needs at least one row")
    keep = np.setdiff1d(np.arange(theory.shape[1]), np.asarray(exclude, dtype=int))
    if k > len(keep):
        raise ValueError(f"k = {k} exceeds the {len(keep)} columns left after the exclusions")
    shares = []
    for a in rows:
        k_row = min(k, int((theory[a, keep] > 0).sum())) if positive else k
        if k_row == 0:
            continue
        top_a = set(keep[np.argsort(-theory[a, keep], kind="stable")[:k_row]])
        top_b = set(keep[np.argsort(-trained[a, keep], kind="stable")[:k_row]])
        shares.append(len(top_a & top_b) / k_row)
    if not shares:
        raise ValueError("no row has a positive theory entry; use positive=False")
    return float(np.mean(shares))
