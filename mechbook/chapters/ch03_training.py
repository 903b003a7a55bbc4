"""Chapter 3, "Training the 3-layer attention model" (book/part1/03_training.ipynb): its config,
charts and prose, in page order (its claims are :data:`mechbook.leading_terms.claims.CH03_CLAIMS`,
its numbers :func:`mechbook.leading_terms.readings.training_numbers`).

The chapter trains the paper's two runs (configs in :mod:`mechbook.leading_terms.runs`): lr 0.005
and 0.05, 100 epochs at the paper's batch-to-data ratio (3,200 steps), from zero, a number as one
token; chapters 4 and 5 read the same models. Then the paper's BPE run (10 epochs at lr 0.005). It
shows how the profile differs from the paper, what each run costs before it trains, the cosines
over training with the leading terms of the first batch (the paper's) and of the whole set (the
book's), and Table 1, Figure 4 and Table 2 beside the paper's numbers
(:mod:`mechbook.leading_terms.tables`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

import mechbook
from mechbook import claims
from mechbook.chapters import common
from mechbook.leading_terms.check import has_learned, loss_drop
from mechbook.leading_terms.claims import CH03_CLAIMS
from mechbook.leading_terms.readings import TrainingReadings, training_numbers
from mechbook.leading_terms.runs import BPE_RUNS, SHARED_RUNS, gpu_hours, run_plan
from mechbook.leading_terms.tables import FIRST, TABLE1, TABLE2, TABLE_EPOCHS, TERMS, WHOLE, final_loss, table_frame
from mechbook.leading_terms.train import RunConfig, Runs, RunsConfig
from mechbook.validation import SEED, check_fields

STEM = "03_training"
MATRIX = {"W_O": "W_O vs B", "V": "V vs (BΦ)ᵀ", "W": "W vs Q", "P": "P vs 𝒫"}
WIDTH = 680


@dataclass(frozen=True)
class ChapterConfig:
    """Chapter 3: the shared ``runs`` (the paper's two rates; chapters 4-5 read them), the ``bpe``
    run (Table 2), and the ``seed`` of every run's batch order."""

    runs: RunsConfig
    bpe: RunConfig
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(self, seed=SEED)

    def shared_runs(self) -> RunsConfig:
        """The shared runs with this chapter's seed."""
        return replace(self.runs, seed=self.seed)

    def bpe_run(self) -> RunConfig:
        """The BPE run with this chapter's seed."""
        return replace(self.bpe, seed=self.seed)


#: The chapter's config per profile, all from :mod:`mechbook.leading_terms.runs`.
CONFIGS: dict[str, ChapterConfig] = {
    profile: ChapterConfig(SHARED_RUNS[profile], BPE_RUNS[profile]) for profile in SHARED_RUNS
}


def resolve(profile: str, seed: int | None = None) -> ChapterConfig:
    """The chapter's config for ``profile`` with the reader's ``seed`` (None: the profile's)."""
    return mechbook.resolve_profile(CONFIGS, profile, seed=seed)


def plans_prose(cfg: ChapterConfig) -> str:
    """What the chapter's runs will cost, computed from their configs before any of them trains:
    size, steps, η·s, memory, arithmetic, and the time on one GPU at the assumed rate."""
    shared = cfg.shared_runs()
    items = {
        f"Each shared run (η = {' and '.join(f'{lr:g}' for lr in shared.lrs)})": run_plan(shared.run(shared.lrs[0])),
        "The BPE run": run_plan(cfg.bpe_run()),
    }
    return "\n".join(
        f"- **{label}**: {plan.markdown()} On one GPU: about {gpu_hours(plan):.2g} h." for label, plan in items.items()
    )


def _learned(drop: float, log_vocab: float) -> str:
    text = f"the loss has fallen {claims.fmt(drop, '.3f')} nats below log |V| = {log_vocab:.3f}"
    if not has_learned(drop):
        text += " (the model has barely learned: its cosines say mostly how its first small steps point)"
    return text


def runs_prose(profile: str, r: TrainingReadings) -> str:
    """The shared runs in one sentence, and how much each has learned by its end."""
    runs = r.runs
    n = runs.sequences.n_kept
    first = r.small.train_cfg
    lrs = sorted(runs.results)
    vocab = runs.tokenizer.vocab_size
    learned = "; ".join(
        f"at η = {lr:g}, {_learned(loss_drop(final_loss(runs.results[lr]), vocab), float(np.log(vocab)))}" for lr in lrs
    )
    return (
        f"Profile **{profile}**: {n:,} sequences of T = {runs.sequences.context} predictions, |V| = {vocab} "
        f"(`<unk>` {runs.sequences.unk_fraction:.1%} of the tokens), plain SGD from zero with batches of "
        f"{first.batch_size} ({n // first.batch_size} steps an epoch) for **{first.steps:,} steps** at learning rates "
        f"{' and '.join(f'{lr:g}' for lr in lrs)}: η·s = {' and '.join(f'{lr * first.steps:g}' for lr in lrs)}. "
        f"At the end, {learned}."
    )


def _history(runs: Runs, per_epoch: int) -> pd.DataFrame:
    """Both runs' histories, long over the two sets of leading terms, with epochs and labels."""
    frames = [r.history.assign(run_lr=lr) for lr, r in runs.results.items()]
    data = pd.concat(frames, ignore_index=True)
    data = data[data["step"] > 0]
    data["epoch"] = data["step"] / per_epoch
    data["term"] = data["kind"].map(MATRIX)
    data["layer_label"] = data["layer"].map(lambda l: "output" if pd.isna(l) else f"layer {int(l)}")
    long = data.melt(
        id_vars=["run_lr", "step", "epoch", "term", "layer_label", "loss"],
        value_vars=[FIRST, WHOLE],
        var_name="terms",
        value_name="cos",
    )
    long["terms"] = long["terms"].map(TERMS)
    return long


def cosine_chart(r: TrainingReadings) -> alt.FacetChart:
    """Cosine with the leading term at the end of every epoch, one panel per kind, one colour per
    layer, solid with the first batch's terms and dashed with the whole set's; a menu picks the
    learning rate. The title gives Table 1's lowest entry and the larger rate's lowest cosine
    after 100 epochs."""
    data = _history(r.runs, r.per_epoch)
    lrs = sorted(r.runs.results)
    table1 = min(r.table1().values())
    pick = alt.selection_point(
        fields=["run_lr"], bind=alt.binding_select(options=lrs, name="learning rate "), value=lrs[0]
    )
    title = (
        f"At η = {lrs[0]:g} every W_O, V and W stays at cosine ≥ {claims.fmt(table1, '.4f')} for 100 epochs; at η = "
        f"{lrs[-1]:g} they end at ≥ {claims.fmt(r.figure4(100), '.3f')} (first batch's terms)"
    )
    return (
        alt.Chart(data)
        .mark_line()
        .encode(
            x=alt.X("epoch:Q", title="epoch (32 steps)"),
            y=alt.Y("cos:Q", title="cosine with the leading term", scale=alt.Scale(zero=False)),
            color=alt.Color("layer_label:N", title="layer", legend=alt.Legend(orient="bottom")),
            strokeDash=alt.StrokeDash("terms:N", title="leading terms of the", legend=alt.Legend(orient="bottom")),
            tooltip=[
                "term",
                "layer_label",
                "terms",
                alt.Tooltip("run_lr:Q", title="learning rate"),
                "epoch",
                alt.Tooltip("cos:Q", format=".4f", title="cosine"),
            ],
        )
        .add_params(pick)
        .transform_filter(pick)
        .properties(width=WIDTH // 2 - 60, height=150)
        .facet(facet=alt.Facet("term:N", title=None, sort=list(MATRIX.values())), columns=2)
        .properties(title=title)
    )


def table1(r: TrainingReadings) -> pd.DataFrame:
    """Table 1 beside the lr-0.005 run's entries, with each set of leading terms."""
    return table_frame(r.small, r.per_epoch, TABLE_EPOCHS["table1"], TABLE1)


def table2(r: TrainingReadings) -> pd.DataFrame:
    """Table 2 beside the BPE run's entries, with each set of leading terms."""
    return table_frame(r.bpe, r.bpe_per_epoch, TABLE_EPOCHS["table2"], TABLE2)


def terms_prose(r: TrainingReadings) -> str:
    """Which set of leading terms the trained matrices follow more closely, per table entry."""
    first, whole = r.table1(FIRST), r.table1(WHOLE)
    closer = [k for k in first if claims.printed(whole[k], ".4f") > claims.printed(first[k], ".4f")]
    further = [k for k in first if claims.printed(whole[k], ".4f") < claims.printed(first[k], ".4f")]
    n = r.runs.sequences.n_kept // r.per_epoch
    parts = []
    if closer:
        parts.append(
            f"the whole set's terms fit {', '.join(MATRIX[k] for k in closer)} more closely than the first batch's"
        )
    if further:
        parts.append(f"the first batch's fit {', '.join(MATRIX[k] for k in further)} more closely")
    if not parts:
        parts.append("both sets of terms fit every matrix alike to four decimals")
    tokens = n * r.runs.sequences.context
    ceiling = ", ".join(f"{MATRIX[k]} {claims.fmt(r.ceiling[k], '.4f')}" for k in ("W_O", "V", "W"))
    return (
        f"The paper computes the leading terms on its first batch of 2,048 sequences of 200 tokens (409,600 tokens); "
        f"here that batch is {n:,} sequences of {r.runs.sequences.context} ({tokens:,} tokens), 1/32 of the data as in "
        f"the paper. Its terms are at cosine {ceiling} with the whole set's: that is what the paper's measure reads "
        f"on a matrix that follows the whole set's terms exactly. On Table 1's run, {'; '.join(parts)}."
    )


def loss_chart(r: TrainingReadings) -> alt.Chart:
    """The batch loss at the end of every epoch of each shared run, with log :math:`|V|` marked."""
    runs = r.runs
    frames = [res.history[res.history["kind"] == "W_O"].assign(run_lr=lr) for lr, res in runs.results.items()]
    data = pd.concat(frames, ignore_index=True)
    data["epoch"] = data["step"] / r.per_epoch
    vocab = runs.tokenizer.vocab_size
    ends = {lr: final_loss(res) for lr, res in runs.results.items()}
    lines = (
        alt.Chart(data)
        .mark_line(point=alt.OverlayMarkDef(size=10))
        .encode(
            x=alt.X("epoch:Q", title="epoch (32 steps)"),
            y=alt.Y("loss:Q", title="cross-entropy of the batch (nats)", scale=alt.Scale(zero=False)),
            color=alt.Color("run_lr:O", title="learning rate η", legend=alt.Legend(orient="bottom")),
            tooltip=[alt.Tooltip("run_lr:Q", title="learning rate"), "epoch", alt.Tooltip("loss:Q", format=".3f")],
        )
    )
    zero = alt.Chart(pd.DataFrame({"loss": [float(np.log(vocab))]})).mark_rule(strokeDash=[2, 2], color="gray")
    return (lines + zero.encode(y="loss:Q")).properties(
        width=WIDTH - 80,
        height=220,
        title="After 100 epochs the loss is "
        + " and ".join(
            f"{ends[lr]:.3f} nats at η = {lr:g} ({ends[lr] / np.log(vocab):.0%} of log |V|)" for lr in sorted(ends)
        )
        + " (dashed: log |V|)",
    )


def record_all(r: TrainingReadings, ev: dict[str, claims.Evidence]) -> dict[str, Any]:
    """Record the chapter's numbers (bounded by ``book/thresholds/03_training.yml``) and its claims;
    return the records."""
    records = common.record_all(training_numbers(r))
    records.update(claims.record_claims(ev[c.id] for c in CH03_CLAIMS))
    return records
