"""What chapter 6 reads off its study for its records and its claims (presented by
:mod:`mechbook.chapters.ch06_pythia`; the claims are :mod:`mechbook.pythia.claims`). Cheap and
uncached, kept apart from the study's modules, whose code keys its cached computations.

- :func:`control_readings`: every (measure, mapping)'s peak against the controls;
- :class:`FindingReadings`: the paper's findings read over its window (:func:`finding_readings`,
  from :mod:`mechbook.pythia.findings`), and why a finding cannot be read on this source;
- :class:`StudyReadings`: what the claims and the records read (:func:`read_pythia`);
- :func:`study_numbers`: the chapter's recorded numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mechbook.pythia import findings as f
from mechbook.pythia.similarity import MEASURES
from mechbook.pythia.study import ControlReading, StudyResult, best_head, control_reading

MAPPING_LABELS = {
    "embedding": "embedding (resid_post)",
    "no_mlp": "no-MLP (resid_pre + attn_out)",
    "attention": "scores from ln1 output (model's)",
    "attention_resid_pre": "scores from resid_pre (paper's)",
}
"""Each mapping of :data:`mechbook.pythia.analysis.MAPPINGS` in chapter 6's words."""


def control_readings(result: StudyResult) -> dict[tuple[str, str], ControlReading]:
    """:func:`mechbook.pythia.study.control_reading` of every (measure, mapping) of the study."""
    return {key: control_reading(s, result.control_means, *key) for key, s in result.summary.items()}


FINDINGS: tuple[str, ...] = (
    "embedding_all_layers",
    "attention_but_first",
    "earlier_drift_first",
    "features_kept",
    "no_mlp_but_first",
    "earlier_heads_slower",
    "middle_heads_fastest",
    "fineweb_similar",
)
"""The paper's Pythia findings, in the order of section 5.2 (the claims are
:mod:`mechbook.pythia.claims`)."""


@dataclass(frozen=True)
class FindingReadings:
    """The paper's findings read on one study: the ``window`` read (:func:`~mechbook.pythia.findings.paper_window`),
    the ``layers`` each per-head finding compares (counted from 0: ``early``, ``later``,
    ``middle``), every measured ``values[finding, measure]``, and ``untested[finding]``: why a
    finding cannot be read on this source."""

    window: tuple[int, ...]
    values: dict[tuple[str, str], float] = field(hash=False)
    untested: dict[str, str] = field(hash=False)
    layers: dict[str, tuple[int, ...]] = field(hash=False)


def _needs_two_layers(n_layers: int) -> str:
    return f"the model has {n_layers} layer; the finding compares the first layer with later ones"


def finding_readings(result: StudyResult) -> FindingReadings:
    """Every finding of :data:`FINDINGS` under both measures over the paper's window, or why it
    cannot be read here: the middle layer's heads need Pythia-1.4B's 24 layers (Figure 7 reads
    layers 2, 13 and 24; a smaller model has no layer 13 between them), FineWeb needs the network
    and a study that read it, and the layer comparisons need two layers."""
    steps = sorted(int(s) for s in result.table["step"].unique())
    window = f.paper_window(steps, result.linear_every)
    start, n = steps[0], result.n_layers
    table, ctl = result.table, result.controls
    untested: dict[str, str] = {}
    layers: dict[str, tuple[int, ...]] = {}
    if n == f.PYTHIA_14B_LAYERS:
        early, middle, last = (layer - 1 for layer in f.FIGURE7_LAYERS)
        layers = {"early": (early,), "later": (middle, last), "middle": (middle,), "others": (early, last)}
    else:
        layers = {"early": (0,), "later": tuple(range(1, n))}
        untested["middle_heads_fastest"] = (
            f"the finding is about layer 13 of Pythia-1.4B's 24 against layers 2 and 24 (Figure 7); this model has "
            f"{n} layers, so it has no such middle layer"
        )
    if n < 2:
        for name in ("attention_but_first", "earlier_drift_first", "no_mlp_but_first", "earlier_heads_slower"):
            untested[name] = _needs_two_layers(n)
    if "fineweb" not in result.compared:
        untested["fineweb_similar"] = (
            "needs real Pythia read with features from FineWeb, i.e. the network (the paper profile reads it); the "
            "miniature's features come from its own TinyStories text"
            if result.choice.kind == "miniature"
            else "this profile reads one text; the paper profile reads FineWeb beside OpenWebText"
        )
    read = {
        "embedding_all_layers": lambda m: f.embedding_match(table, ctl, m, window),
        "attention_but_first": lambda m: f.attention_match_but_first(table, ctl, m, window),
        "earlier_drift_first": lambda m: f.earlier_drift_first(table, m, window),
        "features_kept": lambda m: f.features_kept(table, ctl, m, window),
        "no_mlp_but_first": lambda m: f.no_mlp_differs_first(table, m, window),
        "earlier_heads_slower": lambda m: f.earlier_heads_slower(
            table, m, window, start, layers["early"][0], layers["later"]
        ),
        "middle_heads_fastest": lambda m: f.middle_heads_fastest(
            table, m, window, start, layers["middle"][0], layers["others"]
        ),
        "fineweb_similar": lambda m: f.texts_agree(table, result.compared["fineweb"], m, window),
    }
    values = {(name, m): read[name](m) for name in FINDINGS if name not in untested for m in MEASURES}
    return FindingReadings(window, values, untested, layers)


@dataclass(frozen=True)
class StudyReadings:
    """What chapter 6's claims read: the ``kind`` of source the page read (``"pythia"`` or
    ``"miniature"``) and why it was chosen (``reason``), every (measure, mapping)'s
    :class:`~mechbook.pythia.study.ControlReading` (``controls``), the ``last_step`` read and the
    paper's ``findings`` over its window; ``numbers``: the chapter's recorded numbers
    (:func:`study_numbers`)."""

    kind: str
    reason: str
    controls: dict[tuple[str, str], ControlReading]
    last_step: int
    findings: FindingReadings
    numbers: dict[str, Any] = field(default_factory=dict, hash=False)


def read_pythia(result: StudyResult) -> StudyReadings:
    """Chapter 6's :class:`StudyReadings` of its study, its recorded numbers included."""
    return StudyReadings(
        result.choice.kind,
        result.choice.reason,
        control_readings(result),
        result.last_step,
        finding_readings(result),
        study_numbers(result),
    )


def study_numbers(result: StudyResult) -> dict[str, Any]:
    """Chapter 6's recorded numbers: the source, per measure and mapping the peak, its step, the
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
    read = control_readings(result)
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
    found = finding_readings(result)
    numbers["window_last_step"] = found.window[-1]
    numbers.update({f"{measure}_{name}": value for (name, measure), value in found.values.items()})
    return numbers
