"""The exercises (mechbook/exercises) in the executed smoke book: an executed check cell shows its
one line."""

from __future__ import annotations

import re

import nbformat
import pytest
from test_exercises import NOTEBOOKS, _checks, _exercise_cells, _read, _tags


@pytest.mark.book
def test_an_executed_check_cell_shows_its_one_line(smoke_book):
    """On the page a check cell's output is the line it printed, not the Outcome's repr under it."""
    _, results = smoke_book
    seen = 0
    for result in results:
        nb = nbformat.read(result.output, as_version=4)
        for cell in _exercise_cells(nb):
            if "solution" in _tags(cell):
                assert not cell.outputs, f"{result.source}: a solution cell has output"
                continue
            seen += 1
            assert [(o.output_type, o.get("name")) for o in cell.outputs] == [("stream", "stdout")], (
                result.source,
                cell.outputs,
            )
            assert re.fullmatch(r"✓ check_\w+: passed on all \d+ inputs\n", cell.outputs[0].text), cell.outputs
    assert seen == sum(len(_checks(_read(p))) for p in NOTEBOOKS)
