"""Checks of public arguments at the door, each failing with one line that names the argument
(issue 22): used by the data loaders (:mod:`mechbook.data`, :mod:`mechbook.assign_add.release`),
the cache (:func:`mechbook.cache.cached`) and the executor's config (:mod:`mechbook.book.config`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def path_argument(value: Any, name: str) -> Path:
    """``value`` as a :class:`Path` (``~`` expanded); a ``TypeError`` naming ``name`` unless it is
    a ``str`` or path-like, and a ``ValueError`` for an empty string."""
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (a str or pathlib.Path), got {type(value).__name__} {value!r}")
    if isinstance(value, str) and not value.strip():
        raise ValueError(f"{name} must be a path, got an empty string")
    return Path(value).expanduser()


def whole_number(value: Any, name: str, minimum: int = 1) -> int:
    """``value`` if it is an int (not a bool) of at least ``minimum``; else a ``ValueError``
    naming ``name`` and the value."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be a whole number of at least {minimum}, got {value!r}")
    return value


def text_sequence(value: Any, name: str) -> list[str]:
    """``value`` as a list of strings; a ``TypeError`` naming ``name`` for a lone string or for
    anything else that is not a sequence of strings."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise TypeError(f"{name} must be a list of strings, got {type(value).__name__}")
    wrong = next((v for v in value if not isinstance(v, str)), None)
    if wrong is not None:
        raise TypeError(f"{name} must hold only strings, found {type(wrong).__name__} {wrong!r}")
    return list(value)
