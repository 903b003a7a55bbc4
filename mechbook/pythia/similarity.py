"""The covariance similarity between a model's token representations and a feature matrix
(chapter 6). Pure numpy, float64.

For k tokens, a representation ``R`` (k x d: one row per token) and a feature ``F`` (k x m):

    C(X)  = (X - 1 mean(X)) (X - 1 mean(X))^T        token x token covariance (mean over tokens)
    F_hat = rows of F divided by their norms          (row-normalised feature)
    sim(R, F) = <C(R), C(F_hat)>_F / (||C(R)||_F ||C(F_hat)||_F)

Centring subtracts the mean token (C = H X X^T H with H = I - 11^T/k), so ``sim`` is linear CKA
between the representation and the row-normalised feature. It does not change when the
representation space is rotated (R -> R U, U orthogonal) or scaled, nor when a feature row is
multiplied by a positive number; for independent random R (k x d) and F it is about d/(d+k).
"""

from __future__ import annotations

import numpy as np


def _matrix(x: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"{name} must be a (tokens, dims) matrix with at least 2 tokens, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{name} has non-finite entries; check the model's activations or the feature")
    return x


def centred_gram(x: np.ndarray) -> np.ndarray:
    """C = (X - mean_tokens X)(X - mean_tokens X)^T: the k x k covariance of the k token rows."""
    x = _matrix(x, "x")
    xc = x - x.mean(axis=0, keepdims=True)
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


def feature_gram(feature: np.ndarray) -> np.ndarray:
    """C(F_hat): the token covariance of the row-normalised feature (compute once, compare often)."""
    return centred_gram(row_normalise(feature))


def covariance_similarity(representation: np.ndarray, feature: np.ndarray | None = None, *, gram: np.ndarray | None = None) -> float:
    """sim(R, F) = cos(C(R), C(F_hat)); pass ``gram=feature_gram(F)`` instead of ``feature`` to
    reuse the feature side across many representations."""
    if (feature is None) == (gram is None):
        raise ValueError("give exactly one of feature= or gram=")
    target = feature_gram(feature) if gram is None else gram
    rep = centred_gram(representation)
    if rep.shape != target.shape:
        raise ValueError(f"representation has {rep.shape[0]} tokens but the feature has {target.shape[0]}; use the same top-k tokens")
    return matrix_cosine(rep, target)
