"""Corpus statistics of Part I: the three maps B, Phi, Sigma_B and the leading-term targets
(B Phi)^T, G, Q and P (chapters 1-6).

Notation (``leading-terms.md`` section 2). ``tokens`` is an (N, T+1) array; for sequence n and
position t < T the current token is x_t and the next one y_t = x_{t+1};
r_t = e_{y_t} - 1/|V| (minus the cross-entropy gradient at uniform logits); uniform causal
attention A_bar[t, j] = 1/(t+1) for j <= t; every mean is over the N T (sequence, position) pairs.

    B       = mean e_{x_t} r_t^T                       B[a, c] = p(x=a, y=c) - p(x=a)/|V|
    Phi     = mean r_t (sum_{j<=t} e_{x_j}/(t+1))^T    rows: next token, columns: context token
    Sigma_B = B^T B,   (B Phi)^T,   G = (B Phi)^T B = Phi^T Sigma_B
    Q       = mean_{n,t} sum_{i<=t} e_{x_t} e_{x_i}^T sum_{j<=t} J_t[i, j] e_{x_j}^T G r_t
    P[d]    = (1/(N T)) sum_n sum_{t>=d} sum_{j<=t} J_t[t-d, j] e_{x_j}^T G r_t
    J_t[i, j] = (delta_ij - 1/(t+1)) / (t+1)  (softmax Jacobian at uniform attention, i, j <= t)

Q and P are the spec's Q and P leading terms divided by N T, so that the key-query matrix and the
position bias after s steps from zero are about (eta^4 s^4 / 8) Q and (eta^4 s^4 / 8) P.

:func:`corpus_stats` is the fast streaming form: with g_j = G[x_j, y_t] - mean_c G[x_j, c],
sum_j J_t[i, j] g_j = (g_i - mean_{j<=t} g_j) / (t+1), so each sequence costs O(T^2) pairs
(i <= t) instead of a T x T x T tensor. :func:`literal_stats` evaluates the formulas as written
(dense one-hots, the J tensor) and is the test oracle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechbook.progress import progress


@dataclass(frozen=True)
class CorpusStats:
    """B, Phi, Sigma_B, (B Phi)^T, G, Q (all |V| x |V|) and P (length T), float64."""

    B: np.ndarray
    Phi: np.ndarray
    Sigma_B: np.ndarray
    BPhi_T: np.ndarray
    G: np.ndarray
    Q: np.ndarray
    P: np.ndarray
    n_sequences: int
    context: int
    vocab_size: int


def _check_tokens(tokens: np.ndarray, vocab_size: int) -> np.ndarray:
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or tokens.shape[0] < 1 or tokens.shape[1] < 2:
        raise ValueError(f"tokens must be an (N, T+1) array with N >= 1 and T >= 1, got shape {tokens.shape}; see make_sequences")
    if not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens must hold integer token ids, got dtype {tokens.dtype}")
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
    lo, hi = int(tokens.min()), int(tokens.max())
    if lo < 0 or hi >= vocab_size:
        raise ValueError(f"token ids must lie in [0, {vocab_size}), found range [{lo}, {hi}]; is vocab_size right?")
    return tokens.astype(np.int64, copy=False)


def _derived(B: np.ndarray, Phi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sigma_B = B^T B, (B Phi)^T = Phi^T B^T and G = (B Phi)^T B."""
    Sigma_B = B.T @ B
    BPhi_T = Phi.T @ B.T
    return Sigma_B, BPhi_T, BPhi_T @ B


def corpus_stats(tokens: np.ndarray, vocab_size: int, *, chunk: int = 256) -> CorpusStats:
    """All Part I statistics of ``tokens`` (N, T+1), streamed over chunks of ``chunk`` sequences.

    Two passes: counts for B and Phi (hence G), then Q and P. Working memory is O(|V|^2) for the
    maps plus O(chunk T^2) for one chunk's (t, i <= t) pairs, whatever N.
    """
    tokens = _check_tokens(tokens, vocab_size)
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1 sequence, got {chunk}")
    N, T = tokens.shape[0], tokens.shape[1] - 1
    V = vocab_size
    NT = N * T
    ti, ii = np.tril_indices(T)  # every pair i <= t, ordered by t then i
    inv_t1 = 1.0 / (ti + 1.0)
    starts = range(0, N, chunk)

    bigram = np.zeros(V * V)
    context = np.zeros(V * V)
    for s in progress(starts, desc="B, Phi", total=len(starts)):
        x, y = tokens[s : s + chunk, :-1], tokens[s : s + chunk, 1:]
        bigram += np.bincount((x * V + y).ravel(), minlength=V * V)
        pair_idx = (y[:, ti] * V + x[:, ii]).ravel()
        context += np.bincount(pair_idx, weights=np.broadcast_to(inv_t1, (x.shape[0], ti.size)).ravel(), minlength=V * V)
    B = bigram.reshape(V, V)  # counts, centred and scaled in place (no second |V|^2 array)
    B -= B.sum(1, keepdims=True) / V
    B /= NT
    Phi = context.reshape(V, V)
    Phi -= Phi.sum(0, keepdims=True) / V
    Phi /= NT
    Sigma_B, BPhi_T, G = _derived(B, Phi)

    G_c = G - G.mean(1, keepdims=True)  # g_j = G_c[x_j, y_t]
    offsets = ti.searchsorted(np.arange(T))  # first pair of each t
    Q = np.zeros(V * V)
    P = np.zeros(T)
    for s in progress(starts, desc="Q, P", total=len(starts)):
        x, y = tokens[s : s + chunk, :-1], tokens[s : s + chunk, 1:]
        g = G_c[x[:, ii], y[:, ti]]
        g_mean = np.add.reduceat(g, offsets, axis=1) / np.arange(1, T + 1)
        w = (g - g_mean[:, ti]) * inv_t1
        Q += np.bincount((x[:, ti] * V + x[:, ii]).ravel(), weights=w.ravel(), minlength=V * V)
        P += np.bincount(ti - ii, weights=w.sum(0), minlength=T)
    return CorpusStats(B, Phi, Sigma_B, BPhi_T, G, Q.reshape(V, V) / NT, P / NT, N, T, V)


def softmax_jacobian_tensor(T: int) -> np.ndarray:
    """J[t, i, j] = (delta_ij - 1/(t+1)) / (t+1) for i, j <= t, else 0: the T x T x T tensor."""
    t = np.arange(T)[:, None, None]
    i = np.arange(T)[None, :, None]
    j = np.arange(T)[None, None, :]
    J = ((i == j) - 1.0 / (t + 1)) / (t + 1)
    return np.where((i <= t) & (j <= t), J, 0.0)


def literal_stats(tokens: np.ndarray, vocab_size: int) -> CorpusStats:
    """The statistics evaluated as written: dense one-hots X and R, A_bar, the J tensor (slow).

    B = X^T R / NT, Phi = R^T A_bar X / NT per sequence; Q and P from
    S[j, t] = e_{x_j}^T G r_t and U[t, i] = sum_j J_t[i, j] S[j, t]: Q = sum_n X^T U X / NT,
    P[d] = sum_n sum_{t>=d} U[t, t-d] / NT. The test oracle of :func:`corpus_stats`.
    """
    tokens = _check_tokens(tokens, vocab_size)
    N, T = tokens.shape[0], tokens.shape[1] - 1
    V = vocab_size
    eye = np.eye(V)
    X = eye[tokens[:, :-1]]  # (N, T, V) one-hot of x_t
    R = eye[tokens[:, 1:]] - 1.0 / V  # (N, T, V) r_t
    A_bar = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    B = np.tensordot(X, R, axes=([0, 1], [0, 1])) / (N * T)  # sum_{n,t} e_{x_t} r_t^T
    Phi = np.tensordot(R, A_bar @ X, axes=([0, 1], [0, 1])) / (N * T)  # sum_{n,t} r_t (A_bar X)_t^T
    Sigma_B, BPhi_T, G = _derived(B, Phi)
    J = softmax_jacobian_tensor(T)
    Q = np.zeros((V, V))
    P = np.zeros(T)
    for n in range(N):
        S = X[n] @ G @ R[n].T  # S[j, t] = e_{x_j}^T G r_t
        U = np.einsum("tij,jt->ti", J, S)
        Q += X[n].T @ U @ X[n]
        for d in range(T):
            P[d] += sum(U[t, t - d] for t in range(d, T))
    return CorpusStats(B, Phi, Sigma_B, BPhi_T, G, Q / (N * T), P / (N * T), N, T, V)


def cached_corpus_stats(tokens: np.ndarray, vocab_size: int) -> CorpusStats:
    """:func:`corpus_stats` through the on-disk cache, keyed by the tokens, |V| and this module's code."""
    import sys

    from mechbook.cache import cached, code_version

    key = {"tokens": np.ascontiguousarray(tokens), "vocab_size": vocab_size, "code": code_version(sys.modules[__name__])}
    return cached("leading_terms/corpus_stats", key, lambda: corpus_stats(tokens, vocab_size))
