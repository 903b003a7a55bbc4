"""Fourier features of the layer-2 MLP, the adder (chapter 9).

Feed every query ``+ n m =`` (PAD x 12 in front) and read the layer-2 MLP pre-activations at '='.
Each neuron gives a map ``A[n, m]`` on Z_N x Z_N. For a frequency ``k`` the two-cosine form

    A[n, m] ~ c + a cos(2 pi k n / N + alpha) + b cos(2 pi k m / N + beta)

is the projection of the centred map onto span{cos, sin}(2 pi k n / N), {cos, sin}(2 pi k m / N).
These four functions (for all k = 1 .. (N-1)/2 together) are orthogonal on the grid, so the
variance a frequency explains is the squared norm of that projection over the squared norm of the
centred map, and all frequencies come out of one matrix product.

The module also holds the analyses readers of the grokking literature expect, usable on any
model (the released one or a rebuild): the restricted and excluded losses of a Fourier ablation
(:func:`fourier_ablated_losses`) and the principal components of the number embeddings with a
circle fit (:func:`embedding_pca`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from mechbook.assign_add import circuits
from mechbook.assign_add.task import TaskConfig


def fourier_basis(modulus: int) -> tuple[np.ndarray, np.ndarray]:
    """The orthonormal real Fourier basis of the non-constant functions on Z_N (N odd).

    Returns ``(B, ks)``: ``B`` has shape ``(N, 2K)`` with ``K = (N-1)/2``; column ``2(k-1)`` is
    ``sqrt(2/N) cos(2 pi k n/N)`` and column ``2(k-1)+1`` is ``sqrt(2/N) sin(2 pi k n/N)``;
    ``ks = [1, ..., K]``.
    """
    if modulus < 3 or modulus % 2 == 0:
        raise ValueError(f"modulus must be an odd number >= 3 (the task uses 59), got {modulus}")
    n = np.arange(modulus)
    ks = np.arange(1, (modulus - 1) // 2 + 1)
    angles = 2 * math.pi * np.outer(n, ks) / modulus
    basis = np.empty((modulus, 2 * len(ks)))
    basis[:, 0::2] = np.cos(angles)
    basis[:, 1::2] = np.sin(angles)
    return basis * math.sqrt(2 / modulus), ks


def _check_maps(maps: np.ndarray) -> np.ndarray:
    maps = np.asarray(maps, dtype=np.float64)
    if maps.ndim == 2:
        maps = maps[None]
    if maps.ndim != 3 or maps.shape[1] != maps.shape[2]:
        raise ValueError(f"maps must have shape (neurons, N, N) or (N, N), got {maps.shape}")
    return maps


def marginal_coefficients(maps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Coefficients of each centred map on the orthonormal grid functions ``B[n, j] / sqrt(N)``
    (functions of n alone) and ``B[m, j] / sqrt(N)`` (functions of m alone).

    Returns ``(coef_n, coef_m, total)`` with ``coef_*`` of shape ``(neurons, 2K)`` and ``total``
    the squared norm of each centred map, shape ``(neurons,)``.
    """
    maps = _check_maps(maps)
    modulus = maps.shape[1]
    basis, _ = fourier_basis(modulus)
    centred = maps - maps.mean(axis=(1, 2), keepdims=True)
    coef_n = np.einsum("inm,nj->ij", centred, basis) / math.sqrt(modulus)
    coef_m = np.einsum("inm,mj->ij", centred, basis) / math.sqrt(modulus)
    total = (centred**2).sum(axis=(1, 2))
    return coef_n, coef_m, total


def frequency_fve(maps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fraction of each neuron's variance explained by the two-cosine form at each frequency.

    ``fve[i, k-1] = (|<A_i, cos_k(n)>|^2 + |<A_i, sin_k(n)>|^2 + same for m) / ||A_i - mean||^2``
    with orthonormal grid functions. Returns ``(fve (neurons, K), ks)``; a constant map gets 0.
    """
    coef_n, coef_m, total = marginal_coefficients(maps)
    energy = coef_n[:, 0::2] ** 2 + coef_n[:, 1::2] ** 2 + coef_m[:, 0::2] ** 2 + coef_m[:, 1::2] ** 2
    safe = np.where(total > 0, total, 1.0)
    fve = np.where(total[:, None] > 0, energy / safe[:, None], 0.0)
    return fve, fourier_basis(maps.shape[-1])[1]


def neuron_frequency_table(maps: np.ndarray) -> pd.DataFrame:
    """One row per neuron: its best frequency ``k``, the variance that frequency explains
    (``fve``), and the fitted form ``a cos(2 pi k n/N + alpha) + b cos(2 pi k m/N + beta)``
    (columns ``a``, ``alpha``, ``b``, ``beta``, angles in radians in (-pi, pi]), plus ``std``,
    the standard deviation of the map (dead neurons have 0)."""
    maps = _check_maps(maps)
    modulus = maps.shape[1]
    coef_n, coef_m, _ = marginal_coefficients(maps)
    fve, ks = frequency_fve(maps)
    best = fve.argmax(axis=1)
    rows = np.arange(len(maps))
    scale = math.sqrt(2 / modulus) / math.sqrt(modulus)

    def amp_phase(coef: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        c, s = coef[rows, 2 * best] * scale, coef[rows, 2 * best + 1] * scale
        # c cos(t) + s sin(t) = A cos(t + alpha) with A = hypot(c, s), alpha = -atan2(s, c)
        return np.hypot(c, s), -np.arctan2(s, c)

    a, alpha = amp_phase(coef_n)
    b, beta = amp_phase(coef_m)
    return pd.DataFrame(
        {
            "neuron": rows,
            "k": ks[best],
            "fve": fve[rows, best],
            "a": a,
            "alpha": alpha,
            "b": b,
            "beta": beta,
            "std": maps.std(axis=(1, 2)),
        }
    )


def two_cosine_fit(grid_map: np.ndarray, k: int) -> np.ndarray:
    """The two-cosine fit of one ``(N, N)`` map at frequency ``k``: its mean plus its projection
    onto span{cos, sin}(2 pi k n/N), {cos, sin}(2 pi k m/N) (chapter 9's neuron gallery)."""
    grid_map = np.asarray(grid_map, dtype=np.float64)
    modulus = grid_map.shape[0]
    basis, ks = fourier_basis(modulus)
    if k not in ks:
        raise ValueError(f"k must be in 1..{ks[-1]} for N={modulus}, got {k}")
    cols = basis[:, 2 * (k - 1) : 2 * k]  # (N, 2): cos_k, sin_k, orthonormal
    centred = grid_map - grid_map.mean()
    row_part = cols @ (cols.T @ centred.mean(axis=1))  # projection of the n-marginal
    col_part = cols @ (cols.T @ centred.mean(axis=0))
    return grid_map.mean() + row_part[:, None] + col_part[None, :]


def key_frequencies(table: pd.DataFrame, min_fve: float = 0.9) -> pd.DataFrame:
    """How many neurons have each best frequency among those whose fve >= ``min_fve``,
    most common first (columns ``k``, ``neurons``)."""
    good = table[table["fve"] >= min_fve]
    counts = good["k"].value_counts().rename_axis("k").reset_index(name="neurons")
    return counts.sort_values(["neurons", "k"], ascending=[False, True], ignore_index=True)


LIVE_STD = 1e-3
"""A neuron is live when its map's spread exceeds this fraction of the largest neuron's."""
MIN_FVE = 0.9
"""Variance one frequency must explain for a neuron to count as a Fourier neuron (the paper's
0.90)."""


@dataclass(frozen=True)
class FourierNeurons:
    """Chapter 9's reading of the layer-2 MLP: the frequency table of all neurons
    (:func:`neuron_frequency_table`), the live ones, those with FVE >= :data:`MIN_FVE`, and the key
    frequencies among them (:func:`key_frequencies`, most common first)."""

    table: pd.DataFrame
    live: pd.DataFrame
    good: pd.DataFrame
    frequencies: pd.DataFrame

    @property
    def keys(self) -> list[int]:
        """The key frequencies in increasing order: every best frequency of a Fourier neuron."""
        return sorted(int(k) for k in self.frequencies["k"])

    @property
    def best_fve(self) -> float | None:
        """The best live neuron's FVE (None without a live neuron)."""
        return float(self.live["fve"].max()) if len(self.live) else None

    def ranked_fve(self, rank: int) -> float:
        """The FVE of the ``rank``-th best live neuron (1: the best): at least this much is explained
        by every one of the layer's ``rank`` best (chapter 9). 0.0 when fewer than ``rank`` neurons
        are live: a neuron that does not vary carries no frequency."""
        if rank < 1:
            raise ValueError(f"rank counts from 1 (the best neuron), got {rank}")
        fve = self.live["fve"].sort_values(ascending=False)
        return float(fve.iloc[rank - 1]) if len(fve) >= rank else 0.0


def fourier_neurons(maps: np.ndarray) -> FourierNeurons:
    """Each neuron's best frequency and its FVE; live = spread above :data:`LIVE_STD` of the
    largest; Fourier neurons = live with FVE >= :data:`MIN_FVE` (chapter 9)."""
    table = neuron_frequency_table(maps)
    live = table[table["std"] > LIVE_STD * table["std"].max()]
    good = live[live["fve"] >= MIN_FVE]
    return FourierNeurons(table, live, good, key_frequencies(live, min_fve=MIN_FVE))


def output_fourier_norms(W_out: np.ndarray, W_U: np.ndarray) -> pd.DataFrame:
    """Fourier norms of ``W_out W_U`` (neurons x residues) along the residue axis.

    For each frequency ``k = 0 .. K``, ``norm_k = sqrt(sum_i <row_i, cos_k>^2 + <row_i, sin_k>^2)``
    over all neurons ``i`` (orthonormal basis; k = 0 is the constant). A few large k are the
    frequencies the adder writes the answer with.
    """
    W = np.asarray(W_out, dtype=np.float64) @ np.asarray(W_U, dtype=np.float64)
    modulus = W.shape[1]
    basis, ks = fourier_basis(modulus)
    coef = W @ basis
    norms = np.sqrt((coef[:, 0::2] ** 2 + coef[:, 1::2] ** 2).sum(axis=0))
    const = np.sqrt(((W.sum(axis=1) / math.sqrt(modulus)) ** 2).sum())
    return pd.DataFrame({"k": np.concatenate([[0], ks]), "norm": np.concatenate([[const], norms])})


def mlp2_maps(model: torch.nn.Module, task_cfg: TaskConfig) -> np.ndarray:
    """Layer-2 MLP pre-activations at '=' for every query ``PAD x 12 + n m =``, as neuron maps
    of shape ``(d_mlp, N, N)`` (the input of :func:`neuron_frequency_table`, chapter 9)."""
    tokens, _ = circuits.direct_sequences(task_cfg)
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n == "blocks.1.mlp.hook_pre")
    n = task_cfg.modulus
    return cache["blocks.1.mlp.hook_pre"][:, -1].T.reshape(-1, n, n).double().numpy()


def sum_frequency_basis(modulus: int, ks: Sequence[int]) -> np.ndarray:
    """Orthonormal functions on the (n, m) grid, ``cos`` and ``sin`` of ``2 pi k (n + m) / N``
    for each ``k`` in ``ks``: shape ``(N^2, 2 len(ks))``, rows in row-major (n, m) order."""
    _, all_ks = fourier_basis(modulus)
    bad = sorted(set(ks) - set(all_ks.tolist()))
    if bad:
        raise ValueError(f"frequencies must be in 1..{all_ks[-1]} for N={modulus}, got {bad}")
    n, m = np.divmod(np.arange(modulus * modulus), modulus)
    angles = 2 * math.pi * np.outer(n + m, np.asarray(ks, dtype=np.float64)) / modulus
    cols = np.empty((modulus * modulus, 2 * len(ks)))
    cols[:, 0::2], cols[:, 1::2] = np.cos(angles), np.sin(angles)
    return cols * math.sqrt(2) / modulus


def fourier_ablated_losses(logits: np.ndarray, ks: Sequence[int], pairs: np.ndarray | None = None) -> dict[str, float]:
    """Full, restricted and excluded loss of logits over the (n, m) grid, as in Nanda et al.'s
    progress measures for grokking (chapter 9).

    ``logits`` has shape ``(N^2, N)`` (rows the pairs in row-major order, columns the residues).
    Along the pair axis each residue's logit column is split into its projection ``P`` onto the
    key-frequency functions cos/sin(2 pi k (n + m) / N), k in ``ks``, and the rest:
    *restricted* keeps the grid mean plus ``P`` (only the key frequencies), *excluded* subtracts
    ``P`` (everything but them). Losses are the mean cross-entropy at the answer ``(n + m) mod N``
    over the pairs where the (N, N) bool mask ``pairs`` holds (all pairs if None).
    """
    logits = np.asarray(logits, dtype=np.float64)
    modulus = logits.shape[1]
    if logits.shape != (modulus * modulus, modulus):
        raise ValueError(f"logits must have shape (N^2, N) = ({modulus**2}, {modulus}), got {logits.shape}")
    basis = sum_frequency_basis(modulus, ks)
    projection = basis @ (basis.T @ logits)
    variants = {
        "full": logits,
        "restricted": logits.mean(axis=0, keepdims=True) + projection,
        "excluded": logits - projection,
    }
    n, m = np.divmod(np.arange(modulus * modulus), modulus)
    answer = (n + m) % modulus
    keep = np.ones(modulus * modulus, dtype=bool) if pairs is None else np.asarray(pairs, dtype=bool).reshape(-1)
    out = {}
    for name, z in variants.items():
        z = z - z.max(axis=1, keepdims=True)
        log_p = z[np.arange(len(z)), answer] - np.log(np.exp(z).sum(axis=1))
        out[name] = float(-log_p[keep].mean())
    return out


def model_fourier_ablation(
    model: torch.nn.Module, task_cfg: TaskConfig, ks: Sequence[int], pairs: np.ndarray | None = None
) -> dict[str, float]:
    """:func:`fourier_ablated_losses` of a model's logits at '=' for every query
    ``PAD x 12 + n m =`` (any model: the released one or a rebuild)."""
    return fourier_ablated_losses(direct_logits(model, task_cfg), ks, pairs)


@dataclass(frozen=True)
class Ablation:
    """Chapter 9's Fourier ablation of one model: its loss on all N² direct queries in full, on
    its key frequencies alone (``restricted``) and without them (``excluded``), and two controls
    a near-zero restricted loss needs: the restricted loss on random sets of as many frequencies
    drawn from all of them (``random_sets``, ``random_restricted``, one per draw) and drawn from the
    non-key frequencies only (``nonkey_restricted``). Restricted, excluded and the controls are
    None or empty without key frequencies."""

    full: float
    n_frequencies: int
    restricted: float | None = None
    excluded: float | None = None
    random_restricted: tuple[float, ...] = ()
    random_sets: tuple[tuple[int, ...], ...] = ()
    nonkey_restricted: tuple[float, ...] = ()
    keys: tuple[int, ...] = ()

    @property
    def random_lowest(self) -> float | None:
        """The lowest restricted loss over the random draws from all frequencies."""
        return min(self.random_restricted) if self.random_restricted else None

    @property
    def key_over_random(self) -> float | None:
        """The restricted loss on the key frequencies over :attr:`random_lowest`: below 1, the key
        frequencies do better than every random set of as many (None without both; ``inf`` when the
        best random set's loss is 0 and the key ones' is not)."""
        if self.restricted is None or self.random_lowest is None:
            return None
        if self.random_lowest == 0:
            return 0.0 if self.restricted == 0 else float("inf")
        return self.restricted / self.random_lowest

    @property
    def random_lowest_overlap(self) -> int | None:
        """How many key frequencies the draw with the lowest restricted loss holds."""
        if not self.random_restricted:
            return None
        best = self.random_sets[int(np.argmin(self.random_restricted))]
        return len(set(best) & set(self.keys))

    @property
    def nonkey_lowest(self) -> float | None:
        """The lowest restricted loss over the random draws of non-key frequencies."""
        return min(self.nonkey_restricted) if self.nonkey_restricted else None


def random_frequency_sets(
    modulus: int, size: int, draws: int, seed: int = 0, exclude: Sequence[int] = ()
) -> list[list[int]]:
    """``draws`` sets of ``size`` distinct frequencies drawn uniformly from 1..(N-1)/2 without
    the frequencies in ``exclude`` (as many as are left when fewer than ``size`` are)."""
    _, ks = fourier_basis(modulus)
    if not 1 <= size <= len(ks):
        raise ValueError(f"size must be between 1 and {len(ks)} frequencies, got {size}")
    pool = np.array([k for k in ks if k not in set(exclude)])
    if not len(pool):
        return []
    rng = np.random.default_rng([seed, 23, len(exclude)])
    return [sorted(int(k) for k in rng.choice(pool, size=min(size, len(pool)), replace=False)) for _ in range(draws)]


def ablation(logits: np.ndarray, ks: Sequence[int], draws: int = 5, seed: int = 0) -> Ablation:
    """:func:`fourier_ablated_losses` of ``logits`` (N², N) on the key frequencies ``ks`` and the
    two controls a restricted loss of 1e-11 needs: the restricted loss on ``draws`` random sets of
    ``len(ks)`` frequencies from all of them, and from the non-key ones only
    (:func:`random_frequency_sets`). Chapter 9."""
    logits = np.asarray(logits, dtype=np.float64)
    if not len(ks):
        return Ablation(full=fourier_ablated_losses(logits, [1])["full"], n_frequencies=0)
    losses = fourier_ablated_losses(logits, ks)
    modulus = logits.shape[1]
    sets = random_frequency_sets(modulus, len(ks), draws, seed)
    nonkey = random_frequency_sets(modulus, len(ks), draws, seed, exclude=ks)
    restricted = lambda s: fourier_ablated_losses(logits, s)["restricted"]  # noqa: E731
    return Ablation(
        full=losses["full"],
        n_frequencies=len(ks),
        restricted=losses["restricted"],
        excluded=losses["excluded"],
        random_restricted=tuple(restricted(s) for s in sets),
        random_sets=tuple(tuple(s) for s in sets),
        nonkey_restricted=tuple(restricted(s) for s in nonkey),
        keys=tuple(int(k) for k in ks),
    )


def direct_logits(model: torch.nn.Module, task_cfg: TaskConfig) -> np.ndarray:
    """The model's logits at '=' for every query ``PAD x 12 + n m =`` (N², N), n major."""
    tokens, _ = circuits.direct_sequences(task_cfg)
    with torch.no_grad():
        return model(tokens, last_only=True).double().numpy()


def circle_fit(vectors: np.ndarray) -> pd.DataFrame:
    """Do ``N`` vectors (rows, one per number n) lie on a circle ordered by a frequency?

    Takes the top two principal components of the centred vectors, the angle ``theta_n`` of each
    number there, and for each frequency ``k`` the circular order score
    ``|mean_n exp(i (theta_n - s 2 pi k n / N))|`` maximised over the direction ``s = +-1``
    (1 when the numbers go round the circle in steps of ``k``). Returns one row per ``k`` with
    ``score`` and, the same in every row, ``pc2_fraction``: the variance share of the two PCs.
    """
    x = np.asarray(vectors, dtype=np.float64)
    x = x - x.mean(axis=0)
    _, sing, vt = np.linalg.svd(x, full_matrices=False)
    coords = x @ vt[:2].T
    theta = np.arctan2(coords[:, 1], coords[:, 0])
    modulus = len(x)
    n = np.arange(modulus)
    rows = []
    for k in range(1, (modulus - 1) // 2 + 1):
        phase = 2 * math.pi * k * n / modulus
        score = max(abs(np.exp(1j * (theta - s * phase)).mean()) for s in (1, -1))
        rows.append({"k": k, "score": float(score)})
    frame = pd.DataFrame(rows)
    frame["pc2_fraction"] = float((sing[:2] ** 2).sum() / (sing**2).sum())
    return frame


def frequency_shares(vectors: np.ndarray) -> pd.DataFrame:
    """Share of the variance of ``N`` vectors (rows, one per number n) along each frequency of n:
    ``||B_k^T x||^2 / ||x - mean||^2`` with ``B_k`` the orthonormal cos/sin(2 pi k n / N) columns.
    The part at frequency ``k`` is an ellipse in the plane ``B_k^T x``, so a few large shares
    mean the numbers sit on a few circles (columns ``k``, ``fraction``)."""
    x = np.asarray(vectors, dtype=np.float64)
    x = x - x.mean(axis=0)
    basis, ks = fourier_basis(len(x))
    coef = basis.T @ x
    energy = (coef[0::2] ** 2).sum(axis=1) + (coef[1::2] ** 2).sum(axis=1)
    return pd.DataFrame({"k": ks, "fraction": energy / (x**2).sum()})


def embedding_pca(model: torch.nn.Module, modulus: int, n_components: int = 6) -> dict[str, pd.DataFrame]:
    """Principal components of the number embeddings (chapter 9), for the token embeddings
    ``W_E[0..N-1]`` and for the adder's inputs ``OV2(e_n)``: ``variance`` (columns ``space``,
    ``pc``, ``fraction``: the variance share of the first ``n_components`` PCs), ``circle``
    (:func:`circle_fit` of the top two PCs per space, best ``k`` first) and ``frequency``
    (:func:`frequency_shares` per space, largest first)."""
    E = model.embed.W_E.detach()[:modulus]
    spaces = {"W_E": E.double().numpy(), "OV2 e_n": (E @ circuits.ov(model, 1)).double().numpy()}
    variance, circles, freqs = [], [], []
    for space, x in spaces.items():
        sing = np.linalg.svd(x - x.mean(axis=0), compute_uv=False)
        share = sing**2 / (sing**2).sum()
        variance += [{"space": space, "pc": i + 1, "fraction": float(f)} for i, f in enumerate(share[:n_components])]
        for frame, out in ((circle_fit(x), circles), (frequency_shares(x), freqs)):
            frame.insert(0, "space", space)
            out.append(frame.sort_values(frame.columns[2], ascending=False, ignore_index=True))
    return {
        "variance": pd.DataFrame(variance),
        "circle": pd.concat(circles, ignore_index=True),
        "frequency": pd.concat(freqs, ignore_index=True),
    }


ONE_CIRCLE_PC2 = 0.5
"""Variance share of the top two principal components from which the number embeddings count as
one circle (chapter 9's reading)."""


@dataclass(frozen=True)
class EmbeddingSummary:
    """Of the number embeddings ``W_E[0..N-1]``: the variance share of the top two principal
    components (``top2``), of the ten largest frequencies of n (``top10_frequencies``), and the
    best circular-order score of the top two PCs (``circle_score``, at frequency ``circle_k``)."""

    top2: float
    top10_frequencies: float
    circle_score: float
    circle_k: int


def embedding_summary(pca: dict[str, pd.DataFrame], space: str = "W_E") -> EmbeddingSummary:
    """:class:`EmbeddingSummary` of one space of :func:`embedding_pca` (chapter 9)."""
    var, freq, circle = (pca[k][pca[k].space == space] for k in ("variance", "frequency", "circle"))
    best = circle.sort_values("score", ascending=False).iloc[0]
    return EmbeddingSummary(
        top2=float(var[var.pc <= 2].fraction.sum()),
        top10_frequencies=float(freq.fraction.head(10).sum()),
        circle_score=float(best.score),
        circle_k=int(best.k),
    )
