"""One check for every config dataclass and every size a public function takes.

A config's ``__post_init__`` calls :func:`check_fields` with the bounds of its fields:

    @dataclass(frozen=True)
    class TaskConfig:
        modulus: int = 59
        ...

        def __post_init__(self) -> None:
            check_fields(self, modulus=at_least(2, "the paper uses 59"))

Every field (``init=False`` ones aside) is checked against its annotation: ``bool`` fields take
only bools; ``int`` fields take integers but not bools, nor floats such as ``1e3``; ``float`` fields
take ints and floats but not bools (and no field takes NaN or an infinity); ``str``, ``Path`` and other classes take instances;
``tuple[X, ...]`` and ``tuple[X, Y]`` take tuples whose items fit (``Sequence[X]`` lists too);
``Literal[...]`` takes its values; ``X | None`` takes either; a nested config takes an instance
of its class (which checked itself when it was made). A bound applies to a number, or to each
number of a tuple, and ``None`` skips it. A value that does not fit raises one line naming the
class, the field, the value and what is allowed: a ``TypeError`` for the wrong type, a
``ValueError`` for a value out of bounds. :func:`check_argument` is the same check for one
argument of a public function (``Task.sample(n, rng)``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Union


@dataclasses.dataclass(frozen=True)
class Bound:
    """Allowed values of a number: ``low``/``high`` (each inclusive unless ``*_open``), or a set of
    ``choices``; ``why`` is appended to the error (what the value means, what to choose)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[Any, ...] | None = None
    why: str = ""

    def admits(self, value: Any) -> bool:
        """Whether ``value`` (already of the field's type) is within the bound."""
        if self.choices is not None:
            return value in self.choices
        if self.low is not None and not (value > self.low if self.low_open else value >= self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def text(self) -> str:
        """What the bound allows, as the error says it."""
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{'above' if self.low_open else 'at least'} {self.low:g}"
        return f"{'below' if self.high_open else 'at most'} {self.high:g}"


def at_least(low: float, why: str = "") -> Bound:
    """``value >= low``."""
    return Bound(low=low, why=why)


def above(low: float, why: str = "") -> Bound:
    """``value > low``."""
    return Bound(low=low, low_open=True, why=why)


def between(low: float, high: float, why: str = "", *, low_open: bool = False, high_open: bool = False) -> Bound:
    """``low <= value <= high`` (``<`` on the side that is open)."""
    return Bound(low=low, high=high, low_open=low_open, high_open=high_open, why=why)


def one_of(choices: Sequence[Any], why: str = "") -> Bound:
    """``value in choices``."""
    return Bound(choices=tuple(choices), why=why)


#: The two bounds most fields share: a count or size, and a random seed.
POSITIVE = at_least(1)
SEED = at_least(0)


def _describe(tp: Any) -> str:
    """An annotation as the error names it: ``an int``, ``a tuple of float``, ``None or an int``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is type(None):
        return "None"
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is Union or origin is types.UnionType:
        return " or ".join(_describe(a) for a in args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a tuple of {_name(args[0])}"
        return f"a tuple ({', '.join(_name(a) for a in args)})"
    if origin is not None and issubclass(origin, Sequence):
        return f"a sequence of {_name(args[0])}" if args else "a sequence"
    name = _name(tp)
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"


def _name(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


def _fits(value: Any, tp: Any) -> bool:
    """Whether ``value`` is of annotation ``tp`` (the rules of the module docstring)."""
    if tp is Any or tp is object:
        return True
    if tp is type(None):
        return value is None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if origin is Union or origin is types.UnionType:
        return any(_fits(value, a) for a in args)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_fits(v, args[0]) for v in value)
        return not args or (len(args) == len(value) and all(_fits(v, a) for v, a in zip(value, args)))
    if origin is not None and issubclass(origin, Sequence):
        if isinstance(value, str) or not isinstance(value, Sequence):
            return False
        return not args or all(_fits(v, args[0]) for v in value)
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if tp is Path:
        return isinstance(value, Path)
    return isinstance(value, origin if origin is not None else tp)


def _numbers(value: Any) -> list[Any]:
    """The values a bound applies to: ``value`` itself, or each item of a tuple (nested); none for
    ``None``."""
    if isinstance(value, (tuple, list)):
        return [n for v in value for n in _numbers(v)]
    return [] if value is None else [value]


def check_argument(value: Any, tp: Any, name: str, bound: Bound | None = None) -> Any:
    """``value`` if it is of annotation ``tp`` and within ``bound``; else a ``TypeError`` or
    ``ValueError`` naming ``name``, the value and what is allowed (one line)."""
    if not _fits(value, tp):
        raise TypeError(f"{name} must be {_describe(tp)}, got {type(value).__name__} {value!r}")
    if any(isinstance(n, float) and not math.isfinite(n) for n in _numbers(value)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if bound is not None:
        bad = next((n for n in _numbers(value) if not bound.admits(n)), None)
        if bad is not None:
            shown = f"{bad!r} (in {value!r})" if isinstance(value, (tuple, list)) else repr(value)
            why = f" ({bound.why})" if bound.why else ""
            raise ValueError(f"{name} must be {bound.text()}{why}, got {shown}")
    return value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def check_fields(config: Any, **bounds: Bound) -> None:
    """Check every field of the dataclass instance ``config`` against its annotation and the
    ``bounds`` given by field name (see the module docstring); called first in each config's
    ``__post_init__``, before its checks across fields."""
    cls = type(config)
    fields = {f.name: f for f in dataclasses.fields(config) if f.init}
    unknown = sorted(set(bounds) - set(fields))
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {', '.join(unknown)} to bound")
    hints = _hints(cls)
    for name in fields:
        check_argument(getattr(config, name), hints[name], f"{cls.__name__}.{name}", bounds.get(name))


def physical_memory() -> int | None:
    """This machine's memory in bytes (``sysconf``), or None where the system does not say."""
    import os

    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_allocatable(config: Any, nbytes: float, what: str, fix: str) -> None:
    """Raise one ValueError line when ``config`` needs ``nbytes`` (for ``what``) and that is more
    than this machine's memory, saying what to lower (``fix``); nothing where the memory is unknown."""
    memory = physical_memory()
    if memory is not None and nbytes > memory:
        raise ValueError(
            f"{type(config).__name__} needs about {_size(nbytes)} for {what}, more than this machine's "
            f"{_size(memory)} of memory: {fix}"
        )


def _size(nbytes: float) -> str:
    """``nbytes`` in GiB from 1 GiB up, else in MiB."""
    return f"{nbytes / 2**30:,.1f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:,.1f} MiB"
