"""What a check makes of an answer of an odd kind (mechbook/exercises/core.py, ``normalise``): what
a reader would naturally return is read as numbers (tensors dense or sparse, arrays, lists, tuples,
scalars, bool arrays where the answer is boolean); what is not real numbers is refused with one
line naming it and the answer; an answer right only to float16's or bfloat16's precision is told
its dtype; and no answer makes a check raise."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mechbook.exercises import EXERCISES, Case, Diagnosis, Exercise, run
from mechbook.exercises.core import WRONG_SHAPE, as_array, show

STATUSES = {"passed", "differs", "refused", "changed input", "not written", "raised"}


class RaisingArray:
    """An object whose ``__array__`` raises, as a half-converted custom type might."""

    def __array__(self, *args, **kwargs):
        raise RuntimeError("no array here")


class RaisingRepr:
    """An object that cannot even be printed."""

    def __repr__(self):
        raise RuntimeError("no repr either")


def _answer(name, make):
    """The outcome of ``check_<name>`` for a function that returns ``make(the reference's answer)``."""
    reference = EXERCISES[name].reference
    return run(EXERCISES[name], lambda *a, **k: make(reference(*a, **k)), quiet=True)


def _floats(value):
    return torch.as_tensor(as_array(value))


def _one_line_naming_the_answer(outcome, name):
    assert "\n" not in outcome.line, outcome.line
    assert outcome.line.startswith(f"✗ check_{name}: on {outcome.case}, yours is "), outcome.line
    assert " but the answer is " in outcome.line, outcome.line


REFUSED = [
    ("cosine", str, "yours is text ('0."),
    ("bigram_map", str, "yours is text ("),
    ("bigram_map", lambda v: v.astype(str), "an array holding text"),
    ("remove_projection", lambda v: v.numpy().astype(str), "an array holding text"),
    ("train_pairs", lambda v: np.where(v, "True", "False"), "not the words 'True' and 'False'"),
    ("cosine", lambda v: v + 1j, "complex (complex128"),
    ("bigram_map", lambda v: v + 1j, "complex (complex128"),
    ("remove_projection", lambda v: v + 1j, "a complex tensor (complex128)"),
    ("sharpest_rise", lambda v: [v[0], 1j], "complex"),
    ("bigram_map", lambda v: v.astype(object), "an array of Python objects (dtype object"),
    ("sharpest_rise", lambda v: np.array(v, dtype=object), "an array of Python objects"),
    ("bigram_map", lambda v: torch.empty(v.shape, device="meta"), "a meta tensor of shape"),
    ("cosine", lambda v: torch.empty((), device="meta"), "a meta tensor of shape ()"),
    ("bigram_map", lambda v: RaisingArray(), "a RaisingArray that cannot be read as numbers (RuntimeError: no array"),
    ("train_pairs", lambda v: RaisingArray(), "cannot be read as numbers"),
    ("cosine", lambda v: RaisingRepr(), "yours is a RaisingRepr (<RaisingRepr>)"),
    ("cosine", lambda v: {"cosine": v}, "yours is a dict ("),
    ("bigram_map", lambda v: [v[0], v[0][:2]], "a list of items of different shapes"),
    ("cosine", lambda v: v > 0, "the answer is a number: return the number itself, not True/False"),
    ("bigram_map", lambda v: v > 0, "a bool array of shape (3, 3)"),
    ("cosine", lambda v: float("inf"), "yours is inf but the answer is"),
    ("bigram_map", lambda v: np.where(v > 0, np.inf, v), "inf at entry (0, 2)"),
    ("attention_coefficient", lambda v: torch.tensor(v).half(), "float16 ends at 65504: compute in float32"),
    ("literal_answer", lambda v: 10**400, "OverflowError"),
]


@pytest.mark.parametrize(("name", "make", "says"), REFUSED)
def test_an_answer_that_is_not_real_numbers_is_refused_on_one_line(name, make, says):
    outcome = _answer(name, make)
    assert outcome.status == "refused", outcome.line
    assert says in outcome.line, outcome.line
    assert outcome.hint and outcome.line.endswith(outcome.hint)
    _one_line_naming_the_answer(outcome, name)


@pytest.mark.parametrize("name", list(EXERCISES))
@pytest.mark.parametrize(
    "answer",
    ["0.5", np.array(["1", "0"]), 1 + 2j, np.array([1.0, None]), RaisingArray(), torch.empty(2, device="meta")],
    ids=["string", "string array", "complex", "object array", "raising __array__", "meta tensor"],
)
def test_every_check_refuses_what_is_not_numbers_and_prints_one_line(name, answer, capsys):
    outcome = run(EXERCISES[name], lambda *a, **k: answer)
    assert outcome.status == "refused", outcome.line
    assert capsys.readouterr().out == outcome.line + "\n"
    _one_line_naming_the_answer(outcome, name)


ACCEPTED = [
    ("bigram_map", lambda v: torch.as_tensor(v).to_sparse()),
    ("remove_projection", lambda v: v.to_sparse()),
    ("train_pairs", lambda v: torch.as_tensor(v).to_sparse()),
    ("remove_projection", lambda v: v.clone().requires_grad_(True) * 1),
    ("bigram_map", lambda v: v.tolist()),
    ("bigram_map", lambda v: tuple(torch.as_tensor(row) for row in v)),
    ("bigram_map", lambda v: torch.as_tensor(v).float()),
    ("train_pairs", lambda v: v.tolist()),
    ("train_pairs", lambda v: v.astype(np.int64)),
    ("cosine", np.float32),
    ("cosine", lambda v: torch.tensor(v, dtype=torch.float64)),
    ("literal_answer", np.int64),
    ("literal_answer", float),
    ("literal_answer", torch.tensor),
    ("sharpest_rise", list),
    ("sharpest_rise", lambda v: tuple(None if x is None else torch.tensor(x) for x in v)),
]


@pytest.mark.parametrize(("name", "make"), ACCEPTED)
def test_what_a_reader_naturally_returns_is_read_as_numbers_and_passes(name, make):
    outcome = _answer(name, make)
    assert outcome.status == "passed", outcome.line


@pytest.mark.parametrize(
    ("name", "dtype", "make"),
    [
        ("cosine", "float16", lambda v: np.float16(v)),
        ("cosine", "bfloat16", lambda v: torch.tensor(v).bfloat16()),
        ("bigram_map", "float16", lambda v: v.astype(np.float16)),
        ("bigram_map", "bfloat16", lambda v: _floats(v).bfloat16()),
        ("remove_projection", "float16", lambda v: v.half()),
        ("neuron_spectrum", "bfloat16", lambda v: _floats(v).bfloat16()),
    ],
)
def test_an_answer_right_to_its_half_precision_is_told_its_dtype(name, dtype, make):
    outcome = _answer(name, make)
    assert outcome.status == "differs", outcome.line
    assert outcome.hint.startswith(f"your answer is {dtype}; compute in float32 or float64"), outcome.line
    assert outcome.hint not in {EXERCISES[name].hint} | {d.hint for d in EXERCISES[name].diagnoses}


def test_a_half_precision_answer_with_a_real_mistake_gets_its_hint_and_a_note_of_the_dtype():
    outcome = _answer("bigram_map", lambda v: _floats(v[:, 1:]).half())
    assert outcome.status == "differs", outcome.line
    assert outcome.hint == WRONG_SHAPE.hint + " (your answer is also float16: compute in float32 or float64)"


def test_a_half_precision_answer_that_is_exact_passes():
    """0/1 and small integers are exact in float16: precision is no mistake there."""
    assert _answer("train_pairs", lambda v: torch.as_tensor(v).half()).status == "passed"


def test_custom_closes_and_diagnoses_receive_the_normalised_answer():
    seen = []

    def close(yours, expected):
        seen.append(("close", type(yours), yours.dtype))
        return False

    def matches(yours, expected, case):
        seen.append(("diagnosis", type(yours), yours.dtype))
        return True

    exercise = Exercise(
        "probe",
        reference=lambda x: x * 2,
        cases=lambda: [Case("x", (np.arange(3.0),))],
        hint="general",
        diagnoses=(Diagnosis(matches, "named"),),
        close=close,
    )
    outcome = run(exercise, lambda x: torch.as_tensor(x * 3).to_sparse(), quiet=True)
    assert outcome.status == "differs" and outcome.hint == "named"
    assert seen == [("close", np.ndarray, np.float64), ("diagnosis", np.ndarray, np.float64)]


@pytest.mark.parametrize(
    "value",
    [
        torch.tensor([[0.0, 1.5], [2.0, 0.0]]).to_sparse(),
        np.array(["True", "False"]),
        RaisingArray(),
        RaisingRepr(),
        torch.empty(3, device="meta"),
        np.array([1, "a"], dtype=object),
    ],
    ids=["sparse", "True/False strings", "raising __array__", "raising repr", "meta", "object array"],
)
def test_show_describes_anything_on_one_line(value):
    text = show(value)
    assert text and "\n" not in text and len(text) <= 80


def test_show_reads_a_sparse_tensor_as_its_values():
    assert show(torch.tensor([[0.0, 1.5], [2.0, 0.0]]).to_sparse()) == (
        "array of shape (2, 2), first entries [0. , 1.5, 2. , 0. ]"
    )


def _with_first_case(name):
    exercise = EXERCISES[name]
    return dataclasses.replace(exercise, cases=lambda: list(exercise.cases())[:1])


ODD_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.complex_numbers(max_magnitude=1e6),
    st.text(max_size=5),
    st.binary(max_size=3),
    st.sampled_from(["True", "False", "nan", "1e400"]),
)
ODD_ARRAYS = hnp.arrays(
    st.sampled_from(["float16", "float32", "int8", "uint64", "bool", "complex64", "<U3", "S2", "datetime64[s]"]),
    hnp.array_shapes(min_dims=0, max_dims=3, max_side=3),
)
ODD_OBJECTS = st.sampled_from(
    [
        RaisingArray(),
        object(),
        {1, 2},
        np.array([None, 1.5, "x"], dtype=object),
        torch.empty(2, 3, device="meta"),
        torch.ones(2, 2).to_sparse(),
        torch.ones(3, dtype=torch.complex64),
        torch.ones(2, 2, requires_grad=True) * 1,
        torch.ones(2).bfloat16(),
        torch.full((2,), 7.0e4).half(),
    ]
)
ODD_ANSWERS = st.recursive(
    st.one_of(ODD_SCALARS, ODD_ARRAYS, ODD_OBJECTS),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=2), inner, max_size=2),
    ),
    max_leaves=6,
)
CHECKS = {name: _with_first_case(name) for name in ("cosine", "bigram_map", "train_pairs", "sharpest_rise")}


@settings(max_examples=150, deadline=None)
@given(ODD_ANSWERS, st.sampled_from(sorted(CHECKS)))
def test_no_answer_makes_a_check_raise(answer, name):
    outcome = run(CHECKS[name], lambda *a, **k: answer, quiet=True)
    assert outcome.status in STATUSES, outcome
    assert outcome.line.startswith(("✓", "✗")) and "\n" not in outcome.line, outcome.line
