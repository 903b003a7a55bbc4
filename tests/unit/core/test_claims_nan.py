"""A sentence that compares a number that is not one (issue 31's 10-line corpus: a reading over
no data gives NaN) fails with a line naming the values and the cause, not a bare 'nan'."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mechbook import claims


@pytest.mark.parametrize(
    "call",
    [
        lambda: claims.compare(float("nan"), 0.42),
        lambda: claims.change(0.42, np.float32("nan")),
        lambda: claims.difference(0.5, math.nan),
    ],
)
def test_a_comparison_with_nan_names_both_values_and_the_cause(call):
    with pytest.raises(ValueError) as caught:
        call()
    message = str(caught.value)
    assert "0.42" in message or "0.5" in message, "names the number it was compared with"
    assert "nan is not a number" in message and "np.float32" not in message, message
    assert "a reading over no data" in message and "\n" not in message


def test_two_nans_are_both_named():
    with pytest.raises(ValueError, match="compares nan with nan, and nan and nan are not a number"):
        claims.compare(float("nan"), float("nan"))


def test_finite_numbers_still_compare():
    assert claims.compare(0.5, 0.4) == "higher than" and claims.difference(0.5, 0.4, ".1f") == "0.1 higher"
