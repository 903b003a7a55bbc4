"""Chapter 6, "The same features in a real LLM" (book/part1/06_pythia.ipynb): its config per
profile, its charts and computed prose in page order, and its records.

The study itself (run configs, the checkpoint source, the similarity of every checkpoint to the
leading-term features and the controls) is computed in :mod:`mechbook.pythia.study`, the readings
each claim rests on and the recorded numbers in :mod:`mechbook.pythia.readings`, and the claims are
:mod:`mechbook.pythia.claims`; this module presents them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import altair as alt
import pandas as pd

import mechbook
from mechbook import claims
from mechbook.chapters.common import record_all as record_numbers
from mechbook.claims import Evidence
from mechbook.pythia.analysis import LAYER_LEVEL, MAPPINGS
from mechbook.pythia.claims import FADE, claim_id
from mechbook.pythia.readings import MAPPING_LABELS, StudyReadings
from mechbook.pythia.similarity import MEASURE_LABELS, MEASURES
from mechbook.pythia.study import (
    STUDY_PROFILES,
    ControlReading,
    StudyConfig,
    StudyResult,
    best_head,
    fade_share,
)
from mechbook.validation import check_fields

STEM = "06_pythia"
WIDTH = 640  # the text column is ~680 px; charts leave room for the axis labels
CONTROL_LABELS = {
    "random_init": "random initialisation",
    "shuffled_tokens": "shuffled-token feature",
    "offset": "random + shared offset",
    "linear": "exactly linear in the feature",
}
FEATURE_OF = {"embedding": "(BΦ)ᵀ", "no_mlp": "(BΦ)ᵀ", "attention": "Q", "attention_resid_pre": "Q"}


@dataclass(frozen=True)
class ChapterConfig:
    """Chapter 6's settings."""

    study: StudyConfig
    """The study of the profile (:data:`mechbook.pythia.study.STUDY_PROFILES`): source, top-k,
    the miniature's recipe, the Pythia checkpoints and the seed."""

    def __post_init__(self) -> None:
        check_fields(self)


#: The chapter's config per profile (``smoke``: a miniature; ``cpu``: pythia-70m, or a miniature
#: when the Hub does not answer; ``paper``: pythia-1.4b, the paper's Pythia-1.4B; both from the
#: suite trained on the Pile, as the paper names no deduplicated variant).
CONFIGS: dict[str, ChapterConfig] = {profile: ChapterConfig(study) for profile, study in STUDY_PROFILES.items()}


def resolve(
    profile: str,
    source: str | None = None,
    top_k: int | None = None,
    n_stories: int | None = None,
    seed: int | None = None,
) -> ChapterConfig:
    """The chapter's config for ``profile`` with the reader's knobs (None: from the profile):
    ``source`` ("auto", "pythia" or "miniature"), ``top_k`` tokens, ``n_stories`` for the
    miniature, ``seed`` of the miniature and the controls."""
    return mechbook.resolve_profile(
        CONFIGS, profile, study__source=source, study__top_k=top_k, study__n_stories=n_stories, study__seed=seed
    )


# --- Where the checkpoints come from --------------------------------------------------------------


def banner_prose(result: StudyResult) -> str:
    """An admonition box (HTML) naming the source of every figure of the chapter."""
    choice = result.choice
    if choice.kind == "pythia":
        cls, title = "note", "These figures come from real Pythia checkpoints"
        body = f"Source: {choice.source.label}. Chosen because {choice.reason}."
    else:
        cls, title = "warning", "These figures come from Pythia in miniature, not from Pythia"
        body = (
            f"Source: {choice.source.label}. Chosen because {choice.reason}. The miniature has Pythia's architecture, "
            "optimiser recipe and checkpoint schedule, but it is thousands of times smaller and trained on TinyStories, "
            "so its numbers show the method, not the paper's measurements. Run with the Hub reachable and "
            '<code>source = "pythia"</code> for the real checkpoints.'
        )
    return f'<div class="admonition {cls}"><p class="admonition-title">{title}</p><p>{body}</p></div>'


def loss_chart(losses: list[float], steps: list[int], title: str) -> alt.Chart:
    """The miniature's training loss per step, with its checkpoints marked."""
    data = pd.DataFrame({"step": range(1, len(losses) + 1), "loss": losses})
    marks = data[data["step"].isin(steps)]
    base = (
        alt.Chart(data)
        .mark_line()
        .encode(
            x=alt.X("step:Q", scale=alt.Scale(type="log"), title="training step (log scale)"),
            y=alt.Y("loss:Q", title="cross-entropy (nats/token)"),
        )
    )
    dots = (
        alt.Chart(marks)
        .mark_point(color="black")
        .encode(x="step:Q", y="loss:Q", tooltip=["step:Q", alt.Tooltip("loss:Q", format=".3f")])
    )
    return (base + dots).properties(width=WIDTH - 80, height=200, title=title)


def schedule_chart(steps: list[int], title: str) -> alt.Chart:
    """The checkpoints read, one dot per step on a symmetric-log axis (real Pythia, whose training
    loss the chapter does not have)."""
    data = pd.DataFrame({"step": steps, "checkpoint": range(1, len(steps) + 1)})
    return (
        alt.Chart(data)
        .mark_point(filled=True, color="black")
        .encode(
            x=alt.X("step:Q", scale=alt.Scale(type="symlog"), title="training step (symmetric log scale)"),
            y=alt.Y("checkpoint:Q", title="checkpoint (in order)"),
            tooltip=["checkpoint:Q", "step:Q"],
        )
        .properties(width=WIDTH - 80, height=200, title=title)
    )


def source_chart(result: StudyResult) -> alt.Chart:
    """The source's figure: the miniature's loss with its checkpoints, or Pythia's checkpoints."""
    src = result.choice.source
    steps = list(src.steps)
    if result.choice.kind == "miniature":
        losses = src.run.losses
        verb = claims.change(losses[0], losses[-1], ".2f", "rises", "falls", "stays")
        return loss_chart(
            losses,
            steps,
            f"The miniature's loss {verb} from {losses[0]:.2f} to {losses[-1]:.2f} nats/token; dots are its "
            f"{len(steps)} checkpoints",
        )
    return schedule_chart(steps, f"{len(steps)} checkpoints of {src.label}, steps {steps[0]:,} to {steps[-1]:,}")


# --- The features ---------------------------------------------------------------------------------


def corpus_prose(result: StudyResult) -> str:
    """Markdown: the corpus the features come from and the share of tokens the top k cover."""
    from mechbook.viz import escape_markdown

    src, feats = result.choice.source, result.features
    top = ", ".join(escape_markdown(repr(src.decode(t))) for t in feats.token_ids[:20])
    return (
        f"{src.tokens.shape[0]} sequences of {src.tokens.shape[1] - 1} + 1 tokens; the top {feats.k} tokens cover "
        f"{100 * (1 - feats.other_fraction):.1f}% of them, and the other {100 * feats.other_fraction:.1f}% are dropped. "
        f"The twenty most frequent: {top}."
    )


# --- What each measure can tell apart -------------------------------------------------------------


def controls_title(readings: StudyReadings, ev: dict[str, Evidence]) -> str:
    """The controls chart's title: per measure, how many mappings peak above every negative control
    (each mapping's claim reproduced)."""
    parts = [
        f"{'CKA' if m == 'cka' else 'paper measure'} "
        f"{sum(ev[claim_id(readings.kind, p, m)].verdict == 'reproduced' for p in MAPPINGS)} of {len(MAPPINGS)}"
        for m in MEASURES
    ]
    return "Mappings above every negative control: " + ", ".join(parts)


def controls_chart(
    summary: dict[tuple[str, str], dict[str, float]], control_means: pd.DataFrame, title: str
) -> alt.Chart:
    """Per measure and mapping, the trained model's peak next to the four controls: what each
    measure can and cannot tell apart."""
    rows = [(measure, mapping, "trained model (peak)", s["peak"]) for (measure, mapping), s in summary.items()]
    rows += [(r.measure, r.mapping, CONTROL_LABELS[r.control], r.similarity) for r in control_means.itertuples()]
    data = pd.DataFrame(rows, columns=["measure", "mapping", "what", "similarity"]).assign(
        mapping_label=lambda d: d["mapping"].map(MAPPING_LABELS),
        measure_label=lambda d: d["measure"].map(MEASURE_LABELS),
    )
    order = ["trained model (peak)"] + list(CONTROL_LABELS.values())
    return (
        alt.Chart(data)
        .mark_point(filled=True, size=90)
        .encode(
            x=alt.X("similarity:Q", scale=alt.Scale(domain=[-0.2, 1]), title="similarity"),
            y=alt.Y(
                "mapping_label:N", title=None, sort=[MAPPING_LABELS[m] for m in MAPPINGS], axis=alt.Axis(labelLimit=330)
            ),
            color=alt.Color(
                "what:N", sort=order, title=None, legend=alt.Legend(orient="bottom", columns=2, labelLimit=220)
            ),
            tooltip=["measure_label:N", "mapping_label:N", "what:N", alt.Tooltip("similarity:Q", format=".3f")],
        )
        .properties(width=WIDTH - 320, height=150)
        .facet(
            row=alt.Row(
                "measure_label:N",
                title=None,
                sort=[MEASURE_LABELS[m] for m in MEASURES],
                header=alt.Header(labelAngle=0, labelAlign="left", labelAnchor="start", labelOrient="top"),
            )
        )
        .properties(title=title)
    )


def _steps_sort(table: pd.DataFrame) -> list[str]:
    return [str(s) for s in sorted(table["step"].unique())]


def _measure_pick(name: str) -> alt.Parameter:
    labels = [MEASURE_LABELS[m] for m in MEASURES]
    return alt.param(name=name, value=labels[0], bind=alt.binding_radio(options=labels, name="measure "))


def layer_heatmaps(table: pd.DataFrame, title: str) -> alt.Chart:
    """Layer x checkpoint heatmaps (0..1) of the four mappings, two per row; radio buttons pick
    the measure."""
    data = table[table["head"] == LAYER_LEVEL].assign(
        step_label=lambda d: d["step"].astype(str),
        mapping_label=lambda d: d["mapping"].map(MAPPING_LABELS),
        measure_label=lambda d: d["measure"].map(MEASURE_LABELS),
    )
    pick = _measure_pick("heatmap_measure")
    return (
        alt.Chart(data)
        .mark_rect()
        .encode(
            x=alt.X("step_label:O", sort=_steps_sort(data), title="checkpoint (training step)"),
            y=alt.Y("layer:O", title="layer", sort="descending"),
            color=alt.Color(
                "similarity:Q",
                scale=alt.Scale(domain=[0, 1], scheme="viridis"),
                title="similarity",
                legend=alt.Legend(orient="bottom"),
            ),
            tooltip=[
                "measure_label:N",
                "mapping_label:N",
                "layer:O",
                "step:Q",
                alt.Tooltip("similarity:Q", format=".3f"),
            ],
        )
        .transform_filter(alt.datum.measure_label == pick)
        .properties(width=WIDTH // 2 - 50, height=90)
        .facet(facet=alt.Facet("mapping_label:N", title=None, sort=[MAPPING_LABELS[m] for m in MAPPINGS]), columns=2)
        .add_params(pick)  # a facet chart's parameters live at its top level
        .properties(title=title)
    )


def head_heatmap(table: pd.DataFrame, title: str, layer: int | None = None) -> alt.Chart:
    """Head x checkpoint heatmap of the model's attention scores (ln1 output) against Q; a
    dropdown picks the layer (first shown: ``layer``, default the last), radio buttons the measure."""
    data = table[(table["mapping"] == "attention") & (table["head"] != LAYER_LEVEL)].assign(
        step_label=lambda d: d["step"].astype(str), measure_label=lambda d: d["measure"].map(MEASURE_LABELS)
    )
    layers = sorted(int(layer) for layer in data["layer"].unique())
    if layer is not None and layer not in layers:
        raise ValueError(f"layer {layer} is not among the table's layers {layers}")
    layer_pick = alt.param(
        name="layer_pick",
        value=layers[-1] if layer is None else layer,
        bind=alt.binding_select(options=layers, name="layer "),
    )
    measure_pick = _measure_pick("head_measure")
    return (
        alt.Chart(data, title=title)
        .mark_rect()
        .encode(
            x=alt.X("step_label:O", sort=_steps_sort(data), title="checkpoint (training step)"),
            y=alt.Y("head:O", title="head"),
            color=alt.Color(
                "similarity:Q",
                scale=alt.Scale(domain=[0, 1], scheme="viridis"),
                title="similarity",
                legend=alt.Legend(orient="bottom"),
            ),
            tooltip=["measure_label:N", "layer:O", "head:O", "step:Q", alt.Tooltip("similarity:Q", format=".3f")],
        )
        .add_params(layer_pick, measure_pick)
        .transform_filter((alt.datum.layer == layer_pick) & (alt.datum.measure_label == measure_pick))
        .properties(width=WIDTH - 80, height=140)
    )


def curves_frame(curve: pd.DataFrame, control_means: pd.DataFrame) -> pd.DataFrame:
    """The trained model's layer-mean curve per measure and mapping, and the random-initialisation
    and shuffled-token controls drawn as constant lines over the same steps: ``measure, mapping,
    step, similarity, line``."""
    steps = sorted(curve["step"].unique())
    trained = curve.assign(line="checkpoints")
    flat = [
        (r.measure, r.mapping, step, r.similarity, CONTROL_LABELS[r.control])
        for r in control_means[control_means["control"].isin(["random_init", "shuffled_tokens"])].itertuples()
        for step in steps
    ]
    controls = pd.DataFrame(flat, columns=["measure", "mapping", "step", "similarity", "line"])
    frame = pd.concat([trained[controls.columns], controls], ignore_index=True)
    return frame.assign(mapping=frame["mapping"].map(MAPPING_LABELS), measure=frame["measure"].map(MEASURE_LABELS))


def similarity_curves(curve: pd.DataFrame, control_means: pd.DataFrame, title: str) -> alt.TopLevelMixin:
    """Layer-mean similarity against training step (symmetric-log x, so step 0 shows), one colour
    per mapping, its two model controls dashed in the same colour; radio buttons pick the measure,
    the legend (below) highlights a mapping."""
    from mechbook.viz import curves_with_controls

    frame = curves_frame(curve, control_means)
    return curves_with_controls(
        frame,
        controls=["measure"],
        initial={"measure": MEASURE_LABELS[MEASURES[0]]},
        x="step",
        y="similarity",
        series="mapping",
        stroke_dash="line",
        dash_title="line",
        x_title="training step (symmetric log scale)",
        y_title="similarity (mean over layers)",
        series_title="mapping",
        x_scale=alt.Scale(type="symlog", nice=False, domainMin=0, zero=True),
        point=True,
        height=260,
        title=title,
    )


# --- Layer by checkpoint, head by head, over training ---------------------------------------------


def layers_title(result: StudyResult) -> str:
    """The heatmaps' title: the highest layer-mean similarity under CKA, its mapping and step."""
    rows = result.curve[result.curve["measure"] == "cka"]
    top = rows.loc[rows["similarity"].idxmax()]
    return (
        f"Under CKA the highest layer-mean similarity is {top['similarity']:.2f} "
        f"({MAPPING_LABELS[top['mapping']]}, step {int(top['step']):,})"
    )


def heads_title(result: StudyResult) -> str:
    """The head heatmap's title: the best single head under CKA."""
    best = best_head(result.table)
    return (
        f"Under CKA the best head (layer {int(best['layer'])}, head {int(best['head'])}) reaches "
        f"{best['similarity']:.2f} at step {int(best['step']):,}"
    )


def curves_title(result: StudyResult) -> str:
    """The curves' title: under CKA, where the embedding curve peaks and where it ends."""
    s = result.summary["cka", "embedding"]
    verb = claims.change(s["peak"], s["final"], ".2f", "rises to", "falls to", "stays at")
    return f"Under CKA the embedding peaks at {s['peak']:.2f} (step {s['peak_step']:,}), then {verb} {s['final']:.2f}"


# --- What the numbers say -------------------------------------------------------------------------


def _sentence(measure: str, mapping: str, r: ControlReading, ev: Evidence, share: float, last_step: int) -> str:
    head = f"**{MAPPING_LABELS[mapping]}** vs {FEATURE_OF[mapping]}: peak {r.peak:.3f} at step {r.peak_step}"
    linear = r.controls["linear"]
    above = ev.verdict == "reproduced"
    if above:
        verdict = f"above every negative control (by {r.margin:.3f} over the {CONTROL_LABELS[r.strongest]})"
    elif claims.compare(linear, r.baseline, ".3f") == "higher than":
        verdict = (
            f"**not** above the {CONTROL_LABELS[r.strongest]} ({r.baseline:.3f}), although this measure does rate an "
            f"exactly linear representation higher ({linear:.3f}): no evidence of the feature"
        )
    else:
        verdict = (
            f"**not** above the {CONTROL_LABELS[r.strongest]} ({r.baseline:.3f}); but this measure rates even an "
            f"exactly linear representation no higher ({linear:.3f}), so here it cannot tell either way"
        )
    if not above:
        timing = ""
    elif share >= FADE:
        timing = (
            f"; it then drifts down by {r.drift:.3f} to {r.final:.3f} at the last checkpoint, an early peak that fades"
        )
    else:
        timing = f"; it ends at {r.final:.3f} (step {last_step}), so there is no early peak that fades"
    return f"- {head}, {verdict}{timing}."


def reading_prose(readings: StudyReadings, evs: dict[str, Evidence]) -> str:
    """Markdown that reads the run per measure: for each mapping, its peak against the strongest
    negative control and whether the measure can see an exactly linear representation; which of
    the paper's claims the measure supports on this run; and every claim's verdict sentence."""
    read, kind, last = readings.controls, readings.kind, readings.last_step
    parts = []
    for measure in MEASURES:
        ev = {m: evs[claim_id(kind, m, measure)] for m in [*MAPPINGS, "fades"]}
        lines = [
            _sentence(measure, m, read[measure, m], ev[m], fade_share(read[measure, m], last), last) for m in MAPPINGS
        ]
        geometry = [m for m in ("embedding", "no_mlp") if ev[m].verdict == "reproduced"]
        supported = [
            f"the token geometry carries (BΦ)ᵀ ({' and '.join(MAPPING_LABELS[m].split(' (')[0] for m in geometry)})"
            if geometry
            else None,
            "the attention scores the model computes carry Q" if ev["attention"].verdict == "reproduced" else None,
            "the features are clearest early and fade" if ev["fades"].verdict == "reproduced" else None,
        ]
        supported = [s for s in supported if s]
        summary = (
            f"This measure supports: {'; '.join(supported)}."
            if supported
            else "This measure supports none of the paper's claims on this run."
        )
        if measure == "paper":
            offset = evs["ch06.offset_fools_paper_measure"]
            if offset.verdict == "reproduced":
                summary += (
                    f" A random representation with one shared offset already scores {offset.values[0]:.3f} for the "
                    "embedding here, so a high value alone is weak evidence."
                )
        verdicts = "\n".join(f"- {ev[m].sentence()}" for m in [*MAPPINGS, "fades"])
        parts.append(f"**{MEASURE_LABELS[measure]}**\n\n" + "\n".join(lines) + f"\n\n{summary}\n\n{verdicts}")
    other = [
        e
        for i, e in evs.items()
        if i.startswith(("ch06.pythia_", "ch06.miniature_")) and kind not in i and e.verdict == "untested"
    ]
    if other:
        parts.append(
            f"The {len(other)} readings of the source this page did not read are untested here ("
            f"{other[0].untested}); the claims ledger lists them."
        )
    return "\n\n".join(parts)


# --- The paper's findings, over the paper's window ------------------------------------------------


def window_prose(readings: StudyReadings, ev: dict[str, Evidence]) -> str:
    """Markdown: which checkpoints stand for the paper's steps 1 to 512 on this source, and how
    many of the paper's findings this source can read."""
    found = readings.findings
    steps = ", ".join(f"{s:,}" for s in found.window)
    if readings.kind == "pythia":
        where = f"On real Pythia these are the checkpoints at steps {steps} that this page read."
    else:
        share = 100 * found.window[-1] / readings.last_step
        where = (
            f"The miniature's schedule has the same shape, so its window is the same positions: steps {steps} of its "
            f"{readings.last_step:,} ({share:.0f}% of its training, where Pythia's 512 steps are 0.4% of 143,000)."
        )
    statements = [ev[f"ch06.{name}_cka"].claim.statement.split(",")[0] for name in found.untested]
    untested = [text[0].lower() + text[1:] for text in statements]
    missing = f" It cannot read {len(untested)}: " + "; ".join(untested) + " (why: below)." if untested else ""
    n = len({name for name, _ in found.values})
    return (
        "The paper reads its findings off Pythia's checkpoints at steps 1 to 512, the log-spaced ones saved before "
        f"the evenly spaced ones. {where} This source reads {n} of the paper's {n + len(found.untested)} findings, "
        f"each under both measures.{missing}"
    )


def findings_prose(ev: dict[str, Evidence]) -> str:
    """Markdown: every finding's verdict sentence under each measure (the claims of section
    ``ch06-findings``)."""
    return claims.section_prose(ev, "ch06-findings")


def defect_prose(summary: dict[tuple[str, str], dict[str, float]]) -> str:
    """Markdown comparing the scores the model computes (from the LayerNorm output) with the
    paper's variant (from the un-normalised resid_pre), under each measure; the word of each
    comparison is derived from the printed peaks, and its subject is the corrected variant."""
    rows = []
    for measure in MEASURES:
        paper, model = summary[measure, "attention_resid_pre"]["peak"], summary[measure, "attention"]["peak"]
        gap = claims.difference(model, paper, ".3f", "higher", "lower", "")
        than = f"{gap} than the paper's" if gap else "the same as the paper's"
        rows.append(
            f"under the {MEASURE_LABELS[measure]} the paper's variant peaks at {paper:.3f} and the corrected one at "
            f"{model:.3f}, {than}"
        )
    text = "; ".join(rows)
    return (
        "The paper takes the attention scores from `resid_pre`, the layer input before LayerNorm; the model's "
        "attention reads the LayerNorm output, so only the corrected variant is the score the model computes. "
        f"{text[0].upper()}{text[1:]}."
    )


# --- Records --------------------------------------------------------------------------------------


def record_all(readings: StudyReadings, ev: dict[str, Evidence]) -> dict[str, Any]:
    """Record the chapter's numbers (:func:`~mechbook.pythia.readings.study_numbers`) and its
    claims; returns the records."""
    records = record_numbers(readings.numbers)
    records.update(claims.record_claims(ev.values()))
    return records
