"""The autograd check of the leading terms (chapter 2): full-batch SGD from zero, every matrix
after every step compared with its closed form of :mod:`.leading`, in direction and in size, and
its readings: the check's summary, the growth exponents, where the terms first stop holding in the
validity sweep (:func:`first_departure`), the sweep's cosines at a given η·s (chapter 3 cites them)
and the rule that says whether a run has learned (:func:`has_learned`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mechbook.cache import cached, fingerprint
from mechbook.leading_terms import train
from mechbook.leading_terms.corpus import CorpusConfig, load_corpus
from mechbook.leading_terms.leading import KINDS, bases, coefficient, loglog_slope
from mechbook.leading_terms.model import DTYPES, ModelConfig
from mechbook.leading_terms.stats import cached_corpus_stats
from mechbook.leading_terms.train import TrainConfig
from mechbook.validation import POSITIVE, above, at_least, check_fields, one_of


@dataclass(frozen=True)
class CheckConfig:
    """Autograd check of chapter 2: learning rates, steps per rate, layers, dtype (float64)."""

    lrs: tuple[float, ...] = (0.1,)
    steps: int = 20
    n_layers: int = 3
    dtype: str = "float64"

    def __post_init__(self) -> None:
        check_fields(self, lrs=above(0), steps=at_least(0), n_layers=POSITIVE, dtype=one_of(sorted(DTYPES)))


def autograd_check(tokens: np.ndarray, stats: Any, vocab_size: int, cfg: CheckConfig) -> pd.DataFrame:
    """Run full-batch SGD from zero with autograd for every lr in ``cfg.lrs`` and compare each
    matrix after s = 0..steps steps with its closed form.

    Columns: lr, step, eta_s, loss, matrix, kind, layer, cosine (with the basis), norm,
    predicted_norm = c(eta, s) ||basis|| and ratio = norm / predicted_norm (NaN where the
    prediction is zero: W and P vanish for s <= 2, V for s <= 1). A rate whose loss stops being
    finite ends early: its last logged step is below ``steps``.
    """
    tokens = np.asarray(tokens)
    model_cfg = ModelConfig(d_vocab=vocab_size, n_ctx=tokens.shape[1] - 1, n_layers=cfg.n_layers, dtype=cfg.dtype)
    basis_norm = {kind: float(np.linalg.norm(b)) for kind, b in bases(stats).items()}
    frames = []
    for lr in cfg.lrs:
        run = TrainConfig(lr=lr, steps=cfg.steps, stop_on_divergence=True)
        hist = train.train(tokens, stats, model_cfg, run).history
        hist["predicted_norm"] = [coefficient(k, lr, s) * basis_norm[k] for k, s in zip(hist["kind"], hist["step"])]
        predicted = hist["predicted_norm"].to_numpy()
        hist["ratio"] = np.divide(
            hist["norm"].to_numpy(), predicted, out=np.full(len(hist), np.nan), where=predicted > 0
        )
        frames.append(hist)
    return pd.concat(frames, ignore_index=True)


def cached_autograd_check(tokens: np.ndarray, stats: Any, vocab_size: int, cfg: CheckConfig) -> pd.DataFrame:
    """:func:`autograd_check` through the disk cache (key: config, tokens, bases)."""
    tokens = np.ascontiguousarray(tokens, dtype=np.int64)
    basis = bases(stats)
    key = {
        "cfg": cfg,
        "vocab": vocab_size,
        "tokens": fingerprint(tokens),
        "bases": fingerprint(*(basis[k] for k in sorted(basis))),
    }
    return cached("leading_terms/check", key, lambda: autograd_check(tokens, stats, vocab_size, cfg))


@dataclass(frozen=True)
class CheckRunsConfig:
    """Chapter 2's two full-batch runs: the ``corpus``, how many of its first sequences they use
    (``n_sequences``), the small learning rates and steps of the step-by-step check, the larger
    ones of the validity sweep, and the layers. Chapter 3 reads the same cached sweep."""

    corpus: CorpusConfig
    n_sequences: int
    check_lrs: tuple[float, ...]
    check_steps: int
    sweep_lrs: tuple[float, ...]
    sweep_steps: int
    n_layers: int = 3

    def __post_init__(self) -> None:
        check_fields(
            self,
            n_sequences=POSITIVE,
            check_lrs=above(0),
            check_steps=at_least(4, "W and P are zero until step 3"),
            sweep_lrs=above(0),
            sweep_steps=at_least(0),
            n_layers=POSITIVE,
        )

    def check(self) -> CheckConfig:
        """The step-by-step check's :class:`CheckConfig`."""
        return CheckConfig(lrs=self.check_lrs, steps=self.check_steps, n_layers=self.n_layers)

    def sweep(self) -> CheckConfig:
        """The validity sweep's :class:`CheckConfig`."""
        return CheckConfig(lrs=self.sweep_lrs, steps=self.sweep_steps, n_layers=self.n_layers)


@dataclass(frozen=True)
class CheckRuns:
    """The first ``n_sequences`` sequences of the corpus, their statistics and both runs (frames of
    :func:`autograd_check`)."""

    tokens: np.ndarray
    vocab_size: int
    stats: Any
    check: pd.DataFrame
    sweep: pd.DataFrame


def check_runs(cfg: CheckRunsConfig) -> CheckRuns:
    """Load the corpus, take its first ``n_sequences`` sequences, and run (or read from the cache)
    the check and the sweep (chapter 2; chapter 3 reads the sweep)."""
    tokenizer, sequences = load_corpus(cfg.corpus)
    tokens = sequences.tokens[: cfg.n_sequences]
    stats = cached_corpus_stats(tokens, tokenizer.vocab_size)
    check = cached_autograd_check(tokens, stats, tokenizer.vocab_size, cfg.check())
    sweep = cached_autograd_check(tokens, stats, tokenizer.vocab_size, cfg.sweep())
    return CheckRuns(tokens, tokenizer.vocab_size, stats, check, sweep)


def compared(check: pd.DataFrame) -> pd.DataFrame:
    """The rows with a non-zero prediction (W and P vanish for s <= 2, V for s <= 1)."""
    return check[check["predicted_norm"] > 0]


def check_summary(check: pd.DataFrame) -> tuple[float, float]:
    r"""(lowest cosine, largest :math:`|\mathrm{ratio} - 1|`) at the smallest learning rate, over every
    matrix, layer and step with a non-zero prediction."""
    rows = compared(check)
    small = rows[rows["lr"] == rows["lr"].min()]
    return float(small["cosine"].min()), float((small["ratio"] - 1).abs().max())


def layer0(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of W_O and of layer 0 (the other layers coincide to leading order)."""
    return frame[frame["layer"].isna() | (frame["layer"] == 0)].copy()


def slopes(check: pd.DataFrame, s_last: int) -> pd.DataFrame:
    """Per kind (layer 0): the log-log slope of the norm in s over the second half of the runs (one
    fit over every learning rate's points, which share their steps), and in η at the last step."""
    data = layer0(compared(check))
    small = data[data["step"] >= s_last // 2]
    final = data[data["step"] == s_last]
    table = pd.DataFrame(
        {
            "slope in s (second half of the run)": {
                k: loglog_slope(g["step"], g["norm"]) for k, g in small.groupby("kind")
            },
            f"slope in η (at s = {s_last})": {k: loglog_slope(g["lr"], g["norm"]) for k, g in final.groupby("kind")},
        }
    )
    return table.loc[list(KINDS)]


def lowest_over_layers(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (lr, step, kind): the lowest cosine over the layers, with η·s and the loss there."""
    rows = frame.dropna(subset=["cosine"])
    return rows.groupby(["lr", "step", "kind"], as_index=False).agg(
        eta_s=("eta_s", "first"), loss=("loss", "first"), cosine=("cosine", "min")
    )


@dataclass(frozen=True)
class Departure:
    """Where the leading terms first stop holding in a sweep: at learning rate ``lr``, step
    ``step`` (η·s = ``eta_s``) the matrices of ``kinds`` (lowest cosine over the layers) are first
    below ``threshold``; the loss there is ``loss`` nats."""

    lr: float
    step: int
    eta_s: float
    kinds: tuple[str, ...]
    loss: float
    threshold: float


def departures(sweep: pd.DataFrame, threshold: float = 0.99) -> list[Departure]:
    """Per learning rate of the sweep, the first logged step at which some kind of matrix (lowest
    cosine over the layers) is below ``threshold``, and which kinds are; rates that never fall
    below are left out. Chapter 2 reads them (which matrix leaves first, and at what η·s)."""
    low = lowest_over_layers(sweep)
    out = []
    for lr, g in low.groupby("lr"):
        below = g[g["cosine"] < threshold]
        if below.empty:
            continue
        step = int(below["step"].min())
        at = below[below["step"] == step]
        kinds = tuple(k for k in KINDS if k in set(at["kind"]))
        out.append(Departure(float(lr), step, float(at["eta_s"].iloc[0]), kinds, float(at["loss"].iloc[0]), threshold))
    return out


def departure_steps(sweep: pd.DataFrame, threshold: float = 0.99) -> pd.DataFrame:
    """Per learning rate of the sweep (rows) and kind of matrix (columns, in :data:`KINDS` order), the
    first logged step at which that kind (lowest cosine over the layers) is below ``threshold``;
    NaN where it never is. Chapter 2 reads the order in which the terms leave from it."""
    low = lowest_over_layers(sweep)
    below = low[low["cosine"] < threshold]
    first = below.groupby(["lr", "kind"])["step"].min().unstack("kind")
    return first.reindex(index=sorted(low["lr"].unique()), columns=list(KINDS)).astype(float)


def first_departure(sweep: pd.DataFrame, threshold: float = 0.99) -> Departure | None:
    """The departure of :func:`departures` at the smallest η·s (ties: the smaller learning rate);
    None when no matrix falls below ``threshold``."""
    found = departures(sweep, threshold)
    return min(found, key=lambda d: (d.eta_s, d.lr)) if found else None


def cosines_at(sweep: pd.DataFrame, eta_s: float) -> pd.DataFrame:
    """For each learning rate of the sweep whose run reaches ``eta_s`` (to within half a step): the
    lowest cosine over the layers of each kind and the loss at the logged step nearest ``eta_s``.
    Columns lr, step, eta_s, kind, cosine, loss (chapter 3 cites chapter 2's curves with it)."""
    low = lowest_over_layers(sweep)
    rows = []
    for lr, g in low.groupby("lr"):
        if g["eta_s"].max() < eta_s - lr / 2:
            continue
        step = int(g.loc[(g["eta_s"] - eta_s).abs().idxmin(), "step"])
        rows.append(g[g["step"] == step])
    columns = ["lr", "step", "kind", "eta_s", "loss", "cosine"]
    return pd.concat(rows, ignore_index=True)[columns] if rows else pd.DataFrame(columns=columns)


LEARNED_NATS = 0.1
"""A model has learned when its loss has fallen at least this far below log |V| (the zero model's
loss), in nats: the one rule by which chapters 2 and 3 label a cosine near 1 on a model that has
barely moved."""


def loss_drop(loss: float, vocab_size: int) -> float:
    """How far ``loss`` has fallen below log |V|, the loss of the all-zero model (nats)."""
    return float(np.log(vocab_size) - loss)


def has_learned(drop: float) -> bool:
    """Whether a loss ``drop`` below log |V| counts as having learned (:data:`LEARNED_NATS`)."""
    return drop >= LEARNED_NATS


TRAINED_NATS = 0.5
"""A run is trained enough to decide the paper's claims about what training made of the matrices
(chapters 3-5) when its loss has fallen at least this far below log |V| (nats): five times
:data:`LEARNED_NATS`, and about a quarter of what the paper's larger-rate run falls in the cpu
profile (2.22 nats at lr 0.05). A run below it (the paper's lr 0.005 for its 100 epochs: 0.075 nats
in the cpu profile) still has its leading terms as its weights, so a claim read on it restates
chapter 3's cosines."""


def run_drops(runs: Any) -> dict[float, float]:
    """{lr: how far the run's last logged batch loss fell below log |V|} of chapter 3's runs
    (:class:`mechbook.leading_terms.train.Runs`), which chapters 4 and 5 read."""
    out = {}
    for lr, result in runs.results.items():
        hist = result.history
        last = float(hist.loc[hist["step"] == hist["step"].max(), "loss"].iloc[0])
        out[lr] = loss_drop(last, result.model_cfg.d_vocab)
    return out


def is_trained(drop: float) -> bool:
    """Whether a loss ``drop`` below log |V| is :data:`TRAINED_NATS` or more."""
    return drop >= TRAINED_NATS


def decisive_run(drops: Mapping[float, float]) -> float | None:
    """Of runs keyed by learning rate with their loss ``drops`` below log |V|, the one chapters 4
    and 5 decide their claims on: the run that fell furthest, if it is trained
    (:func:`is_trained`); None when none is."""
    best = max(drops, key=drops.get, default=None)
    return best if best is not None and is_trained(drops[best]) else None


def run_label(lr: float, drop: float) -> str:
    """The run a claim was decided on, in words: ``"the η = 0.1 run (its loss fell 2.00 nats)"``."""
    return f"the η = {lr:g} run (its loss fell {drop:.2f} nats below log |V|)"
