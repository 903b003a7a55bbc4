"""Chapter 6's profiles, source selection and charts (the notebook stays thin).

``CONFIGS`` holds one :class:`Chapter6Config` per profile: ``smoke`` always trains a very small
miniature; ``cpu`` (the published book) uses pythia-70m-deduped at 20 checkpoints when the Hub
answers and otherwise a 4-layer miniature; ``paper`` is pythia-1.4b-deduped at all 154 checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import altair as alt
import pandas as pd

from mechbook.pythia.analysis import LAYER_LEVEL
from mechbook.pythia.miniature import MiniatureConfig

MAPPING_LABELS = {"embedding": "embedding (resid_post)", "no_mlp": "no-MLP (resid_pre + attn_out)", "attention": "attention scores (E M E^T)"}
CONTROL_LABELS = {"random_init": "random initialisation", "shuffled_tokens": "shuffled-token feature"}


@dataclass(frozen=True)
class Chapter6Config:
    """``source``: ``auto`` (Pythia if the Hub answers within ``hub_deadline`` seconds, else the
    miniature), ``pythia`` or ``miniature``. Pythia: ``pythia_size``, ``deduped``,
    ``pythia_steps`` (empty: all 154), ``n_texts`` OpenWebText texts of ``context`` + 1 tokens.
    Miniature: ``n_stories`` TinyStories stories and ``miniature``. Both: ``top_k`` tokens,
    ``control_seed`` for the random-initialisation and shuffled-feature controls."""

    source: str
    top_k: int
    n_stories: int
    miniature: MiniatureConfig
    pythia_size: str = "70m"
    deduped: bool = True
    pythia_steps: tuple[int, ...] = ()
    n_texts: int = 1000
    context: int = 128
    hub_deadline: float = 5.0
    control_seed: int = 1


_CPU_MINIATURE = MiniatureConfig(bpe_vocab=1024, context=64, d_model=128, n_layers=4, n_heads=4, d_mlp=512, steps=1200, batch_size=32, n_linear=12)
_CPU_PYTHIA_STEPS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 100000, 143000)

CONFIGS: dict[str, Chapter6Config] = {
    "smoke": Chapter6Config(
        source="miniature",
        top_k=64,
        n_stories=1500,
        miniature=MiniatureConfig(bpe_vocab=384, context=64, d_model=64, n_layers=2, n_heads=4, d_mlp=256, steps=120, batch_size=32, n_linear=6),
    ),
    "cpu": Chapter6Config(source="auto", top_k=200, n_stories=5000, miniature=_CPU_MINIATURE, pythia_steps=_CPU_PYTHIA_STEPS, n_texts=500),
    "paper": Chapter6Config(source="pythia", top_k=500, n_stories=5000, miniature=_CPU_MINIATURE, pythia_size="1.4b", n_texts=2000),
}


@dataclass
class SourceChoice:
    """The source the chapter uses and why (for the banner)."""

    source: object
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
        steps = list(cfg.pythia_steps) or pythia_steps()
        source = PythiaSource(cfg.pythia_size, cfg.deduped, steps, cfg.n_texts, cfg.context)
        try:
            source.tokens  # the OpenWebText download: the first thing that needs the network
            return SourceChoice(source, kind, reason)
        except Exception as exc:  # any failure to fetch falls back, and the banner says why
            if cfg.source == "pythia":
                raise
            kind, reason = "miniature", f"the Hub answered but loading OpenWebText failed ({type(exc).__name__}: {exc})"
    run = miniature_run(load_stories(max_stories=cfg.n_stories), cfg.miniature)
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
            "<code>source = \"pythia\"</code> for the real checkpoints."
        )
    return f'<div class="admonition {cls}"><p class="admonition-title">{title}</p><p>{body}</p></div>'


def _steps_sort(table: pd.DataFrame) -> list[str]:
    return [str(s) for s in sorted(table["step"].unique())]


def layer_heatmaps(table: pd.DataFrame, title: str) -> alt.Chart:
    """Layer x checkpoint heatmaps (0..1) of the three mappings, side by side."""
    data = table[table["head"] == LAYER_LEVEL].assign(
        step_label=lambda d: d["step"].astype(str), mapping_label=lambda d: d["mapping"].map(MAPPING_LABELS)
    )
    return (
        alt.Chart(data)
        .mark_rect()
        .encode(
            x=alt.X("step_label:O", sort=_steps_sort(data), title="checkpoint (training step)"),
            y=alt.Y("layer:O", title="layer", sort="descending"),
            color=alt.Color("similarity:Q", scale=alt.Scale(domain=[0, 1], scheme="viridis"), title="similarity"),
            tooltip=["mapping_label:N", "layer:O", "step:Q", alt.Tooltip("similarity:Q", format=".3f")],
        )
        .properties(width=260, height=120)
        .facet(column=alt.Column("mapping_label:N", title=None, sort=[MAPPING_LABELS[m] for m in MAPPING_LABELS]))
        .properties(title=title)
    )


def head_heatmap(table: pd.DataFrame, title: str) -> alt.Chart:
    """Head x checkpoint heatmap of the attention mapping; a dropdown picks the layer."""
    data = table[(table["mapping"] == "attention") & (table["head"] != LAYER_LEVEL)].assign(step_label=lambda d: d["step"].astype(str))
    layers = sorted(int(l) for l in data["layer"].unique())
    pick = alt.param(name="layer_pick", value=layers[-1], bind=alt.binding_select(options=layers, name="layer "))
    return (
        alt.Chart(data, title=title)
        .mark_rect()
        .encode(
            x=alt.X("step_label:O", sort=_steps_sort(data), title="checkpoint (training step)"),
            y=alt.Y("head:O", title="head"),
            color=alt.Color("similarity:Q", scale=alt.Scale(domain=[0, 1], scheme="viridis"), title="similarity"),
            tooltip=["layer:O", "head:O", "step:Q", alt.Tooltip("similarity:Q", format=".3f")],
        )
        .add_params(pick)
        .transform_filter(alt.datum.layer == pick)
        .properties(width=520, height=140)
    )


def curves_with_controls(curve: pd.DataFrame, control_means: pd.DataFrame, title: str) -> alt.Chart:
    """Layer-mean similarity against training step (symmetric-log x, so step 0 shows), with each
    control as a dashed horizontal line in its mapping's colour; click the legend to isolate one."""
    lines = curve.assign(mapping_label=lambda d: d["mapping"].map(MAPPING_LABELS))
    ticks = [0] + [10**p for p in range(len(str(int(curve["step"].max()))))]
    rules = control_means.assign(mapping_label=lambda d: d["mapping"].map(MAPPING_LABELS), control_label=lambda d: d["control"].map(CONTROL_LABELS))
    pick = alt.selection_point(fields=["mapping_label"], bind="legend")
    colour = alt.Color("mapping_label:N", title="mapping", legend=alt.Legend(labelLimit=320))
    opacity = alt.condition(pick, alt.value(1.0), alt.value(0.15))
    line = (
        alt.Chart(lines)
        .mark_line(point=True)
        .encode(
            x=alt.X("step:Q", scale=alt.Scale(type="symlog"), axis=alt.Axis(values=ticks), title="training step (symmetric log scale)"),
            y=alt.Y("similarity:Q", title="similarity (mean over layers)"),
            color=colour,
            opacity=opacity,
            tooltip=["mapping_label:N", "step:Q", alt.Tooltip("similarity:Q", format=".3f")],
        )
        .add_params(pick)
    )
    rule = (
        alt.Chart(rules)
        .mark_rule(strokeWidth=1.5)
        .encode(
            y="similarity:Q",
            color=colour,
            strokeDash=alt.StrokeDash("control_label:N", title="control"),
            opacity=opacity,
            tooltip=["mapping_label:N", "control_label:N", alt.Tooltip("similarity:Q", format=".3f")],
        )
    )
    return (line + rule).properties(width=560, height=280, title=title)


def loss_chart(losses: list[float], steps: list[int], title: str) -> alt.Chart:
    """The miniature's training loss per step, with its checkpoints marked."""
    data = pd.DataFrame({"step": range(1, len(losses) + 1), "loss": losses})
    marks = data[data["step"].isin(steps)]
    base = alt.Chart(data).mark_line().encode(
        x=alt.X("step:Q", scale=alt.Scale(type="log"), title="training step (log scale)"), y=alt.Y("loss:Q", title="cross-entropy (nats/token)")
    )
    dots = alt.Chart(marks).mark_point(color="black").encode(x="step:Q", y="loss:Q", tooltip=["step:Q", alt.Tooltip("loss:Q", format=".3f")])
    return (base + dots).properties(width=520, height=200, title=title)


def control_table(controls: pd.DataFrame) -> pd.DataFrame:
    """Mean over layers of each control's layer-level similarity: ``control, mapping, similarity``."""
    rows = controls[controls["head"] == LAYER_LEVEL]
    return rows.groupby(["control", "mapping"], as_index=False, sort=False)["similarity"].mean()


def reading(summary: dict[str, dict[str, float]], control_means: pd.DataFrame) -> str:
    """Markdown sentences that read the curves: per mapping, the peak and its step, the final value,
    the drift from peak to end, and the margin over the stronger control."""
    lines = []
    for mapping, s in summary.items():
        ctl = control_means[control_means["mapping"] == mapping].set_index("control")["similarity"]
        strongest = ctl.idxmax()
        margin = s["peak"] - ctl.max()
        verdict = (
            f"above both controls (by {margin:.3f} over the {CONTROL_LABELS[strongest]})"
            if margin > 0
            else f"**not** above the {CONTROL_LABELS[strongest]} ({ctl.max():.3f}): at this size the mapping carries no more of the feature than the baseline"
        )
        drift = s["peak"] - s["final"]
        ending = f"then drifts down by {drift:.3f} to {s['final']:.3f} at the last checkpoint" if drift > 1e-3 else f"then stays there ({s['final']:.3f} at the last checkpoint)"
        lines.append(f"- **{MAPPING_LABELS[mapping]}**: peaks at step {s['peak_step']} with {s['peak']:.3f}, {verdict}; it {ending}.")
    return "\n".join(lines)
