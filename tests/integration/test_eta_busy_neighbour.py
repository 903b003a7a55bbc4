"""The plan's ETA (issue 31, item 2) against a real busy neighbour process on the same core: the ETA
moves with the slowed machine."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from test_eta import _shipped
from test_execute import _tiny_repo

from mechbook.book import run
from mechbook.book.config import ExecuteConfig


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity")
def test_the_eta_moves_with_a_machine_slowed_by_a_busy_neighbour_on_the_same_core(tmp_path):
    repo = _tiny_repo(tmp_path)
    _shipped(repo, {"cpu": "Reference CPU", "steps_per_s": 200.0}, {"01_ok": 100.0, "02_bad": 50.0})
    cfg = ExecuteConfig(profile="smoke", root=repo)
    saved = os.sched_getaffinity(0)
    core = min(saved)
    os.sched_setaffinity(0, {core})
    try:
        alone = run.estimate_plan(cfg, ["01_ok", "02_bad"]).seconds(["01_ok", "02_bad"])[0]
        neighbour = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            os.sched_setaffinity(neighbour.pid, {core})
            shared = run.estimate_plan(cfg, ["01_ok", "02_bad"]).seconds(["01_ok", "02_bad"])[0]
        finally:
            neighbour.kill()
            neighbour.wait()
    finally:
        os.sched_setaffinity(0, saved)
    assert shared / alone > 1.4, f"half a core should about double the ETA ({alone:.0f} s -> {shared:.0f} s)"
