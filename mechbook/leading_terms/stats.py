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

Q and P are the paper's Q and P leading terms divided by N T, so that the key-query matrix and the
position bias after s steps from zero are about (eta^4 s^4 / 8) Q and (eta^4 s^4 / 8) P.

:func:`corpus_stats` is the fast streaming form: with g_j = G[x_j, y_t] - mean_c G[x_j, c],
sum_j J_t[i, j] g_j = (g_i - mean_{j<=t} g_j) / (t+1), so each sequence costs O(T^2) pairs
(i <= t) instead of a T x T x T tensor; and B is a sparse bigram matrix minus a rank-one centring
term, so Sigma_B, (B Phi)^T and G come from sparse products (:func:`sparse_derived`) instead of
dense |V|^3 ones. :func:`literal_stats` evaluates the formulas as written (dense one-hots, dense
products, the J tensor) and is the test oracle.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from mechbook.progress import progress


@dataclass(frozen=True)
class CorpusStats:
    """B, Phi, Sigma_B, (B Phi)^T, G, Q (all |V| x |V|) and P (length T), float64.

    From :func:`corpus_stats`, BPhi_T and G are transposed views (Fortran order)."""

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
        raise ValueError(
            f"tokens must be an (N, T+1) array with N >= 1 and T >= 1, got shape {tokens.shape}; see make_sequences"
        )
    if not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens must hold integer token ids, got dtype {tokens.dtype}")
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
    lo, hi = int(tokens.min()), int(tokens.max())
    if lo < 0 or hi >= vocab_size:
        raise ValueError(f"token ids must lie in [0, {vocab_size}), found range [{lo}, {hi}]; is vocab_size right?")
    return tokens.astype(np.int64, copy=False)


def _derived(B: np.ndarray, Phi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sigma_B = B^T B, (B Phi)^T = Phi^T B^T and G = (B Phi)^T B as dense products (the literal form)."""
    Sigma_B = B.T @ B
    BPhi_T = Phi.T @ B.T
    return Sigma_B, BPhi_T, BPhi_T @ B


def sparse_derived(
    C: sparse.csr_array, alpha: np.ndarray, Phi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sigma_B = B^T B, (B Phi)^T and G = (B Phi)^T B for B = C - alpha 1^T with C sparse.

    In :func:`corpus_stats` C is the bigram count matrix divided by N T (nonzeros: the distinct
    bigrams of the corpus) and alpha = p(x)/|V|, so each product costs O(nnz(C) |V|) instead of the
    |V|^3 of the dense form :func:`_derived`:

        Sigma_B = C^T C - u 1^T - 1 u^T + (alpha . alpha) 1 1^T,   u = C^T alpha
        B Phi   = C Phi                          (1^T Phi = 0: Phi's columns are centred)
        G^T     = B^T (B Phi) = C^T (B Phi) - 1 (alpha^T B Phi)

    The same mathematics as :func:`_derived` up to float rounding (the tests compare them).
    Sigma_B is computed on a second thread while the G chain runs (scipy releases the GIL).
    (B Phi)^T and G are returned as transposed views. Used by chapters 1-6 through corpus_stats.
    """
    CT = C.T

    def sigma() -> np.ndarray:
        Sigma_B = (CT @ C).toarray()
        u = CT @ alpha
        Sigma_B -= u[:, None]
        Sigma_B -= (u - alpha @ alpha)[None, :]
        return Sigma_B

    with ThreadPoolExecutor(max_workers=1) as pool:
        Sigma_B = pool.submit(sigma)
        BPhi = np.asarray(C @ Phi)
        GT = np.asarray(CT @ BPhi)
        GT -= alpha @ BPhi
        return Sigma_B.result(), BPhi.T, GT.T


def _lag_offsets(T: int) -> np.ndarray:
    """Start of each lag's segment in the lag-major pair layout, plus the end (length T+1).

    Pairs (t, i <= t) are laid out by lag d = t - i, then by i: segment d holds the T - d pairs
    (t, i) = (d + k, k), k = 0..T-d-1, so every per-lag operation is on contiguous slices."""
    return np.concatenate([[0], np.cumsum(np.arange(T, 0, -1))])


def _pair_sum(left: np.ndarray, right: np.ndarray, offsets: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out[n, pair (t, i)] = left[n, t] + right[n, i] over all pairs i <= t, in the lag layout."""
    T = left.shape[1]
    for d in range(T):
        np.add(left[:, d:], right[:, : T - d], out=out[:, offsets[d] : offsets[d + 1]])
    return out


def corpus_stats(tokens: np.ndarray, vocab_size: int, *, chunk: int = 64) -> CorpusStats:
    """All Part I statistics of ``tokens`` (N, T+1), streamed over chunks of ``chunk`` sequences.

    Two passes: counts for B and Phi (hence G, by :func:`sparse_derived`), then Q and P. Pairs
    (t, i <= t) are laid out by lag (:func:`_lag_offsets`). Working memory is O(|V|^2) for the
    maps plus O(chunk T^2) for one chunk's pairs, whatever N.
    """
    tokens = _check_tokens(tokens, vocab_size)
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1 sequence, got {chunk}")
    N, T = tokens.shape[0], tokens.shape[1] - 1
    V = vocab_size
    NT = N * T
    offsets = _lag_offsets(T)
    t_of_pair = np.concatenate([np.arange(d, T) for d in range(T)])
    inv_t1 = 1.0 / np.arange(1, T + 1)
    size = min(chunk, N)
    # 1/((t+1) N T) for every pair of a full chunk: np.add.at gets full-size values, since numpy
    # 2.4 returns nan (or crashes) when they are broadcast against a 2-D index
    weights = np.tile(inv_t1[t_of_pair] / NT, (size, 1))
    tail = np.cumsum(inv_t1[::-1])[::-1] / NT  # sum_{t>=i} 1/((t+1) N T): Phi's column mass of x_i
    idx = np.empty((size, offsets[-1]), dtype=np.intp)
    starts = range(0, N, chunk)

    B = np.zeros(V * V)  # bigram frequencies p(x, y), then B in place (no second |V|^2 array)
    occurs = np.zeros(V * V, dtype=bool)  # which bigrams occur: the sparsity pattern of C
    current = np.zeros(V)  # how often each token is the current one
    Phi = np.zeros(V * V)  # sum of 1/((t+1) N T) over pairs (y_t, x_i), then Phi in place
    column_mass = np.zeros(V)  # Phi's column sums before centring
    for s in progress(starts, desc="B, Phi", total=len(starts)):
        x, y = tokens[s : s + chunk, :-1], tokens[s : s + chunk, 1:]
        n = x.shape[0]
        bigram = (x * V + y).ravel()
        np.add.at(B, bigram, 1.0 / NT)
        occurs[bigram] = True
        current += np.bincount(x.ravel(), minlength=V)
        column_mass += np.bincount(x.ravel(), weights=np.tile(tail, n), minlength=V)
        np.add.at(Phi, _pair_sum(y * V, x, offsets, idx[:n]).ravel(), weights[:n].ravel())
    seen = np.flatnonzero(occurs)
    rows, cols = np.divmod(seen, V)
    C = sparse.csr_array((B[seen], cols, np.searchsorted(rows, np.arange(V + 1))), shape=(V, V))
    alpha = current / (V * NT)
    B = B.reshape(V, V)
    B -= alpha[:, None]
    Phi = Phi.reshape(V, V)
    Phi -= column_mass / V
    Sigma_B, BPhi_T, G = sparse_derived(C, alpha, Phi)

    GT = G.T.ravel()  # G[x_i, y_t] at y_t V + x_i; G's rows sum to zero (B's do), so g_j = G[x_j, y_t]
    mean_weight = inv_t1**2 / NT
    g = np.empty(idx.shape)
    Q = np.zeros(V * V)
    lag_sums = np.zeros(offsets[-1])
    for s in progress(starts, desc="Q, P", total=len(starts)):
        x, y = tokens[s : s + chunk, :-1], tokens[s : s + chunk, 1:]
        n = x.shape[0]
        gn = np.take(GT, _pair_sum(y * V, x, offsets, idx[:n]), out=g[:n], mode="clip")  # ids are in range
        c = np.zeros((n, T))  # sum_{j<=t} g_j, then m_t / ((t+1) N T)
        for d in range(T):
            c[:, d:] += gn[:, offsets[d] : offsets[d + 1]]
        c *= mean_weight
        gn *= weights[:n]
        for d in range(T):  # w / (N T) = (g_i - m_t) / ((t+1) N T)
            gn[:, offsets[d] : offsets[d + 1]] -= c[:, d:]
        lag_sums += gn.sum(0)
        np.add.at(Q, _pair_sum(x * V, x, offsets, idx[:n]).ravel(), gn.ravel())
    P = np.add.reduceat(lag_sums, offsets[:-1])
    return CorpusStats(B, Phi, Sigma_B, BPhi_T, G, Q.reshape(V, V), P, N, T, V)


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
    """:func:`corpus_stats` through the on-disk cache, keyed by the tokens and |V|."""
    from mechbook.cache import cached

    key = {"tokens": np.ascontiguousarray(tokens), "vocab_size": vocab_size}
    return cached("leading_terms/corpus_stats", key, lambda: corpus_stats(tokens, vocab_size))
