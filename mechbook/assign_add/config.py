"""What a Part II training run is and what it returns (chapters 8-11): :class:`TrainConfig`,
:class:`TrainResult`, which checkpoints a run keeps (:func:`keep_steps`), the training precision
(:func:`compute_dtype`), a model at a kept step (:func:`load_model`) and configs with fields
replaced (:func:`with_overrides`).

Data only: nothing here trains. The one training loop is :mod:`mechbook.assign_add.train`, which
imports this module and is imported by nothing here, so the imports run one way.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from mechbook.assign_add.model import AssignAddModel, ModelConfig
from mechbook.assign_add.task import TaskConfig
from mechbook.validation import POSITIVE, SEED, above, at_least, between, check_allocatable, check_fields, one_of

POOL_SHORT = {
    "0var_train": "0t",
    "0var_heldout": "0h",
    "1var_train": "1t",
    "1var_heldout": "1h",
    "1var_misplaced": "1m",
    "2var_train": "2t",
    "2var_heldout": "2h",
    "2var_misplaced_one": "2m1",
    "2var_misplaced_both": "2m2",
}


PRECISIONS = ("fp32", "bf16")
"""The training precisions: float32 throughout, or the authors' bf16 autocast (products in bf16,
float32 master weights, optimiser, softmax and loss)."""


@dataclass(frozen=True)
class TrainConfig:
    """One training run: AdamW on batches of ``batch_size`` training rows. The defaults are the
    paper's run (spec section 5: AdamW, lr 1e-3, betas (0.9, 0.999), weight decay 0.02, batch 512,
    no schedule, 40,000 steps, seed 42, evaluated every 100 steps); every field is part of the
    cache key of the run it configures."""

    steps: int = 40_000  # optimiser steps; the paper's run length
    batch_size: int = 512  # training rows per step, drawn with replacement; the paper's batch
    lr: float = 1e-3  # AdamW's learning rate, constant (the paper has no schedule)
    betas: tuple[float, float] = (0.9, 0.999)  # AdamW's moment decays; the paper's (torch's defaults)
    weight_decay: float = 0.02  # AdamW's decoupled weight decay; the paper's
    seed: int = 42  # seeds the data stream (which rows, distractors, layouts); the paper's seed
    eval_every: int = 100  # steps between evaluations of the nine pools; the paper evaluates every 100
    eval_per_pool: int = 512  # sequences per pool per evaluation; one batch's worth: a standard error of at most 0.022
    # seed of the evaluation pools: fixed and separate from ``seed``, so every evaluation of every
    # run scores the same sequences and a curve moves only when the model does
    eval_seed: int = 1
    keep_every: int = 500  # a float16 checkpoint is kept every this many steps (chapters 9-10 open them)
    # a checkpoint is also kept at each evaluation where some pool's accuracy moved by at least this
    # much since the previous evaluation or before the next: 0.05 is about twice an evaluation's
    # sampling noise at 512 sequences, so the kept steps resolve a phase transition to one
    # evaluation without keeping every checkpoint of a flat stretch
    keep_change: float = 0.05
    resume_every: int = 500  # steps between resumable saves; an interruption loses at most this many
    # "fp32", or "bf16": bf16 autocast with float32 master weights, the authors' precision (SOURCE.md
    # of the released run); fp32 by default because every cached run so far was trained in it and
    # bf16 needs a CPU with native bf16 (AMX or AVX512-BF16) or a GPU
    precision: str = "fp32"
    # torch.compile the forward and backward: a speed switch (its fused kernels may round otherwise
    # than eager's, so it is part of the key); off by default, because a compile takes one to three
    # minutes a process on a small CPU and the eager step is the one tests/integration/test_determinism.py
    # checks bit for bit
    compile: bool = False
    # stop at the first evaluation whose training cross-entropy (mean over the batches since the
    # previous evaluation, nats) is at most this: chapter 11's sweep points train until they fit
    # their training data, with ``steps`` as the cap; None (the paper's) trains all ``steps``
    stop_loss: float | None = None
    task: TaskConfig = field(default_factory=TaskConfig)  # the task and its split; the paper's by default
    model: ModelConfig = field(default_factory=ModelConfig)  # the model's sizes and init seed; the paper's by default

    def __post_init__(self) -> None:
        check_fields(
            self,
            steps=POSITIVE,
            batch_size=POSITIVE,
            lr=at_least(0.0, "AdamW's learning rate; the paper's is 1e-3; 0 trains nothing"),
            betas=between(0.0, 1.0, "AdamW's moment decays", high_open=True),
            weight_decay=at_least(0),
            seed=SEED,
            eval_every=POSITIVE,
            eval_per_pool=POSITIVE,
            eval_seed=SEED,
            keep_every=POSITIVE,
            keep_change=between(0.0, 1.0),
            resume_every=POSITIVE,
            precision=one_of(PRECISIONS),
            stop_loss=above(0.0, "a training loss in nats, e.g. 0.1; None trains every step"),
        )

        if self.resume_every % self.eval_every or self.keep_every % self.eval_every:
            raise ValueError(
                f"resume_every ({self.resume_every}) and keep_every ({self.keep_every}) must be multiples "
                f"of eval_every ({self.eval_every})"
            )
        t, m = self.task, self.model
        expected = {"d_vocab": t.d_vocab, "d_out": t.modulus, "n_ctx": t.seq_len}
        wrong = {k: (getattr(m, k), v) for k, v in expected.items() if getattr(m, k) != v}
        if wrong:
            fix = ", ".join(f"{k}={v[1]}" for k, v in wrong.items())
            raise ValueError(f"the model does not fit the task ({wrong} as model vs task): use ModelConfig({fix})")
        check_allocatable(
            self,
            training_bytes(self),
            "training (the weights, their gradients, AdamW's state, and one step's and one evaluation's activations)",
            "lower batch_size, eval_per_pool or the model's sizes",
        )


def training_bytes(cfg: TrainConfig) -> int:
    """An upper estimate of the memory a run of ``cfg`` holds at once, in bytes (float32): its
    parameters four times (weights, gradients, AdamW's two moments), and per sequence of the
    larger of a training batch (twice: activations and their gradients) and the evaluation's nine
    pools, the forward's (P x P) patterns and pair indices, its rows over the V + P rows of the
    tables, its d_model-wide residuals, its MLP and its logits."""
    m, p = cfg.model, cfg.model.n_ctx
    per_sequence = 4 * (4 * p * p + 8 * (m.d_vocab + p) + 6 * m.d_model + 2 * m.d_mlp + 2 * m.d_out) + 8 * p * p
    sequences = max(2 * cfg.batch_size, 9 * cfg.eval_per_pool)
    return 16 * m.n_parameters + per_sequence * sequences


@dataclass
class TrainResult:
    """A finished run: ``history`` has one row per (step, pool) with ``accuracy`` and ``loss``
    (pool ``"train"`` = mean over the training batches since the previous evaluation);
    ``checkpoints`` maps steps to float16 state dicts; ``final_state`` is float32."""

    history: pd.DataFrame
    checkpoints: dict[int, dict[str, torch.Tensor]]
    final_state: dict[str, torch.Tensor]
    config: TrainConfig
    train_seconds: float

    def accuracy(self) -> pd.DataFrame:
        """Accuracy as a (step x pool) table."""
        return self.history.pivot(index="step", columns="pool", values="accuracy")


def keep_steps(history: pd.DataFrame, cfg: TrainConfig) -> list[int]:
    """Steps whose checkpoints are kept: multiples of ``keep_every``, the last, and each eval step
    where some pool's accuracy moved by >= ``keep_change`` from the previous eval or to the next."""
    acc = history[history.pool != "train"].pivot(index="step", columns="pool", values="accuracy").sort_index()
    moved = acc.diff().abs().max(axis=1).fillna(0) >= cfg.keep_change
    dense = moved | moved.shift(-1, fill_value=False)
    steps = acc.index.to_numpy()
    keep = (steps % cfg.keep_every == 0) | (steps == steps.max()) | dense.to_numpy()
    return [int(s) for s in steps[keep]]


def native_bf16(device: str) -> bool:
    """Whether ``device`` multiplies bf16 natively: a GPU that supports it, or a CPU whose
    ``/proc/cpuinfo`` flags have AMX (``amx_bf16``) or AVX512-BF16 (``avx512_bf16``)."""
    if str(device).startswith("cuda"):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def compute_dtype(precision: str, device: str) -> torch.dtype:
    """The dtype of the products for ``precision`` on ``device``; bf16 is refused (one line, what
    to do) where the hardware has no native bf16, since emulated bf16 is slower than fp32."""
    if precision == "fp32":
        return torch.float32
    if not native_bf16(device):
        raise ValueError(
            f"precision='bf16' needs native bf16 (a CPU with AMX or AVX512-BF16, or a GPU), which {device} lacks: "
            "train with precision='fp32'"
        )
    return torch.bfloat16


def load_model(result: TrainResult, step: int | None = None, device: str = "cpu") -> AssignAddModel:
    """The model of ``result`` at checkpoint ``step`` (the final weights if None), in eval mode."""
    if step is None:
        state = result.final_state
    elif step in result.checkpoints:
        state = result.checkpoints[step]
    else:
        near = sorted(result.checkpoints, key=lambda s: abs(s - step))[:5]
        raise KeyError(f"no checkpoint at step {step}; the nearest kept steps are {sorted(near)}")
    model = AssignAddModel(result.config.model)
    model.load_state_dict(state)
    return model.to(device).eval()


def with_overrides(cfg: TrainConfig, **changes) -> TrainConfig:
    """``cfg`` with top-level fields replaced; ``task__x=...`` / ``model__x=...`` reach the nested
    configs (e.g. ``with_overrides(cfg, task__two_var_fraction=0.2)`` for chapter 11's sweeps)."""
    nested: dict[str, dict] = {"task": {}, "model": {}}
    top = {}
    for key, value in changes.items():
        head, _, tail = key.partition("__")
        if tail:
            if head not in nested:
                raise ValueError(f"unknown nested config {head!r} in {key!r}; use task__... or model__...")
            nested[head][tail] = value
        else:
            top[key] = value
    if nested["task"]:
        top["task"] = dataclasses.replace(cfg.task, **nested["task"])
    if nested["model"]:
        top["model"] = dataclasses.replace(cfg.model, **nested["model"])
    return dataclasses.replace(cfg, **top)
