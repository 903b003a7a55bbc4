"""mechbook.chapters.common: recording a chapter's numbers and showing its numbered figures."""

from __future__ import annotations

import numpy as np
import pytest

from mechbook.chapters import common
from mechbook.chapters.common import record_all


def test_record_all_returns_plain_values_outside_a_kernel():
    assert record_all({"a": np.float64(0.5), "b": np.int64(3)}) == {"a": 0.5, "b": 3}
    with pytest.raises(ValueError, match="non-finite"):
        record_all({"c": float("nan")})


def test_figure_glues_in_the_static_build_and_displays_live(monkeypatch):
    import IPython.display
    import myst_nb

    calls = []
    monkeypatch.setattr(myst_nb, "glue", lambda name, obj, display=True: calls.append(("glue", name, obj, display)))
    monkeypatch.setattr(IPython.display, "display", lambda obj: calls.append(("display", obj)))
    monkeypatch.setenv("MECHBOOK_STATIC", "1")
    common.figure("fig-x", "chart")
    monkeypatch.setenv("MECHBOOK_STATIC", "0")
    common.figure("fig-y", "other")
    assert calls == [("glue", "fig-x", "chart", False), ("display", "other")]
