"""Chapter 5, "How the parts cooperate" (book/part1/05_cooperation.ipynb).

The logits of the attention-only model split exactly into a residual (bigram) path and one
attention path per layer (:mod:`mechbook.leading_terms.logit_paths`). The chapter scores each
path by its centred contribution to the logit of the right next token, sentence by sentence and
on average, then removes each trained matrix's leading component (:mod:`mechbook.leading_terms.ablation`)
and measures what it costs in loss, for chapter 3's two runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from mechbook.chapters.part1_labels import TERM_LABELS, matrix_label, run_labels
from mechbook.leading_terms.ablation import cached_ablation_table
from mechbook.leading_terms.logit_paths import RESIDUAL, logit_paths
from mechbook.leading_terms.model import AttentionModel
from mechbook.leading_terms.runs import SHARED_RUNS
from mechbook.leading_terms.train import Runs, RunsConfig, chapter_runs

FULL, EVERY, ZERO = "full model", "remove every leading term", "zero model"
"""The reference rows of :func:`mechbook.leading_terms.ablation.ablation_table`."""


@dataclass(frozen=True)
class CooperationConfig:
    """Chapter 5: the ``runs`` of chapter 3, how many training sequences the losses and path
    averages use (``n_eval``), and how many sentences the per-position explorer offers."""

    runs: RunsConfig
    n_eval: int
    n_sentences: int = 5

    def __post_init__(self) -> None:
        if not isinstance(self.runs, RunsConfig):
            raise TypeError(f"CooperationConfig.runs must be a RunsConfig, got {type(self.runs).__name__}")
        run_labels(self.runs.lrs)
        for name in ("n_eval", "n_sentences"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"CooperationConfig.{name} must be a positive integer, got {value!r}")
        if self.n_sentences > self.n_eval:
            raise ValueError(
                f"CooperationConfig.n_sentences ({self.n_sentences}) must not exceed n_eval ({self.n_eval})"
            )


#: The chapter's config per profile: chapter 3's runs of that profile and how many training sequences
#: its losses and path averages use.
CONFIGS: dict[str, CooperationConfig] = {
    "smoke": CooperationConfig(SHARED_RUNS["smoke"], n_eval=256),
    "cpu": CooperationConfig(SHARED_RUNS["cpu"], n_eval=1024),
    "paper": CooperationConfig(SHARED_RUNS["paper"], n_eval=4096),
}


@dataclass
class Cooperation:
    """Chapter 3's runs, one model per learning rate, and the evaluation sequences (the first
    ``n_eval`` training sequences)."""

    cfg: CooperationConfig
    runs: Runs
    models: dict[float, AttentionModel]
    evaluation: np.ndarray

    @property
    def lrs(self) -> tuple[float, float]:
        return self.cfg.runs.lrs


def load(cfg: CooperationConfig) -> Cooperation:
    """Chapter 3's runs (trained, or read from the cache), their models and evaluation sequences."""
    runs = chapter_runs(cfg.runs)
    models = {lr: r.model() for lr, r in runs.results.items()}
    return Cooperation(cfg, runs, models, runs.sequences.tokens[: cfg.n_eval])


def profile_note(c: Cooperation) -> str:
    """Which runs and how many sequences the chapter uses."""
    paper_lr, large_lr = c.lrs
    return (
        f"The two runs of chapter 3 ($\\eta$ = {paper_lr} and {large_lr}, {c.runs.results[c.lrs[0]].train_cfg.steps:,} steps); losses and "
        f"averages over the first **{len(c.evaluation):,}** training sequences."
    )


def sentence_paths(c: Cooperation, sentence: int, lr: float) -> pd.DataFrame:
    """:func:`logit_paths` of one evaluation sentence, with the current and next tokens as text
    and a ``label`` "position token" for the axis."""
    tok = c.runs.tokenizer
    frame = logit_paths(c.models[lr], c.evaluation[sentence])
    frame["token_text"] = [tok.id_to_token[i] for i in frame["token"]]
    frame["next_text"] = [tok.id_to_token[i] for i in frame["next_token"]]
    frame["label"] = [f"{p:02d} {w}" for p, w in zip(frame["position"], frame["token_text"])]
    return frame.drop(columns=["sequence"])


def path_explorer(c: Cooperation) -> Any:
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
        controls={"sentence": list(range(c.cfg.n_sentences)), "lr": list(c.lrs)},
        title="Residual (bigram) path and attention paths, token by token",
    )


def path_means(c: Cooperation) -> pd.DataFrame:
    """Per learning rate, the mean over every evaluation position of the residual path's and of
    all attention paths' (summed) centred logit of the next token, and the attention share
    :math:`a / (|a| + |r|)` for attention a and residual r (negative when the attention paths lower the right token)."""
    rows = {}
    for lr in c.lrs:
        frame = logit_paths(c.models[lr], c.evaluation)
        frame["kind"] = np.where(frame["path"] == RESIDUAL, "residual", "attention")
        rows[lr] = frame.groupby(["sequence", "position", "kind"])["contribution"].sum().unstack().mean()
    table = pd.DataFrame(rows).T[["residual", "attention"]].rename_axis(index="learning rate", columns=None)
    table["attention share"] = table["attention"] / (table["attention"].abs() + table["residual"].abs())
    return table


def path_prose(c: Cooperation, means: pd.DataFrame) -> str:
    """What each kind of path adds at both learning rates, and the order the leading terms predict."""
    paper_lr, large_lr = c.lrs
    return (
        f"Averaged over every position, the residual path adds **{means.loc[paper_lr, 'residual']:.3g}** nats to the "
        f"centred logit of the right token at $\\eta = {paper_lr}$ and the attention paths together "
        f"**{means.loc[paper_lr, 'attention']:.3g}**; at $\\eta = {large_lr}$: **{means.loc[large_lr, 'residual']:.3g}** "
        f"and **{means.loc[large_lr, 'attention']:.3g}**. The leading terms predict this ordering: the residual path "
        f"grows like $\\eta s$, the attention paths like $(\\eta s)^3$, so attention only matters once $\\eta s$ is large."
    )


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


def ablation(c: Cooperation) -> pd.DataFrame:
    """The ablation table of both runs (cached), with columns ``lr`` and ``label``
    (:func:`ablation_label`) added."""
    tables = []
    for lr in c.lrs:
        t = cached_ablation_table(c.runs.results[lr].state, c.models[lr], c.runs.stats, c.evaluation)
        tables.append(t.assign(lr=lr, label=t.apply(ablation_label, axis=1)))
    return pd.concat(tables, ignore_index=True)


def ablation_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Loss and loss increase of every ablation (rows, in the table's order) at both learning rates."""
    return (
        table.pivot_table(index="label", columns="lr", values=["loss", "delta_loss"], sort=False)
        .rename(columns={"loss": "loss (nats)", "delta_loss": "minus the full model"})
        .rename_axis(index="removal", columns=[None, "learning rate"])
    )


def _costliest(table: pd.DataFrame) -> pd.DataFrame:
    """Per learning rate, the single-matrix removal with the largest loss increase."""
    single = table[table["matrix"].notna()]
    return single.loc[single.groupby("lr")["delta_loss"].idxmax()].set_index("lr")


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


def headline(c: Cooperation, table: pd.DataFrame, means: pd.DataFrame) -> dict[str, Any]:
    r"""The recorded numbers per run (``*_paper_lr``, ``*_large_lr``): mean residual and attention
    contributions, loss of the full model, with every leading term removed and with W_O's removed,
    the largest single-removal increase and its matrix; and the zero model's loss (:math:`\log |V|`)."""
    labels = run_labels(c.lrs)
    worst = _costliest(table)
    numbers: dict[str, Any] = {}
    for lr, name in labels.items():
        numbers[f"mean_residual_{name}"] = float(means.loc[lr, "residual"])
        numbers[f"mean_attention_{name}"] = float(means.loc[lr, "attention"])
    for lr, name in labels.items():
        rows = table[table["lr"] == lr].set_index("ablation")
        numbers[f"loss_full_{name}"] = float(rows.loc[FULL, "loss"])
        numbers[f"loss_no_leading_{name}"] = float(rows.loc[EVERY, "loss"])
        numbers[f"loss_no_W_O_term_{name}"] = float(rows.loc["remove leading term of W_O", "loss"])
        numbers[f"max_single_delta_{name}"] = float(worst.loc[lr, "delta_loss"])
        numbers[f"worst_single_{name}"] = str(worst.loc[lr, "matrix"])
    numbers["loss_zero"] = float(table[(table["lr"] == c.lrs[0]) & (table["ablation"] == ZERO)]["loss"].iloc[0])
    return numbers


def ablation_prose(c: Cooperation, table: pd.DataFrame) -> str:
    """The zero model's loss, then per run: the full loss, the loss with every leading component
    removed (and how far back to the zero model that is), and the costliest single removal."""
    loss = table.set_index(["lr", "ablation"])["loss"]
    zero = loss[(c.lrs[0], ZERO)]
    worst = _costliest(table)
    parts = [f"The zero model scores $\\log|V|$ = **{zero:.3f}** nats."]
    for lr in c.lrs:
        full, none = loss[(lr, FULL)], loss[(lr, EVERY)]
        parts.append(
            f"At $\\eta = {lr}$ the full model reaches **{full:.4f}**; removing every leading component at once gives "
            f"**{none:.4f}** ({(none - full) / max(zero - full, 1e-12):.0%} of the way back to the zero model), "
            f"and the single most costly removal is the leading term of {matrix_label(worst.loc[lr, 'matrix'])} "
            f"(+{worst.loc[lr, 'delta_loss']:.4f} nats)."
        )
    return " ".join(parts)
