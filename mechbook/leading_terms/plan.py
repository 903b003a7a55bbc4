"""What a Part I training run will cost, computed before it starts (chapter 3; the ``paper``
profile checks it before any training).

A run of ``epochs`` epochs over N kept sequences at batch size b takes
``steps = floor(epochs * N / b)`` SGD steps and reaches eta*s = lr * steps. Its memory is at least
the float weights, their gradients (plain SGD keeps no other state) and the tensors autograd keeps
for the backward pass; the last are measured with ``torch.autograd.graph.saved_tensors_hooks`` on
forward passes of two and three sequences and extrapolated linearly in the batch.

Its arithmetic is :func:`step_flops`: the floating-point operations of one step in the model's
dense formulation (one-hot matrix products), an upper bound on what the fast path does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from mechbook.leading_terms.model import AttentionModel, ModelConfig


def steps_for_epochs(epochs: float, n_sequences: int, batch_size: int) -> int:
    """SGD steps in ``epochs`` epochs of ``n_sequences`` at ``batch_size``: floor(epochs N / b)."""
    if n_sequences < 1 or batch_size < 1 or epochs <= 0:
        raise ValueError(
            f"need n_sequences >= 1, batch_size >= 1 and epochs > 0, got {n_sequences}, {batch_size}, {epochs}"
        )
    return math.floor(epochs * n_sequences / batch_size)


def cannot_fill_batch(n_sequences: int, batch_size: int) -> str:
    """The error message for a corpus of ``n_sequences`` that cannot fill a batch of ``batch_size``."""
    return (
        f"the corpus keeps {n_sequences:,} sequences, fewer than one batch of {batch_size:,}: give more text "
        "(set MECHBOOK_TINYSTORIES to the full TinyStories train file, or let the book download it), or lower batch_size"
    )


def step_flops(cfg: ModelConfig, batch_size: int) -> int:
    """Floating-point operations of one SGD step on ``batch_size`` sequences in the dense
    formulation: per sequence and layer, h W and (h W) V-wide products of 2 T |V|^2 each, the
    scores and the mixing of 2 T^2 |V| each, and the logits' 2 T |V|^2; the backward pass twice the
    forward's. The fast path gathers where layer 0 multiplies, so this is an upper bound."""
    t, v = cfg.n_ctx, cfg.d_vocab
    forward = cfg.n_layers * (4 * t * v * v + 4 * t * t * v) + 2 * t * v * v
    return 3 * forward * batch_size


def parameter_count(cfg: ModelConfig) -> int:
    """Trainable numbers of the model (:attr:`~mechbook.leading_terms.model.ModelConfig.n_parameters`)."""
    return cfg.n_parameters


def training_bytes(cfg: ModelConfig, batch_size: int) -> int:
    """An upper estimate of the memory a training step holds at once, in bytes: the weights and
    their gradients, and per sequence position the |V|-wide residuals, products and their
    gradients of every layer and of the logits, and every layer's (T x T) scores, pattern and
    their gradient."""
    itemsize = cfg.torch_dtype.itemsize
    per_position = cfg.d_vocab * (4 * cfg.n_layers + 3) + 3 * cfg.n_layers * cfg.n_ctx
    return itemsize * (2 * cfg.n_parameters + batch_size * cfg.n_ctx * per_position)


def measure_saved_bytes(cfg: ModelConfig, batch_size: int) -> int:
    """Bytes of the non-parameter tensors autograd keeps for the backward pass of the training loss
    on ``batch_size`` random sequences (each storage counted once), measured on the CPU with
    ``torch.autograd.graph.saved_tensors_hooks``."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    model = AttentionModel(cfg, device="cpu")
    own = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in own:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    tokens = torch.randint(0, cfg.d_vocab, (batch_size, cfg.n_ctx + 1), generator=torch.Generator().manual_seed(0))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model.loss(tokens)
    return sum(seen.values())


def saved_activation_bytes(cfg: ModelConfig, batch_size: int) -> int:
    """:func:`measure_saved_bytes` at ``batch_size``, extrapolated linearly from the two smallest
    batches of at least two sequences that take the model's fast path (at least |V| token
    positions; from there on every saved tensor is batch-independent or has the batch as its first
    dimension), so a plan at batch 2048 never runs a batch of 2048. A batch below those is measured
    directly: it is small, and it takes the dense path (:class:`~mechbook.leading_terms.model.AttentionModel`)."""
    first = max(2, -(-cfg.d_vocab // cfg.n_ctx))
    if batch_size <= first + 1:
        return measure_saved_bytes(cfg, batch_size)
    low, high = measure_saved_bytes(cfg, first), measure_saved_bytes(cfg, first + 1)
    return low + (batch_size - first) * (high - low)


@dataclass(frozen=True)
class TrainingPlan:
    """A run's size before it starts: kept sequences, batch, epochs, steps, lr, and its memory."""

    n_sequences: int
    batch_size: int
    epochs: float
    steps: int
    lr: float
    n_parameters: int
    parameter_bytes: int
    activation_bytes: int
    flops_per_step: int
    from_epochs: bool = True

    @property
    def eta_s(self) -> float:
        """eta * s at the end of the run."""
        return self.lr * self.steps

    @property
    def flops(self) -> int:
        """Floating-point operations of the whole run (:func:`step_flops` times the steps)."""
        return self.flops_per_step * self.steps

    @property
    def fits(self) -> bool:
        """True when the sequences fill at least one batch."""
        return self.n_sequences >= self.batch_size

    @property
    def memory_bytes(self) -> int:
        """Weights + gradients + the tensors saved for the backward pass (a lower bound on the peak)."""
        return 2 * self.parameter_bytes + self.activation_bytes

    def require_fits(self) -> None:
        """Raise before any training when the data cannot fill one batch."""
        if not self.fits:
            raise ValueError(cannot_fill_batch(self.n_sequences, self.batch_size))

    def markdown(self) -> str:
        """One sentence a chapter shows before training."""
        if self.from_epochs:
            length = (
                f"{self.epochs:.3g} epochs at batch {self.batch_size:,} are "
                f"⌊{self.epochs:.3g} × {self.n_sequences:,} / {self.batch_size:,}⌋ = **{self.steps:,} steps**"
            )
        else:
            length = f"**{self.steps:,} steps** at batch {self.batch_size:,} ({self.epochs:.3g} epochs)"
        return (
            f"{self.n_sequences:,} kept sequences; {length}, so η·s = "
            f"{self.lr:g} × {self.steps:,} = **{self.eta_s:.3g}**. Memory: {self.n_parameters:,} parameters "
            f"({readable_bytes(self.parameter_bytes)}, as much again for their gradients) and "
            f"{readable_bytes(self.activation_bytes)} kept for the backward pass, "
            f"**{readable_bytes(self.memory_bytes)}** in all. Arithmetic: {self.flops_per_step:.3g} "
            f"floating-point operations a step, {self.flops:.3g} in all (the dense count, an upper bound)."
            + ("" if self.fits else " **The data cannot fill one batch.**")
        )


def readable_bytes(n: int) -> str:
    """``n`` bytes in MiB below 1 GiB, else in GiB (two decimals)."""
    return f"{n / 2**20:.2f} MiB" if n < 2**30 else f"{n / 2**30:.2f} GiB"


def plan_training(
    n_sequences: int,
    model_cfg: ModelConfig,
    batch_size: int | None,
    lr: float,
    epochs: float | None = None,
    steps: int | None = None,
) -> TrainingPlan:
    """The :class:`TrainingPlan` of a run given either its ``epochs`` or its ``steps`` (not both).

    ``batch_size`` None is the full batch. With ``steps``, ``epochs = steps * batch_size / n_sequences``.
    """
    if (epochs is None) == (steps is None):
        raise ValueError("give exactly one of epochs and steps")
    batch = batch_size or n_sequences
    steps_given = steps
    if steps is None:
        steps = steps_for_epochs(epochs, n_sequences, batch)
    else:
        epochs = steps * batch / n_sequences
    itemsize = torch.empty((), dtype=model_cfg.torch_dtype).element_size()
    n_params = parameter_count(model_cfg)
    return TrainingPlan(
        n_sequences=n_sequences,
        batch_size=batch,
        epochs=float(epochs),
        steps=int(steps),
        lr=lr,
        n_parameters=n_params,
        parameter_bytes=n_params * itemsize,
        activation_bytes=saved_activation_bytes(model_cfg, batch),
        flops_per_step=step_flops(model_cfg, batch),
        from_epochs=steps_given is None,
    )
