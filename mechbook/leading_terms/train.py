"""Plain SGD from zero for the attention-only model, logging each matrix against its leading term
(chapter 3 trains with it; chapter 2's autograd check runs it full-batch in float64).

Loss: mean cross-entropy over every (sequence, position). Optimiser: ``torch.optim.SGD`` with no
momentum, weight decay or schedule. Mini-batches come from a seeded ``torch.Generator`` (a fresh
permutation each epoch), so a run is deterministic for its seed on the CPU. At every logged step the
history holds the loss of the batch at the current weights and, for every matrix M, its norm
||M||_F and cos(M, leading basis) in float64: W_O ~ B, V^(l) ~ (B Phi)^T, W^(l) ~ Q, P^(l) ~ P,
with the bases of the whole training set (``cosine``) and of the run's first batch
(``cosine_first``, the paper's choice, section 5.1).

Entry points: :func:`load_or_train` (one :class:`RunConfig`: corpus, lr, batch, steps or epochs;
cached) and :func:`chapter_runs` (one corpus, several learning rates; chapters 3-5 share them).
A run given in epochs takes floor(epochs N / batch) steps on its N kept sequences, and a corpus
that cannot fill one batch raises before any training (:mod:`.plan` computes the rest of a run's
cost).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from mechbook.cache import cached, fingerprint
from mechbook.determinism import deterministic, subnormals_flushed
from mechbook.device import default_device
from mechbook.leading_terms import leading
from mechbook.leading_terms.corpus import CorpusConfig, load_corpus
from mechbook.leading_terms.model import AttentionModel, ModelConfig, parameter_names
from mechbook.leading_terms.plan import cannot_fill_batch, steps_for_epochs, training_bytes
from mechbook.leading_terms.stats import CorpusStats, cached_corpus_stats, corpus_stats
from mechbook.leading_terms.tokenize import SequenceSet, Tokenizer
from mechbook.progress import progress
from mechbook.validation import POSITIVE, SEED, above, at_least, check_allocatable, check_fields


@dataclass(frozen=True)
class TrainConfig:
    """SGD run: learning rate, number of steps, batch size (None: full batch), seed, log interval;
    ``keep``: steps whose weights the result keeps besides the last; ``stop_on_divergence``: end
    the run (keeping its history) instead of raising when the loss stops being finite;
    ``init_std``: the standard deviation of the i.i.d. Gaussian every parameter starts from, drawn
    from a generator seeded with ``seed`` (0, the default: the exact zero of the book's runs and of
    Theorem D.10; :func:`mechbook.leading_terms.theorem.gaussian_std` is Theorem D.13's)."""

    lr: float
    steps: int
    batch_size: int | None = None
    seed: int = 0
    log_every: int = 1
    stop_on_divergence: bool = False
    keep: tuple[int, ...] = ()
    init_std: float = 0.0

    def __post_init__(self) -> None:
        check_fields(
            self,
            lr=above(0),
            init_std=at_least(0.0),
            steps=at_least(0),
            batch_size=at_least(1, "or None for the full batch"),
            seed=SEED,
            log_every=POSITIVE,
        )
        if any(not 0 <= k <= self.steps for k in self.keep):
            raise ValueError(f"TrainConfig.keep must list steps in [0, {self.steps}], got {self.keep}")


@dataclass
class TrainResult:
    """What a run leaves: the history (one row per logged step and matrix), the final weights and
    the weights at the steps of ``train_cfg.keep``."""

    history: pd.DataFrame
    state: dict[str, torch.Tensor]
    model_cfg: ModelConfig
    train_cfg: TrainConfig
    checkpoints: dict[int, dict[str, torch.Tensor]] = field(default_factory=dict)

    def model(self, step: int | None = None, device: str | None = None) -> AttentionModel:
        """A fresh :class:`AttentionModel` holding the weights after ``step`` steps (None: the last)."""
        if step is None or step == self.train_cfg.steps:
            state = self.state
        elif step in self.checkpoints:
            state = self.checkpoints[step]
        else:
            raise KeyError(
                f"step {step} was not kept; kept: {sorted(self.checkpoints)} and the last, {self.train_cfg.steps}"
            )
        return AttentionModel(self.model_cfg, device=device).load_checkpoint(state)


def batch_indices(n_sequences: int, cfg: TrainConfig) -> Iterator[torch.Tensor | None]:
    """Yield, without end, the sequence indices of each step's batch (None for full batch).

    Each epoch is a fresh permutation drawn from a ``torch.Generator`` seeded with ``cfg.seed``; a
    last partial batch is dropped so every step sees ``batch_size`` sequences.
    """
    if cfg.batch_size is not None and cfg.batch_size > n_sequences:
        raise ValueError(
            f"batch_size {cfg.batch_size} exceeds the {n_sequences} sequences; lower it or use None (full batch)"
        )
    if cfg.batch_size is None or cfg.batch_size == n_sequences:
        while True:
            yield None
    gen = torch.Generator().manual_seed(cfg.seed)
    while True:
        order = torch.randperm(n_sequences, generator=gen)
        for b in range(n_sequences // cfg.batch_size):
            yield order[b * cfg.batch_size : (b + 1) * cfg.batch_size]


def snapshot(
    model: AttentionModel, bases: dict[str, np.ndarray], first: dict[str, np.ndarray] | None = None
) -> list[dict[str, Any]]:
    """Rows (matrix, kind, layer, norm, cosine with its leading basis of the whole training set,
    ``cosine_first`` with that of the first batch, ``first``; None: the whole set is the batch)
    for the model's weights."""
    rows = []
    for name in parameter_names(model.cfg):
        kind, layer = leading.kind_of(name)
        weight = model.get_parameter(name).detach().cpu().double().numpy()
        whole = leading.cosine(weight, bases[kind])
        rows.append(
            {
                "matrix": name,
                "kind": kind,
                "layer": layer,
                "norm": float(np.linalg.norm(weight)),
                "cosine": whole,
                "cosine_first": whole if first is None else leading.cosine(weight, first[kind]),
            }
        )
    return rows


def first_batch_bases(tokens: np.ndarray, vocab_size: int, cfg: TrainConfig) -> dict[str, np.ndarray] | None:
    """The leading-term bases of the first batch a run of ``cfg`` draws from ``tokens`` (N, T+1),
    the batch the paper computes its leading terms from (section 5.1); None for a full-batch run,
    whose first batch is the whole set."""
    first = next(batch_indices(tokens.shape[0], cfg))
    if first is None:
        return None
    return leading.bases(corpus_stats(np.asarray(tokens)[first.numpy()], vocab_size))


def train(
    tokens: np.ndarray | torch.Tensor,
    stats: Any,
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    device: str | None = None,
) -> TrainResult:
    """Train from zero (or from ``train_cfg.init_std``'s Gaussian) with plain SGD on ``tokens``
    (N, T+1) and log against ``stats``' leading terms.

    ``stats`` is the corpus's CorpusStats (attributes B, BPhi_T, Q, P as float64 arrays). Logged
    steps: 0, every ``log_every``-th, and the last.
    """
    tokens = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
    if tokens.ndim != 2 or tokens.shape[1] != model_cfg.n_ctx + 1:
        raise ValueError(f"tokens must have shape (N, n_ctx+1) = (N, {model_cfg.n_ctx + 1}), got {tuple(tokens.shape)}")
    bases = leading.bases(stats)
    if bases["W_O"].shape != (model_cfg.d_vocab, model_cfg.d_vocab) or bases["P"].shape != (model_cfg.n_ctx,):
        raise ValueError("stats do not match the model config: compute them from the same tokens and vocabulary")
    check_allocatable(
        train_cfg,
        training_bytes(model_cfg, train_cfg.batch_size or tokens.shape[0]),
        f"a step at |V| {model_cfg.d_vocab:,} and T {model_cfg.n_ctx} (weights, gradients, one batch's activations)",
        "lower batch_size, or the vocabulary or context of the model",
    )
    first = first_batch_bases(tokens.numpy(), model_cfg.d_vocab, train_cfg)
    torch.manual_seed(train_cfg.seed)
    net = AttentionModel(model_cfg, device=device)
    if train_cfg.init_std > 0:
        gaussian_start(net, train_cfg.init_std, train_cfg.seed)
    tokens = tokens.to(net.W_O.device)
    opt = torch.optim.SGD(net.parameters(), lr=train_cfg.lr, momentum=0.0, weight_decay=0.0)
    rows: list[dict[str, Any]] = []
    kept: dict[int, dict[str, torch.Tensor]] = {}
    batches = batch_indices(tokens.shape[0], train_cfg)
    with deterministic(), subnormals_flushed():
        for step in progress(range(train_cfg.steps + 1), desc=f"SGD lr={train_cfg.lr}"):
            idx = next(batches)
            loss = net.loss(tokens if idx is None else tokens[idx.to(tokens.device)])
            if not torch.isfinite(loss):
                if train_cfg.stop_on_divergence:
                    break
                raise FloatingPointError(
                    f"SGD diverged: the loss is {loss.item()} at step {step} with lr {train_cfg.lr}; lower the learning rate"
                )
            if step % train_cfg.log_every == 0 or step == train_cfg.steps:
                rows.extend({"step": step, "loss": loss.item(), **row} for row in snapshot(net, bases, first))
            if step in train_cfg.keep and step < train_cfg.steps:
                kept[step] = _detached(net)
            if step < train_cfg.steps:
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
    history = pd.DataFrame(rows)
    history["lr"] = train_cfg.lr
    history["eta_s"] = train_cfg.lr * history["step"]
    return TrainResult(
        history=history, state=_detached(net), model_cfg=model_cfg, train_cfg=train_cfg, checkpoints=kept
    )


def gaussian_start(net: AttentionModel, std: float, seed: int) -> None:
    """Set every parameter of ``net`` to i.i.d. N(0, std²), drawn in float64 on the CPU from a
    generator seeded with ``seed`` in :func:`~mechbook.leading_terms.model.parameter_names` order
    (the same start on every device and dtype)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name in parameter_names(net.cfg):
            p = net.get_parameter(name)
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * std)


def _detached(net: AttentionModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in net.state_dict().items()}


def cached_train(
    tokens: np.ndarray, stats: Any, model_cfg: ModelConfig, train_cfg: TrainConfig, refresh: bool = False
) -> TrainResult:
    """:func:`train`, cached on disk (chapters 3-5 call it with the same config and share the run).

    Key: both configs, the fingerprint of the tokens and of the leading-term bases, and the device
    (a GPU run rounds differently).
    """
    tokens = np.ascontiguousarray(tokens, dtype=np.int64)
    bases = leading.bases(stats)
    key = {
        "model": model_cfg,
        "train": train_cfg,
        "tokens": fingerprint(tokens),
        "bases": fingerprint(*(bases[k] for k in sorted(bases))),
        "device": default_device(),
    }
    payload = cached(
        "leading_terms/train",
        key,
        lambda: vars(train(tokens, stats, model_cfg, train_cfg)),
        refresh=refresh,
    )
    return TrainResult(**payload)


@dataclass
class Corpus:
    """A fitted tokenizer, its training sequences and their statistics (computed on all of them)."""

    tokenizer: Tokenizer
    sequences: SequenceSet
    stats: CorpusStats

    def model_cfg(self, n_layers: int) -> ModelConfig:
        """The model that reads this corpus: d_vocab = |V|, n_ctx = T."""
        return ModelConfig(d_vocab=self.tokenizer.vocab_size, n_ctx=self.sequences.context, n_layers=n_layers)


def load_training_corpus(cfg: CorpusConfig) -> Corpus:
    """:func:`load_corpus` and the statistics of all its sequences, both cached."""
    tokenizer, sequences = load_corpus(cfg)
    return Corpus(tokenizer, sequences, cached_corpus_stats(sequences.tokens, tokenizer.vocab_size))


def resolve_steps(steps: int | None, epochs: float | None, n_sequences: int, batch_size: int | None) -> int:
    """``steps`` when given, else the steps of ``epochs`` epochs: floor(epochs N / batch), with a
    clear error when the N sequences cannot fill one batch."""
    if batch_size is not None and batch_size > n_sequences:
        raise ValueError(cannot_fill_batch(n_sequences, batch_size))
    if steps is not None:
        return steps
    return steps_for_epochs(epochs, n_sequences, batch_size or n_sequences)


#: The bounds of :class:`RunConfig`'s and :class:`RunsConfig`'s fields (``lr`` is each of ``lrs``).
RUN_BOUNDS = {
    "batch_size": at_least(1, "or None for the full batch"),
    "log_every": POSITIVE,
    "steps": at_least(0, "or None to give epochs"),
    "epochs": above(0, "or None to give steps"),
    "n_layers": POSITIVE,
    "seed": SEED,
}


@dataclass(frozen=True)
class RunConfig:
    """One run of chapters 3-5: its corpus, layers and SGD settings. Give ``steps`` or ``epochs``
    (then steps = floor(epochs N / batch) once the corpus is known)."""

    corpus: CorpusConfig
    lr: float
    batch_size: int | None
    log_every: int
    steps: int | None = None
    epochs: float | None = None
    n_layers: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(self, lr=above(0), **RUN_BOUNDS)
        if (self.steps is None) == (self.epochs is None):
            raise ValueError(
                f"RunConfig needs exactly one of steps and epochs, got steps={self.steps}, epochs={self.epochs}"
            )

    def train_cfg(self, n_sequences: int) -> TrainConfig:
        """The :class:`TrainConfig` of this run on ``n_sequences`` sequences."""
        steps = resolve_steps(self.steps, self.epochs, n_sequences, self.batch_size)
        return TrainConfig(
            lr=self.lr, steps=steps, batch_size=self.batch_size, seed=self.seed, log_every=self.log_every
        )


def load_or_train(cfg: RunConfig, refresh: bool = False) -> TrainResult:
    """The cached :class:`TrainResult` of ``cfg``: loads the corpus, checks that it fills a batch,
    and trains when the run is not in the cache."""
    corpus = load_training_corpus(cfg.corpus)
    train_cfg = cfg.train_cfg(corpus.sequences.n_kept)
    return cached_train(
        corpus.sequences.tokens, corpus.stats, corpus.model_cfg(cfg.n_layers), train_cfg, refresh=refresh
    )


@dataclass(frozen=True)
class RunsConfig:
    """The trained models chapters 3-5 share: one corpus, one :class:`RunConfig` per learning rate."""

    corpus: CorpusConfig
    lrs: tuple[float, ...]
    batch_size: int | None
    log_every: int
    steps: int | None = None
    epochs: float | None = None
    n_layers: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(self, lrs=above(0), **RUN_BOUNDS)

    def run(self, lr: float) -> RunConfig:
        """The run of learning rate ``lr``."""
        return RunConfig(
            self.corpus, lr, self.batch_size, self.log_every, self.steps, self.epochs, self.n_layers, self.seed
        )


@dataclass
class Runs:
    """A chapter's corpus (tokenizer, sequences, statistics) and one trained model per learning rate."""

    tokenizer: Tokenizer
    sequences: SequenceSet
    stats: CorpusStats
    results: dict[float, TrainResult]


def chapter_runs(cfg: RunsConfig) -> Runs:
    """The corpus of ``cfg`` and :func:`load_or_train` of each of its learning rates.

    Chapters 3, 4 and 5 call this with the same config, so they share one set of runs.
    """
    corpus = load_training_corpus(cfg.corpus)
    results = {lr: load_or_train(cfg.run(lr)) for lr in cfg.lrs}
    return Runs(corpus.tokenizer, corpus.sequences, corpus.stats, results)
