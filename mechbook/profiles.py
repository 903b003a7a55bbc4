"""Profiles: how big a chapter's computation is (every chapter's ``parameters`` cell).

- ``smoke``: seconds to a minute a chapter; what CI and the regression tests run.
- ``cpu``: the published book on a 2-core laptop-class CPU; minutes a chapter.
- ``paper``: the papers' exact sizes; a GPU is recommended.

A chapter keeps a table ``{profile: Config}`` of frozen dataclasses and resolves it with
:func:`resolve_profile`, so that papermill can inject ``profile = "smoke"`` and any single knob.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, TypeVar

PROFILES: tuple[str, ...] = ("smoke", "cpu", "paper")

C = TypeVar("C")


def resolve_profile(table: Mapping[str, C], profile: str, **overrides: Any) -> C:
    """Pick ``table[profile]`` and replace the fields given in ``overrides`` that are not None.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Cfg:
    ...     steps: int
    >>> resolve_profile({"smoke": Cfg(10), "cpu": Cfg(100), "paper": Cfg(1000)}, "cpu", steps=None)
    Cfg(steps=100)
    """
    if profile not in table:
        raise ValueError(
            f"unknown profile {profile!r}: choose one of {', '.join(table)} "
            "(set it in the chapter's parameters cell or with `make book PROFILE=...`)"
        )
    cfg = table[profile]
    chosen = {k: v for k, v in overrides.items() if v is not None}
    if not chosen:
        return cfg
    if not dataclasses.is_dataclass(cfg):
        raise TypeError(f"overrides need a dataclass config, got {type(cfg).__name__}")
    names = {f.name for f in dataclasses.fields(cfg)}
    unknown = sorted(set(chosen) - names)
    if unknown:
        raise ValueError(f"unknown knob(s) {unknown}; this config has {sorted(names)}")
    return dataclasses.replace(cfg, **chosen)
