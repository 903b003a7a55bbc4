"""resolve_profile and ran_with (mechbook/profiles.py): profiles, nested knobs, checked types."""

from __future__ import annotations

import dataclasses
import doctest
from typing import Literal, Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mechbook import profiles
from mechbook.profiles import PROFILES, changed_knobs, ran_with, ran_with_text, resolve_profile


@dataclasses.dataclass(frozen=True)
class Opt:
    lr: float = 0.01
    kind: Literal["adam", "sgd"] = "adam"

    def __post_init__(self):
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")


@dataclasses.dataclass(frozen=True)
class Train:
    steps: int
    opt: Opt = Opt()
    widths: tuple[int, ...] = (4, 8)


@dataclasses.dataclass(frozen=True)
class Cfg:
    steps: int
    width: int = 8
    name: str = "x"
    limit: Optional[int] = None  # noqa: UP045 (the typing.Optional spelling is what this field tests)
    ratio: float | None = 0.5
    train: Train = Train(5)


TABLE = {"smoke": Cfg(1), "cpu": Cfg(10), "paper": Cfg(100, 64, train=Train(50, Opt(0.1)))}


def test_profiles_are_the_three_documented():
    assert PROFILES == ("smoke", "cpu", "paper")


@given(st.sampled_from(PROFILES), st.none() | st.integers(1, 1000), st.none() | st.integers(1, 64))
def test_override_replaces_only_given_knobs(profile, steps, width):
    got = resolve_profile(TABLE, profile, steps=steps, width=width)
    base = TABLE[profile]
    assert got.steps == (base.steps if steps is None else steps)
    assert got.width == (base.width if width is None else width)
    assert got.train == base.train


@given(
    st.sampled_from(PROFILES),
    st.none() | st.integers(1, 10**6),
    st.none() | st.floats(1e-6, 10, allow_nan=False),
    st.none() | st.sampled_from(["adam", "sgd"]),
)
def test_nested_knobs_equal_a_literal_nested_replace(profile, steps, lr, kind):
    got = resolve_profile(TABLE, profile, train__steps=steps, train__opt__lr=lr, train__opt__kind=kind)
    base = TABLE[profile]
    opt = base.train.opt
    opt = dataclasses.replace(opt, lr=opt.lr if lr is None else lr, kind=opt.kind if kind is None else kind)
    train = dataclasses.replace(base.train, steps=base.train.steps if steps is None else steps, opt=opt)
    assert got == dataclasses.replace(base, train=train)
    assert got.steps == base.steps


def test_a_nested_knob_and_its_parent_together():
    got = resolve_profile(TABLE, "cpu", train=Train(7), train__steps=9)
    assert got.train == Train(9)


def test_nested_ranges_are_checked_by_the_configs_post_init():
    with pytest.raises(ValueError, match="lr must be > 0"):
        resolve_profile(TABLE, "cpu", train__opt__lr=-1.0)


def test_unknown_knobs_are_named_with_the_allowed_ones():
    with pytest.raises(ValueError, match="unknown knob 'depth'") as err:
        resolve_profile(TABLE, "cpu", depth=3)
    assert "train__opt__lr" in str(err.value) and "steps" in str(err.value)
    with pytest.raises(ValueError, match="unknown knob 'train__opt__beta'"):
        resolve_profile(TABLE, "cpu", train__opt__beta=3)
    with pytest.raises(ValueError, match="'steps' is a int, not a config"):
        resolve_profile(TABLE, "cpu", steps__x=3)


@pytest.mark.parametrize(
    "knob, value, expected",
    [
        ("steps", "10", "expected int"),
        ("steps", 1.5, "expected int"),
        ("steps", True, "expected int"),
        ("train__steps", 2.0, "expected int"),
        ("name", 3, "expected str"),
        ("ratio", "0.5", "expected float | None"),
        ("limit", 1.0, "expected Optional"),
        ("train__opt__kind", "rmsprop", "expected Literal"),
        ("train__widths", (1, "a"), r"expected tuple\[int, ...\]"),
        ("train", 5, "expected Train"),
    ],
)
def test_wrong_types_name_the_knob_the_value_and_the_type(knob, value, expected):
    with pytest.raises(TypeError, match=expected) as err:
        resolve_profile(TABLE, "cpu", **{knob: value})
    assert repr(knob) in str(err.value) and repr(value) in str(err.value)


def test_values_that_fit_are_stored_as_the_field_holds_them():
    got = resolve_profile(TABLE, "cpu", ratio=1, limit=3, train__widths=[2, 3], train__opt__lr=1, name="y")
    assert got.ratio == 1.0 and isinstance(got.ratio, float)
    assert got.train.widths == (2, 3) and got.train.opt.lr == 1.0
    assert (got.limit, got.name) == (3, "y")


def test_errors_say_what_to_do():
    with pytest.raises(ValueError, match="choose one of smoke, cpu, paper"):
        resolve_profile(TABLE, "gpu")
    with pytest.raises(TypeError, match="dataclass"):
        resolve_profile({"cpu": {"steps": 1}}, "cpu", steps=2)


@given(st.sampled_from(PROFILES), st.none() | st.integers(1, 99), st.none() | st.integers(1, 99))
def test_ran_with_lists_exactly_the_changed_knobs(profile, steps, train_steps):
    cfg = resolve_profile(TABLE, profile, steps=steps, train__steps=train_steps)
    base = TABLE[profile]
    expected = {}
    if steps is not None and steps != base.steps:
        expected["steps"] = (base.steps, steps)
    if train_steps is not None and train_steps != base.train.steps:
        expected["train__steps"] = (base.train.steps, train_steps)
    assert changed_knobs(TABLE, profile, cfg) == expected
    text = ran_with_text(TABLE, profile, cfg)
    assert text.startswith(f"This page ran in the **{profile}** profile")
    assert ("| knob |" in text) == bool(expected)
    for name, (default, value) in expected.items():
        assert f"| `{name}` | {default!r} | {value!r} |" in text


def test_ran_with_is_markdown_for_the_notebook():
    note = ran_with(TABLE, "smoke", TABLE["smoke"])
    assert note._repr_markdown_() == "This page ran in the **smoke** profile."


def test_docstring_example():
    assert doctest.testmod(profiles).failed == 0
