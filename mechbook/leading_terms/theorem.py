"""The paper's theorem as stated (chapter 2): its conditions, its window, its bounds (eqs. 5-8) and
the small Gaussian initialisation of Theorem D.13, evaluated on full-batch runs inside them.

Theorem D.10 (zero initialisation) and D.13 (Gaussian), for L layers, context T and vocabulary
|V|: if T >= 60, |V| >= 500 and L <= sqrt(T)/4, then after s full-batch gradient steps of rate η
with s η <= min(1/(12 L), 5/(8 sqrt(T))) (the *window*), for every layer, in Frobenius norm,

    ||W_O - s η B||                         <= 3 s² η²          (5)
    ||V - C(s,2) η² (B Φ)^T||               <= 12 s³ η³         (6)
    ||W - (3 C(s,4) + 2 C(s,3)) η⁴ Q||      <= 13 s⁵ η⁵ T       (7)
    ||P - (3 C(s,4) + 2 C(s,3)) η⁴ Δ||      <= 13 s⁵ η⁵ T       (8)

D.13 starts every parameter i.i.d. from N(0, v² / |V|^(2+2ξ)) with v <= η²/T², ξ >= 0, T <= |V| and
η >= 1/T (the headline Theorem 4.1). The coefficients are :func:`mechbook.leading_terms.leading.coefficient`'s
(3 C(s,4) + 2 C(s,3) = ½ Σ_{k<s} k²(k−1)), so a run's distance from its term follows from its
logged norm and cosine: ||M − c b||² = (‖M‖ − c‖b‖)² + 2 ‖M‖ c‖b‖ (1 − cos(M, b)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechbook.cache import cached, fingerprint
from mechbook.leading_terms import train
from mechbook.leading_terms.corpus import CorpusConfig, load_corpus
from mechbook.leading_terms.leading import KINDS, bases, coefficient
from mechbook.leading_terms.model import ModelConfig
from mechbook.leading_terms.stats import cached_corpus_stats
from mechbook.leading_terms.train import TrainConfig
from mechbook.validation import POSITIVE, above, at_least, check_fields

MIN_CONTEXT = 60
"""The theorem's smallest context T."""
MIN_VOCAB = 500
"""The theorem's smallest vocabulary |V|."""


def window_eta_s(n_layers: int, context: int) -> float:
    """The largest η·s of the theorem's window: min(1/(12 L), 5/(8 √T))."""
    return min(1 / (12 * n_layers), 5 / (8 * math.sqrt(context)))


def window_steps(lr: float, n_layers: int, context: int) -> int:
    """The last step s inside the window at rate ``lr``: the largest s with s η <= :func:`window_eta_s`."""
    return math.floor(window_eta_s(n_layers, context) / lr * (1 + 1e-12))


def unmet_conditions(vocab_size: int, context: int, n_layers: int, lr: float, gaussian: bool) -> list[str]:
    """The theorem's conditions that a run does not meet, in words (empty: it meets them all):
    T >= 60, |V| >= 500, L <= √T/4, and for the Gaussian start (D.13) η >= 1/T and T <= |V|."""
    unmet = []
    if context < MIN_CONTEXT:
        unmet.append(f"T = {context} < {MIN_CONTEXT}")
    if vocab_size < MIN_VOCAB:
        unmet.append(f"|V| = {vocab_size} < {MIN_VOCAB}")
    if n_layers > math.sqrt(context) / 4:
        unmet.append(f"L = {n_layers} > √T/4 = {math.sqrt(context) / 4:.3g}")
    if gaussian and lr < 1 / context:
        unmet.append(f"η = {lr:g} < 1/T = {1 / context:.3g}")
    if gaussian and context > vocab_size:
        unmet.append(f"T = {context} > |V| = {vocab_size}")
    return unmet


def bound(kind: str, lr: float, s: int | np.ndarray, context: int) -> float | np.ndarray:
    """The theorem's bound on ||M − term||_F after s steps: 3 s²η² (W_O), 12 s³η³ (V), 13 s⁵η⁵T (W, P)."""
    x = np.asarray(s, dtype=np.float64) * lr
    if kind == "W_O":
        return 3 * x**2
    if kind == "V":
        return 12 * x**3
    if kind in ("W", "P"):
        return 13 * x**5 * context
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def gaussian_std(lr: float, context: int, vocab_size: int, xi: float = 0.0) -> float:
    """The standard deviation of D.13's initialisation at its largest v = η²/T²: v / |V|^(1+ξ)."""
    if xi < 0:
        raise ValueError(f"ξ must be >= 0, got {xi}")
    return lr**2 / context**2 / vocab_size ** (1 + xi)


def distance(norm: np.ndarray, predicted: np.ndarray, cosine: np.ndarray) -> np.ndarray:
    """||M − P||_F from ‖M‖, ‖P‖ and cos(M, P), written (‖M‖−‖P‖)² + 2‖M‖‖P‖(1 − cos) so that
    nearly equal matrices lose no digits to cancellation; where either norm is zero the cosine is
    undefined and the distance is the other norm."""
    norm, predicted = np.asarray(norm, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    cosine = np.nan_to_num(np.asarray(cosine, dtype=np.float64), nan=0.0)
    squared = (norm - predicted) ** 2 + 2 * norm * predicted * (1 - cosine)
    return np.sqrt(np.maximum(squared, 0.0))  # a cosine rounded above 1 leaves a tiny negative


@dataclass(frozen=True)
class TheoremRunsConfig:
    """Chapter 2's runs inside the theorem's conditions: the ``corpus`` (T >= 60, |V| >= 500 and
    L <= √T/4 for the theorem to apply), the first ``n_sequences`` of its sequences as the full
    batch, the zero-initialised run's rate ``zero_lr``, and ``steps`` for both runs; the Gaussian
    run takes D.13's η = 1/T (the smallest rate it allows, so the widest window) and its largest
    initial variance (v = η²/T², ξ = 0) (:func:`gaussian_lr`)."""

    corpus: CorpusConfig
    n_sequences: int
    zero_lr: float
    steps: int
    n_layers: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(self, n_sequences=POSITIVE, zero_lr=above(0), steps=at_least(1), n_layers=POSITIVE)


def gaussian_lr(context: int) -> float:
    """The Gaussian run's rate: 1/T, the smallest D.13 allows."""
    return 1 / context


INITS = ("zero", "gaussian")
"""The two starts: exact zero (D.10) and D.13's small Gaussian."""


def theorem_run(tokens: np.ndarray, stats: object, vocab_size: int, cfg: TheoremRunsConfig, init: str) -> pd.DataFrame:
    """Full-batch float64 SGD on ``tokens`` from the start ``init`` (:data:`INITS`), logged at every
    step: per matrix its norm, cosine with its term, the term's norm (``predicted_norm``), the
    ``distance`` between them, the theorem's ``bound`` and ``ratio`` = distance / bound, and
    ``in_window`` (s >= 1 and s η inside the window)."""
    if init not in INITS:
        raise ValueError(f"init must be one of {INITS}, got {init!r}")
    context = tokens.shape[1] - 1
    lr = cfg.zero_lr if init == "zero" else gaussian_lr(context)
    std = 0.0 if init == "zero" else gaussian_std(lr, context, vocab_size)
    model_cfg = ModelConfig(d_vocab=vocab_size, n_ctx=context, n_layers=cfg.n_layers, dtype="float64")
    run = TrainConfig(lr=lr, steps=cfg.steps, seed=cfg.seed, init_std=std, stop_on_divergence=True)
    hist = train.train(tokens, stats, model_cfg, run).history
    basis_norm = {kind: float(np.linalg.norm(b)) for kind, b in bases(stats).items()}
    hist["init"] = init
    hist["predicted_norm"] = [coefficient(k, lr, s) * basis_norm[k] for k, s in zip(hist["kind"], hist["step"])]
    hist["distance"] = distance(hist["norm"], hist["predicted_norm"], hist["cosine"])
    hist["bound"] = [float(bound(k, lr, s, context)) for k, s in zip(hist["kind"], hist["step"])]
    dist, bounds = hist["distance"].to_numpy(), hist["bound"].to_numpy()
    hist["ratio"] = np.divide(dist, bounds, out=np.full(len(hist), np.nan), where=bounds > 0)
    last = window_steps(lr, cfg.n_layers, context)
    hist["in_window"] = (hist["step"] >= 1) & (hist["step"] <= last)
    return hist


@dataclass(frozen=True)
class TheoremRuns:
    """Both runs (:func:`theorem_run` frames, one ``init`` column) on the first ``n_sequences``
    sequences, with the corpus's |V| and T and the conditions each run leaves unmet."""

    frame: pd.DataFrame
    vocab_size: int
    context: int
    n_layers: int
    unmet: dict[str, list[str]]


def theorem_runs(cfg: TheoremRunsConfig) -> TheoremRuns:
    """Load the corpus, take its first ``n_sequences`` sequences and run (or read from the cache)
    the zero and the Gaussian start."""
    tokenizer, sequences = load_corpus(cfg.corpus)
    tokens = np.ascontiguousarray(sequences.tokens[: cfg.n_sequences], dtype=np.int64)
    vocab, context = tokenizer.vocab_size, tokens.shape[1] - 1
    stats = cached_corpus_stats(tokens, vocab)
    basis = bases(stats)
    key = {"cfg": cfg, "vocab": vocab, "tokens": fingerprint(tokens), "bases": fingerprint(*(basis[k] for k in KINDS))}
    frame = cached(
        "leading_terms/theorem",
        key,
        lambda: pd.concat([theorem_run(tokens, stats, vocab, cfg, init) for init in INITS], ignore_index=True),
    )
    unmet = {
        init: unmet_conditions(
            vocab, context, cfg.n_layers, cfg.zero_lr if init == "zero" else gaussian_lr(context), init == "gaussian"
        )
        for init in INITS
    }
    return TheoremRuns(frame, vocab, context, cfg.n_layers, unmet)
