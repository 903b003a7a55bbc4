"""The paper's TinyStories results (section 5.1, App. B) as numbers, and the same quantities read
from a run's history (chapters 3 and 5).

- :data:`TABLE1`, :data:`TABLE2`: the minimum cosine, over every epoch of the run and every layer,
  between each kind of learned matrix and its leading term (Table 1: lr 0.005, 100 epochs; Table
  2: the cased BPE, 10 epochs at lr 0.005), for attention (W), value (V) and output (W_O);
- :data:`FIGURE4`: the larger rate's (0.05) cosines after 30 and 100 epochs and its loss;
- :data:`TABLE3`: the loss of the lr-0.05 model with one matrix's leading component removed
  (:func:`table3_ablation` runs it on the book's model, :func:`table3_frame` sets the two side by
  side);
- :func:`epoch_minima`, :func:`cosines_at`: those quantities on a run, with the leading terms of
  the run's first batch (the paper's, ``cosine_first``) or of the whole training set (the
  book's, ``cosine``); :func:`first_batch_stats` gives that batch's statistics (Table 3's terms).

A run of the book keeps the paper's batch-to-data ratio, so an epoch is :func:`epoch_steps` steps
(32, as the paper's 65,536 samples at batch 2,048) and its history logs every epoch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechbook.leading_terms.ablation import EvalRuns, ablation_table
from mechbook.leading_terms.stats import CorpusStats, corpus_stats
from mechbook.leading_terms.train import TrainResult, batch_indices

TABLE_KINDS = {"attention": "W", "value": "V", "output": "W_O"}
"""The paper's names for the three kinds of matrix its tables list, and the book's."""

FIRST, WHOLE = "cosine_first", "cosine"
"""History columns: cosine with the first batch's leading terms (the paper's) and with the whole
training set's (the book's)."""

TERMS = {FIRST: "first batch (the paper's)", WHOLE: "whole training set (the book's)"}
"""What each history column's leading terms are computed on, in words."""

TABLE1 = {"W": 0.999496, "V": 0.999169, "W_O": 0.998486}
"""Table 1: minimum cosine over the first 100 epochs at lr 0.005, natural tokenizer."""

TABLE2 = {"W": 0.999914, "V": 0.998800, "W_O": 0.997891}
"""Table 2 (App. B): minimum cosine over 10 epochs at lr 0.005, cased BPE of 10,000 tokens."""

TABLE_EPOCHS = {"table1": 100, "table2": 10}
"""Epochs each table's minimum is taken over."""


@dataclass(frozen=True)
class Figure4:
    """Figure 4's statements on the lr-0.05 run: every weight's cosine at least ``floor_30`` after
    ``epochs_30`` epochs and above ``floor_100`` after ``epochs_100``, when the loss had fallen
    from ``loss_start`` (log 3000) to ``loss_end``."""

    epochs_30: int = 30
    floor_30: float = 0.9
    epochs_100: int = 100
    floor_100: float = 0.7
    loss_start: float = 8.00
    loss_end: float = 5.35

    @property
    def loss_ratio(self) -> float:
        """The paper's final loss as a share of the uniform loss log 3000 (5.35 / 8.006)."""
        return self.loss_end / math.log(3000)


FIGURE4 = Figure4()
"""The paper's Figure 4."""

TABLE3 = {
    "full model": 5.349,
    "blocks.0.attn.W": 5.350,
    "blocks.1.attn.W": 5.352,
    "blocks.2.attn.W": 5.361,
    "blocks.0.attn.V": 6.192,
    "blocks.1.attn.V": 6.526,
    "blocks.2.attn.V": 6.520,
    "W_O": 8.287,
}
"""Table 3 (App. B): the lr-0.05 model's loss, whole and with one matrix's leading component
removed (P is not ablated); the uniform loss is log 3000 = 8.006."""

TABLE3_UNIFORM = math.log(3000)
"""The uniform loss of the paper's vocabulary, which Table 3's output ablation passes."""


def first_batch_stats(tokens: np.ndarray, stats: CorpusStats, result: TrainResult) -> CorpusStats:
    """The statistics of the first batch ``result``'s run drew from ``tokens`` (its training
    sequences), the batch the paper computes its leading terms from; ``stats`` (the whole set's)
    for a full-batch run."""
    first = next(batch_indices(len(tokens), result.train_cfg))
    return stats if first is None else corpus_stats(np.asarray(tokens)[first.numpy()], result.model_cfg.d_vocab)


def epoch_steps(n_sequences: int, batch_size: int) -> int:
    """Steps in one epoch of ``n_sequences`` at ``batch_size`` (the last partial batch dropped)."""
    if batch_size < 1 or n_sequences < batch_size:
        raise ValueError(f"need 1 <= batch_size <= n_sequences, got batch {batch_size} of {n_sequences}")
    return n_sequences // batch_size


def _at_epochs(result: TrainResult, per_epoch: int, epochs: int) -> pd.DataFrame:
    """The history rows logged at the end of epochs 1..``epochs``."""
    h = result.history
    steps = h["step"]
    rows = h[(steps > 0) & (steps % per_epoch == 0) & (steps <= epochs * per_epoch)]
    if rows["step"].nunique() < epochs:
        raise ValueError(
            f"the run logs {rows['step'].nunique()} of the first {epochs} epochs' ends ({per_epoch} steps each): "
            "train it for that many epochs and log every epoch (log_every a divisor of the epoch)"
        )
    return rows


def epoch_minima(result: TrainResult, per_epoch: int, epochs: int, column: str = FIRST) -> dict[str, float]:
    """The paper's table entry per kind (W, V, W_O): the lowest cosine ``column`` over every layer
    and the end of every epoch 1..``epochs``."""
    rows = _at_epochs(result, per_epoch, epochs)
    return {kind: float(rows.loc[rows["kind"] == kind, column].min()) for kind in TABLE_KINDS.values()}


def cosines_at(result: TrainResult, step: int, column: str = FIRST) -> dict[str, float]:
    """The lowest cosine ``column`` over the layers of each kind (W_O, V, W, P) at ``step``."""
    rows = result.history[result.history["step"] == step]
    if rows.empty:
        raise ValueError(f"step {step} is not logged; logged steps run to {int(result.history['step'].max())}")
    return {str(kind): float(v) for kind, v in rows.groupby("kind")[column].min().items()}


def loss_at(result: TrainResult, step: int) -> float:
    """The batch loss logged at ``step``."""
    rows = result.history[result.history["step"] == step]
    if rows.empty:
        raise ValueError(f"step {step} is not logged")
    return float(rows["loss"].iloc[0])


def table_frame(result: TrainResult, per_epoch: int, epochs: int, paper: dict[str, float]) -> pd.DataFrame:
    """A paper's table beside the run's: one row per kind (attention, value, output), the paper's
    minimum and the run's with each set of leading terms."""
    first = epoch_minima(result, per_epoch, epochs, FIRST)
    whole = epoch_minima(result, per_epoch, epochs, WHOLE)
    return pd.DataFrame(
        [
            {
                "matrix": f"{name} ({kind})",
                "the paper": paper[kind],
                TERMS[FIRST]: first[kind],
                TERMS[WHOLE]: whole[kind],
            }
            for name, kind in TABLE_KINDS.items()
        ]
    )


def table3_frame(matrices: pd.DataFrame, uniform: float) -> pd.DataFrame:
    """Table 3 beside the book's: the loss of the full model and with each W, V and W_O leading
    component removed (the rows Table 3 has, from chapter 5's
    :func:`~mechbook.leading_terms.ablation.ablation_table` ``matrices``), then the uniform loss."""
    losses = matrices.set_index("ablation")["loss"]
    by_matrix = matrices.dropna(subset=["matrix"]).set_index("matrix")["loss"]
    rows = [
        {"ablation": "none (full model)", "the paper": TABLE3["full model"], "this run": float(losses["full model"])}
    ]
    rows += [
        {"ablation": f"remove the leading term of {name}", "the paper": paper, "this run": float(by_matrix[name])}
        for name, paper in TABLE3.items()
        if name != "full model"
    ]
    rows.append({"ablation": "uniform prediction (log |V|)", "the paper": TABLE3_UNIFORM, "this run": uniform})
    return pd.DataFrame(rows)


def table3_deltas(matrices: pd.DataFrame) -> dict[str, float]:
    """The loss increase of each of Table 3's removals (W and V of each layer, W_O) on this run."""
    rows = matrices.dropna(subset=["matrix"])
    rows = rows[rows["matrix"].isin([n for n in TABLE3 if n != "full model"])]
    return {str(m): float(d) for m, d in zip(rows["matrix"], rows["delta_loss"])}


def final_cosines(result: TrainResult, column: str = WHOLE) -> dict[str, float]:
    """:func:`cosines_at` the run's last step."""
    return cosines_at(result, result.train_cfg.steps, column)


def final_loss(result: TrainResult) -> float:
    """The batch loss at the run's last step (nats)."""
    return loss_at(result, result.train_cfg.steps)


def table3_ablation(coop: EvalRuns) -> pd.DataFrame:
    """Table 3's experiment on the larger-rate run of ``coop``: its loss on the evaluation
    sequences with each matrix's leading component removed, one at a time
    (:func:`~mechbook.leading_terms.ablation.ablation_table`), the leading terms those of the
    run's first batch, as the paper's."""
    lr = max(coop.models)
    result = coop.runs.results[lr]
    stats = first_batch_stats(coop.runs.sequences.tokens, coop.runs.stats, result)
    return ablation_table(result.state, coop.models[lr], stats, coop.evaluation)
