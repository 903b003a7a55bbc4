"""Progress measures over training (chapter 8): how far each part of the circuit has formed at
every kept checkpoint. They reuse chapter 9's circuit readings (:mod:`mechbook.assign_add.circuits`)
so the two chapters measure the same things:

- ``adder``: the paper's measure, share of all N^2 pairs for which the adder alone is right,
  ``argmax MLP_2(h) W_U = (n + m) mod N`` with ``h = OV_2 e_n + OV_2 e_m`` (token embeddings
  only, no position embedding; the MLP's output alone, without the residual ``h``; MLP_2 has no
  biases, so the overall scale of ``h``, i.e. how the attention splits its weight, does not
  matter); ``adder_with_residual``: the book's variant ``argmax (h + MLP_2(h)) W_U``, which adds
  the direct path ``h W_U``;
- ``prev_token``: mean layer-1 attention from each context value to its variable (the token before);
- ``qk_identity``: share of rows of the 12 x 12 block ``(E_var OV_1) QK_2 (E_var OV_1)^T`` whose
  maximum is on the diagonal (layer 2 looks a variable up by its identity);
- ``l1_operands_top2``: share of sequences whose two most-attended layer-1 keys from '=' are the
  operand positions 13 and 14 (``l1_operands_mass``: the attention on them);
- ``l2_needed_top2``: share of sequences whose two most-attended layer-2 keys from '=' are where
  the needed numbers sit (the value positions of the operand variables, or 13/14 for constants;
  ``l2_needed_mass``: the attention on them).

Attention measures are taken on a fixed batch drawn from the training distribution.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from mechbook.assign_add import circuits
from mechbook.assign_add.config import TrainResult, load_model
from mechbook.assign_add.task import Task
from mechbook.cache import cached
from mechbook.progress import progress
from mechbook.validation import POSITIVE, SEED, check_fields

MEASURES: dict[str, str] = {
    "adder": "adder alone right (all pairs)",
    "prev_token": "layer 1: value -> its variable",
    "qk_identity": "layer 2 QK: variable rows with diagonal max",
    "l1_operands_top2": "layer 1: '=' top-2 keys are 13, 14",
    "l2_needed_top2": "layer 2: '=' top-2 keys are the needed numbers",
}
"""The headline measures and their chart labels (``adder_with_residual`` and the ``*_mass``
companions are also computed)."""


@dataclass(frozen=True)
class MeasureConfig:
    """Sequences (from the training distribution) for the attention measures, and their seed."""

    n_sequences: int = 512
    seed: int = 3

    def __post_init__(self) -> None:
        check_fields(self, n_sequences=POSITIVE, seed=SEED)


def top2_hits(rows: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(B,) bool: whether the two largest entries of each attention row (B, P) sit exactly at the
    two positions in ``targets`` (B, 2)."""
    top = np.argsort(-rows, axis=1, kind="stable")[:, :2]
    return (np.sort(top, axis=1) == np.sort(targets, axis=1)).all(axis=1)


def checkpoint_measures(model: torch.nn.Module, task: Task, tokens: np.ndarray) -> dict[str, float]:
    """All progress measures of one model (see the module docstring) on ``tokens`` (B, 16)."""
    cfg = task.cfg
    pat = circuits.attention_patterns(model, torch.as_tensor(tokens)).numpy()
    operands = np.tile([cfg.context_len + 1, cfg.context_len + 2], (len(tokens), 1))
    needed = circuits.needed_positions(tokens, cfg)
    roles = circuits.role_attention(model, tokens, cfg)
    block = circuits.variable_qk_block(model, cfg)
    return {
        "adder": circuits.adder_alone_accuracy(model, cfg.modulus),
        "adder_with_residual": circuits.adder_with_residual_accuracy(model, cfg.modulus),
        "prev_token": roles["value_to_variable"],
        "qk_identity": circuits.block_diagonality(block)["rows_diag_max"],
        "l1_operands_top2": float(top2_hits(pat[0, :, -1], operands).mean()),
        "l1_operands_mass": roles["eq_to_operands"],
        "l2_needed_top2": float(top2_hits(pat[1, :, -1], needed).mean()),
        "l2_needed_mass": roles["eq_to_needed"],
    }


def measures_over_training(result: TrainResult, cfg: MeasureConfig = MeasureConfig()) -> pd.DataFrame:
    """Tidy ``(step, measure, value)`` for every kept checkpoint of ``result`` (cached; the key
    holds the run's config and final weights and the measure config)."""

    def compute() -> pd.DataFrame:
        task = Task(result.config.task)
        tokens, _ = task.sample(cfg.n_sequences, np.random.default_rng([cfg.seed, 5]))
        rows = []
        for step in progress(sorted(result.checkpoints), desc="progress measures"):
            model = load_model(result, step)
            rows += [
                {"step": step, "measure": k, "value": v} for k, v in checkpoint_measures(model, task, tokens).items()
            ]
        return pd.DataFrame(rows)

    key = {
        "train": result.config,
        "steps": sorted(result.checkpoints),
        "final": result.final_state,
        "measures": cfg,
    }
    return cached("assign_add/measures", key, compute)
