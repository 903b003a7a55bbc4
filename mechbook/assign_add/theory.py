"""Why the variable lookup composes: the gradient on the layer-2 query-key form (chapter 10).

Write layer-2 attention scores as a bilinear form of the residual stream after layer 1,
``s_qk = x_q^T M x_k`` with ``M = W_Q W_K^T / sqrt(d_head)``. At ``M = 0`` attention is uniform
over the allowed keys. The gradient of the loss with respect to ``M`` there is

    dL/dM = sum_b sum_k  (dL/ds_{b,k}) x_{b,q} x_{b,k}^T,
    dL/ds_{b,k} = a_k (g_b . v_{b,k} - sum_j a_j g_b . v_{b,j}),

with ``a`` the uniform pattern, ``v_k = x_k OV2`` what key ``k`` would write and ``g_b`` the
gradient of the loss at the layer-2 attention output: keys whose value helps the correct logit
get pulled towards the query. We compute it with autograd by replacing the layer-2 scores with
``x_q^T M x_k`` for a leaf tensor ``M`` (so it does not depend on how ``M`` is factored into
``W_Q`` and ``W_K``), and read its restriction to the variable subspace ``U = E_var OV1``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from mechbook.assign_add import circuits, release, scores
from mechbook.assign_add.circuits import variable_directions
from mechbook.assign_add.config import TrainResult, load_model
from mechbook.assign_add.phases import PhaseRules, detect_phases
from mechbook.assign_add.task import TaskConfig
from mechbook.cache import cached, fingerprint

SCORES_HOOK = "blocks.1.attn.hook_attn_scores"
RESID_HOOK = "blocks.1.hook_resid_pre"


def loss_with_qk2(model: torch.nn.Module, tokens: torch.Tensor, labels: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy at '=' when the layer-2 scores are ``x_q^T M x_k`` (causal mask kept),
    ``x`` the residual stream entering layer 2; everything else is the model's own weights."""
    stored: dict[str, torch.Tensor] = {}

    def keep(x: torch.Tensor, hook: object) -> torch.Tensor:
        stored["x"] = x
        return x

    def replace(scores: torch.Tensor, hook: object) -> torch.Tensor:
        x = stored["x"]
        n_q, n_k = scores.shape[-2], scores.shape[-1]
        xq = x[:, n_k - n_q :]
        new = torch.einsum("bqd,de,bke->bqk", xq, M, x)[:, None]
        q_abs = torch.arange(n_k - n_q, n_k)[:, None]
        allowed = torch.arange(n_k)[None, :] <= q_abs
        return new.masked_fill(~allowed, float("-inf"))

    logits = model.run_with_hooks(
        torch.as_tensor(tokens), fwd_hooks=[(RESID_HOOK, keep), (SCORES_HOOK, replace)], last_only=True
    )
    return torch.nn.functional.cross_entropy(logits, torch.as_tensor(labels, dtype=torch.long))


def qk2_gradient(
    model: torch.nn.Module, tokens: torch.Tensor, labels: torch.Tensor, M: torch.Tensor | None = None
) -> torch.Tensor:
    """``dL/dM`` (d_model x d_model) at ``M`` (default 0: uniform layer-2 attention) on a batch.
    The model's own parameters are left untouched (no ``.grad`` is accumulated on them)."""
    d = model.cfg.d_model
    dtype = model.embed.W_E.dtype
    M = torch.zeros(d, d, dtype=dtype) if M is None else M.detach().clone().to(dtype)
    M.requires_grad_(True)
    with torch.enable_grad():
        for p in model.parameters():
            p.requires_grad_(False)
        try:
            loss = loss_with_qk2(model, tokens, labels, M)
            (grad,) = torch.autograd.grad(loss, M)
        finally:
            for p in model.parameters():
                p.requires_grad_(True)
    return grad.detach()


def gradient_variable_block(
    model: torch.nn.Module, task_cfg: TaskConfig, tokens: torch.Tensor, labels: torch.Tensor
) -> np.ndarray:
    """The descent direction on the variable subspace: ``-U (dL/dM) U^T`` (n_vars x n_vars) with
    ``U = E_var OV1``, at uniform layer-2 attention. Row = query operand variable, column = key
    variable; the theory predicts an identity-like block."""
    U = variable_directions(model, task_cfg)
    grad = qk2_gradient(model, tokens, labels)
    return (-(U @ grad @ U.T)).numpy().astype(np.float64)


def block_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine between two blocks after removing each one's mean (a correlation of the entries):
    1 when they share their pattern up to scale and offset."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    a, b = a - a.mean(), b - b.mean()
    denom = np.linalg.norm(a) * np.linalg.norm(b)
    if denom == 0:
        raise ValueError("a constant block has no pattern to compare")
    return float(a @ b / denom)


def zero_query_step_block(
    model: torch.nn.Module, task_cfg: TaskConfig, tokens: torch.Tensor, labels: torch.Tensor
) -> np.ndarray:
    """The first gradient step on ``M`` when uniform attention comes from ``W_Q = 0`` (``W_K``
    kept), on the variable subspace, per unit learning rate.

    With ``M = W_Q W_K^T / sqrt(d)``, ``dL/dW_Q = (dL/dM) W_K / sqrt(d)`` and ``dL/dW_K = 0`` at
    ``W_Q = 0``, so one step moves ``M`` by ``-(dL/dM) W_K W_K^T / d``: the gradient seen through
    the key Gram matrix. Returns ``-U (dL/dM) W_K W_K^T U^T / d`` (n_vars x n_vars).
    """
    U = variable_directions(model, task_cfg)
    W_K = model.blocks[1].attn.W_K[0].detach()
    grad = qk2_gradient(model, tokens, labels)
    return (-(U @ grad @ W_K @ W_K.T @ U.T) / W_K.shape[1]).numpy().astype(np.float64)


def associative_memory_block(model: torch.nn.Module, task_cfg: TaskConfig) -> np.ndarray:
    """The block the argument predicts, up to scale: if ``-dL/dM ~ c sum_v u_v u_v^T = c U^T U``
    (``u_v`` = row ``v`` of ``U = E_var OV1``), then ``U (-dL/dM) U^T ~ c (U U^T)^2``."""
    U = variable_directions(model, task_cfg)
    gram = U @ U.T
    return (gram @ gram).numpy().astype(np.float64)


def after_phase1_step(history: pd.DataFrame, checkpoints: list[int], rules: PhaseRules | None = None) -> int:
    """The checkpoint chapter 10 differentiates at: the last kept step before the phase-2
    (variable-binding) jump that :func:`mechbook.assign_add.phases.detect_phases` finds in the
    history, and not before phase 1 (addition) when that is detected. Without a detected jump (a
    run too short to bind) it is the last kept step."""
    steps = sorted(checkpoints)
    if not steps:
        raise ValueError("no checkpoints: pass TrainResult.checkpoints (a run keeps at least its last step)")
    found = detect_phases(history, rules or PhaseRules())
    if found.phase2 is None:
        return steps[-1]
    before = [s for s in steps if s < found.phase2]
    settled = [s for s in before if found.phase1 is not None and s >= found.phase1]
    return (settled or before or steps[:1])[-1]


def score_gradients(
    model: torch.nn.Module, tokens: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """At uniform layer-2 attention (``M = 0``): ``dL/ds`` (B, P), the gradient of the loss with
    respect to the scores of the '=' query over every key position (0 on masked keys), and the
    residual stream ``x`` (B, P, d) entering layer 2."""
    stored: dict[str, torch.Tensor] = {}

    def keep(x: torch.Tensor, hook: object) -> torch.Tensor:
        stored["x"] = x.detach()
        return x

    def replace(scores: torch.Tensor, hook: object) -> torch.Tensor:
        leaf = torch.zeros(scores.shape[0], scores.shape[-1], dtype=scores.dtype, requires_grad=True)
        stored["s"] = leaf
        return leaf[:, None, None, :].expand_as(scores)  # the '=' query only (last_only run)

    with torch.enable_grad():
        logits = model.run_with_hooks(
            torch.as_tensor(tokens), fwd_hooks=[(RESID_HOOK, keep), (SCORES_HOOK, replace)], last_only=True
        )
        loss = torch.nn.functional.cross_entropy(logits, torch.as_tensor(labels, dtype=torch.long))
        (ds,) = torch.autograd.grad(loss, stored["s"])
    return ds.detach(), stored["x"]


def qk2_gradient_by_keys(
    model: torch.nn.Module, tokens: torch.Tensor, labels: torch.Tensor, keys: list[int]
) -> torch.Tensor:
    """The part of ``dL/dM`` at ``M = 0`` contributed by the key positions ``keys``:
    ``sum_b sum_{k in keys} (dL/ds_{b,k}) x_{b,q} x_{b,k}^T`` (d x d). Over all positions it is
    :func:`qk2_gradient`; chapter 10 splits it into context keys and query keys."""
    ds, x = score_gradients(model, tokens, labels)
    idx = torch.as_tensor(keys, dtype=torch.long)
    return torch.einsum("bk,bd,bke->de", ds[:, idx], x[:, -1], x[:, idx])


def gradient_block_over_training(result: TrainResult, tokens: torch.Tensor, labels: torch.Tensor) -> pd.DataFrame:
    """The uniform-attention gradient block at every kept checkpoint of ``result`` (chapter 10):
    columns ``step``, ``ratio``, ``rows_diag_max`` (:func:`circuits.block_diagonality` of
    ``-U dL/dM U^T`` with that checkpoint's ``U``) and ``similarity`` (to the final model's learned
    block). Cached on the final weights, the kept steps, the batch and this module's code."""
    task_cfg = result.config.task

    def compute() -> pd.DataFrame:
        learned = circuits.variable_qk_block(load_model(result).double(), task_cfg)
        rows = []
        for step in sorted(result.checkpoints):
            model = load_model(result, step).double()
            block = gradient_variable_block(model, task_cfg, tokens, labels)
            stats = circuits.block_diagonality(block)
            rows.append(
                {
                    "step": step,
                    "ratio": stats["ratio"],
                    "rows_diag_max": stats["rows_diag_max"],
                    "similarity": block_similarity(block, learned),
                }
            )
        return pd.DataFrame(rows)

    key = {
        "weights": fingerprint(result.final_state),
        "steps": sorted(result.checkpoints),
        "tokens": tokens,
        "labels": labels,
    }
    return cached("assign_add/gradient_blocks", key, compute)


GRADIENT = "gradient at uniform attention"
STEP = "first step with W_Q⁽²⁾ = 0"
PREDICTED = "predicted (U Uᵀ)²"
LEARNED = "learned after phase 2"
"""The names of the four blocks chapter 10 compares (:func:`gradient_blocks`)."""


def gradient_blocks(
    early: torch.nn.Module, late: torch.nn.Module, task_cfg: TaskConfig, tokens: torch.Tensor, labels: torch.Tensor
) -> dict[str, np.ndarray]:
    """The four blocks chapter 10 compares: -U(dL/dM)U^T at M = 0 and the first step's block
    with W_Q2 = 0 (both at ``early``), the predicted (UU^T)^2 (``early``'s U) and the learned
    U QK2 U^T of ``late``."""
    return {
        GRADIENT: gradient_variable_block(early, task_cfg, tokens, labels),
        STEP: zero_query_step_block(early, task_cfg, tokens, labels),
        PREDICTED: associative_memory_block(early, task_cfg),
        LEARNED: circuits.variable_qk_block(late, task_cfg),
    }


def block_stats(blocks: dict[str, np.ndarray], reference: str | None = GRADIENT) -> pd.DataFrame:
    """Per block its diagonality (:func:`~mechbook.assign_add.circuits.block_diagonality`) and,
    with a ``reference``, the correlation of its entries with that block's (:func:`block_similarity`)."""
    stats = pd.DataFrame({name: circuits.block_diagonality(b) for name, b in blocks.items()}).T
    if reference is not None:
        stats["similarity"] = [block_similarity(blocks[reference], b) for b in blocks.values()]
    return stats


def key_split_blocks(
    model: torch.nn.Module, task_cfg: TaskConfig, tokens: torch.Tensor, labels: torch.Tensor
) -> dict[str, np.ndarray]:
    """-U(dL/dM)U^T at M = 0 from the context keys (``context``, positions 0..11) and from the
    query's keys (``query``, 12..15); they add up to :func:`gradient_variable_block`."""
    U = circuits.variable_directions(model, task_cfg)
    context, query = list(range(task_cfg.context_len)), list(range(task_cfg.context_len, task_cfg.seq_len))
    return {
        "context": -(U @ qk2_gradient_by_keys(model, tokens, labels, context) @ U.T).numpy(),
        "query": -(U @ qk2_gradient_by_keys(model, tokens, labels, query) @ U.T).numpy(),
    }


def first_identity_step(over: pd.DataFrame, share: float = 0.5) -> int | None:
    """The first checkpoint of :func:`gradient_block_over_training` whose gradient block has its
    diagonal as the row maximum in more than ``share`` of the rows (None: never)."""
    steps = over.loc[over["rows_diag_max"] > share, "step"]
    return int(steps.iloc[0]) if len(steps) else None


def direction_spread(model: torch.nn.Module, task_cfg: TaskConfig) -> dict[str, float]:
    """How distinct the variable directions u_v = E_v OV1 are: ``mean_abs_cos``, the mean
    |cos(u_v, u_w)| over pairs of different variables, and ``norm_ratio``, the longest over the
    shortest |u_v| (chapter 10's premise)."""
    u = circuits.variable_directions(model, task_cfg).double().numpy()
    norms = np.linalg.norm(u, axis=1)
    cos = (u @ u.T) / np.outer(norms, norms)
    return {
        "mean_abs_cos": float(np.abs(cos[~np.eye(len(u), dtype=bool)]).mean()),
        "norm_ratio": float(norms.max() / norms.min()),
    }


@dataclass(frozen=True)
class GradientReading:
    """Chapter 10's reading of one run: the checkpoint before its binding jump (``step``) and the
    final step, the four blocks and their statistics (:func:`block_stats`), the gradient split by
    key position and its statistics, the gradient block from 0-var sequences alone, and the
    spread of the variable directions at the checkpoint and at the end (:func:`direction_spread`)."""

    step: int
    final_step: int
    blocks: dict[str, np.ndarray]
    stats: pd.DataFrame
    split: dict[str, np.ndarray]
    split_stats: pd.DataFrame
    zero_block: np.ndarray
    spread_checkpoint: dict[str, float]
    spread_final: dict[str, float]

    @property
    def form(self) -> float:
        """Correlation of the gradient block with the predicted (UU^T)^2."""
        return float(self.stats.loc[PREDICTED, "similarity"])

    @property
    def learned(self) -> float:
        """Correlation of the gradient block with the block learned by the end."""
        return float(self.stats.loc[LEARNED, "similarity"])

    @property
    def ratio(self) -> float:
        """The gradient block's diagonal mean over its mean |off-diagonal|."""
        return float(self.stats.loc[GRADIENT, "ratio"])

    @property
    def zero_ratio(self) -> float:
        """The same ratio for the gradient from 0-var sequences alone."""
        return circuits.block_diagonality(self.zero_block)["ratio"]

    def numbers(self) -> dict[str, float | int]:
        """The headline numbers (chapter 10's records)."""
        return {
            "gradient_checkpoint_step": self.step,
            "gradient_block_ratio": self.ratio,
            "gradient_block_rows_diag_max": float(self.stats.loc[GRADIENT, "rows_diag_max"]),
            "gradient_vs_learned_similarity": self.learned,
            "gradient_vs_predicted_similarity": self.form,
            "gradient_block_ratio_0var": self.zero_ratio,
            "gradient_context_block_ratio": float(self.split_stats.loc["context", "ratio"]),
            "gradient_context_diag_mean": float(self.split_stats.loc["context", "diag_mean"]),
            "gradient_query_diag_mean": float(self.split_stats.loc["query", "diag_mean"]),
            "variable_directions_cos_checkpoint": self.spread_checkpoint["mean_abs_cos"],
            "variable_directions_cos_final": self.spread_final["mean_abs_cos"],
            "variable_directions_norm_spread_checkpoint": self.spread_checkpoint["norm_ratio"],
        }


def read_gradient(
    early: torch.nn.Module,
    late: torch.nn.Module,
    task_cfg: TaskConfig,
    batch: tuple[torch.Tensor, torch.Tensor],
    zero_batch: tuple[torch.Tensor, torch.Tensor],
    step: int,
    final_step: int,
) -> GradientReading:
    """Chapter 10's :class:`GradientReading` of one run: ``early`` at ``step`` (before the jump),
    ``late`` its final model; ``batch`` the 1-/2-var sequences the gradient averages over and
    ``zero_batch`` 0-var sequences alone."""
    tokens, labels = batch
    blocks = gradient_blocks(early, late, task_cfg, tokens, labels)
    split = key_split_blocks(early, task_cfg, tokens, labels)
    return GradientReading(
        step=step,
        final_step=final_step,
        blocks=blocks,
        stats=block_stats(blocks),
        split=split,
        split_stats=block_stats(split, reference=None),
        zero_block=gradient_variable_block(early, task_cfg, *zero_batch),
        spread_checkpoint=direction_spread(early, task_cfg),
        spread_final=direction_spread(late, task_cfg),
    )


def read_run(
    run: TrainResult,
    batch: tuple[torch.Tensor, torch.Tensor],
    zero_batch: tuple[torch.Tensor, torch.Tensor],
    rules: PhaseRules | None = None,
) -> GradientReading:
    """:func:`read_gradient` of a trained run at its last kept checkpoint before its binding jump
    (:func:`after_phase1_step`), against its final weights (chapter 10, every seed)."""
    step = after_phase1_step(run.history, list(run.checkpoints), rules)
    early, late = load_model(run, step).double(), load_model(run).double()
    return read_gradient(early, late, run.config.task, batch, zero_batch, step, run.config.steps)


def release_before_jump(steps: Sequence[int] | None, per_pool: int, rules: PhaseRules | None = None) -> int:
    """The authors' released run's last checkpoint (among ``steps``; None: every one present
    locally) before the binding jump that chapter 8's ``rules`` find in its curves on ``per_pool``
    sequences per pool (:func:`mechbook.assign_add.scores.release_history`)."""
    history = scores.release_history(steps, n_per_pool=per_pool)
    return after_phase1_step(history, sorted(history.step.unique().tolist()), rules)


def read_release(
    steps: Sequence[int] | None,
    per_pool: int,
    task_cfg: TaskConfig,
    batch: tuple[torch.Tensor, torch.Tensor],
    zero_batch: tuple[torch.Tensor, torch.Tensor],
    rules: PhaseRules | None = None,
) -> GradientReading:
    """:func:`read_gradient` of the authors' released run at :func:`release_before_jump`, against
    its final model (chapter 10)."""
    step = release_before_jump(steps, per_pool, rules)
    early, late = release.load_release(step).double(), release.load_release(release.FINAL).double()
    return read_gradient(early, late, task_cfg, batch, zero_batch, step, release.FINAL_STEP)


GRADIENT_POOLS = ("1var_train", "2var_train")
"""The evaluation pools whose sequences chapter 10's gradient averages over."""


def pool_batch(
    pools: dict[str, tuple[np.ndarray, np.ndarray]], names: Sequence[str] = GRADIENT_POOLS
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens, labels)`` of the pools ``names`` of ``pools`` (:meth:`Task.eval_pools`), stacked."""
    return tuple(torch.from_numpy(np.concatenate([pools[p][i] for p in names])) for i in (0, 1))
