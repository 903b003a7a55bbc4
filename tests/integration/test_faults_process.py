"""One sentence per failure (issue 22) from a real process: the console gets one line and exit
status 1."""

from __future__ import annotations

import os
import subprocess
import sys

import test_faults
from conftest import ROOT

env = test_faults.env  # the fixture of test_faults.py


def test_the_console_gets_one_line_and_exit_1_from_a_real_process(env):
    done = subprocess.run(
        [sys.executable, "-m", "mechbook", "cache", "export", str(env / "b.tar")],
        env={**os.environ, "PYTHONPATH": str(ROOT), "MECHBOOK_DEVICE": "gpu"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: MECHBOOK_DEVICE='gpu' is not a device torch knows: use cpu, or cuda (cuda:N) on a machine with a GPU"
    ]
