"""Closed-form leading terms of SGD from zero (chapter 2 derives them, :mod:`.check` checks them by
autograd; chapters 3-5 compare trained weights with them).

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

from typing import Any

import numpy as np

KINDS = ("W_O", "V", "W", "P")
BASIS_ATTR = {"W_O": "B", "V": "BPhi_T", "W": "Q", "P": "P"}


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


def loglog_slope(x: Any, y: Any) -> float:
    """Least-squares slope of log y against log x (the exponent p of y ~ x^p)."""
    return float(np.polyfit(np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float)), 1)[0])


def ranking_overlap(
    theory: Any,
    trained: Any,
    rows: list[int],
    k: int = 10,
    exclude: list[int] | tuple[int, ...] = (),
    positive: bool = False,
) -> float:
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
