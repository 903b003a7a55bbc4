"""The leading-term features restricted to the top-k tokens of a corpus (chapter 6): the paper's
statistics, on a restriction that is the book's budget choice (the paper states no top-k).

A real vocabulary (Pythia's 50k BPE tokens, or the miniature's) is too large for |V| x |V| maps
on the book's budget, so the chapter keeps the k most frequent tokens and **drops** every other
token: its one-hot vector is zero, so it is no row or column of any map and takes no part in any
product. The statistics are those of chapter 1 over a vocabulary of the k kept tokens, with
every position of every sequence still counted (N T of them) and uniform attention still spread
over all t + 1 visible positions:

    e_v = one-hot in R^k for a kept token v, 0 for a dropped one;   r_t = e_{y_t} - 1/k
    B   = mean_{n,t} e_{x_t} r_t^T            Phi = mean_{n,t} r_t (sum_{j<=t} e_{x_j} / (t+1))^T
    (B Phi)^T = Phi^T B^T,   G = (B Phi)^T B
    Q   = mean_{n,t} sum_{i<=t} e_{x_t} e_{x_i}^T (S_{it} - mean_{j<=t} S_{jt}) / (t+1),   S_{jt} = e_{x_j}^T G r_t

(the last line is chapter 1's Q with the softmax Jacobian at uniform attention applied in closed
form). When no token is dropped these are exactly :func:`mechbook.leading_terms.stats.corpus_stats`.
Both features are k x k, rows and columns in order of frequency.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechbook.cache import cached, fingerprint
from mechbook.progress import progress


@dataclass(frozen=True)
class LeadingFeatures:
    """``token_ids``: the k kept ids (original vocabulary, most frequent first);
    ``BPhi_T`` and ``Q``: k x k float64; ``other_fraction``: share of corpus tokens outside the top k."""

    token_ids: np.ndarray
    BPhi_T: np.ndarray
    Q: np.ndarray
    other_fraction: float

    @property
    def k(self) -> int:
        return int(self.token_ids.size)

    def feature(self, mapping: str) -> np.ndarray:
        """The feature a mapping is compared with: Q for the attention mappings, else (B Phi)^T."""
        return self.Q if mapping.startswith("attention") else self.BPhi_T


def restrict_top_k(tokens: np.ndarray, vocab_size: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Remap ``tokens`` (N, T+1) to 0..k-1 for the k most frequent ids (ties: smaller id first)
    and to k (dropped) for every other id. Returns ``(remapped, kept_ids)``."""
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens must be an (N, T+1) integer array, got shape {tokens.shape} and dtype {tokens.dtype}")
    if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError(f"token ids must lie in [0, {vocab_size}); is vocab_size right?")
    counts = np.bincount(tokens.ravel(), minlength=vocab_size)
    present = int((counts > 0).sum())
    if not 2 <= k <= present:
        raise ValueError(f"top_k must be between 2 and the {present} distinct tokens in the corpus, got {k}")
    kept = np.argsort(-counts, kind="stable")[:k]
    lookup = np.full(vocab_size, k, dtype=np.int64)
    lookup[kept] = np.arange(k)
    return lookup[tokens], kept.astype(np.int64)


def top_k_maps(
    remapped: np.ndarray, k: int, *, chunk: int = 64
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(B, Phi, (B Phi)^T, Q)`` (k x k) of ``remapped`` (N, T+1; ids 0..k-1 kept, k dropped) by the
    formulas of this module, streamed over chunks of sequences (memory O(k^2 + chunk T^2))."""
    remapped = np.asarray(remapped, dtype=np.int64)
    N, T = remapped.shape[0], remapped.shape[1] - 1
    V = k + 1  # the dropped id gets a row and column that are cut off (its one-hot is zero)
    tt, jj = np.tril_indices(T)  # pairs (t, j <= t), grouped by t
    starts = (np.arange(T) * (np.arange(T) + 1)) // 2
    inv_t1 = 1.0 / np.arange(1, T + 1)
    tail = np.cumsum(inv_t1[::-1])[::-1]  # sum_{t>=j} 1/(t+1): the uniform attention position j receives
    chunks = range(0, N, chunk)

    bigram, current, pairs, mass = np.zeros(V * V), np.zeros(V), np.zeros(V * V), np.zeros(V)
    for s in progress(chunks, desc="B, Phi (top k)", total=len(chunks)):
        x, y = remapped[s : s + chunk, :-1], remapped[s : s + chunk, 1:]
        bigram += np.bincount((x * V + y).ravel(), minlength=V * V)
        current += np.bincount(x.ravel(), minlength=V)
        pairs += np.bincount(
            (y[:, tt] * V + x[:, jj]).ravel(), weights=np.tile(inv_t1[tt], x.shape[0]), minlength=V * V
        )
        mass += np.bincount(x.ravel(), weights=np.tile(tail, x.shape[0]), minlength=V)
    NT = N * T
    B = (bigram.reshape(V, V)[:k, :k] - current[:k, None] / k) / NT
    Phi = (pairs.reshape(V, V)[:k, :k] - mass[None, :k] / k) / NT
    BPhi_T = Phi.T @ B.T
    G = np.zeros((V, V))
    G[:k, :k] = BPhi_T @ B
    centring = G.sum(axis=1) / k  # e_{x_j}^T G 1 / k, zero for a dropped x_j

    Q = np.zeros(V * V)
    for s in progress(chunks, desc="Q (top k)", total=len(chunks)):
        x, y = remapped[s : s + chunk, :-1], remapped[s : s + chunk, 1:]
        S = G[x[:, jj], y[:, tt]] - centring[x[:, jj]]  # S[n, pair (t, j)] = e_{x_j}^T G r_t
        mean_t = np.add.reduceat(S, starts, axis=1) * inv_t1  # mean_{j<=t} S_{jt}
        U = (S - mean_t[:, tt]) * inv_t1[tt]
        Q += np.bincount((x[:, tt] * V + x[:, jj]).ravel(), weights=U.ravel(), minlength=V * V)
    return B, Phi, BPhi_T, Q.reshape(V, V)[:k, :k] / NT


def compute_leading_features(tokens: np.ndarray, vocab_size: int, k: int) -> LeadingFeatures:
    """(B Phi)^T and Q of ``tokens`` on its top-k tokens, every other token dropped."""
    remapped, kept = restrict_top_k(tokens, vocab_size, k)
    _, _, BPhi_T, Q = top_k_maps(remapped, k)
    return LeadingFeatures(kept, BPhi_T, Q, float((remapped == k).mean()))


def leading_features(tokens: np.ndarray, vocab_size: int, k: int) -> LeadingFeatures:
    """:func:`compute_leading_features`, cached on the tokens and k."""
    key = {"tokens": fingerprint(np.asarray(tokens)), "vocab_size": vocab_size, "k": k}
    return cached("pythia/features", key, lambda: compute_leading_features(tokens, vocab_size, k))
