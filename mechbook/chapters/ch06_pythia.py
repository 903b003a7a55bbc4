"""Chapter 6, "The same features in a real LLM" (book/part1/06_pythia.ipynb): its config per
profile, its claims, its charts and computed prose in page order, and its records.

The study itself (run configs, the checkpoint source, the similarity of every checkpoint to the
leading-term features, the controls and the readings each claim rests on) is computed in
:mod:`mechbook.pythia.study`; this module presents it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import altair as alt
import pandas as pd

import mechbook
from mechbook import claims
from mechbook.chapters.common import record_all as record_numbers
from mechbook.claims import Claim, Evidence, Rule
from mechbook.pythia.analysis import LAYER_LEVEL, MAPPINGS
from mechbook.pythia.similarity import MEASURE_LABELS, MEASURES
from mechbook.pythia.study import (
    STUDY_PROFILES,
    ControlReading,
    StudyConfig,
    StudyResult,
    best_head,
    control_reading,
    fade_share,
    run_study,
)
from mechbook.validation import check_fields

STEM = "06_pythia"
WIDTH = 640  # the text column is ~680 px; charts leave room for the axis labels
MAPPING_LABELS = {
    "embedding": "embedding (resid_post)",
    "no_mlp": "no-MLP (resid_pre + attn_out)",
    "attention": "scores from ln1 output (model's)",
    "attention_resid_pre": "scores from resid_pre (paper's)",
}
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


#: The chapter's config per profile (``smoke``: a miniature; ``cpu``: pythia-70m-deduped, or a
#: miniature when the Hub does not answer; ``paper``: pythia-1.4b-deduped).
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


# --- Claims ---------------------------------------------------------------------------------------

SUBJECTS = {"pythia": ("paper", "Pythia"), "miniature": ("book", "Pythia in miniature")}
"""Whose checkpoints a claim is about: real Pythia (the paper's claims) or the miniature (the
book's readings of its stand-in)."""
_STATEMENTS = {
    "embedding": "{who}'s token geometry after each layer (resid_post) carries (BΦ)ᵀ beyond every negative control",
    "no_mlp": "{who}'s layer output without its MLP (resid_pre + attn_out) carries (BΦ)ᵀ beyond every negative control",
    "attention": "The attention scores {who} computes (from the LayerNorm output) carry Q beyond every negative control",
    "attention_resid_pre": "{who}'s attention scores read from resid_pre, as the paper's pipeline reads them, carry Q "
    "beyond every negative control",
}
PAPER = (
    "Pythia-1.4B's token geometry carries (BΦ)ᵀ and its attention scores Q, most clearly at the earliest checkpoints "
    "(layer x checkpoint heatmaps)"
)
FADE = 0.1
"""Share of its margin over the controls a curve must lose after an early peak to count as fading."""


def _claim_id(subject: str, what: str, measure: str) -> str:
    return f"ch06.{subject}_{what}_{measure}"


def _claims() -> tuple[Claim, ...]:
    out = []
    for subject, (source, who) in SUBJECTS.items():
        paper = PAPER if source == "paper" else None
        for measure in MEASURES:
            for mapping in MAPPINGS:
                out.append(
                    Claim(
                        _claim_id(subject, mapping, measure),
                        STEM,
                        source,
                        _STATEMENTS[mapping].format(who=who) + f", under the {MEASURE_LABELS[measure]}",
                        f"peak layer-mean similarity minus the strongest negative control (random initialisation, "
                        f"shuffled-token feature, random + shared offset), {MAPPING_LABELS[mapping]}",
                        Rule(">", 0.0),
                        paper=paper,
                        section="ch06-reading",
                        spec=".3f",
                    )
                )
            out.append(
                Claim(
                    _claim_id(subject, "fades", measure),
                    STEM,
                    source,
                    f"{who}'s features are clearest early and fade: an early peak above the controls loses at least a "
                    f"tenth of its margin by the last checkpoint, under the {MEASURE_LABELS[measure]}",
                    "largest share, over the four mappings, of the margin over the controls lost between a peak in the "
                    "first half of training and the last checkpoint",
                    Rule(">=", FADE),
                    paper=paper,
                    section="ch06-reading",
                    spec=".2f",
                )
            )
    out.append(
        Claim(
            "ch06.offset_fools_paper_measure",
            STEM,
            "book",
            "The paper's row-centred measure rates a random representation with one shared offset as similar to (BΦ)ᵀ, "
            "so a high value under it is weak evidence",
            "similarity of the random + shared offset control to (BΦ)ᵀ under the paper's row-centred covariance",
            Rule(">=", 0.5),
            section="ch06-controls",
            spec=".3f",
        )
    )
    return tuple(out)


CLAIMS: tuple[Claim, ...] = _claims()
"""Chapter 6's claims: per measure and mapping, the paper's claim about Pythia and the book's
reading of the miniature (whichever the page did not read is untested), and the offset caveat."""


def claim(claim_id: str) -> Claim:
    """The claim of :data:`CLAIMS` with id ``claim_id``."""
    return {c.id: c for c in CLAIMS}[claim_id]


def readings(result: StudyResult) -> dict[tuple[str, str], ControlReading]:
    """:func:`mechbook.pythia.study.control_reading` of every (measure, mapping)."""
    return {key: control_reading(s, result.control_means, *key) for key, s in result.summary.items()}


def _fade(read: dict[tuple[str, str], ControlReading], measure: str, last_step: int) -> float:
    return max(fade_share(read[measure, m], last_step) for m in MAPPINGS)


def evidences(result: StudyResult) -> dict[str, Evidence]:
    """Every claim's evidence: the subject the page read is measured, the other untested (why)."""
    read, kind = readings(result), result.choice.kind
    out: dict[str, Evidence] = {}
    for subject in SUBJECTS:
        why = None
        if subject != kind:
            why = (
                f"needs the network (real Pythia checkpoints from the Hugging Face Hub): {result.choice.reason}"
                if subject == "pythia"
                else "this page read real Pythia, not the miniature"
            )
        for measure in MEASURES:
            values = {m: read[measure, m].margin for m in MAPPINGS}
            values["fades"] = _fade(read, measure, result.last_step)
            for what, value in values.items():
                c = claim(_claim_id(subject, what, measure))
                out[c.id] = c.evidence(untested=why) if why else c.evidence(value)
    offset = read["paper", "embedding"].controls["offset"]
    out["ch06.offset_fools_paper_measure"] = claim("ch06.offset_fools_paper_measure").evidence(offset)
    return out


# --- Where the checkpoints come from --------------------------------------------------------------


def compute(cfg: ChapterConfig) -> StudyResult:
    """The chapter's study (:func:`mechbook.pythia.study.run_study`)."""
    return run_study(cfg.study)


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


def controls_title(result: StudyResult) -> str:
    """The controls chart's title: per measure, how many mappings peak above every negative control
    (read by each mapping's claim rule)."""
    read = readings(result)
    rule = claim(_claim_id(result.choice.kind, "embedding", "cka")).rule
    parts = [
        f"{'CKA' if m == 'cka' else 'paper measure'} {sum(bool(rule.holds(read[m, p].margin)) for p in MAPPINGS)} of "
        f"{len(MAPPINGS)}"
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
            f"; it then drifts down by {r.drift:.3f} to {r.final:.3f} at the last checkpoint, the early-then-fading "
            "shape the paper reports"
        )
    else:
        timing = f"; it ends at {r.final:.3f} (step {last_step}), so there is no early peak that fades"
    return f"- {head}, {verdict}{timing}."


def reading_prose(result: StudyResult) -> str:
    """Markdown that reads the run per measure: for each mapping, its peak against the strongest
    negative control and whether the measure can see an exactly linear representation; which of
    the paper's claims the measure supports on this run; and every claim's verdict sentence."""
    read, evs, kind, last = readings(result), evidences(result), result.choice.kind, result.last_step
    parts = []
    for measure in MEASURES:
        ev = {m: evs[_claim_id(kind, m, measure)] for m in [*MAPPINGS, "fades"]}
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
    other = [e for i, e in evs.items() if i.startswith("ch06.") and e.verdict == "untested"]
    if other:
        parts.append(
            f"The {len(other)} claims about the source this page did not read are untested here ("
            f"{other[0].untested}); the claims ledger lists them."
        )
    return "\n\n".join(parts)


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


def headline(result: StudyResult) -> dict[str, Any]:
    """The chapter's headline numbers: the source, per measure and mapping the peak, its step, the
    final value, the rise (peak minus the value at the first checkpoint, the initialisation), every
    control and the margin over the strongest negative control, and the best single head under
    each measure."""
    src = result.choice.source
    numbers: dict[str, Any] = {
        "source": result.choice.kind,
        "n_checkpoints": len(src.steps),
        "other_fraction": result.features.other_fraction,
    }
    if result.choice.kind == "miniature":
        numbers["miniature_final_loss"] = sum(src.run.losses[-10:]) / len(src.run.losses[-10:])
    read = readings(result)
    for (measure, mapping), s in result.summary.items():
        r, name = read[measure, mapping], f"{measure}_{mapping}"
        numbers[f"{name}_peak"] = s["peak"]
        numbers[f"{name}_peak_step"] = s["peak_step"]
        numbers[f"{name}_final"] = s["final"]
        numbers[f"{name}_rise"] = s["peak"] - s["initial"]
        numbers[f"{name}_margin"] = r.margin
        numbers.update({f"{name}_control_{c}": v for c, v in r.controls.items()})
    for measure in MEASURES:
        numbers[f"{measure}_best_head_similarity"] = float(best_head(result.table, measure)["similarity"])
    return numbers


def record_all(result: StudyResult) -> dict[str, Any]:
    """Record the chapter's numbers (:func:`headline`) and its claims; returns the records."""
    records = record_numbers(headline(result))
    records.update(claims.record_claims(evidences(result).values()))
    return records
