"""What Part I's chapters read off their runs for their records and their claims (the readings
objects :mod:`mechbook.leading_terms.claims` reads). Cheap and uncached; kept apart from the
modules of the cached computations (:mod:`.check`, :mod:`.train`, ...), whose code is part of
their cache keys.

- chapter 2: :func:`check_numbers`, :func:`attention_first`, :class:`CheckReadings`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechbook.leading_terms.check import CheckRuns, check_summary, first_departure, loss_drop, slopes
from mechbook.leading_terms.leading import KINDS

BREAK_COSINE = 0.99
"""Chapter 2's line: a matrix has left its leading form once its lowest cosine over the layers is
below it."""
EXPONENTS = {"W_O": 1, "V": 2, "W": 4, "P": 4}
"""The order in η (and, for large s, in s) of each kind's leading term (chapter 2 fits them)."""


def attention_first(order: pd.DataFrame) -> pd.Series:
    """Per learning rate of ``order`` (:func:`~mechbook.leading_terms.check.departure_steps`):
    whether both W and P leave before both W_O and V, a term that never leaves counting as last
    (chapter 2)."""
    steps = order.fillna(np.inf)
    return steps[["W", "P"]].max(axis=1) < steps[["W_O", "V"]].min(axis=1)


def check_numbers(data: CheckRuns, s_last: int) -> dict[str, float]:
    """Chapter 2's numbers (``book/thresholds/02_leading_terms.yml`` bounds them): the check's
    lowest cosine and largest ratio error, the slopes in s (fitted up to ``s_last``) and η per
    kind, the first η·s below :data:`BREAK_COSINE` (the sweep's largest η·s when none falls below)
    and how far the loss had fallen from log :math:`|V|` there."""
    min_cos, max_err = check_summary(data.check)
    table = slopes(data.check, s_last)
    out = {"check_min_cosine": min_cos, "check_max_ratio_error": max_err}
    for kind in KINDS:
        out[f"slope_s_{kind}"] = float(table.iloc[:, 0][kind])
        out[f"slope_eta_{kind}"] = float(table.iloc[:, 1][kind])
    first = first_departure(data.sweep, BREAK_COSINE)
    out["breakdown_eta_s"] = first.eta_s if first else float(data.sweep["eta_s"].max())
    if first:
        out["breakdown_loss_drop"] = loss_drop(first.loss, data.vocab_size)
    return out


@dataclass(frozen=True)
class CheckReadings:
    """What chapter 2's claims read: its ``numbers`` (:func:`check_numbers`) and the validity
    ``sweep``."""

    numbers: dict[str, float]
    sweep: pd.DataFrame


def check_readings(data: CheckRuns, s_last: int) -> CheckReadings:
    """Chapter 2's :class:`CheckReadings` of its two runs, the check's slopes fitted up to ``s_last``."""
    return CheckReadings(check_numbers(data, s_last), data.sweep)
