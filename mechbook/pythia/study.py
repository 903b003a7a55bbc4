"""Chapter 6's study as a library: its run configs per profile, the checkpoint source it reads,
the similarity of every checkpoint to the leading-term features with the controls, and the readings
each of the book's readings rests on (peak against the strongest negative control, an early peak that fades).

- :class:`PythiaConfig`, :class:`StudyConfig` and :data:`STUDY_PROFILES`: every training and
  reading configuration of every profile (``smoke`` always trains a very small miniature; ``cpu``
  uses pythia-70m at 20 checkpoints when the Hub answers, otherwise a 4-layer miniature; ``paper``
  is the paper's setting: pythia-1.4b at steps 0 to 512, features from the first 100k OpenWebText
  texts of at least 512 characters and again from FineWeb's, and never the miniature). The real
  models are the suite trained on the Pile, not its deduplicated variant: the paper names
  Pythia-1.4B and no deduplicated model (section 5.2).
- :func:`build_source` picks real Pythia or the miniature (and says why); :func:`run_study` computes
  everything the chapter shows (each checkpoint cached).
- :class:`ControlReading` and :func:`control_reading`: one mapping's peak against the controls;
  :func:`fade_share`: how much of that margin the curve loses after an early peak.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from mechbook.pythia.analysis import LAYER_LEVEL, layer_mean, summarise
from mechbook.pythia.features import LeadingFeatures
from mechbook.pythia.hub import PAPER_N_TEXTS
from mechbook.pythia.miniature import MiniatureConfig
from mechbook.validation import POSITIVE, SEED, above, at_least, check_fields, one_of

CONTROLS: tuple[str, ...] = ("random_init", "shuffled_tokens", "offset", "linear")
"""The four controls of :func:`mechbook.pythia.sources.controls`."""
NEGATIVE_CONTROLS: tuple[str, ...] = ("random_init", "shuffled_tokens", "offset")
"""The controls a trained model must beat (the fourth, ``linear``, says whether a measure can see
the feature at all)."""


@dataclass(frozen=True)
class PythiaConfig:
    """Real Pythia, as the chapter reads it."""

    size: str = "70m"
    """Model size (``70m`` ... ``12b``): 70m is what a CPU reads in minutes; the paper read 1.4b."""
    deduped: bool = False
    """Read the deduplicated-Pile models (``EleutherAI/pythia-{size}-deduped``) instead of the
    Pile-trained ones. Off: the paper names Pythia-1.4B (``EleutherAI/pythia-1.4b``) and no
    deduplicated variant (section 5.2)."""
    steps: tuple[int, ...] = ()
    """Checkpoint steps read (empty: all 154)."""
    texts: tuple[str, ...] = ("openwebtext-10k",)
    """The texts the features come from (keys of :data:`mechbook.pythia.hub.TEXTS`): the first is
    the one the page shows; each other one is a second study of the same checkpoints, compared
    with the first (the paper: OpenWebText, then FineWeb in its Figure 8). Pythia itself was
    trained on the Pile: the text is only where the leading terms are computed."""
    n_texts: int = 1000
    """Texts of at least 512 characters the features come from, the first ones of each text: the
    paper reads 100k; fewer is the book's budget."""
    context: int = 128
    """Tokens kept per text, a budget choice of the book: the paper states no such budget
    (sequences hold context + 1)."""

    def __post_init__(self) -> None:
        from mechbook.pythia.checkpoints import PYTHIA_SIZES, pythia_steps
        from mechbook.pythia.hub import TEXTS

        check_fields(self, size=one_of(PYTHIA_SIZES), n_texts=POSITIVE, context=POSITIVE)
        if not self.texts or set(self.texts) - set(TEXTS) or len(set(self.texts)) < len(self.texts):
            raise ValueError(f"texts must be distinct names among {', '.join(TEXTS)}, got {self.texts!r}")
        unknown = sorted(set(self.steps) - set(pythia_steps()))
        if unknown:
            raise ValueError(
                f"Pythia has no checkpoints at steps {unknown}; use 0, 1, 2, 4, ..., 512, 1000, 2000, ..., 143000"
            )


@dataclass(frozen=True)
class StudyConfig:
    """Chapter 6's study."""

    source: Literal["auto", "pythia", "miniature"]
    """``auto``: Pythia if the Hub answers within ``hub_deadline`` seconds, else the miniature."""
    top_k: int
    """Most frequent tokens the features keep (k x k maps): a budget choice of the book; the paper
    passes every token alone and states no top-k restriction (section 5.2)."""
    n_stories: int
    """TinyStories stories the miniature trains on."""
    miniature: MiniatureConfig
    """The miniature's sizes and recipe (its seed is replaced by ``seed``)."""
    pythia: PythiaConfig = PythiaConfig()
    """Real Pythia, when the source is Pythia."""
    hub_deadline: float = 5.0
    """Seconds the Hub check waits (bounded, even if name resolution hangs)."""
    seed: int = 1
    """The study's one seed: the miniature's initialisation and batches, and every control."""

    def __post_init__(self) -> None:
        check_fields(self, top_k=at_least(2, "tokens"), n_stories=POSITIVE, hub_deadline=above(0), seed=SEED)

    @property
    def miniature_run(self) -> MiniatureConfig:
        """The miniature's config as trained: ``miniature`` with the study's seed."""
        return dataclasses.replace(self.miniature, seed=self.seed)


_CPU_MINIATURE = MiniatureConfig(
    bpe_vocab=1024,  # a BPE vocabulary a 4-layer model learns in minutes
    context=64,  # TinyStories sentences fit; twice smoke's
    d_model=128,
    n_layers=4,  # enough layers for a layer x checkpoint heatmap to show depth
    n_heads=4,
    d_mlp=512,  # Pythia's 4 x d_model
    steps=1200,  # the loss falls well below uniform within the cold build's budget
    batch_size=32,
    n_linear=12,  # 12 evenly spaced late checkpoints after the log-spaced early ones
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
"""20 checkpoints: every log-spaced early one and a log-spaced sample of the linear tail."""
_PAPER_PYTHIA_STEPS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
"""The paper's steps 1 to 512 (Figures 6-7), and step 0, the initialisation the per-head gains are
measured from (the book's reference)."""

STUDY_PROFILES: dict[str, StudyConfig] = {
    "smoke": StudyConfig(
        source="miniature",  # smoke never touches the network
        top_k=64,
        n_stories=1500,
        miniature=MiniatureConfig(
            bpe_vocab=384,  # every code path at a size that trains in seconds
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
    "cpu": StudyConfig(
        source="auto",  # real Pythia when the Hub answers, the miniature otherwise
        top_k=200,
        n_stories=5000,
        miniature=_CPU_MINIATURE,
        pythia=PythiaConfig(steps=_CPU_PYTHIA_STEPS, texts=("openwebtext-10k",), n_texts=500),
    ),
    "paper": StudyConfig(
        # the paper's setting: Pythia-1.4B (EleutherAI/pythia-1.4b) at steps 1-512 (and 0), the leading terms from
        # the first 100k OpenWebText texts of 512+ characters, then from FineWeb's (Figure 8); never the miniature
        # (offline it stops at once). top_k and the 128 tokens a text are the book's budget, not the paper's
        source="pythia",
        top_k=500,
        n_stories=5000,
        miniature=_CPU_MINIATURE,
        pythia=PythiaConfig(
            size="1.4b", steps=_PAPER_PYTHIA_STEPS, texts=("openwebtext", "fineweb"), n_texts=PAPER_N_TEXTS
        ),
    ),
}
"""Chapter 6's study per profile."""


@dataclass(frozen=True)
class SourceChoice:
    """The checkpoint source the study uses (``kind`` "pythia" or "miniature") and why."""

    source: Any
    kind: str
    reason: str


def build_source(cfg: StudyConfig) -> SourceChoice:
    """Choose and build the checkpoint source: Pythia when allowed and loadable, otherwise the
    miniature trained (or read from the cache) on TinyStories."""
    from mechbook.data import load_stories
    from mechbook.pythia.checkpoints import pythia_steps
    from mechbook.pythia.miniature import miniature_run
    from mechbook.pythia.sources import MiniatureSource, PythiaSource, choose_source

    kind, reason = choose_source(cfg.source, cfg.hub_deadline)
    if kind == "pythia":
        p = cfg.pythia
        source = PythiaSource(p.size, p.deduped, list(p.steps) or pythia_steps(), p.n_texts, p.context, p.texts[0])
        try:
            _ = source.tokens  # the text's download: the first thing that needs the network
            return SourceChoice(source, kind, reason)
        except Exception as exc:  # any failure to fetch falls back, and the banner says why
            if cfg.source == "pythia":
                raise
            kind, reason = "miniature", f"the Hub answered but loading the texts failed ({type(exc).__name__}: {exc})"
    run = miniature_run(load_stories(max_stories=cfg.n_stories), cfg.miniature_run)
    return SourceChoice(MiniatureSource(run), kind, reason)


@dataclass(frozen=True)
class StudyResult:
    """What the chapter shows: the source, the features, the similarity of every checkpoint
    (``table``: step, measure, mapping, layer, head, similarity), the controls, the layer-mean
    ``curve`` over steps, its per-(measure, mapping) ``summary`` (peak, peak_step, initial, final),
    the controls' layer means and ``compared``: per further text of real Pythia (FineWeb), the
    similarity table of the same checkpoints with features from that text (empty otherwise)."""

    choice: SourceChoice
    features: LeadingFeatures
    table: pd.DataFrame
    controls: pd.DataFrame
    curve: pd.DataFrame
    summary: dict[tuple[str, str], dict[str, float]] = field(hash=False)
    control_means: pd.DataFrame
    compared: dict[str, pd.DataFrame] = field(default_factory=dict, hash=False)

    @property
    def last_step(self) -> int:
        return int(self.choice.source.steps[-1])

    @property
    def linear_every(self) -> int:
        """The spacing of the source's evenly spaced checkpoints: Pythia's 1,000, or the miniature's
        ``steps // n_linear`` (:func:`mechbook.pythia.checkpoints.scaled_schedule`)."""
        from mechbook.pythia.checkpoints import PYTHIA_LINEAR_EVERY

        if self.choice.kind == "pythia":
            return PYTHIA_LINEAR_EVERY
        c = self.choice.source.run.config
        return c.steps // c.n_linear

    @property
    def n_layers(self) -> int:
        return int(self.table["layer"].max()) + 1


def run_study(cfg: StudyConfig) -> StudyResult:
    """Build the source, the top-k features of its corpus, the similarity at every checkpoint and
    the four controls (each step cached); for real Pythia, the similarity again with the features
    of every further text of ``cfg.pythia.texts``."""
    from mechbook.pythia.features import leading_features
    from mechbook.pythia.sources import controls, similarity_over_checkpoints

    choice = build_source(cfg)
    src = choice.source
    feats = leading_features(src.tokens, src.vocab_size, cfg.top_k)
    table = similarity_over_checkpoints(src, feats)
    ctl = controls(src, feats, seed=cfg.seed)
    compared = {}
    if choice.kind == "pythia":
        for text in cfg.pythia.texts[1:]:
            other = dataclasses.replace(src, text=text, _tokens=None)
            compared[text] = similarity_over_checkpoints(
                other, leading_features(other.tokens, other.vocab_size, cfg.top_k)
            )
    curve = layer_mean(table)
    return StudyResult(choice, feats, table, ctl, curve, summarise(curve), layer_mean(ctl), compared)


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


@dataclass(frozen=True)
class ControlReading:
    """One mapping under one measure against its controls: ``peak``, ``peak_step`` and ``final`` of
    the layer-mean curve, every control's value, the ``strongest`` negative control and ``baseline``
    (its value)."""

    peak: float
    peak_step: int
    final: float
    controls: dict[str, float] = field(hash=False)
    strongest: str

    @property
    def baseline(self) -> float:
        return self.controls[self.strongest]

    @property
    def margin(self) -> float:
        """Peak minus the strongest negative control."""
        return self.peak - self.baseline

    @property
    def drift(self) -> float:
        """Peak minus the last checkpoint's value."""
        return self.peak - self.final


def control_reading(
    summary: dict[str, float], control_means: pd.DataFrame, measure: str, mapping: str
) -> ControlReading:
    """:class:`ControlReading` of one (measure, mapping) of a :func:`run_study` summary."""
    values = {c: control_value(control_means, c, measure, mapping) for c in CONTROLS}
    strongest = max(NEGATIVE_CONTROLS, key=values.get)
    return ControlReading(summary["peak"], summary["peak_step"], summary["final"], values, strongest)


def fade_share(r: ControlReading, last_step: int) -> float:
    """Share of the margin over the strongest negative control that the curve loses between its
    peak and the last checkpoint, when the peak lies in the first half of training and above the
    controls; 0 otherwise (no early peak above the controls to fade from)."""
    if r.margin <= 0 or r.peak_step > last_step / 2:
        return 0.0
    return r.drift / r.margin


def best_head(table: pd.DataFrame, measure: str = "cka") -> pd.Series:
    """The (layer, head, step) whose model attention scores (ln1 output) are most similar to Q."""
    heads = table[(table["mapping"] == "attention") & (table["head"] != LAYER_LEVEL) & (table["measure"] == measure)]
    return heads.loc[heads["similarity"].idxmax()]
