"""Chapter 11 (mechbook.chapters.ch11_how_much_data) on sweeps trained for real: the smoke bounds
reject sweeps that never learn."""

from __future__ import annotations

import dataclasses
import math

from test_ch11_how_much_data import SMOKE_BOUNDS

from mechbook.assign_add import sweeps
from mechbook.assign_add.claims import CH11_CLAIMS
from mechbook.book.checks import check_thresholds
from mechbook.chapters import ch11_how_much_data as ch11
from mechbook.claims import evidence


def test_smoke_bounds_reject_sweeps_that_never_learn():
    """Both smoke sweeps with a learning rate of 0, so every run keeps its initial weights,
    recorded as the notebook records them: the training cross-entropy stays at its value at
    initialisation, above ln 59 and above every seed's 60-step runs."""
    cfg = ch11.CONFIGS["smoke"]
    frozen = dataclasses.replace(
        cfg, f_train=dataclasses.replace(cfg.f_train, lr=0.0), r_train=dataclasses.replace(cfg.r_train, lr=0.0)
    )
    sw = sweeps.run_sweeps(frozen)
    records = ch11.record_all(sw, evidence(CH11_CLAIMS, sw))
    assert [p.split()[0] for p in check_thresholds(records, SMOKE_BOUNDS)] == ["max_final_train_loss"]
    assert records["max_final_train_loss"] > math.log(59)
