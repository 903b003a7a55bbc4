"""Profiles: how big a chapter's computation is (every chapter's ``parameters`` cell).

- ``smoke``: seconds to a minute a chapter; what CI and the regression tests run.
- ``cpu``: the published book on a 2-core laptop-class CPU; minutes a chapter.
- ``paper``: the papers' exact sizes; a GPU is recommended.

A chapter keeps a table ``{profile: Config}`` of frozen dataclasses and resolves it with
:func:`resolve_profile`, so that papermill can inject ``profile = "smoke"`` and any knob, nested
ones included (``train__steps=500`` sets ``steps`` of the config's ``train`` field).
:func:`ran_with` tells the reader which profile and knobs a page ran with.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, Union

PROFILES: tuple[str, ...] = ("smoke", "cpu", "paper")

#: Separator of a nested knob's path: ``train__steps`` is field ``steps`` of field ``train``.
SEP = "__"

C = TypeVar("C")


def _pick(table: Mapping[str, C], profile: str) -> C:
    if profile not in table:
        raise ValueError(
            f"unknown profile {profile!r}: choose one of {', '.join(table)} "
            "(set it in the chapter's parameters cell or with `make book PROFILE=...`)"
        )
    return table[profile]


def knob_names(cfg: Any, prefix: str = "") -> list[str]:
    """Every knob of a dataclass config: its fields, and ``a__b`` for each field of a nested one."""
    names = []
    for f in dataclasses.fields(cfg):
        names.append(prefix + f.name)
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            names.extend(knob_names(value, prefix + f.name + SEP))
    return names


def _hints(cls: type) -> dict[str, Any]:
    """The resolved field annotations of ``cls``; a field whose annotation cannot be resolved
    (a name imported only for type checkers) is left out and checked against its current value."""
    try:
        return typing.get_type_hints(cls)
    except Exception:  # one unresolvable annotation: fall back field by field
        hints = {}
        module = __import__(cls.__module__, fromlist=["_"])
        for f in dataclasses.fields(cls):
            try:
                hints[f.name] = eval(f.type, vars(module)) if isinstance(f.type, str) else f.type
            except Exception:
                continue
        return hints


def _describe(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


def _coerce(value: Any, tp: Any) -> tuple[bool, Any]:
    """``(True, value as the field holds it)`` when ``value`` fits annotation ``tp``, else
    ``(False, None)``. int rejects bool, float and str; float accepts int; a tuple field accepts a
    list (what YAML and JSON give) and stores a tuple; a Path field accepts a str."""
    if tp is Any or tp is object:
        return True, value
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Literal:
        return (value in args and type(value) in {type(a) for a in args}), value
    if origin is Union or origin is types.UnionType:
        for arg in args:
            ok, got = _coerce(value, arg)
            if ok:
                return True, got
        return False, None
    if tp is type(None):
        return value is None, value
    if origin is tuple:
        if not isinstance(value, (tuple, list)):
            return False, None
        if len(args) == 2 and args[1] is Ellipsis:
            items = [_coerce(v, args[0]) for v in value]
        elif not args:
            return True, tuple(value)
        else:
            if len(args) != len(value):
                return False, None
            items = [_coerce(v, a) for v, a in zip(value, args)]
        if all(ok for ok, _ in items):
            return True, tuple(got for _, got in items)
        return False, None
    if tp is bool:
        return isinstance(value, bool), value
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False, None
        return True, float(value)
    if tp is Path:
        return isinstance(value, (str, Path)), Path(value) if isinstance(value, str) else value
    check = origin if origin is not None else tp
    if isinstance(check, type):
        return isinstance(value, check), value
    return True, value


def _apply(cfg: Any, knobs: dict[str, Any], prefix: str) -> Any:
    """``cfg`` with ``knobs`` (paths relative to ``cfg``, each a list of field names) replaced."""
    fields = {f.name: f for f in dataclasses.fields(cfg)}
    hints = _hints(type(cfg))
    allowed = knob_names(cfg, prefix)
    direct: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for path, value in knobs.items():
        head, _, rest = path.partition(SEP)
        name = prefix + path
        if head not in fields:
            raise ValueError(f"unknown knob {name!r}; the knobs of this chapter are: {', '.join(allowed)}")
        current = getattr(cfg, head)
        if rest:
            if not (dataclasses.is_dataclass(current) and not isinstance(current, type)):
                raise ValueError(
                    f"unknown knob {name!r}: {prefix + head!r} is a {type(current).__name__}, "
                    f"not a config with fields; the knobs of this chapter are: {', '.join(allowed)}"
                )
            nested.setdefault(head, {})[rest] = value
            continue
        if head in hints:
            tp = hints[head]
        elif current is not None:
            tp = type(current)
        else:
            tp = Any
        ok, got = _coerce(value, tp)
        if not ok:
            raise TypeError(
                f"knob {name!r} = {value!r} ({type(value).__name__}) does not fit: expected {_describe(tp)}"
            )
        direct[head] = got
    for head, sub in nested.items():
        base = direct.get(head, getattr(cfg, head))
        direct[head] = _apply(base, sub, prefix + head + SEP)
    return dataclasses.replace(cfg, **direct)


def resolve_profile(table: Mapping[str, C], profile: str, **knobs: Any) -> C:
    """Pick ``table[profile]`` and replace the knobs given that are not None.

    A knob ``a__b=v`` sets field ``b`` of the nested dataclass field ``a`` (to any depth), by
    :func:`dataclasses.replace`, so each config's ``__post_init__`` checks the ranges again. A
    value must fit the field's annotation (``int`` refuses ``True``, ``1.5`` and ``"10"``;
    ``float`` takes ints; ``Literal`` fields take only their choices): anything else is a
    ``TypeError`` naming the knob, the value and the expected type; a knob that names no field
    is a ``ValueError`` listing the chapter's knobs.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Train:
    ...     steps: int
    >>> @dataclass(frozen=True)
    ... class Cfg:
    ...     train: Train
    ...     lr: float = 0.1
    >>> table = {"smoke": Cfg(Train(10)), "cpu": Cfg(Train(100)), "paper": Cfg(Train(1000))}
    >>> resolve_profile(table, "cpu", lr=None)
    Cfg(train=Train(steps=100), lr=0.1)
    >>> resolve_profile(table, "cpu", train__steps=5, lr=1)
    Cfg(train=Train(steps=5), lr=1.0)
    """
    cfg = _pick(table, profile)
    chosen = {k: v for k, v in knobs.items() if v is not None}
    if not chosen:
        return cfg
    if not dataclasses.is_dataclass(cfg):
        raise TypeError(f"knobs need a dataclass config, got {type(cfg).__name__}")
    return _apply(cfg, chosen, "")


def _leaves(cfg: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            yield from _leaves(value, prefix + f.name + SEP)
        else:
            yield prefix + f.name, value


def changed_knobs(table: Mapping[str, C], profile: str, cfg: C) -> dict[str, tuple[Any, Any]]:
    """``{knob: (profile's default, value in cfg)}`` for every leaf field of ``cfg`` that differs
    from ``table[profile]`` (nested fields named ``a__b``)."""
    base = dict(_leaves(_pick(table, profile)))
    return {name: (base.get(name), value) for name, value in _leaves(cfg) if name not in base or base[name] != value}


def ran_with_text(table: Mapping[str, C], profile: str, cfg: C) -> str:
    """The Markdown of :func:`ran_with`: the profile, then a table of the changed knobs."""
    text = f"This page ran in the **{profile}** profile"
    changed = changed_knobs(table, profile, cfg)
    if not changed:
        return text + "."
    rows = "\n".join(f"| `{k}` | {d!r} | {v!r} |" for k, (d, v) in changed.items())
    return text + ", with these knobs changed:\n\n" + "| knob | profile's value | this run |\n|---|---|---|\n" + rows


def ran_with(table: Mapping[str, C], profile: str, cfg: C) -> Any:
    """A Markdown note for the reader (every chapter shows it under its parameters): the profile
    the page ran in and the knobs that differ from that profile's defaults."""
    from IPython.display import Markdown

    return Markdown(ran_with_text(table, profile, cfg))
