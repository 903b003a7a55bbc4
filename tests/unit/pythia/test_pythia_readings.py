"""The paper's findings read from a study (mechbook.pythia.readings)."""

from __future__ import annotations

import pandas as pd
import pytest
from test_ch06_pythia import _result

from mechbook.pythia.analysis import LAYER_LEVEL, MAPPINGS
from mechbook.pythia.similarity import MEASURES
from mechbook.pythia.study import StudyResult


def test_on_pythia_14b_figure_7s_layers_are_compared_and_fineweb_is_read():
    from mechbook.pythia.readings import finding_readings

    rows = []
    for layer in range(24):
        for step in (0, 1, 2, 512, 1000):
            for mapping in MAPPINGS:
                v = 0.3 if step else 0.1
                rows.append((step, "cka", mapping, layer, LAYER_LEVEL, v))
                if mapping == "attention_resid_pre":
                    # layer 13 (index 12) parts its heads; layer 2 (index 1) learns least
                    gain = {1: 0.05, 12: 0.2}.get(layer, 0.1) * (step > 0)
                    rows += [
                        (step, "cka", mapping, layer, h, 0.1 + gain * (1 + (h - 1.5) * (layer == 12))) for h in range(4)
                    ]
    table = pd.DataFrame(rows, columns=["step", "measure", "mapping", "layer", "head", "similarity"])
    table = pd.concat([table, table.assign(measure="paper")], ignore_index=True)
    ctl = pd.DataFrame(
        [("random_init", m, p, 0, LAYER_LEVEL, 0.0) for m in MEASURES for p in MAPPINGS],
        columns=["control", "measure", "mapping", "layer", "head", "similarity"],
    )
    result = _result(table, ctl, [3.0, 2.0], kind="pythia")
    result = StudyResult(
        *[getattr(result, f) for f in ("choice", "features", "table", "controls", "curve", "summary", "control_means")],
        compared={"fineweb": table.assign(similarity=table["similarity"] + 0.01)},
    )
    found = finding_readings(result)
    assert found.window == (1, 2, 512) and found.untested == {}
    assert found.layers["early"] == (1,) and found.layers["middle"] == (12,) and found.layers["others"] == (1, 23)
    assert found.values["earlier_heads_slower", "cka"] == pytest.approx(0.05)
    assert found.values["middle_heads_fastest", "cka"] > 0
    assert found.values["fineweb_similar", "cka"] == pytest.approx(0.01)
