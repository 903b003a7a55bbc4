"""mechbook.leading_terms.labels: the run names and matrix labels shared by chapters 3-5."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mechbook.leading_terms.labels import RUN_NAMES, TERM_LABELS, matrix_label, run_labels


def test_run_labels_name_the_paper_rate_first():
    assert run_labels((0.005, 0.1)) == {0.005: "paper_lr", 0.1: "large_lr"}
    assert list(run_labels([0.1, 0.005]).values()) == list(RUN_NAMES)


@pytest.mark.parametrize("lrs", [(0.005,), (0.005, 0.1, 0.2), (0.1, 0.1)])
def test_run_labels_need_two_distinct_rates(lrs):
    with pytest.raises(ValueError, match="exactly two distinct learning rates"):
        run_labels(lrs)


@given(layer=st.integers(0, 120), kind=st.sampled_from(["V", "W", "P"]))
def test_matrix_labels_are_distinct_and_readable(layer, kind):
    text = matrix_label(f"blocks.{layer}.attn.{kind}")
    digits = str(layer).translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))
    assert text == f"{kind}⁽{digits}⁾"
    assert matrix_label(f"blocks.{layer + 1}.attn.{kind}") != text
    assert kind in TERM_LABELS


@pytest.mark.parametrize("name", ["W", "blocks.0.mlp.V", "blocks.x.attn.V", "blocks.0.attn.Q", "embed"])
def test_matrix_label_refuses_other_names(name):
    with pytest.raises(ValueError, match="not a parameter of the attention model"):
        matrix_label(name)
    assert matrix_label("W_O") == "W_O"
