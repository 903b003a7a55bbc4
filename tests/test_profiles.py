"""resolve_profile (mechbook/profiles.py): picking a profile and overriding knobs."""

from __future__ import annotations

import dataclasses
import doctest

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mechbook import profiles
from mechbook.profiles import PROFILES, resolve_profile


@dataclasses.dataclass(frozen=True)
class Cfg:
    steps: int
    width: int = 8


TABLE = {"smoke": Cfg(1), "cpu": Cfg(10), "paper": Cfg(100, 64)}


def test_profiles_are_the_three_documented():
    assert PROFILES == ("smoke", "cpu", "paper")


@given(st.sampled_from(PROFILES), st.none() | st.integers(1, 1000), st.none() | st.integers(1, 64))
def test_override_replaces_only_given_knobs(profile, steps, width):
    got = resolve_profile(TABLE, profile, steps=steps, width=width)
    base = TABLE[profile]
    assert got.steps == (base.steps if steps is None else steps)
    assert got.width == (base.width if width is None else width)


def test_errors_say_what_to_do():
    with pytest.raises(ValueError, match="choose one of smoke, cpu, paper"):
        resolve_profile(TABLE, "gpu")
    with pytest.raises(ValueError, match=r"unknown knob\(s\) \['depth'\]"):
        resolve_profile(TABLE, "cpu", depth=3)
    with pytest.raises(TypeError, match="dataclass"):
        resolve_profile({"cpu": {"steps": 1}}, "cpu", steps=2)


def test_docstring_example():
    assert doctest.testmod(profiles).failed == 0
