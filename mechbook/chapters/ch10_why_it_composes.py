"""Chapter 10, "Why it composes": the chapter's config, its claims, and the charts and computed
prose of each section in page order. The gradient readings are computed by the library
(:func:`mechbook.assign_add.theory.read_run`, :func:`~mechbook.assign_add.theory.read_release`)
on every seed run of chapter 8's stack (:data:`mechbook.assign_add.runs.SEED_RUNS`, the same
cached runs), each at its last kept checkpoint before its binding jump, and on the authors'
released run before its jump.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd

from mechbook import claims, resolve_profile, viz
from mechbook.assign_add import claims as claims_table
from mechbook.assign_add import release
from mechbook.assign_add.claims import CH10_CLAIMS
from mechbook.assign_add.config import TrainResult
from mechbook.assign_add.phases import Phases
from mechbook.assign_add.readings import composition_numbers, gradient_form, gradient_identity
from mechbook.assign_add.runs import SEED_RUNS
from mechbook.assign_add.seeds import SeedRuns
from mechbook.assign_add.task import TaskConfig
from mechbook.assign_add.theory import GRADIENT, LEARNED, GradientReading
from mechbook.chapters import common
from mechbook.claims import Evidence
from mechbook.validation import POSITIVE, check_fields

STEM = "10_why_it_composes"
POOL_SEED = 5
"""Seed of the evaluation pools whose 1-/2-var (and 0-var) sequences the gradient averages over."""
SMOKE_RELEASE_STEPS = (1, 501, 1401, 3001, 5001, 5301, 5401, 5501, 7001, 10001, 13001, 16001, 39901)
"""The released checkpoints smoke reads to find the released run's binding jump (around the
paper's phases 1 and 2; the cpu and paper profiles read every checkpoint present)."""


@dataclass(frozen=True)
class ChapterConfig:
    """Chapter 10: the seed runs whose checkpoints it reads (chapter 8's, so the cached stack is
    shared), the sequences per pool in the batch the gradient is averaged over, and how the
    released run's curves are read to find its jump (sequences per pool; checkpoints, None: every
    one present locally)."""

    runs: SeedRuns
    per_pool: int
    release_per_pool: int = 512
    release_steps: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        check_fields(self, per_pool=POSITIVE, release_per_pool=POSITIVE)
        bad = sorted(set(self.release_steps or ()) - set(release.RELEASE_STEPS))
        if bad:
            raise ValueError(f"release_steps {bad} are not released checkpoints (1, 101, ..., 39901)")


CONFIGS: dict[str, ChapterConfig] = {
    "smoke": ChapterConfig(SEED_RUNS["smoke"], 256, release_per_pool=128, release_steps=SMOKE_RELEASE_STEPS),
    "cpu": ChapterConfig(SEED_RUNS["cpu"], 1024),
    "paper": ChapterConfig(SEED_RUNS["paper"], 2048),
}


def resolve(profile: str, seed: int | None = None, per_pool: int | None = None) -> ChapterConfig:
    """The chapter's config for ``profile`` with the reader's knobs (None: from the profile);
    ``seed`` opens that seed's run of chapter 8 instead of the rule's pick."""
    return resolve_profile(CONFIGS, profile, runs__pick=seed, per_pool=per_pool)


def form_words(similarity: float) -> str:
    """The gradient-form claim's rule in words for one value: the form holds or does not."""
    return "the form holds" if gradient_form(similarity) else "the form does not hold"


# ---------------------------------------------------------------------------- the checkpoint
def checkpoint_prose(result: TrainResult, phases: Phases, r: GradientReading, n_sequences: int) -> str:
    """Which checkpoint the gradient is taken at, why, and how the model scores there."""
    acc = result.accuracy()
    jump = f"step {phases.phase2:,}" if phases.phase2 is not None else "not detected in this run"
    return (
        f"Phase 2 (binding jump, chapter 8's rule): {jump}. Checkpoint used (the last kept one before the jump; "
        f"the run's last when none is detected): step **{r.step:,}** (0-var train accuracy "
        f"{acc.loc[r.step, '0var_train']:.2f}, 1-var train accuracy {acc.loc[r.step, '1var_train']:.2f}); learned "
        f"block from the final weights (step {r.final_step:,}). Gradient averaged over {n_sequences:,} 1-var and "
        "2-var training sequences."
    )


# ----------------------------------------------------------------------------- the blocks
STAT_NAMES = {
    "diag_mean": "diagonal mean",
    "offdiag_abs_mean": "mean |off-diagonal|",
    "ratio": "diag / |off-diag|",
    "rows_diag_max": "rows with diagonal max",
    "similarity": "correlation with the gradient",
}


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


def blocks_title(r: GradientReading) -> list[str]:
    """The title of the four-block figure, stating the measured ratios and the correlation."""
    return [
        f"At step {r.step:,} the gradient is {r.ratio:.1f}× diagonal (correlation {r.form:.2f} with the prediction);",
        f"the block learned by the end is {r.stats.loc[LEARNED, 'ratio']:.1f}× diagonal",
    ]


def gradient_prose(r: GradientReading) -> str:
    """The gradient block's diagonality and its correlations, in one sentence."""
    return (
        f"Gradient block: diagonal mean / mean |off-diagonal| = **{r.ratio:.1f}**, rows with the diagonal as "
        f"maximum: {r.stats.loc[GRADIENT, 'rows_diag_max']:.0%}. Correlation of its entries with the predicted "
        f"$(UU^\\top)^2$: {r.form:.2f} ({form_words(r.form)} on this run); with the block learned after phase 2: "
        f"**{r.learned:.2f}**."
    )


# ------------------------------------------------------------------------------- the data
def zero_var_table(r: GradientReading) -> pd.DataFrame:
    """The gradient block from 1-/2-var sequences beside the one from 0-var sequences only."""
    return pd.DataFrame(
        {
            "batch": ["1-var and 2-var sequences", "0-var sequences only"],
            "diag / |off-diag|": [r.ratio, r.zero_ratio],
            "diagonal mean": [float(np.diag(r.blocks[GRADIENT]).mean()), float(np.diag(r.zero_block).mean())],
        }
    )


# ------------------------------------------------------------------------------- the keys
def split_title(task_cfg: TaskConfig) -> str:
    """The key-split figure's title, naming the two key ranges."""
    c, s = task_cfg.context_len, task_cfg.seq_len
    return f"The gradient block split by where the keys sit: context keys 0-{c - 1}, query keys {c}-{s - 1}"


def split_prose(r: GradientReading) -> str:
    """The two parts' diagonals, and which way the query keys' part pushes the diagonal, said by its
    printed sign against the prediction (down): the words derived from the printed numbers."""
    ctx, qry = r.split_stats.loc["context", "diag_mean"], r.split_stats.loc["query", "diag_mean"]
    claim = next(c for c in CH10_CLAIMS if c.id == "ch10.query_keys_push_down")
    way = claims.compare(qry, 0.0, claim.spec, claims.Words("up", "down", "neither up nor down"))
    verdict = "as predicted" if claim.rule.holds(qry) else "against the prediction that it pushes it down"
    return (
        f"Diagonal mean of the context keys' part: **{ctx:.3g}**; of the query keys' part: "
        f"**{claim.rule.shown(qry, claim.spec)}**: the query keys push the diagonal {way}, {verdict}. In size the "
        f"query keys' part is "
        f"{claims.compare(abs(qry), abs(ctx), '.3g', claims.Words('larger than', 'smaller than', 'as large as'))} "
        "the context keys'."
    )


# ----------------------------------------------------------------------- over training
OVER_LABELS = {
    "ratio": "diag / |off-diag|",
    "rows_diag_max": "rows with diagonal max",
    "similarity": "correlation with learned block",
}


def over_training_chart(over: pd.DataFrame, phase2: int | None) -> alt.LayerChart:
    """The uniform-attention gradient block's statistics at every checkpoint, the binding jump dashed."""
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
    marks = pd.DataFrame([{"phase": "binding jump", "step": phase2}] if phase2 is not None else [])
    return viz.training_curves(
        lines, title="The uniform-attention gradient block across training (dashed: the binding jump)", marks=marks
    )


def over_training_prose(first: int | None, phase2: int | None) -> str:
    """When the gradient first points at the identity, beside the binding jump (the word from the steps)."""
    if first is None:
        return "The gradient block never has its diagonal as the maximum of most rows at a kept checkpoint."
    where = f", {claims.order(first, phase2)} the binding jump at step {phase2:,}" if phase2 is not None else ""
    return f"The gradient block first has its diagonal as the maximum of most rows at step **{first:,}**{where}."


# ---------------------------------------------------------------------------- the verdict
def verdict_table(ev: dict[str, Evidence], dissected: int) -> pd.DataFrame:
    """Every claim: its value on the run above, over every seed, on the released run, the rule and
    the verdict (from its one evidence)."""
    rows = []
    for e in ev.values():
        claim = e.claim
        mine = dict(e.rebuild).get(dissected)
        rows.append(
            {
                "claim": claim.statement,
                "this run": "none" if mine is None else claims.fmt(mine, claim.spec),
                "over the seeds": e.summary(),
                "released run": "none" if e.release is None else claims.fmt(e.release, claim.spec),
                "rule": claim.rule.text(claim.spec),
                "verdict": e.verdict,
            }
        )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------- the premise
def spread_table(r: GradientReading) -> pd.DataFrame:
    """The variable directions' spread at the checkpoint and at the end, one row each."""
    names = {"mean_abs_cos": "mean |cos| (different variables)", "norm_ratio": "longest / shortest u_v"}
    return pd.DataFrame(
        {f"step {r.step:,} (the checkpoint)": r.spread_checkpoint, f"step {r.final_step:,} (final)": r.spread_final}
    ).T.rename(columns=names)


def premise_prose(r: GradientReading) -> str:
    """The form-versus-shape reading, one of four cases chosen by the numbers and the claims'
    rules: the identity shape already there; the form without the shape because the directions are
    not yet distinct; the form with directions as distinct as at the end; no form."""
    early_cos, final_cos = r.spread_checkpoint["mean_abs_cos"], r.spread_final["mean_abs_cos"]
    form = gradient_form(r.form)
    if gradient_identity(r.ratio):
        case = "Here the gradient already has the identity shape at the checkpoint."
    elif form and early_cos > final_cos:
        case = (
            "The gradient has the predicted form but not the identity shape, because layer 1 has not yet made the "
            "variables distinct: the identity-like block and the binding jump arrive together with distinct "
            "variable directions."
        )
    elif form:
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
        f"At step {r.step:,} the gradient block correlates **{r.form:.2f}** with $(UU^\\top)^2$ ({form_words(r.form)}). "
        f"The variable directions there have mean $|\\cos|$ **{early_cos:.2f}** between different variables and a "
        f"longest/shortest length ratio of {r.spread_checkpoint['norm_ratio']:.1f}; at the end, **{final_cos:.2f}** "
        f"and {r.spread_final['norm_ratio']:.1f}. " + case
    )


# ------------------------------------------------------------------------------ over seeds
def seeds_table(
    seeds: dict[int, GradientReading], bound: Collection[int], released: GradientReading, opened: int
) -> pd.DataFrame:
    """One row per seed (whether it bound; a seed that never bound is read at its last step) and
    one for the released run: its checkpoint, the gradient block's ratio and rows with the diagonal
    as maximum, its correlation with (UUᵀ)² and whether the gradient-form claim's rule holds there,
    its correlation with the learned block, and the query keys' diagonal mean (its sign printed)."""
    spec = next(c.spec for c in CH10_CLAIMS if c.id == "ch10.query_keys_push_down")
    runs = [(f"seed {s}" + (" (opened)" if s == opened else ""), s in bound, r) for s, r in seeds.items()]
    runs.append(("released run", True, released))
    return pd.DataFrame(
        [
            {
                "run": name,
                "bound": did,
                "step": r.step,
                "ratio": r.ratio,
                "rows with diagonal max": f"{r.stats.loc[GRADIENT, 'rows_diag_max']:.0%}",
                "similarity": r.form,
                "form": gradient_form(r.form),
                "with the learned block": f"{r.learned:.2f}",
                "query keys' diagonal": claims.fmt(r.split_stats.loc["query", "diag_mean"], spec),
            }
            for name, did, r in runs
        ]
    )


def seeds_prose(ev: dict[str, Evidence], dissected: int, seeds: Sequence[int]) -> str:
    """How the dissected seed's correlation compares with that of every seed that bound (the
    claim's values), of the stack's ``seeds``, what the one rule says, and what the gradient reads on
    the seeds that never bound (its own claim)."""
    e = ev["ch10.gradient_form"]
    values = dict(e.rebuild)
    unbound = ev["ch10.unbound_against_identity"]
    left = (
        f" {common.not_bound([s for s, _ in unbound.rebuild], 'by the last step')}: with no jump there is no "
        f"checkpoint before it, so the table reads {'them' if len(unbound.rebuild) > 1 else 'it'} at the last step, "
        "where layer 1 has written its variable directions."
        if unbound.rebuild
        else ""
    )
    if not values:
        who = "The one seed did not bind" if len(seeds) == 1 else f"None of the {len(seeds)} seeds bound"
        return f"{who}, so the claim is read on the released run alone.{left}"
    held = sum(bool(e.claim.rule.holds(v)) for v in values.values())
    verdict = (
        "so the predicted form is a property of these runs"
        if held == len(values)
        else "so on one run the argument can look right or wrong: it is not a property of these runs at this scale"
        if held
        else f"so by the rule the predicted form appears before the jump in none of them (the closest reaches "
        f"{max(values.values()):.3f})"
    )
    mine = f"; seed {dissected}, the one above, has {values[dissected]:.2f}" if dissected in values else ""
    return (
        f"Over the {len(values)} seeds that bound, each read at its own last checkpoint before its jump, the "
        f"gradient's correlation with the predicted (UUᵀ)² is {e.summary()}{mine}. It reaches "
        f"{e.claim.rule.threshold} in {held} of {len(values)}, {verdict}.{left}"
    )


# ---------------------------------------------------------------------------- the release
def comparison_table(rebuild: GradientReading, released: GradientReading) -> pd.DataFrame:
    """The rebuild's and the released run's gradient readings side by side, with how many of the
    chapter's claims hold on each (each by its own rule)."""

    def column(r: GradientReading) -> list[str]:
        held, tested = claims_table.holding(CH10_CLAIMS, r)
        return [
            f"{r.step:,}",
            f"{r.ratio:.2f}",
            f"{r.stats.loc[GRADIENT, 'rows_diag_max']:.0%}",
            f"{r.form:.2f}",
            f"{r.learned:.2f}",
            f"{r.spread_checkpoint['mean_abs_cos']:.2f}",
            f"{held} of {tested}",
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
                "claims holding on this run",
            ],
            "paper's run, as released": column(released),
            "this rebuild": column(rebuild),
        }
    )


def closing_prose(ev: dict[str, Evidence], first_identity: int | None, phase2: int | None) -> str:
    """The argument's verdict, claim by claim (form, identity shape and diagonal rows just before
    the jump), then its direction in time on the run above: whether the gradient block's rows first
    have their maximum on the diagonal before the binding jump, as an argument in which that
    gradient drives the jump needs, or only after it (the words from the steps)."""
    form, shape, rows = (ev[f"ch10.{k}"] for k in ("gradient_form", "gradient_identity", "identity_rows_before_jump"))
    released = None if rows.release is None else f"the released run {claims.fmt(rows.release, rows.claim.spec)}"
    where = ", ".join(
        ([f"{rows.summary()} on the rebuild"] if rows.values else ["no seed of the rebuild bound"])
        + ([released] if released else [])
    )
    verdicts = (
        f"The reconstructed argument, claim by claim: the predicted form is {form.word()}, the identity shape "
        f"just before the jump {shape.word()}, and the gradient's diagonal as the maximum of most rows just before "
        f"the jump {rows.word()} ({where})."
    )
    if first_identity is None:
        timing = (
            "On the run above the gradient block never has its diagonal as the maximum of most rows at a kept "
            "checkpoint: on this run the gradient never points at an identity block."
        )
    elif phase2 is None:
        timing = (
            f"On the run above the gradient block first has its diagonal as the maximum of most rows at step "
            f"{first_identity:,}; no binding jump is detected to set it against."
        )
    else:
        when = claims.order(first_identity, phase2)
        reading = (
            "the gradient points at the identity before binding starts, the order the argument needs"
            if first_identity < phase2
            else "the identity appears in the gradient only once binding is under way, so on this run the "
            "uniform-attention gradient follows the jump rather than leading it, and the argument does not say what "
            "starts it"
        )
        timing = (
            f"On the run above the gradient block first has its diagonal as the maximum of most rows at step "
            f"{first_identity:,}, {when} the binding jump at step {phase2:,}: {reading}."
        )
    return f"{verdicts} {timing}"


def record_all(
    rebuild: GradientReading,
    released: GradientReading,
    seeds: dict[int, GradientReading],
    over: pd.DataFrame,
    first_identity: int | None,
    ev: dict[str, Evidence],
) -> dict[str, object]:
    """Record the chapter's headline numbers (:func:`~mechbook.assign_add.readings.composition_numbers`:
    the rebuild's, the released run's as ``release_*``, the reading over the ``seeds`` that bound as
    ``seeds_*``) and every claim's evidence (``claim.*``, the notebook's ``ev``); returns the records."""
    numbers = composition_numbers(rebuild, released, seeds, over, first_identity)
    return {**common.record_all(numbers), **claims.record_claims(ev.values())}
