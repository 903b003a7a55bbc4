"""Chapter 10, "Why it composes": configs, the gradient blocks it compares, the premise it
measures (how distinct the variable directions are), its charts and computed prose.

The run is chapter 8's dissected run (``CONFIGS[profile].runs`` is the same object), read at the last kept
checkpoint before the binding jump (:func:`mechbook.assign_add.theory.after_phase1_step`).
"""

from __future__ import annotations

from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd
import torch

import mechbook
from mechbook import viz
from mechbook.assign_add import circuits, release, scores, theory
from mechbook.assign_add.phases import Phases
from mechbook.assign_add.seeds import SeedRuns
from mechbook.assign_add.task import TaskConfig
from mechbook.assign_add.train import TrainResult, load_model
from mechbook.chapters import ch08_training_dynamics as ch08

GRADIENT = "gradient at uniform attention"
STEP = "first step with W_Q⁽²⁾ = 0"
PREDICTED = "predicted (U Uᵀ)²"
LEARNED = "learned after phase 2"
STAT_NAMES = {
    "diag_mean": "diagonal mean",
    "offdiag_abs_mean": "mean |off-diagonal|",
    "ratio": "diag / |off-diag|",
    "rows_diag_max": "rows with diagonal max",
    "similarity": "correlation with the gradient",
}
IDENTITY_RATIO = 5.0
"""Diagonal mean over mean :math:`|\\text{off-diagonal}|` from which a block counts as identity-like."""
FORM_HOLDS, FORM_LOOSE = 0.9, 0.5
"""Correlations with (U Uᵀ)² from which the gradient has the predicted form (loosely)."""


@dataclass(frozen=True)
class TheoryChapterConfig:
    """Chapter 10: the seed runs whose dissected run's checkpoints it reads (chapter 8's) and the number of
    sequences per pool (1-var and 2-var training pools) in the batch the gradient is averaged over."""

    runs: SeedRuns
    per_pool: int
    release_per_pool: int = 512
    release_steps: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.per_pool < 1:
            raise ValueError(f"per_pool must be at least 1, got {self.per_pool}")


def _config(profile: str, per_pool: int) -> TheoryChapterConfig:
    dynamics = ch08.CONFIGS[profile]
    return TheoryChapterConfig(dynamics.runs, per_pool, dynamics.release_per_pool, dynamics.release_steps)


CONFIGS: dict[str, TheoryChapterConfig] = {
    "smoke": _config("smoke", 256),
    "cpu": _config("cpu", 1024),
    "paper": _config("paper", 2048),
}
"""Chapter 8's run and its reading of the released run (the same pools, so the cached history
is shared)."""


def resolve(profile: str, seed: int | None = None, per_pool: int | None = None) -> TheoryChapterConfig:
    """The chapter's config for ``profile`` with the reader's knobs (None: from the profile);
    ``seed`` opens that seed's run of chapter 8 instead of the rule's pick."""
    return mechbook.resolve_profile(CONFIGS, profile, runs__pick=seed, per_pool=per_pool)


def checkpoint_prose(result: TrainResult, phases: Phases, step: int, n_sequences: int) -> str:
    """Which checkpoint the gradient is taken at, why, and how the model scores there."""
    acc = result.accuracy()
    jump = f"step {phases.phase2:,}" if phases.phase2 is not None else "not detected in this run"
    return (
        f"Phase 2 (binding jump, chapter 8's rule): {jump}. Checkpoint used (the last kept one before the jump; "
        f"the run's last when none is detected): step **{step:,}** (0-var train accuracy "
        f"{acc.loc[step, '0var_train']:.2f}, 1-var train accuracy {acc.loc[step, '1var_train']:.2f}); learned block "
        f"from the final weights (step {result.config.steps:,}). Gradient averaged over {n_sequences:,} 1-var and "
        f"2-var training sequences."
    )


def gradient_blocks(
    early: torch.nn.Module, late: torch.nn.Module, task_cfg: TaskConfig, tokens: torch.Tensor, labels: torch.Tensor
) -> dict[str, np.ndarray]:
    """The four blocks the chapter compares: -U(∂L/∂M)U ᵀ at M = 0 and the first step's block
    with W_Q⁽²⁾ = 0 (both at ``early``), the predicted (UUᵀ)² (``early``'s U) and the learned
    U QK₂ Uᵀ of ``late``."""
    return {
        GRADIENT: theory.gradient_variable_block(early, task_cfg, tokens, labels),
        STEP: theory.zero_query_step_block(early, task_cfg, tokens, labels),
        PREDICTED: theory.associative_memory_block(early, task_cfg),
        LEARNED: circuits.variable_qk_block(late, task_cfg),
    }


def block_stats(blocks: dict[str, np.ndarray], reference: str | None = GRADIENT) -> pd.DataFrame:
    """Per block its diagonality (:func:`~mechbook.assign_add.circuits.block_diagonality`) and,
    with a ``reference``, the correlation of its entries with that block's."""
    stats = pd.DataFrame({name: circuits.block_diagonality(b) for name, b in blocks.items()}).T
    if reference is not None:
        stats["similarity"] = [theory.block_similarity(blocks[reference], b) for b in blocks.values()]
    return stats


def stats_table(stats: pd.DataFrame) -> pd.DataFrame:
    """``stats`` with readable column names, in a fixed order."""
    return stats[[c for c in STAT_NAMES if c in stats.columns]].rename(columns=STAT_NAMES)


def blocks_chart(
    blocks: dict[str, np.ndarray], letters: tuple[str, ...], title: list[str] | str, columns: int = 2
) -> alt.TopLevelMixin:
    """The blocks as signed heatmaps, each scaled by its own largest entry, ``columns`` to a row."""
    return viz.signed_heatmap(
        blocks,
        rows=letters,
        cols=letters,
        row_title="query variable",
        col_title="key variable",
        value_title="entry",
        normalise=True,
        columns=columns,
        panel=210,
        title=title,
    )


def blocks_title(stats: pd.DataFrame, step: int) -> list[str]:
    """The title of the four-block figure, stating the measured ratios and the correlation."""
    return [
        f"At step {step:,} the gradient is {stats.loc[GRADIENT, 'ratio']:.1f}× diagonal "
        f"(correlation {stats.loc[PREDICTED, 'similarity']:.2f} with the prediction);",
        f"the block learned by the end is {stats.loc[LEARNED, 'ratio']:.1f}× diagonal",
    ]


def gradient_prose(stats: pd.DataFrame) -> str:
    """The gradient block's diagonality and its correlations, in one sentence."""
    g = stats.loc[GRADIENT]
    return (
        f"Gradient block: diagonal mean / mean |off-diagonal| = **{g['ratio']:.1f}**, rows with the diagonal as "
        f"maximum: {g['rows_diag_max']:.0%}. Correlation of its entries with the predicted $(UU^\\top)^2$: "
        f"{stats.loc[PREDICTED, 'similarity']:.2f}; with the block learned after phase 2: "
        f"**{stats.loc[LEARNED, 'similarity']:.2f}**."
    )


def zero_var_table(grad_block: np.ndarray, zero_block: np.ndarray) -> pd.DataFrame:
    """The gradient block from 1-/2-var sequences beside the one from 0-var sequences only."""
    return pd.DataFrame(
        {
            "batch": ["1-var and 2-var sequences", "0-var sequences only"],
            "diag / |off-diag|": [
                circuits.block_diagonality(grad_block)["ratio"],
                circuits.block_diagonality(zero_block)["ratio"],
            ],
            "diagonal mean": [float(np.diag(grad_block).mean()), float(np.diag(zero_block).mean())],
        }
    )


def key_split_blocks(
    model: torch.nn.Module, task_cfg: TaskConfig, tokens: torch.Tensor, labels: torch.Tensor
) -> dict[str, np.ndarray]:
    """-U(∂L/∂M)Uᵀ at M = 0 from the context keys (0..11) and from the query's keys (12..15)."""
    U = circuits.variable_directions(model, task_cfg)
    context, query = list(range(task_cfg.context_len)), list(range(task_cfg.context_len, task_cfg.seq_len))
    return {
        f"context keys (0-{context[-1]})": -(
            U @ theory.qk2_gradient_by_keys(model, tokens, labels, context) @ U.T
        ).numpy(),
        f"query keys ({query[0]}-{query[-1]})": -(
            U @ theory.qk2_gradient_by_keys(model, tokens, labels, query) @ U.T
        ).numpy(),
    }


def first_identity_step(over: pd.DataFrame, share: float = 0.5) -> int | None:
    """The first checkpoint whose gradient block has its diagonal as the row maximum in more
    than ``share`` of the rows."""
    steps = over.loc[over["rows_diag_max"] >= share, "step"]
    return int(steps.iloc[0]) if len(steps) else None


OVER_LABELS = {
    "ratio": "diag / |off-diag|",
    "rows_diag_max": "rows with diagonal max",
    "similarity": "correlation with learned block",
}


def over_training_chart(over: pd.DataFrame, phase2: int | None) -> alt.LayerChart:
    """The uniform-attention gradient block's statistics at every checkpoint, the binding jump
    dashed."""
    long = over.melt(id_vars="step", value_vars=list(OVER_LABELS), var_name="quantity").assign(
        quantity=lambda d: d.quantity.map(OVER_LABELS)
    )
    lines = viz.highlight_lines(
        long,
        x="step",
        y="value",
        series="quantity",
        series_title="quantity",
        point=True,
        x_title="training step (checkpoint)",
        y_title="value",
        height=300,
    )
    layers = [lines]
    if phase2 is not None:
        layers.append(
            alt.Chart(pd.DataFrame({"step": [phase2]})).mark_rule(strokeDash=[4, 4], color="gray").encode(x="step:Q")
        )
    return alt.layer(*layers).properties(
        title="The uniform-attention gradient block across training (dashed: the binding jump)"
    )


def over_training_prose(first: int | None, phase2: int | None) -> str:
    """When the gradient first points at the identity, beside the binding jump."""
    return (
        f"The gradient block first has its diagonal as the maximum of most rows at step "
        f"**{f'{first:,}' if first is not None else 'never'}**; the binding jump is at step "
        f"{f'{phase2:,}' if phase2 is not None else 'not detected'}."
    )


def identity_like(row: pd.Series) -> bool:
    """A block is identity-like: ratio >= ``IDENTITY_RATIO`` and the diagonal is the row maximum
    in most rows."""
    return bool(row["ratio"] >= IDENTITY_RATIO and row["rows_diag_max"] > 0.5)


def checks_table(stats: pd.DataFrame, split_stats: pd.DataFrame) -> pd.DataFrame:
    """The argument's four checkable predictions, what was measured, and whether each holds."""
    g, ctx = stats.loc[GRADIENT], split_stats.iloc[0]
    return pd.DataFrame(
        [
            {
                "prediction": f"gradient block identity-like (ratio ≥ {IDENTITY_RATIO:g}, diagonal is the row maximum in most rows)",
                "measured": f"ratio {g['ratio']:.2f}, rows {g['rows_diag_max']:.0%}",
                "holds": identity_like(g),
            },
            {
                "prediction": "context-key part identity-like",
                "measured": f"ratio {ctx['ratio']:.2f}, rows {ctx['rows_diag_max']:.0%}",
                "holds": identity_like(ctx),
            },
            {
                "prediction": f"gradient block resembles (U Uᵀ)² (correlation > {FORM_LOOSE})",
                "measured": f"{stats.loc[PREDICTED, 'similarity']:.2f}",
                "holds": bool(stats.loc[PREDICTED, "similarity"] > FORM_LOOSE),
            },
            {
                "prediction": f"gradient block resembles the learned block (correlation > {FORM_LOOSE})",
                "measured": f"{stats.loc[LEARNED, 'similarity']:.2f}",
                "holds": bool(stats.loc[LEARNED, "similarity"] > FORM_LOOSE),
            },
        ]
    )


def direction_spread(model: torch.nn.Module, task_cfg: TaskConfig) -> dict[str, float]:
    """How distinct the variable directions :math:`u_v = E_v OV_1` are: the mean
    :math:`|\\cos(u_v, u_w)|` over pairs of different variables, and the longest over the shortest
    :math:`|u_v|`."""
    u = circuits.variable_directions(model, task_cfg).double().numpy()
    norms = np.linalg.norm(u, axis=1)
    cos = (u @ u.T) / np.outer(norms, norms)
    return {
        "mean |cos| (different variables)": float(np.abs(cos[~np.eye(len(u), dtype=bool)]).mean()),
        "longest / shortest u_v": float(norms.max() / norms.min()),
    }


def spread_table(
    early: torch.nn.Module, late: torch.nn.Module, task_cfg: TaskConfig, step: int, final_step: int
) -> pd.DataFrame:
    """:func:`direction_spread` at the checkpoint and at the end, one row each."""
    return pd.DataFrame(
        {
            f"step {step:,} (the checkpoint)": direction_spread(early, task_cfg),
            f"step {final_step:,} (final)": direction_spread(late, task_cfg),
        }
    ).T


def premise_prose(similarity: float, gradient_ratio: float, spread: pd.DataFrame, step: int) -> str:
    """The form-versus-shape reading, one of four cases chosen by the numbers: the identity shape
    already there; the form without the shape because the directions are not yet distinct; the
    form with directions as distinct as at the end (the spread does not explain it); no form."""
    early_cos, final_cos = spread.iloc[0, 0], spread.iloc[1, 0]
    form = (
        "the form holds"
        if similarity > FORM_HOLDS
        else "the form holds only loosely"
        if similarity > FORM_LOOSE
        else "the form does not hold"
    )
    if gradient_ratio >= IDENTITY_RATIO:
        case = "Here the gradient already has the identity shape at the checkpoint."
    elif similarity > FORM_HOLDS and early_cos > final_cos:
        case = (
            "The gradient has the predicted form but not the identity shape, because layer 1 has not yet made the "
            "variables distinct: the identity-like block and the binding jump arrive together with distinct "
            "variable directions."
        )
    elif similarity > FORM_HOLDS:
        case = (
            "The gradient has the predicted form and the directions are as distinct as at the end, so their spread "
            "does not explain the missing identity shape; the blocks above show which variables dominate."
        )
    else:
        case = (
            "Here the gradient does not have the predicted form closely enough: the reconstructed argument does not "
            "describe this checkpoint's gradient, and the directions' spread cannot explain the block."
        )
    return (
        f"At step {step:,} the gradient block correlates **{similarity:.2f}** with $(UU^\\top)^2$ ({form}). "
        f"The variable directions there have mean $|\\cos|$ **{early_cos:.2f}** between different variables and a "
        f"longest/shortest length ratio of {spread.iloc[0, 1]:.1f}; at the end, **{final_cos:.2f}** and "
        f"{spread.iloc[1, 1]:.1f}. " + case
    )


@dataclass(frozen=True)
class Reading:
    """The chapter's whole reading of one run at one checkpoint."""

    step: int
    stats: pd.DataFrame
    split_stats: pd.DataFrame
    checks: pd.DataFrame
    spread: pd.DataFrame


def read_run(
    early: torch.nn.Module,
    late: torch.nn.Module,
    task_cfg: TaskConfig,
    tokens: torch.Tensor,
    labels: torch.Tensor,
    step: int,
    final_step: int,
) -> Reading:
    """The gradient blocks, their statistics, the key split, the verdict and the premise of one
    run (``early`` at ``step``, ``late`` its final model)."""
    stats = block_stats(gradient_blocks(early, late, task_cfg, tokens, labels))
    split_stats = block_stats(key_split_blocks(early, task_cfg, tokens, labels), reference=None)
    return Reading(
        step,
        stats,
        split_stats,
        checks_table(stats, split_stats),
        spread_table(early, late, task_cfg, step, final_step),
    )


def seeds_table(
    results: list[TrainResult], task_cfg: TaskConfig, tokens: torch.Tensor, labels: torch.Tensor
) -> pd.DataFrame:
    """The gradient reading of every seed run at its own last checkpoint before its binding jump:
    ``seed``, ``step``, the gradient block's ``ratio``, its ``similarity`` to the predicted
    (UUᵀ)², and ``form`` (the similarity reaches :data:`FORM_HOLDS`)."""
    rows = []
    for run in results:
        step = theory.after_phase1_step(run.history, list(run.checkpoints))
        early = load_model(run, step).double()
        blocks = {
            GRADIENT: theory.gradient_variable_block(early, task_cfg, tokens, labels),
            PREDICTED: theory.associative_memory_block(early, task_cfg),
        }
        stats = block_stats(blocks)
        similarity = float(stats.loc[PREDICTED, "similarity"])
        rows.append(
            {
                "seed": run.config.seed,
                "step": step,
                "ratio": float(stats.loc[GRADIENT, "ratio"]),
                "similarity": similarity,
                "form": similarity >= FORM_HOLDS,
            }
        )
    return pd.DataFrame(rows)


def seeds_prose(table: pd.DataFrame, dissected: int) -> str:
    """How the reading of the dissected seed compares with every seed's."""
    held = int(table.form.sum())
    mine = table.set_index("seed").loc[dissected]
    verdict = (
        "so the predicted form is a property of these runs"
        if held == len(table)
        else "so on one run the argument can look right or wrong: it is not a property of these runs at this scale"
        if 0 < held < len(table)
        else "so the predicted form does not appear before the jump in any of them"
    )
    return (
        f"Over the {len(table)} seeds, each read at its own last checkpoint before its jump, the gradient's "
        f"correlation with the predicted (UUᵀ)² runs from {table.similarity.min():.2f} to {table.similarity.max():.2f} "
        f"(seed {dissected}, the one above: {mine.similarity:.2f}); it reaches {FORM_HOLDS} in {held} of "
        f"{len(table)}, {verdict}. The block's diagonal-to-off-diagonal ratio runs from {table.ratio.min():.2f} "
        f"to {table.ratio.max():.2f}."
    )


def record_seeds(table: pd.DataFrame) -> dict[str, object]:
    """Record the reading over seeds."""
    values = {
        "seeds_predicted_form_holding": int(table.form.sum()),
        "seeds_gradient_vs_predicted_min": float(table.similarity.min()),
        "seeds_gradient_vs_predicted_max": float(table.similarity.max()),
        "seeds_gradient_block_ratio_max": float(table.ratio.max()),
    }
    return {name: mechbook.record(name, value) for name, value in values.items()}


def release_reading(
    cfg: TheoryChapterConfig, task_cfg: TaskConfig, tokens: torch.Tensor, labels: torch.Tensor
) -> Reading:
    """:func:`read_run` on the authors' released run, at its last checkpoint (among
    ``cfg.release_steps``) before the binding jump that chapter 8's rules find in its curves."""
    history = scores.release_history(cfg.release_steps, n_per_pool=cfg.release_per_pool)
    step = theory.after_phase1_step(history, sorted(history.step.unique().tolist()))
    early, late = release.load_release(step).double(), release.load_release(release.FINAL).double()
    return read_run(early, late, task_cfg, tokens, labels, step, release.FINAL_STEP)


def comparison_table(rebuild: Reading, released: Reading) -> pd.DataFrame:
    """The rebuild's and the released run's gradient readings side by side."""

    def column(r: Reading) -> list[str]:
        g = r.stats.loc[GRADIENT]
        return [
            f"{r.step:,}",
            f"{g['ratio']:.2f}",
            f"{g['rows_diag_max']:.0%}",
            f"{r.stats.loc[PREDICTED, 'similarity']:.2f}",
            f"{r.stats.loc[LEARNED, 'similarity']:.2f}",
            f"{r.spread.iloc[0, 0]:.2f}",
            f"{int(r.checks['holds'].sum())} of 4",
        ]

    return pd.DataFrame(
        {
            "": [
                "checkpoint (before the binding jump)",
                "gradient block: diag / |off-diag|",
                "rows with diagonal max",
                "correlation with (U Uᵀ)²",
                "correlation with the learned block",
                "mean |cos| between variable directions",
                "predictions holding",
            ],
            "paper's run, as released": column(released),
            "this rebuild": column(rebuild),
        }
    )


def release_prose(r: Reading) -> str:
    """Does the argument hold on the released run before its jump: the premise prose on it, and
    the number of predictions that hold."""
    holding = int(r.checks["holds"].sum())
    return (
        premise_prose(r.stats.loc[PREDICTED, "similarity"], r.stats.loc[GRADIENT, "ratio"], r.spread, r.step)
        + f" On the released run {holding} of the {len(r.checks)} predictions hold."
    )


def record_release(r: Reading) -> dict[str, object]:
    """Record the released run's reading as ``release_*``."""
    values = {
        "release_gradient_checkpoint_step": r.step,
        "release_gradient_block_ratio": r.stats.loc[GRADIENT, "ratio"],
        "release_gradient_block_rows_diag_max": r.stats.loc[GRADIENT, "rows_diag_max"],
        "release_gradient_vs_predicted_similarity": r.stats.loc[PREDICTED, "similarity"],
        "release_gradient_vs_learned_similarity": r.stats.loc[LEARNED, "similarity"],
        "release_theory_predictions_holding": int(r.checks["holds"].sum()),
        "release_variable_directions_cos_checkpoint": float(r.spread.iloc[0, 0]),
    }
    return {name: mechbook.record(name, value) for name, value in values.items()}


def record_all(
    step: int,
    stats: pd.DataFrame,
    zero: pd.DataFrame,
    split_stats: pd.DataFrame,
    over: pd.DataFrame,
    checks: pd.DataFrame,
    spread: pd.DataFrame,
) -> dict[str, object]:
    """Record the chapter's headline numbers (``book/thresholds/10_why_it_composes.yml``)."""
    values = {
        "gradient_checkpoint_step": step,
        "gradient_block_ratio": stats.loc[GRADIENT, "ratio"],
        "gradient_block_rows_diag_max": stats.loc[GRADIENT, "rows_diag_max"],
        "gradient_vs_learned_similarity": stats.loc[LEARNED, "similarity"],
        "gradient_vs_predicted_similarity": stats.loc[PREDICTED, "similarity"],
        "gradient_block_ratio_0var": zero.loc[1, "diag / |off-diag|"],
        "gradient_context_block_ratio": split_stats.iloc[0]["ratio"],
        "gradient_block_ratio_last_checkpoint": float(over["ratio"].iloc[-1]),
        "gradient_identity_first_step": first_identity_step(over),
        "theory_predictions_holding": int(checks["holds"].sum()),
        "variable_directions_cos_checkpoint": float(spread.iloc[0, 0]),
        "variable_directions_cos_final": float(spread.iloc[1, 0]),
        "variable_directions_norm_spread_checkpoint": float(spread.iloc[0, 1]),
    }
    return {name: mechbook.record(name, value) for name, value in values.items()}
