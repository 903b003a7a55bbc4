"""``--knob NAME=VALUE``: one strict rule for VALUE (mechbook.arguments.knob_value), so that no
value is read as something else (YAML read ``010`` as 8 and ``1:30`` as 90), and a knob given
twice is refused rather than silently taking the last value."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mechbook.arguments import knob_pairs, knob_value


@pytest.mark.parametrize(
    "text, value",
    [
        ("10", 10),
        ("0", 0),
        ("-3", -3),
        ("0.5", 0.5),
        ("1e-3", 1e-3),
        ("[1, 2]", [1, 2]),
        ("[]", []),
        ("true", True),
        ("False", False),
        ("null", None),
        ("merge", "merge"),
        ("cpu", "cpu"),
        ('"a b"', "a b"),
        (" 7 ", 7),
    ],
)
def test_values_read_as_written(text, value):
    got = knob_value(text)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("text", ["010", "007", "-01", "1:30", "1_000", "0x10", "[1, 2", "{a: 1}", "a b", "", "1.2.3"])
def test_values_yaml_would_misread_are_refused_with_how_to_write_them(text):
    with pytest.raises(ValueError, match=r"leading zero|not a value a knob takes"):
        knob_value(text)


@given(st.integers(-(10**12), 10**12))
def test_every_integer_reads_as_itself(n):
    assert knob_value(str(n)) == n


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_float_reads_as_itself(x):
    assert knob_value(repr(x)) == x


def test_a_knob_given_twice_is_refused():
    assert knob_pairs([("seed", 1), ("steps", 2)]) == (("seed", 1), ("steps", 2))
    with pytest.raises(ValueError, match="'seed' is given twice"):
        knob_pairs([("seed", 1), ("seed", 2)])


def test_the_command_line_refuses_a_misread_knob_in_one_line():
    import argparse

    from mechbook.__main__ import _knob

    assert _knob("seed=10") == ("seed", 10)
    with pytest.raises(argparse.ArgumentTypeError, match=r"^--knob seed: '010' has a leading zero"):
        _knob("seed=010")
