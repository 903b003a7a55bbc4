"""Chapter 6, "the same features in a real LLM": its profiles, the computation it shows, its charts,
its computed prose and its records (``book/part1/06_pythia.ipynb`` stays thin).

``CONFIGS`` holds one :class:`Chapter6Config` per profile: ``smoke`` always trains a very small
miniature; ``cpu`` (the published book) uses pythia-70m-deduped at 20 checkpoints when the Hub
answers and otherwise a 4-layer miniature; ``paper`` is pythia-1.4b-deduped at all 154 checkpoints.
:func:`compute` runs the chapter; every number the page prints comes from its result.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

import altair as alt
import pandas as pd

from mechbook.pythia.analysis import LAYER_LEVEL, MAPPINGS, layer_mean, summarise
from mechbook.pythia.features import LeadingFeatures
from mechbook.pythia.miniature import MiniatureConfig
from mechbook.pythia.similarity import MEASURE_LABELS, MEASURES

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
NEGATIVE_CONTROLS = ("random_init", "shuffled_tokens", "offset")  # what a trained model must beat
FADE_SHARE = 0.1  # share of the margin a curve must lose after its peak to count as fading
FEATURE_OF = {"embedding": "(BΦ)ᵀ", "no_mlp": "(BΦ)ᵀ", "attention": "Q", "attention_resid_pre": "Q"}


@dataclass(frozen=True)
class PythiaConfig:
    """Real Pythia: ``size`` (``70m`` ... ``12b``), ``deduped``, checkpoint ``steps`` (empty: all
    154), features from ``n_texts`` OpenWebText texts of ``context`` + 1 tokens."""

    size: str = "70m"
    deduped: bool = True
    steps: tuple[int, ...] = ()
    n_texts: int = 1000
    context: int = 128

    def __post_init__(self) -> None:
        from mechbook.pythia.checkpoints import PYTHIA_SIZES, pythia_steps

        if self.size not in PYTHIA_SIZES:
            raise ValueError(f"pythia size must be one of {', '.join(PYTHIA_SIZES)}, got {self.size!r}")
        unknown = sorted(set(self.steps) - set(pythia_steps()))
        if unknown:
            raise ValueError(
                f"Pythia has no checkpoints at steps {unknown}; use 0, 1, 2, 4, ..., 512, 1000, 2000, ..., 143000"
            )
        if self.n_texts < 1 or self.context < 1:
            raise ValueError(f"n_texts and context must be >= 1, got {self.n_texts} and {self.context}")


@dataclass(frozen=True)
class Chapter6Config:
    """``source``: ``auto`` (Pythia if the Hub answers within ``hub_deadline`` seconds, else the
    miniature), ``pythia`` or ``miniature``; ``top_k`` tokens kept for the features; ``n_stories``
    TinyStories stories for the miniature. ``seed`` is the chapter's one seed: it replaces
    ``miniature.seed`` (initialisation and batches) and seeds every control."""

    source: Literal["auto", "pythia", "miniature"]
    top_k: int
    n_stories: int
    miniature: MiniatureConfig
    pythia: PythiaConfig = PythiaConfig()
    hub_deadline: float = 5.0
    seed: int = 1

    def __post_init__(self) -> None:
        if self.top_k < 2:
            raise ValueError(f"top_k must be >= 2 tokens, got {self.top_k}")
        if self.n_stories < 1:
            raise ValueError(f"n_stories must be >= 1, got {self.n_stories}")

    @property
    def miniature_run(self) -> MiniatureConfig:
        """The miniature's config as trained: ``miniature`` with the chapter's seed."""
        return dataclasses.replace(self.miniature, seed=self.seed)


_CPU_MINIATURE = MiniatureConfig(
    bpe_vocab=1024, context=64, d_model=128, n_layers=4, n_heads=4, d_mlp=512, steps=1200, batch_size=32, n_linear=12
)
_CPU_PYTHIA_STEPS = (
    0,
    1,
    2,
    4,
    8,
    16,
    32,
    64,
    128,
    256,
    512,
    1000,
    2000,
    4000,
    8000,
    16000,
    32000,
    64000,
    100000,
    143000,
)

#: The chapter's config per profile (``smoke``: a miniature; ``cpu``: pythia-70m-deduped, or a miniature
#: when the Hub does not answer; ``paper``: pythia-1.4b-deduped).
CONFIGS: dict[str, Chapter6Config] = {
    "smoke": Chapter6Config(
        source="miniature",
        top_k=64,
        n_stories=1500,
        miniature=MiniatureConfig(
            bpe_vocab=384,
            context=64,
            d_model=64,
            n_layers=2,
            n_heads=4,
            d_mlp=256,
            steps=120,
            batch_size=32,
            n_linear=6,
        ),
    ),
    "cpu": Chapter6Config(
        source="auto",
        top_k=200,
        n_stories=5000,
        miniature=_CPU_MINIATURE,
        pythia=PythiaConfig(steps=_CPU_PYTHIA_STEPS, n_texts=500),
    ),
    "paper": Chapter6Config(
        source="pythia",
        top_k=500,
        n_stories=5000,
        miniature=_CPU_MINIATURE,
        pythia=PythiaConfig(size="1.4b", n_texts=2000),
    ),
}


@dataclass
class SourceChoice:
    """The source the chapter uses and why (for the banner)."""

    source: Any
    kind: str
    reason: str
    notes: list[str] = field(default_factory=list)


def build_source(cfg: Chapter6Config) -> SourceChoice:
    """Choose and build the checkpoint source: Pythia when allowed and loadable, otherwise the
    miniature trained (or read from the cache) on TinyStories."""
    from mechbook.data import load_stories
    from mechbook.pythia.checkpoints import pythia_steps
    from mechbook.pythia.miniature import miniature_run
    from mechbook.pythia.sources import MiniatureSource, PythiaSource, choose_source

    kind, reason = choose_source(cfg.source, cfg.hub_deadline)
    if kind == "pythia":
        p = cfg.pythia
        source = PythiaSource(p.size, p.deduped, list(p.steps) or pythia_steps(), p.n_texts, p.context)
        try:
            _ = source.tokens  # the OpenWebText download: the first thing that needs the network
            return SourceChoice(source, kind, reason)
        except Exception as exc:  # any failure to fetch falls back, and the banner says why
            if cfg.source == "pythia":
                raise
            kind, reason = "miniature", f"the Hub answered but loading OpenWebText failed ({type(exc).__name__}: {exc})"
    run = miniature_run(load_stories(max_stories=cfg.n_stories), cfg.miniature_run)
    return SourceChoice(MiniatureSource(run), kind, reason)


def banner_html(choice: SourceChoice) -> str:
    """An admonition box naming the source of every figure of the chapter."""
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


@dataclass
class Chapter6Result:
    """What the page shows: the source, the features, the similarity of every checkpoint
    (``table``: step, measure, mapping, layer, head, similarity), the controls, the layer-mean
    ``curve`` over steps, its per-(measure, mapping) ``summary`` and the controls' layer means."""

    choice: SourceChoice
    features: LeadingFeatures
    table: pd.DataFrame
    controls: pd.DataFrame
    curve: pd.DataFrame
    summary: dict[tuple[str, str], dict[str, float]]
    control_means: pd.DataFrame


def compute(cfg: Chapter6Config) -> Chapter6Result:
    """Build the source, the top-k features of its corpus, the similarity at every checkpoint and
    the four controls (each step cached)."""
    from mechbook.pythia.features import leading_features
    from mechbook.pythia.sources import controls, similarity_over_checkpoints

    choice = build_source(cfg)
    src = choice.source
    feats = leading_features(src.tokens, src.vocab_size, cfg.top_k)
    table = similarity_over_checkpoints(src, feats)
    ctl = controls(src, feats, seed=cfg.seed)
    curve = layer_mean(table)
    return Chapter6Result(choice, feats, table, ctl, curve, summarise(curve), layer_mean(ctl))


def control_value(control_means: pd.DataFrame, control: str, measure: str, mapping: str) -> float:
    """The layer mean of one control for one measure and mapping."""
    row = control_means[
        (control_means["control"] == control)
        & (control_means["measure"] == measure)
        & (control_means["mapping"] == mapping)
    ]
    if len(row) != 1:
        raise KeyError(f"no single {control!r} control for measure {measure!r} and mapping {mapping!r}")
    return float(row["similarity"].iloc[0])


def verdict(summary: dict[str, float], control_means: pd.DataFrame, measure: str, mapping: str) -> dict[str, Any]:
    """The comparison one sentence reads: ``baseline`` (the strongest negative control),
    ``margin`` = peak - baseline, ``sees_linear`` (the exactly-linear control beats the baseline,
    so the measure can see the feature at all) and ``drift`` = peak - final."""
    controls = {c: control_value(control_means, c, measure, mapping) for c in CONTROL_LABELS}
    strongest = max(NEGATIVE_CONTROLS, key=controls.get)
    return {
        "controls": controls,
        "strongest": strongest,
        "baseline": controls[strongest],
        "margin": summary["peak"] - controls[strongest],
        "sees_linear": controls["linear"] > controls[strongest],
        "drift": summary["peak"] - summary["final"],
    }


def fades(summary: dict[str, float], v: dict[str, Any], last_step: int) -> bool:
    """The early-then-fading shape: the peak lies in the first half of training and the curve then
    loses at least ``FADE_SHARE`` of the peak's height above the strongest negative control."""
    return summary["peak_step"] <= last_step / 2 and v["drift"] >= FADE_SHARE * v["margin"] > 0


def _sentence(measure: str, mapping: str, s: dict[str, float], v: dict[str, Any], last_step: int) -> str:
    head = f"**{MAPPING_LABELS[mapping]}** vs {FEATURE_OF[mapping]}: peak {s['peak']:.3f} at step {s['peak_step']}"
    if v["margin"] > 0:
        claim = f"above every negative control (by {v['margin']:.3f} over the {CONTROL_LABELS[v['strongest']]})"
    elif v["sees_linear"]:
        claim = f"**not** above the {CONTROL_LABELS[v['strongest']]} ({v['baseline']:.3f}), although this measure does rate an exactly linear representation higher ({v['controls']['linear']:.3f}): no evidence of the feature"
    else:
        claim = (
            f"**not** above the {CONTROL_LABELS[v['strongest']]} ({v['baseline']:.3f}); but this measure rates even an exactly "
            f"linear representation no higher ({v['controls']['linear']:.3f}), so here it cannot tell either way"
        )
    if v["margin"] <= 0:
        timing = ""
    elif fades(s, v, last_step):
        timing = f"; it then drifts down by {v['drift']:.3f} to {s['final']:.3f} at the last checkpoint, the early-then-fading shape the paper reports"
    else:
        timing = f"; it ends at {s['final']:.3f} (step {last_step}), so there is no early peak that fades"
    return f"- {head}, {claim}{timing}."


def reading(summary: dict[tuple[str, str], dict[str, float]], control_means: pd.DataFrame, last_step: int) -> str:
    """Markdown that reads the run per measure: for each mapping, its peak against the strongest
    negative control and whether the measure can see an exactly linear representation, then which
    of the paper's claims the measure supports (the token geometry carries (BΦ)ᵀ, the attention
    scores carry Q, the features show early and fade)."""
    parts = []
    for measure in MEASURES:
        verdicts = {m: verdict(summary[measure, m], control_means, measure, m) for m in MAPPINGS}
        lines = [_sentence(measure, m, summary[measure, m], verdicts[m], last_step) for m in MAPPINGS]
        geometry = [m for m in ("embedding", "no_mlp") if verdicts[m]["margin"] > 0]
        scores = verdicts["attention"]["margin"] > 0
        fading = [
            m
            for m in geometry + (["attention"] if scores else [])
            if fades(summary[measure, m], verdicts[m], last_step)
        ]
        claims = [
            f"the token geometry carries (BΦ)ᵀ ({' and '.join(MAPPING_LABELS[m].split(' (')[0] for m in geometry)})"
            if geometry
            else None,
            "the attention scores the model computes carry Q" if scores else None,
            "the features are clearest early and fade" if fading else None,
        ]
        supported = [c for c in claims if c]
        offset = verdicts["embedding"]["controls"]["offset"]
        caveat = (
            f" A random representation with one shared offset already scores {offset:.3f} for the embedding here, so a high value alone is weak evidence."
            if offset >= 0.5
            else ""
        )
        verdict_line = (
            f"This measure supports: {'; '.join(supported)}."
            if supported
            else "This measure supports none of the paper's claims on this run."
        )
        parts.append(f"**{MEASURE_LABELS[measure]}**\n\n" + "\n".join(lines) + f"\n\n{verdict_line}{caveat}")
    return "\n\n".join(parts)


def defect_note(summary: dict[tuple[str, str], dict[str, float]]) -> str:
    """Markdown comparing the paper's attention scores (from the un-normalised resid_pre) with the
    scores the model computes (from the LayerNorm output), under each measure."""
    rows = []
    for measure in MEASURES:
        paper, model = summary[measure, "attention_resid_pre"]["peak"], summary[measure, "attention"]["peak"]
        gap = paper - model
        direction = "higher" if gap > 0 else "lower"
        rows.append(
            f"under the {MEASURE_LABELS[measure]} the paper's variant peaks at {paper:.3f}, the corrected one at {model:.3f} ({abs(gap):.3f} {direction})"
        )
    text = "; ".join(rows)
    return (
        "The paper takes the attention scores from `resid_pre`, the layer input before LayerNorm; the model's "
        "attention reads the LayerNorm output, so only the corrected variant is the score the model computes. "
        f"{text[0].upper()}{text[1:]}."
    )


def corpus_note(result: Chapter6Result) -> str:
    """Markdown: the corpus the features come from and the share of tokens the top k cover."""
    src, feats = result.choice.source, result.features
    from mechbook.viz import escape_markdown

    top = ", ".join(escape_markdown(repr(src.decode(t))) for t in feats.token_ids[:20])
    return (
        f"{src.tokens.shape[0]} sequences of {src.tokens.shape[1] - 1} + 1 tokens; the top {feats.k} tokens cover "
        f"{100 * (1 - feats.other_fraction):.1f}% of them, and the other {100 * feats.other_fraction:.1f}% are dropped. "
        f"The twenty most frequent: {top}."
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


def best_head(table: pd.DataFrame, measure: str = "cka") -> pd.Series:
    """The (layer, head, step) whose model attention scores (ln1 output) are most similar to Q."""
    heads = table[(table["mapping"] == "attention") & (table["head"] != LAYER_LEVEL) & (table["measure"] == measure)]
    return heads.loc[heads["similarity"].idxmax()]


def record_all(result: Chapter6Result) -> None:
    """Record the chapter's headline numbers: the source, per measure and mapping the peak, its
    step, the final value, the rise (peak minus the value at the first checkpoint, the
    initialisation), every control and the margin over the strongest negative control, and the
    best single head under each measure."""
    from mechbook import record

    src = result.choice.source
    record("source", result.choice.kind)
    record("n_checkpoints", len(src.steps))
    record("other_fraction", result.features.other_fraction)
    if result.choice.kind == "miniature":
        record("miniature_final_loss", sum(src.run.losses[-10:]) / len(src.run.losses[-10:]))
    for (measure, mapping), s in result.summary.items():
        v = verdict(s, result.control_means, measure, mapping)
        name = f"{measure}_{mapping}"
        record(f"{name}_peak", s["peak"])
        record(f"{name}_peak_step", s["peak_step"])
        record(f"{name}_final", s["final"])
        record(f"{name}_rise", s["peak"] - s["initial"])
        record(f"{name}_margin", v["margin"])
        for control, value in v["controls"].items():
            record(f"{name}_control_{control}", value)
    for measure in MEASURES:
        record(f"{measure}_best_head_similarity", float(best_head(result.table, measure)["similarity"]))
