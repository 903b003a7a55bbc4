"""Chapter 5, "How the parts cooperate" (book/part1/05_cooperation.ipynb).

The logits of the attention-only model split exactly into a residual (bigram) path and one
attention path per layer (:mod:`mechbook.leading_terms.logit_paths`). The chapter scores each
path by its centred contribution to the logit of the right next token, sentence by sentence and
on average; then removes each trained matrix's leading component, and each path, and measures
what it costs in loss (:mod:`mechbook.leading_terms.ablation`, which computes every experiment):
how far the removals are from additive, why removing W_O's B part can cost more than zeroing the
whole model, and the "W := 0" control, for chapter 3's two runs. The notebook reads them once
(:func:`mechbook.leading_terms.readings.read_cooperation`, a
:class:`~mechbook.leading_terms.readings.CooperationReadings`) and computes the verdicts of
:data:`mechbook.leading_terms.claims.CH05_CLAIMS` once; the recorded numbers are
:func:`mechbook.leading_terms.readings.cooperation_numbers`. This module presents them in page order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

import mechbook
from mechbook import claims
from mechbook.chapters.common import record_all as record_numbers
from mechbook.leading_terms.ablation import EvalRuns, OutputSplit
from mechbook.leading_terms.check import decisive_run, run_label
from mechbook.leading_terms.labels import TERM_LABELS, matrix_label, run_labels
from mechbook.leading_terms.logit_paths import logit_paths
from mechbook.leading_terms.readings import EVERY, FULL, ZERO, CooperationReadings, cooperation_numbers
from mechbook.leading_terms.runs import SHARED_RUNS
from mechbook.leading_terms.tables import table3_frame
from mechbook.leading_terms.train import RunsConfig
from mechbook.validation import POSITIVE, check_fields

STEM = "05_cooperation"


@dataclass(frozen=True)
class ChapterConfig:
    """Chapter 5's settings."""

    runs: RunsConfig
    """Chapter 3's shared runs of the profile (read from the cache, trained if missing)."""
    n_eval: int
    """Training sequences the losses and path averages use (more: steadier means, longer ablations)."""
    n_sentences: int = 5
    """Sentences the per-position explorer offers (a handful to click through)."""

    def __post_init__(self) -> None:
        check_fields(self, n_eval=POSITIVE, n_sentences=POSITIVE)
        run_labels(self.runs.lrs)
        if self.n_sentences > self.n_eval:
            raise ValueError(f"ChapterConfig.n_sentences ({self.n_sentences}) must not exceed n_eval ({self.n_eval})")


#: The chapter's config per profile: chapter 3's runs of that profile and how many training sequences
#: its losses and path averages use.
CONFIGS: dict[str, ChapterConfig] = {
    "smoke": ChapterConfig(SHARED_RUNS["smoke"], n_eval=256),  # smoke's minute
    "cpu": ChapterConfig(SHARED_RUNS["cpu"], n_eval=1024),  # means steady to 3 digits within a minute
    "paper": ChapterConfig(SHARED_RUNS["paper"], n_eval=4096),  # two of the paper's batches
}


def resolve(profile: str, n_eval: int | None = None, seed: int | None = None) -> ChapterConfig:
    """The chapter's config for ``profile`` with the reader's knobs (None: from the profile):
    ``n_eval`` evaluation sequences, ``seed`` of chapter 3's runs."""
    return mechbook.resolve_profile(CONFIGS, profile, n_eval=n_eval, runs__seed=seed)


def profile_prose(c: EvalRuns) -> str:
    """Which runs and how many sequences the chapter uses."""
    paper_lr, large_lr = c.lrs
    steps = c.runs.results[paper_lr].train_cfg.steps
    return (
        f"The two runs of chapter 3 ($\\eta$ = {paper_lr} and {large_lr}, {steps:,} steps); losses and "
        f"averages over the first **{len(c.evaluation):,}** training sequences."
    )


# --- The paths, position by position -------------------------------------------------------------


def sentence_paths(c: EvalRuns, sentence: int, lr: float) -> pd.DataFrame:
    """:func:`logit_paths` of one evaluation sentence, with the current and next tokens as text
    and a ``label`` "position token" for the axis."""
    tok = c.runs.tokenizer
    frame = logit_paths(c.models[lr], c.evaluation[sentence])
    frame["token_text"] = [tok.id_to_token[i] for i in frame["token"]]
    frame["next_text"] = [tok.id_to_token[i] for i in frame["next_token"]]
    frame["label"] = [f"{p:02d} {w}" for p, w in zip(frame["position"], frame["token_text"])]
    return frame.drop(columns=["sequence"])


def path_explorer(cfg: ChapterConfig, c: EvalRuns) -> Any:
    """Bars of each path's centred logit of the next token, position by position; controls pick
    the sentence and the learning rate."""
    import mechbook.viz

    def chart(base: alt.Chart) -> alt.Chart:
        return (
            base.mark_bar()
            .encode(
                x=alt.X(
                    "label:N",
                    title="position and current token",
                    sort=alt.EncodingSortField("position"),
                    axis=alt.Axis(labelAngle=-60),
                ),
                y=alt.Y("contribution:Q", title="centred logit of the next token (nats)"),
                color=alt.Color("path:N", title="path"),
                tooltip=["position", "token_text", "next_text", "path", alt.Tooltip("contribution:Q", format=".4f")],
            )
            .properties(height=260)
        )

    return mechbook.viz.explore(
        lambda sentence, lr: sentence_paths(c, sentence, lr),
        chart,
        controls={"sentence": list(range(cfg.n_sentences)), "lr": list(c.lrs)},
        title="Residual (bigram) path and attention paths, token by token",
    )


def path_prose(readings: CooperationReadings, ev: dict[str, claims.Evidence]) -> str:
    """What each kind of path adds at both learning rates, and the verdict of the paper's ordering
    (on the run that has trained)."""
    means = readings.means
    paper_lr, large_lr = readings.drops
    return (
        f"Averaged over every position, the residual path adds **{means.loc[paper_lr, 'residual']:.3g}** nats to the "
        f"centred logit of the right token at $\\eta = {paper_lr}$ and the attention paths together "
        f"**{means.loc[paper_lr, 'attention']:.3g}**; at $\\eta = {large_lr}$: **{means.loc[large_lr, 'residual']:.3g}** "
        f"and **{means.loc[large_lr, 'attention']:.3g}**. The attention share "
        f"{claims.change(means.loc[paper_lr, 'attention share'], means.loc[large_lr, 'attention share'])} from "
        f"{means.loc[paper_lr, 'attention share']:.3g} to {means.loc[large_lr, 'attention share']:.3g} between the two "
        f"rates.\n\n{ev['ch05.residual_leads'].sentence()}"
    )


# --- Ablation: removing the leading components ---------------------------------------------------


def ablation_label(row: pd.Series) -> str:
    """A short, distinct label of one ablation row in the text's notation: ``W_O − its B part``,
    ``V⁽¹⁾ − its (BΦ)ᵀ part``, ``every matrix − its leading part``, ``zero model``."""
    if row["ablation"] == FULL:
        return "full model"
    if row["ablation"] == EVERY:
        return "every matrix − its leading part"
    if row["ablation"] == ZERO:
        return "zero model (all weights 0)"
    return f"{matrix_label(row['matrix'])} − its {TERM_LABELS[row['kind']]} part"


def ablation(readings: CooperationReadings) -> pd.DataFrame:
    """The matrix ablation tables of both runs, with columns ``lr`` and ``label`` (:func:`ablation_label`)."""
    return pd.concat(
        [e.matrices.assign(lr=lr, label=e.matrices.apply(ablation_label, axis=1)) for lr, e in readings.exps.items()],
        ignore_index=True,
    )


def ablation_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Loss and loss increase of every ablation (rows, in the table's order) at both learning rates."""
    return (
        table.pivot_table(index="label", columns="lr", values=["loss", "delta_loss"], sort=False)
        .rename(columns={"loss": "loss (nats)", "delta_loss": "minus the full model"})
        .rename_axis(index="removal", columns=[None, "learning rate"])
    )


def ablation_chart(table: pd.DataFrame) -> alt.FacetChart:
    """Loss increase over the full model of every removal, one panel per learning rate (each with
    its own scale, as the two runs differ by orders of magnitude); the title names the costliest
    single removal."""
    data = table[table["ablation"] != FULL].assign(
        removal=lambda d: np.where(d["matrix"].notna(), "one matrix's leading term", "reference"),
        run=lambda d: [f"η = {lr}" for lr in d["lr"]],
    )
    worst = data[data["matrix"].notna()].sort_values("delta_loss").iloc[-1]
    order = list(dict.fromkeys(data["label"]))
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            y=alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=260)),
            x=alt.X("delta_loss:Q", title="loss increase over the full model (nats)"),
            color=alt.Color("removal:N", title=None, scale=alt.Scale(range=["#1f77b4", "#9e9e9e"])),
            tooltip=[
                alt.Tooltip("label:N", title="removal"),
                alt.Tooltip("lr:Q", title="η"),
                alt.Tooltip("loss:Q", format=".4f", title="loss (nats)"),
                alt.Tooltip("delta_loss:Q", format="+.4f", title="minus the full model"),
                alt.Tooltip("cosine:Q", format=".4f", title="cos(matrix, its term)"),
            ],
        )
        .properties(width=340, height=alt.Step(16))
        .facet(
            row=alt.Row(
                "run:N",
                title=None,
                sort=list(dict.fromkeys(data["run"])),
                header=alt.Header(labelOrient="top", labelAnchor="start", labelFontWeight="bold"),
            )
        )
        .resolve_scale(x="independent")
        .properties(
            title=f"Costliest single removal: the leading term of {matrix_label(worst['matrix'])} "
            f"(+{worst['delta_loss']:.3f} nats at η = {worst['lr']})"
        )
    )


def against_sum(joint: float, total: float, spec: str) -> str:
    """The joint removal's cost against the sum of the single ones, as printed with ``spec``:
    "0.016 less than their sum", "0.002 more than their sum" or "equal to their sum"."""
    gap = claims.difference(joint, total, spec, "more", "less", "")
    return f"{gap} than their sum" if gap else "equal to their sum"


def ablation_prose(table: pd.DataFrame, readings: CooperationReadings, ev: dict[str, claims.Evidence]) -> str:
    """The zero model's loss, then per run: the full loss, the loss with every leading component
    removed (and how far back to the zero model that is), the costliest single removal, and how far
    the single removals are from adding up; then the verdicts."""
    exps = readings.exps
    loss = table.set_index(["lr", "ablation"])["loss"]
    zero = loss[(next(iter(exps)), ZERO)]
    parts = [f"The zero model scores $\\log|V|$ = **{zero:.3f}** nats."]
    for lr, e in exps.items():
        full, none = loss[(lr, FULL)], loss[(lr, EVERY)]
        total, joint = e.matrix_additivity
        worst, cost = e.costliest
        parts.append(
            f"At $\\eta = {lr}$ the full model reaches **{full:.4f}**; removing every leading component at once gives "
            f"**{none:.4f}** ({e.way_back:.0%} of the way back to the zero model), and the single most "
            f"costly removal is the leading term of {matrix_label(worst)} "
            f"(+{cost:.4f} nats). The single removals add up to +{total:.4f} nats, the joint "
            f"removal costs +{joint:.4f} ({against_sum(joint, total, '.4f')})."
        )
    return " ".join(parts) + "\n\n" + claims.section_prose(ev, "ch05-ablation")


# --- Ablating one path ---------------------------------------------------------------------------


def path_table(readings: CooperationReadings) -> pd.DataFrame:
    """Loss and its increase for every path removal (rows) at both learning rates (columns)."""
    frames = {lr: e.paths.set_index("removal")[["loss", "delta_loss"]] for lr, e in readings.exps.items()}
    table = pd.concat(frames, axis=1).swaplevel(axis=1).sort_index(axis=1, level=0, sort_remaining=False)
    return table.rename(columns={"loss": "loss (nats)", "delta_loss": "minus the full model"}).rename_axis(
        columns=[None, "learning rate"]
    )


def path_ablation_prose(readings: CooperationReadings, ev: dict[str, claims.Evidence]) -> str:
    """Per run: the cost of dropping the residual path and every attention path, the costliest
    single attention layer, how far the layers' single costs are from their joint cost; then the
    verdict."""
    parts = []
    for lr, e in readings.exps.items():
        p = e.paths.set_index("removal")["delta_loss"]
        layers = {k: v for k, v in p.items() if k.startswith("without attention layer")}
        top = max(layers, key=layers.get)
        total, joint = e.path_additivity
        parts.append(
            f"At $\\eta = {lr}$, dropping the residual path costs **+{p['without the residual path']:.4g}** nats and "
            f"dropping every attention path **+{p['without every attention path']:.4g}**; of the layers, "
            f"{top.removeprefix('without ')} costs most (+{layers[top]:.4g}). The layers' single costs add up to "
            f"+{total:.4g}, the joint removal costs +{joint:.4g} ({against_sum(joint, total, '.4g')})."
        )
    return " ".join(parts) + "\n\n" + ev["ch05.residual_path_costs_most"].sentence()


# --- Why removing W_O's B part can cost more than the zero model ---------------------------------


def split_table(readings: CooperationReadings) -> pd.DataFrame:
    """The W_O split of both runs (:class:`mechbook.leading_terms.ablation.OutputSplit`): rows are
    quantities, columns learning rates."""
    names = {
        "loss_full": "loss, W_O whole (nats)",
        "loss_b_part": "loss, W_O's B part alone",
        "loss_remainder": "loss, W_O's remainder alone",
        "loss_zero": "loss, zero model (log |V|)",
        "right_b_part": "right token's centred logit from the B part",
        "right_remainder": "right token's centred logit from the remainder",
        "logit_cosine": "cosine of the two parts' centred logits",
        "rms_b_part": "RMS centred logit, B part",
        "rms_remainder": "RMS centred logit, remainder",
    }
    return pd.DataFrame(
        {lr: {label: getattr(e.split, f) for f, label in names.items()} for lr, e in readings.exps.items()}
    ).rename_axis(columns="learning rate")


def split_prose(readings: CooperationReadings, ev: dict[str, claims.Evidence]) -> str:
    """The W_O split at the larger learning rate in words (each comparison's word derived from the
    printed numbers), then the verdicts of the two remainder claims (on the run that has trained)."""
    lr = tuple(readings.exps)[1]
    s = readings.exps[lr].split
    rest = claims.compare(s.loss_remainder, s.loss_zero, ".3f", claims.Words("worse than", "better than", "as good as"))
    return (
        f"At $\\eta = {lr}$, W_O's B part alone gives a loss of **{s.loss_b_part:.3f}** nats (the whole W_O "
        f"{s.loss_full:.3f}), its remainder alone **{s.loss_remainder:.3f}**: {rest} the zero model's "
        f"{s.loss_zero:.3f}. The remainder writes centred logits of RMS {s.rms_remainder:.3g} "
        f"({claims.compare(s.rms_remainder, s.rms_b_part, '.3g', claims.Words('louder than', 'quieter than', 'as loud as'))} "
        f"the B part's {s.rms_b_part:.3g}), gives the right next token a mean centred logit of {s.right_remainder:.3g} "
        f"(the B part {s.right_b_part:.3g}), and its logits have cosine {s.logit_cosine:.3g} with the B part's. "
        + b_part_alone_prose(s)
        + "\n\n"
        + claims.section_prose(ev, "ch05-remainder")
    )


def b_part_alone_prose(s: OutputSplit) -> str:
    """Why W_O's B part alone can cost more than the zero model although it favours the right
    token: the gap between its largest centred logit and the right token's, and how often that
    largest logit is the right token (each word derived from the printed numbers)."""
    gap = claims.difference(s.top_b_part, s.right_b_part, ".3g", "above", "below", "level with")
    worse = claims.compare(s.loss_b_part, s.loss_zero, ".3f", claims.Words("more than", "less than", "as much as"))
    why = (
        "A position's loss is about the gap between its largest logits and the right one, so a part this loud "
        "that puts another token first at most positions costs more than the zero model, which spreads its guess "
        "evenly"
        if worse == "more than"
        else f"Alone it costs {worse} the zero model"
    )
    return (
        f"The B part alone puts its largest centred logit, on average **{s.top_b_part:.3g}**, {gap} the right "
        f"token's {s.right_b_part:.3g}, and that largest logit is the right token at **{s.hit_b_part:.1%}** of the "
        f"positions. {why} ({s.loss_b_part:.3f} against {s.loss_zero:.3f} nats)."
    )


# --- The "W := 0" control ------------------------------------------------------------------------


def w_zero_prose(readings: CooperationReadings, ev: dict[str, claims.Evidence]) -> str:
    """The loss with every key-query matrix zeroed at both learning rates, against the full model
    and the W leading-term removals, then the verdict on the run that has trained."""
    parts = []
    for lr, e in readings.exps.items():
        loss = e.matrices.set_index("ablation")["loss"]
        parts.append(
            f"at $\\eta = {lr}$, W := 0 gives **{e.loss_w_zero:.5f}** nats against the full model's "
            f"{loss[FULL]:.5f} ({claims.difference(e.loss_w_zero, loss[FULL], '.5f')}; {e.idle_share:.2%} of the "
            f"model's gain over the zero model)"
        )
    verdict = ev["ch05.w_zero_idle"].sentence()
    return (
        "With every key-query matrix set to zero, " + "; ".join(parts) + f".\n\n{verdict}" + w_against_paths(readings)
    )


def w_against_paths(readings: CooperationReadings) -> str:
    """On the run that has trained: what W's choice of where attention looks is worth (the loss of
    W := 0 over the full model's) against what the attention paths carry (the loss without every
    attention path), as a ratio; empty where no run has trained."""
    drops = readings.drops
    lr = decisive_run(drops)
    if lr is None:
        return ""
    e = readings.exps[lr]
    full = float(e.matrices.set_index("ablation").loc[FULL, "loss"])
    w_cost = e.loss_w_zero - full
    paths_cost = float(e.paths.set_index("removal").loc["without every attention path", "delta_loss"])
    if w_cost <= 0:
        return (
            f" On {run_label(lr, drops[lr])}, W := 0 costs nothing while dropping every attention path costs "
            f"+{paths_cost:.4g} nats: the attention paths' skill rests on what they read, not on where W sends them."
        )
    ratio = paths_cost / w_cost
    reading = (
        "with the position biases alone setting the patterns, the model keeps most of what attention gives it: "
        "the key-query matrices, where the paper reads its W ∝ Q associations (chapter 4), carry little of it"
        if ratio >= 1
        else "where W sends attention is worth more than what the paths carry directly"
    )
    return (
        f" On {run_label(lr, drops[lr])}, dropping every attention path costs +{paths_cost:.4g} nats and W := 0 "
        f"+{w_cost:.4g}: the attention paths are worth **{ratio:.3g} times** what W's choice of where they look is "
        f"worth, so {reading}."
    )


# --- Records --------------------------------------------------------------------------------------


def table3(readings: CooperationReadings, uniform: float) -> pd.DataFrame:
    """Table 3 beside this page's lr-0.05 run (``readings.table3``:
    :func:`~mechbook.leading_terms.tables.table3_ablation`)."""
    return table3_frame(readings.table3, uniform)


def table3_prose(ev: dict[str, claims.Evidence]) -> str:
    """The verdicts on Table 3's claims."""
    return claims.section_prose(ev, "ch05-table3")


def record_all(readings: CooperationReadings, ev: dict[str, claims.Evidence]) -> dict[str, Any]:
    """Record the chapter's numbers (:func:`~mechbook.leading_terms.readings.cooperation_numbers`,
    Table 3's losses) and its claims' verdicts; returns the records."""
    losses = readings.table3.dropna(subset=["matrix"]).set_index("matrix")["loss"]
    records = record_numbers(
        {
            **cooperation_numbers(readings.exps, readings.means),
            **{f"table3_loss_{name}": float(v) for name, v in losses.items()},
        }
    )
    records.update(claims.record_claims(ev.values()))
    return records
