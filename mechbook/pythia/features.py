"""The leading-term features restricted to the top-k tokens of a corpus (chapter 6).

A real vocabulary (Pythia's 50k BPE tokens, or the miniature's) is too large for |V| x |V| maps,
so the chapter keeps the k most frequent tokens. Every other token is mapped to one extra
"other" id k; the statistics are computed with vocabulary k + 1 (so the other tokens still count
as next tokens and as context, and r_t is centred with 1/(k+1)); then the "other" row and column
are dropped. The features are (B Phi)^T (what a context token's value vector should carry) and
Q (the key-query leading term), both k x k, rows and columns in order of frequency.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechbook.cache import cached, fingerprint


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
        """The feature a mapping is compared with: Q for ``attention``, else (B Phi)^T."""
        return self.Q if mapping == "attention" else self.BPhi_T


def restrict_top_k(tokens: np.ndarray, vocab_size: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Remap ``tokens`` (N, T+1) to 0..k-1 for the k most frequent ids (ties: smaller id first)
    and to k for every other id. Returns ``(remapped, kept_ids)``."""
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


def compute_leading_features(tokens: np.ndarray, vocab_size: int, k: int) -> LeadingFeatures:
    """(B Phi)^T and Q of ``tokens`` on the top-k tokens plus "other", with "other" dropped."""
    from mechbook.leading_terms.stats import corpus_stats

    remapped, kept = restrict_top_k(tokens, vocab_size, k)
    stats = corpus_stats(remapped, k + 1)
    return LeadingFeatures(kept, stats.BPhi_T[:k, :k].copy(), stats.Q[:k, :k].copy(), float((remapped == k).mean()))


def leading_features(tokens: np.ndarray, vocab_size: int, k: int) -> LeadingFeatures:
    """:func:`compute_leading_features`, cached on the tokens and k."""
    key = {"tokens": fingerprint(np.asarray(tokens)), "vocab_size": vocab_size, "k": k}
    return cached("pythia/features", key, lambda: compute_leading_features(tokens, vocab_size, k))
