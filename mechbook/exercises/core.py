"""The machinery behind every ``mechbook.exercises.check_<name>``: run a reader's function against
the library's own on a list of inputs and say, in one line, whether it agrees.

A check is an :class:`Exercise`: the library's solution (``reference``), the inputs it is tried
on (:class:`Case`: seeded random ones and edge cases), how two answers are compared, and the
hints. A hint is either general or a *diagnosis*: a predicate on (reader's answer, expected
answer) that recognises a typical mistake (a transpose, a missing normalisation, a wrong mask)
and names it. :func:`run` returns a :class:`Outcome` and prints its one line; it never raises
for a wrong or unfinished answer, so an exercise notebook with stubs runs to its end.

Every answer passes through one normaliser, :func:`normalise`, before anything compares it: a
tensor (dense or sparse), an array, a number, or a list or tuple of them becomes a numpy array of
real numbers; text, complex numbers, objects, a meta tensor, or an overflow where the answer is
finite are refused with a line that says what the answer is and what to return. Each call of the
reader's function, and of the reference, gets its own deep copy of the case's inputs, so a function
that changes its input in place changes only its copy, and is told so.

Used by every chapter's exercises (chapters 1-11); the exercise form of a notebook is written by
:mod:`mechbook.exercises.notebooks`.
"""

from __future__ import annotations

import copy
import inspect
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
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
    """A typical mistake: ``matches(yours, expected, case)`` is true when the reader's answer (as
    :func:`normalise` reads it: a numpy array) is what that mistake gives, and ``hint`` then says
    what to fix. ``expected`` is the reference's answer as it returned it."""

    matches: Callable[[Any, Any, Case], bool]
    hint: str


@dataclass(frozen=True)
class Exercise:
    """A check: ``name`` (the function ``check_<name>``), the library's ``reference`` solution, the
    ``cases`` to try (a function of nothing, so they are built when the check runs), ``close``
    (are the normalised answer and the reference's equal: default :func:`allclose`), ``diagnoses``
    tried in order when they differ, and the general ``hint`` shown when none matches."""

    name: str
    reference: Callable[..., Any]
    cases: Callable[[], Sequence[Case]]
    hint: str
    diagnoses: tuple[Diagnosis, ...] = ()
    close: Callable[[Any, Any], bool] | None = None


@dataclass(frozen=True)
class Outcome:
    """What a check found: ``status`` is ``"passed"``, ``"differs"``, ``"refused"`` (the answer is
    not real numbers, see :func:`normalise`), ``"changed input"`` (the function changed an input
    in place), ``"not written"`` (the stub's ``NotImplementedError``) or ``"raised"`` (another
    exception); ``line`` the one line printed; ``hint`` the hint given (empty when it passed);
    ``case`` the first failing input's label."""

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


class Refused(ValueError):
    """An answer that cannot be compared as real numbers: ``what`` it is (e.g. ``"text ('0.5')"``)
    and the ``fix``, what to return instead."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(f"{what}: {fix}")
        self.what = what
        self.fix = fix


NUMBERS = "return a number, a list of numbers, a numpy array or a tensor"
REAL = "the answer is real: return real numbers (take .real only where the imaginary part is zero)"


def _one_line(text: str, limit: int = 80) -> str:
    """``text`` with its whitespace runs (newlines included) as single spaces, cut to ``limit``."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _brief(value: Any, limit: int = 40) -> str:
    """``repr(value)`` on one line, cut to ``limit`` characters; the type's name where repr raises."""
    try:
        text = repr(value)
    except Exception:  # a reader's object whose repr fails is still described
        text = f"<{type(value).__name__}>"
    return _one_line(text, limit)


def _an(noun: str) -> str:
    """``noun`` with its indefinite article ("an int", "a list")."""
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def _unreadable(array: np.ndarray, value: Any) -> Refused:
    """The refusal of ``value``, which numpy reads as ``array`` of a dtype that is not real numbers."""
    holder = "an array" if isinstance(value, np.ndarray) else _an(type(value).__name__)
    kind = array.dtype.kind
    if kind == "c":
        return Refused(f"complex ({array.dtype}: {_brief(value)})", REAL)
    if kind in "US":
        text = isinstance(value, (str, bytes))
        what = f"text ({_brief(value)})" if text else f"{holder} holding text ({_brief(array.ravel()[:3].tolist())})"
        if kind == "U" and array.size and set(np.char.lower(array).ravel().tolist()) <= {"true", "false"}:
            return Refused(what, "return True/False values (a bool array), not the words 'True' and 'False'")
        return Refused(what, "return numbers, not their text")
    if kind == "O" and isinstance(value, np.ndarray):
        return Refused(
            f"an array of Python objects (dtype object: {_brief(value.ravel()[:3].tolist())})",
            "build it from numbers: np.array(..., dtype=float)",
        )
    if kind == "O":
        return Refused(f"{_an(type(value).__name__)} ({_brief(value)})", NUMBERS)
    return Refused(f"{holder} of dtype {array.dtype} ({_brief(value)})", NUMBERS)


def _read_tensor(tensor: torch.Tensor) -> tuple[np.ndarray, str]:
    """A tensor's values (detached, on the CPU, densified if sparse; bfloat16 and float8 as
    float32, which numpy has no dtype for) and its dtype's name."""
    precision = str(tensor.dtype).removeprefix("torch.")
    if tensor.is_meta:
        raise Refused(
            f"a meta tensor of shape {tuple(tensor.shape)} (a shape with no values)",
            "compute it with real tensors, on the CPU (no device='meta')",
        )
    if tensor.is_complex():
        raise Refused(f"a complex tensor ({precision})", REAL)
    tensor = tensor.detach()
    if tensor.layout != torch.strided:
        tensor = tensor.to_dense()
    if tensor.is_floating_point() and tensor.dtype not in (torch.float16, torch.float32, torch.float64):
        tensor = tensor.float()
    return tensor.numpy(force=True), precision


def _read_items(items: list | tuple) -> tuple[np.ndarray, str]:
    """A list or tuple as one array: at once where numpy reads it as numbers, else item by item
    (tensors that need grad, ``None`` entries, bfloat16 tensors), stacked when their shapes agree;
    the dtype named is the least precise float among the items."""
    try:
        array = np.asarray(items)
    except Exception:  # ragged, or an item numpy cannot read whole: read item by item below
        array = None
    if array is not None and array.dtype.kind != "O":
        if array.dtype.kind not in "biuf":
            raise _unreadable(array, items)
        return array, str(array.dtype)
    parts = [_read(item) for item in items]
    shapes = sorted({part.shape for part, _ in parts})
    if len(shapes) > 1:
        raise Refused(
            f"{_an(type(items).__name__)} of items of different shapes ({', '.join(map(str, shapes))})",
            "return one array: every item of the same shape",
        )
    array = np.stack([part for part, _ in parts])
    floats = [precision for _, precision in parts if precision in ROUNDOFF]
    return array, (max(floats, key=ROUNDOFF.__getitem__) if floats else str(array.dtype))


def _read_value(value: Any) -> tuple[np.ndarray, str]:
    """What :func:`_read` computes, raising whatever a reader's object raises on the way."""
    if value is None:
        return np.array(np.nan), "float64"
    if isinstance(value, torch.Tensor):
        return _read_tensor(value)
    if isinstance(value, (list, tuple)):
        return _read_items(value)
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.generic)):
        return np.array(float(value)), "float64"
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise _unreadable(array, value)
    return array, str(array.dtype)


def _read(value: Any) -> tuple[np.ndarray, str]:
    """``value`` as a numpy array of booleans, integers or floats, and the dtype it was computed in
    (``"bfloat16"`` for a bfloat16 tensor, whose values come as float32): a tensor (detached,
    densified), an array, a number (``None`` as NaN), or a list or tuple of them. :class:`Refused`,
    saying what it is, for anything else: text, complex, objects, a meta tensor, a value that
    cannot be converted (an ``__array__`` or ``__float__`` that raises, an int beyond float64)."""
    try:
        return _read_value(value)
    except Refused:
        raise
    except Exception as error:  # whatever a reader's object raises is a refusal, never a crash of the check
        raise Refused(
            f"{_an(type(value).__name__)} that cannot be read as numbers ({type(error).__name__}: "
            f"{_one_line(str(error), 60)})",
            NUMBERS,
        ) from None


def as_array(value: Any) -> np.ndarray:
    """``value`` (a tensor, array, number or nested sequence) as a float64 numpy array;
    :class:`Refused` (a ``ValueError``) when it is not real numbers."""
    return _read(value)[0].astype(np.float64)


ROUNDOFF = {"float64": 1e-10, "float32": 1e-5, "bfloat16": 1e-2, "float16": 1e-2}
"""The round-off two computations of the same function may differ by, as a share of the largest
entry, by the precision of the less precise operand: its machine epsilon (2.2e-16, 1.2e-7, 7.8e-3,
9.8e-4) times the terms a reader's sums and products add in another order (up to about 100 at the
checks' sizes), with room to spare; far below the smallest difference a real mistake makes. A check
reads an answer computed in float16 or bfloat16 as float32 (:func:`normalise`), so it is judged at
float32's share; its own share tells whether precision is all it lacks."""


def roundoff(*values: Any) -> float:
    """The :data:`ROUNDOFF` share of the least precise float among ``values`` (tensors, arrays or
    numbers; a Python float or int counts as float64)."""
    names = []
    for value in values:
        dtype = getattr(value, "dtype", None)
        names.append(str(dtype).removeprefix("torch.") if dtype is not None else "float64")
    return max(ROUNDOFF.get(name, ROUNDOFF["float64"]) for name in names)


@dataclass(frozen=True)
class Answer:
    """A reader's answer as the checks compare it: ``value``, a numpy array (bool where the answer
    is boolean, float32 where it was computed in float32 or less, else float64), and
    ``precision``, the dtype it was computed in (``"float16"``, ``"bfloat16"``, ``"int64"``, ...)."""

    value: np.ndarray
    precision: str


def _low(precision: str) -> bool:
    """Whether ``precision`` is a float dtype coarser than float32 (float16, bfloat16)."""
    return ROUNDOFF.get(precision, 0.0) > ROUNDOFF["float32"]


def normalise(value: Any, expected: Any) -> Answer:
    """The reader's answer ``value`` as an :class:`Answer` to compare with ``expected``, the
    reference's answer. :class:`Refused`, saying what ``value`` is and what to return, when it is
    not real numbers (see :func:`_read`), when it is True/False where ``expected`` is a number, or
    when it is infinite where ``expected`` is finite (an overflow: float16 ends at 65504)."""
    array, precision = _read(value)
    reference, _ = _read(expected)
    if array.dtype == bool:
        if reference.dtype != bool:
            what = f"True/False ({_brief(value)})" if array.ndim == 0 else f"a bool array of shape {array.shape}"
            raise Refused(what, "the answer is a number: return the number itself, not True/False")
        return Answer(array, precision)
    with np.errstate(over="ignore"):  # an overflow becomes inf, refused below
        array = array.astype(np.float32 if ROUNDOFF.get(precision, 0.0) >= ROUNDOFF["float32"] else np.float64)
    target = reference.astype(np.float64)
    if array.shape == target.shape and np.any(overflow := np.isinf(array) & np.isfinite(target)):
        index = tuple(int(i) for i in np.argwhere(overflow)[0])
        what = str(array[index]) + (f" at entry {index}" if index else "")
        fix = f"the answer is finite there ({target[index]:.6g}): look for an overflow or a division by zero"
        if _low(precision):
            fix += f" ({precision} ends at {torch.finfo(getattr(torch, precision)).max:.6g}: compute in float32 or float64)"
        raise Refused(what, fix)
    return Answer(array, precision)


def allclose(yours: Any, expected: Any, rtol: float = 1e-5, atol: float = 1e-8, share: float | None = None) -> bool:
    """Same shape and equal within ``rtol`` of each entry plus an absolute tolerance of at least
    ``share`` (default: the operands' :func:`roundoff`) times the largest entry of ``expected``
    (so an entry near zero in a large tensor is not judged on its own rounding: its CPU's kernels
    decide those bits); ``False`` when the shapes differ or the answer cannot be read as numbers."""
    try:
        a, b = as_array(yours), as_array(expected)
    except Refused:
        return False
    if a.shape != b.shape:
        return False
    finite = np.abs(b[np.isfinite(b)])
    floor = (roundoff(yours, expected) if share is None else share) * float(finite.max(initial=0))
    return bool(np.allclose(a, b, rtol=rtol, atol=max(atol, floor), equal_nan=True))


def show(value: Any, limit: int = 80) -> str:
    """A short printable form of an answer: the shape and first entries of an array or tensor (its
    number when it has no axes), a short ``repr`` of anything else or of what does not read as numbers."""
    if not isinstance(value, (np.ndarray, torch.Tensor)):
        return _brief(value, limit)
    try:
        array, _ = _read(value)
    except Refused:
        return _brief(value, limit)
    if array.ndim == 0:
        return _one_line(str(array[()]), limit)
    flat = np.array2string(array.ravel()[:4], precision=4, separator=", ")
    return _one_line(f"array of shape {tuple(array.shape)}, first entries {flat}", limit)


def shape_of(value: Any) -> tuple[int, ...] | None:
    """The shape of an answer read as numbers, or ``None`` when it cannot be."""
    try:
        return tuple(as_array(value).shape)
    except Refused:
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


def _hint(exercise: Exercise, answer: Answer, expected: Any, case: Case) -> str:
    """The hint for an answer that differs. One computed in float16 or bfloat16 that agrees with
    ``expected`` to its own precision (:data:`ROUNDOFF`), though not to the check's, is told its
    dtype, its only mistake; any other gets the first diagnosis that recognises it, else the
    general hint, with a note of its dtype where that is coarser than float32."""
    low = _low(answer.precision)
    if low and allclose(answer.value, expected, share=ROUNDOFF[answer.precision]):
        digits = int(-math.log10(torch.finfo(getattr(torch, answer.precision)).eps))
        return (
            f"your answer is {answer.precision}; compute in float32 or float64: it agrees with the answer to "
            f"{answer.precision}'s {digits} significant digits only, and the check compares at float32's precision"
        )
    hint = next((d.hint for d in exercise.diagnoses if _diagnosed(d, answer.value, expected, case)), exercise.hint)
    return hint + (f" (your answer is also {answer.precision}: compute in float32 or float64)" if low else "")


def _unchanged(before: Any, after: Any) -> bool:
    """Whether ``after``, a deep copy of the input ``before`` that a function was given, still holds
    the same values: arrays and tensors entry by entry (NaN equal to NaN), a module's weights,
    lists, tuples, dicts and objects' attributes item by item, anything else by ``==``."""
    if before is after:
        return True
    if isinstance(before, torch.nn.Module):
        return isinstance(after, torch.nn.Module) and _unchanged(before.state_dict(), after.state_dict())
    if isinstance(before, (np.ndarray, torch.Tensor)):
        return (
            type(after) is type(before)
            and after.dtype == before.dtype
            and after.shape == before.shape
            and bool(((after == before) | ((after != after) & (before != before))).all())
        )
    if isinstance(before, Mapping):
        return (
            isinstance(after, Mapping)
            and before.keys() == after.keys()
            and all(_unchanged(before[key], after[key]) for key in before)
        )
    if isinstance(before, (list, tuple)):
        return (
            type(after) is type(before)
            and len(after) == len(before)
            and all(_unchanged(b, a) for b, a in zip(before, after))
        )
    if hasattr(before, "__dict__"):
        return type(after) is type(before) and _unchanged(vars(before), vars(after))
    try:
        return bool(before == after)
    except Exception:  # what the function put there does not even compare (an array for a number): changed
        return False


def _changed_inputs(fn: Callable[..., Any], case: Case, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str]:
    """The inputs of ``case`` that ``fn`` changed in its copies ``args`` and ``kwargs``, each by the
    name ``fn`` gives it (``"argument 2"`` where it has none, as with ``*args``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a callable with no signature to read
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    changed = [
        f"`{names[i]}`" if i < len(names) else f"argument {i + 1}"
        for i, (before, after) in enumerate(zip(case.args, args))
        if not _unchanged(before, after)
    ]
    return changed + [f"`{key}`" for key, before in case.kwargs.items() if not _unchanged(before, kwargs[key])]


IN_PLACE = "work on a copy (x = x.copy(), t = t.clone()) or build new values (x = x - y, not x -= y)"


def _try(exercise: Exercise, fn: Callable[..., Any], case: Case) -> Outcome | None:
    """``fn`` against the reference on ``case``, each on its own deep copy of the inputs: ``None``
    when it agrees, else the failing :class:`Outcome` (see :func:`run`)."""
    name = f"check_{exercise.name}"
    expected = exercise.reference(*copy.deepcopy(case.args), **copy.deepcopy(case.kwargs))
    args, kwargs = copy.deepcopy(case.args), copy.deepcopy(case.kwargs)
    try:
        yours = fn(*args, **kwargs)
    except NotImplementedError:
        return Outcome(
            exercise.name,
            "not written",
            f"✗ {name}: not written yet: replace the `raise NotImplementedError` with your code, then run this cell again",
        )
    except Exception as error:  # the reader's code failing is a result to report, not a crash
        return Outcome(
            exercise.name,
            "raised",
            f"✗ {name}: on {case.label}, your function raised {type(error).__name__}: {_one_line(str(error), 200)}",
            exercise.hint,
            case.label,
        )
    changed = _changed_inputs(fn, case, args, kwargs)
    if changed:
        return Outcome(
            exercise.name,
            "changed input",
            f"✗ {name}: on {case.label}, your function changed its input {' and '.join(changed)} in place: {IN_PLACE}",
            IN_PLACE,
            case.label,
        )
    try:
        answer = normalise(yours, expected)
    except Refused as refused:
        return Outcome(
            exercise.name,
            "refused",
            f"✗ {name}: on {case.label}, yours is {refused.what} but the answer is {show(expected)}: {refused.fix}",
            refused.fix,
            case.label,
        )
    if (exercise.close or allclose)(answer.value, expected):
        return None
    hint = _hint(exercise, answer, expected, case)
    return Outcome(
        exercise.name,
        "differs",
        f"✗ {name}: on {case.label}, yours is {show(answer.value)} but the answer is {show(expected)}. Hint: {hint}",
        hint,
        case.label,
    )


def run(exercise: Exercise, fn: Callable[..., Any], *, quiet: bool = False) -> Outcome:
    """Try ``fn`` on every case of ``exercise`` against its reference; print and return the outcome.

    The first case where ``fn`` fails decides the line: that input, both answers and the hint
    (for an answer that agrees only to its float16 or bfloat16 precision, the dtype; else the first
    matching diagnosis, else the general hint). A stub's ``NotImplementedError`` gives a "not
    written yet" line; any other exception from ``fn``, an answer that is not real numbers
    (:func:`normalise`) and an input changed in place are each reported on one line, not raised."""
    cases = list(exercise.cases())
    for case in cases:
        outcome = _try(exercise, fn, case)
        if outcome is not None:
            break
    else:
        outcome = Outcome(exercise.name, "passed", f"✓ check_{exercise.name}: passed on all {len(cases)} inputs")
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
