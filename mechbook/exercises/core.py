"""The machinery behind every ``mechbook.exercises.check_<name>``: run a reader's function against
the library's own on a list of inputs and say, in one line, whether it agrees.

A check is an :class:`Exercise`: the library's solution (``reference``), the inputs it is tried
on (:class:`Case`: seeded random ones and edge cases), how two answers are compared, and the
hints. A hint is either general or a *diagnosis*: a predicate on (reader's answer, expected
answer) that recognises a typical mistake (a transpose, a missing normalisation, a wrong mask)
and names it. :func:`run` returns a :class:`Outcome` and prints its one line; it never raises
for a wrong or unfinished answer, so an exercise notebook with stubs runs to its end.

Used by every chapter's exercises (chapters 1-11); the exercise form of a notebook is written by
:mod:`mechbook.exercises.notebooks`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class Case:
    """One input to try: positional ``args`` (and ``kwargs``) for both functions, and ``label``, a
    short description of the input that the failure line shows (e.g. ``"3 tokens, vocabulary 5"``)."""

    label: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Diagnosis:
    """A typical mistake: ``matches(yours, expected, case)`` is true when the reader's answer is what
    that mistake gives, and ``hint`` then says what to fix."""

    matches: Callable[[Any, Any, Case], bool]
    hint: str


@dataclass(frozen=True)
class Exercise:
    """A check: ``name`` (the function ``check_<name>``), the library's ``reference`` solution, the
    ``cases`` to try (a function of nothing, so they are built when the check runs), ``close``
    (are two answers equal: default :func:`allclose`), ``diagnoses`` tried in order when they
    differ, and the general ``hint`` shown when none matches."""

    name: str
    reference: Callable[..., Any]
    cases: Callable[[], Sequence[Case]]
    hint: str
    diagnoses: tuple[Diagnosis, ...] = ()
    close: Callable[[Any, Any], bool] | None = None


@dataclass(frozen=True)
class Outcome:
    """What a check found: ``status`` is ``"passed"``, ``"differs"``, ``"not written"`` (the stub's
    ``NotImplementedError``) or ``"raised"`` (another exception); ``line`` the one line printed;
    ``hint`` the hint given (empty when it passed); ``case`` the first failing input's label."""

    name: str
    status: str
    line: str
    hint: str = ""
    case: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def _ipython_display_(self) -> None:
        """Show nothing when a notebook cell ends with the check: :func:`run` has printed its line,
        and the dataclass's repr under it would repeat the line in a long dump."""


def as_array(value: Any) -> np.ndarray:
    """``value`` (a tensor, array, number or nested sequence) as a float64 numpy array."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().to(torch.float64).numpy()
    return np.asarray(value, dtype=np.float64)


ROUNDOFF = {"float64": 1e-10, "float32": 1e-5, "bfloat16": 1e-2, "float16": 1e-2}
"""The round-off two computations of the same function may differ by, as a share of the largest
entry, by the precision of the less precise operand: its machine epsilon (2.2e-16, 1.2e-7, 7.8e-3,
9.8e-4) times the terms a reader's sums and products add in another order (up to about 100 at the
checks' sizes), with room to spare; far below the smallest difference a real mistake makes."""


def roundoff(*values: Any) -> float:
    """The :data:`ROUNDOFF` share of the least precise float among ``values`` (tensors, arrays or
    numbers; a Python float or int counts as float64)."""
    names = []
    for value in values:
        dtype = getattr(value, "dtype", None)
        names.append(str(dtype).removeprefix("torch.") if dtype is not None else "float64")
    return max(ROUNDOFF.get(name, ROUNDOFF["float64"]) for name in names)


def allclose(yours: Any, expected: Any, rtol: float = 1e-5, atol: float = 1e-8) -> bool:
    """Same shape and equal within ``rtol`` of each entry plus an absolute tolerance of at least
    the operands' :func:`roundoff` times the largest entry of ``expected`` (so an entry near zero
    in a large tensor is not judged on its own rounding: its CPU's kernels decide those bits);
    ``False`` when the shapes differ or the answer cannot be read as numbers."""
    try:
        a, b = as_array(yours), as_array(expected)
    except (TypeError, ValueError):
        return False
    if a.shape != b.shape:
        return False
    finite = np.abs(b[np.isfinite(b)])
    floor = roundoff(yours, expected) * float(finite.max(initial=0))
    return bool(np.allclose(a, b, rtol=rtol, atol=max(atol, floor), equal_nan=True))


def show(value: Any, limit: int = 80) -> str:
    """A short printable form of an answer: shape and a few entries for arrays, ``repr`` otherwise."""
    if isinstance(value, (torch.Tensor, np.ndarray)) and np.ndim(as_array(value)) > 0:
        a = as_array(value)
        flat = np.array2string(a.ravel()[:4], precision=4, separator=", ")
        text = f"array of shape {tuple(a.shape)}, first entries {flat}"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shape_of(value: Any) -> tuple[int, ...] | None:
    """The shape of an answer read as numbers, or ``None`` when it cannot be."""
    try:
        return tuple(as_array(value).shape)
    except (TypeError, ValueError):
        return None


def transposed(yours: Any, expected: Any, case: Case) -> bool:
    """A diagnosis predicate: the reader's matrix is the expected one transposed (and differs from it)."""
    a, b = shape_of(yours), shape_of(expected)
    if a is None or b is None or len(b) != 2 or a != b[::-1]:
        return False
    return allclose(as_array(yours).T, expected) and not allclose(yours, expected)


def wrong_shape(yours: Any, expected: Any, case: Case) -> bool:
    """A diagnosis predicate: the answer's shape is not the expected one."""
    return shape_of(yours) != shape_of(expected)


WRONG_SHAPE = Diagnosis(wrong_shape, "your answer has the wrong shape: check which axis is which")
TRANSPOSED = Diagnosis(transposed, "your matrix is the transpose of the expected one: swap its two axes")


def _diagnosed(diagnosis: Diagnosis, yours: Any, expected: Any, case: Case) -> bool:
    """Whether ``diagnosis`` recognises the answer; a predicate that cannot read it answers no."""
    try:
        return bool(diagnosis.matches(yours, expected, case))
    except Exception:  # an answer of an unexpected type is "not this mistake", never a crash of the check
        return False


def run(exercise: Exercise, fn: Callable[..., Any], *, quiet: bool = False) -> Outcome:
    """Try ``fn`` on every case of ``exercise`` against its reference; print and return the outcome.

    The first case where ``fn`` differs decides the line: that input, both answers and the hint
    (the first matching diagnosis, else the general hint). A stub's ``NotImplementedError`` gives a
    "not written yet" line; any other exception from ``fn`` is reported on one line, not raised."""
    name = f"check_{exercise.name}"
    close = exercise.close or allclose
    cases = list(exercise.cases())
    outcome = None
    for case in cases:
        expected = exercise.reference(*case.args, **case.kwargs)
        try:
            yours = fn(*case.args, **case.kwargs)
        except NotImplementedError:
            outcome = Outcome(
                exercise.name,
                "not written",
                f"✗ {name}: not written yet: replace the `raise NotImplementedError` with your code, then run this cell again",
            )
            break
        except Exception as error:  # the reader's code failing is a result to report, not a crash
            outcome = Outcome(
                exercise.name,
                "raised",
                f"✗ {name}: on {case.label}, your function raised {type(error).__name__}: {error}",
                exercise.hint,
                case.label,
            )
            break
        if close(yours, expected):
            continue
        hint = next((d.hint for d in exercise.diagnoses if _diagnosed(d, yours, expected, case)), exercise.hint)
        outcome = Outcome(
            exercise.name,
            "differs",
            f"✗ {name}: on {case.label}, yours is {show(yours)} but the answer is {show(expected)}. Hint: {hint}",
            hint,
            case.label,
        )
        break
    if outcome is None:
        outcome = Outcome(exercise.name, "passed", f"✓ {name}: passed on all {len(cases)} inputs")
    if not quiet:
        print(outcome.line)
    return outcome


def checker(exercise: Exercise) -> Callable[..., Outcome]:
    """``check_<name>(fn, quiet=False)``: the function a notebook calls, with the exercise's docstring."""

    def check(fn: Callable[..., Any], quiet: bool = False) -> Outcome:
        return run(exercise, fn, quiet=quiet)

    check.__name__ = f"check_{exercise.name}"
    check.__doc__ = (
        f"Check your function against the library's ``{exercise.reference.__module__}.{exercise.reference.__qualname__}`` "
        "on random and edge-case inputs; print one line (passed, or the first input that differs, with a hint)."
    )
    return check


def rng_cases(
    make: Callable[[np.random.Generator], Case], n: int, seed: int = 0, edges: Sequence[Case] = ()
) -> Callable[[], list[Case]]:
    """Cases for an :class:`Exercise`: the ``edges`` first, then ``n`` random ones drawn by ``make``
    from a generator seeded with ``seed`` (so a check tries the same inputs every time)."""

    def cases() -> list[Case]:
        rng = np.random.default_rng(seed)
        return [*edges, *(make(rng) for _ in range(n))]

    return cases
