"""record / read_records (mechbook/records.py): a real papermill round trip, dict input, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mechbook.records import GLUE_PREFIX, read_records, record


def _executed(outputs):
    return {"cells": [{"cell_type": "markdown", "source": "x"}, {"cell_type": "code", "outputs": outputs}]}


def test_read_records_on_notebook_dict_accepts_text_and_object_payloads():
    outs = [
        {"output_type": "stream", "text": "hi"},
        {
            "output_type": "display_data",
            "metadata": {"scrapbook": {"name": "a"}},
            "data": {GLUE_PREFIX + "application/json": '{"value": 1.5}'},
        },
        {
            "output_type": "display_data",
            "metadata": {"scrapbook": {"name": "b"}},
            "data": {GLUE_PREFIX + "application/json": {"value": "s"}},
        },
        {"output_type": "display_data", "metadata": {}, "data": {"text/plain": "not a record"}},
    ]
    assert read_records(_executed(outs)) == {"a": 1.5, "b": "s"}


@pytest.mark.parametrize("bad", ["", "has space", "semi;colon"])
def test_bad_names_are_rejected(bad):
    with pytest.raises(ValueError, match="record name"):
        record(bad, 1)


def test_bad_values_are_rejected_with_a_hint():
    with pytest.raises(ValueError, match="non-finite"):
        record("x", math.nan)
    with pytest.raises(TypeError, match="not object"):
        record("x", object())


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
        lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3),
        max_leaves=8,
    )
)
def test_record_outside_a_kernel_returns_the_plain_value(value):
    assert record("v", value) == value


def test_numpy_scalars_become_python_numbers():
    assert type(record("i", np.int64(3))) is int and type(record("f", np.float64(0.5))) is float
