"""What chapter 6 reads off its study for its records and its claims (presented by
:mod:`mechbook.chapters.ch06_pythia`; the claims are :mod:`mechbook.pythia.claims`). Cheap and
uncached, kept apart from the study's modules, whose code keys its cached computations.

- :func:`control_readings`: every (measure, mapping)'s peak against the controls;
- :class:`StudyReadings`: what the claims read (:func:`study_readings`);
- :func:`study_numbers`: the chapter's recorded numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True)
class StudyReadings:
    """What chapter 6's claims read: the ``kind`` of source the page read (``"pythia"`` or
    ``"miniature"``) and why it was chosen (``reason``), every (measure, mapping)'s
    :class:`~mechbook.pythia.study.ControlReading` (``controls``) and the ``last_step`` read."""

    kind: str
    reason: str
    controls: dict[tuple[str, str], ControlReading]
    last_step: int


def study_readings(result: StudyResult) -> StudyReadings:
    """Chapter 6's :class:`StudyReadings` of its study."""
    return StudyReadings(result.choice.kind, result.choice.reason, control_readings(result), result.last_step)


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
    return numbers
