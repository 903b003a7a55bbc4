"""record / read_records (mechbook/records.py) through a real papermill round trip in a kernel."""

from __future__ import annotations

import papermill
from conftest import make_notebook

from mechbook.records import GLUE_PREFIX, read_records


def test_round_trip_through_papermill(tmp_path):
    src = make_notebook(
        tmp_path / "rec.ipynb",
        [
            (
                "code",
                "import numpy as np, torch\nfrom mechbook import record\n"
                "record('n', 3)\nrecord('x', np.float32(0.25))\nrecord('t', torch.tensor(2.5))\n"
                "record('flag', True)\nrecord('d', {'a': [1, 2.5, None]})\nrecord('n', 4)\nprint('visible')",
            )
        ],
    )
    out = tmp_path / "rec_out.ipynb"
    papermill.execute_notebook(str(src), str(out), kernel_name="python3", progress_bar=False)
    assert read_records(out) == {"n": 4, "x": 0.25, "t": 2.5, "flag": True, "d": {"a": [1, 2.5, None]}}
    text = out.read_text()
    assert GLUE_PREFIX + "application/json" in text, "records keep the glue prefix so the site shows nothing"
