"""The two similarities between a model's token representations and a feature matrix (chapter 6).
Pure numpy, float64.

For k tokens, a representation ``R`` (k x d: one row per token) and a feature ``F`` (k x m), with
F_hat the rows of F divided by their norms, both measures compare token x token Gram matrices:

    sim(R, F) = <C(R), C(F_hat)>_F / (||C(R)||_F ||C(F_hat)||_F)

and differ only in how a matrix is centred before its Gram C(X) = X_c X_c^T is formed:

- ``paper``: each row is centred over its own entries (X_c = X - mean_row(X) 1^T), the paper's
  token covariance. A direction shared by every token survives this centring, so a representation
  with a large common offset, even a random one, matches any feature whose rows also share a
  direction.
- ``cka``: each column is centred over the tokens (X_c = H X with H = I - 11^T/k): linear CKA.
  The shared offset is removed, so random representations stay near d/(d+k). It does not change
  under rotations or scalings of the representation space; because only F, not R, is
  row-normalised, an R exactly linear in F with rows of unequal norm can still score low.
"""

from __future__ import annotations

import numpy as np

MEASURES: tuple[str, ...] = ("paper", "cka")
MEASURE_LABELS = {"paper": "paper's row-centred covariance", "cka": "linear CKA (token-centred)"}


def _matrix(x: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"{name} must be a (tokens, dims) matrix with at least 2 tokens, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{name} has non-finite entries; check the model's activations or the feature")
    return x


def _measure(measure: str) -> str:
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, got {measure!r}")
    return measure


def centred_gram(x: np.ndarray, measure: str) -> np.ndarray:
    """C(X) = X_c X_c^T (k x k), X_c centred per row (``paper``) or per column over tokens (``cka``)."""
    x = _matrix(x, "x")
    axis = 1 if _measure(measure) == "paper" else 0
    xc = x - x.mean(axis=axis, keepdims=True)
    return xc @ xc.T


def row_normalise(f: np.ndarray) -> np.ndarray:
    """F with each row divided by its Euclidean norm (all-zero rows are left at zero)."""
    f = _matrix(f, "feature")
    norms = np.linalg.norm(f, axis=1, keepdims=True)
    return np.divide(f, norms, out=np.zeros_like(f), where=norms > 0)


def matrix_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """cos(A, B) = tr(A^T B) / (||A||_F ||B||_F); 0 when either matrix is zero."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"matrix_cosine needs equal shapes, got {a.shape} and {b.shape}")
    denom = np.linalg.norm(a) * np.linalg.norm(b)
    return float((a * b).sum() / denom) if denom > 0 else 0.0


def feature_gram(feature: np.ndarray, measure: str) -> np.ndarray:
    """C(F_hat) under ``measure``: the feature side, computed once and compared often."""
    return centred_gram(row_normalise(feature), measure)


def covariance_similarity(
    representation: np.ndarray, feature: np.ndarray | None = None, *, measure: str, gram: np.ndarray | None = None
) -> float:
    """sim(R, F) = cos(C(R), C(F_hat)) under ``measure`` (``paper`` or ``cka``); pass
    ``gram=feature_gram(F, measure)`` instead of ``feature`` to reuse the feature side."""
    if (feature is None) == (gram is None):
        raise ValueError("give exactly one of feature= or gram=")
    target = feature_gram(feature, measure) if gram is None else gram
    rep = centred_gram(representation, measure)
    if rep.shape != target.shape:
        raise ValueError(
            f"representation has {rep.shape[0]} tokens but the feature has {target.shape[0]}; use the same top-k tokens"
        )
    return matrix_cosine(rep, target)
