"""Checks of public arguments at the door, each failing with one line that names the argument:
used by the data loaders (:mod:`mechbook.data`, :mod:`mechbook.assign_add.release`),
the cache (:func:`mechbook.cache.cached`) and the executor's config (:mod:`mechbook.book.config`)."""

from __future__ import annotations

import json
import os
import re
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


_WORD = re.compile(r"[A-Za-z_][\w.\-/]*")
_WORDS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


def knob_value(text: str) -> Any:
    """A knob's VALUE by one strict rule: a JSON number (``10``, ``0.5``, ``1e-3``; no leading zeros),
    list (``[1, 2]``) or quoted string; ``true``/``false``/``null`` (or Python's spellings); or a bare
    word, read as a string (``merge``, ``cpu``). Anything else is refused with a ``ValueError`` that
    says how to write it: ``010`` (YAML's octal 8) and ``1:30`` (YAML's base 60, 90) are not numbers here."""
    text = text.strip()
    if text in _WORDS:
        return _WORDS[text]
    try:
        return json.loads(text)
    except ValueError:
        pass
    if re.fullmatch(r"[+-]?0\d+(\.\d*)?", text):
        raise ValueError(f"{text!r} has a leading zero: write the number without it (e.g. {text.lstrip('+-0') or '0'})")
    if _WORD.fullmatch(text) and not re.fullmatch(r"[\d.+\-eE:]+", text):
        return text
    raise ValueError(
        f"{text!r} is not a value a knob takes: write a number (10, 0.5), a list ([1, 2]), true/false, "
        'or a word (merge); quote anything else as JSON ("a b")'
    )


def knob_pairs(pairs: list[tuple[str, Any]]) -> tuple[tuple[str, Any], ...]:
    """The ``(name, value)`` knobs as given, refusing a name given twice (the last would silently win)."""
    seen: set[str] = set()
    for name, _ in pairs:
        if name in seen:
            raise ValueError(f"knob {name!r} is given twice: give each knob once")
        seen.add(name)
    return tuple(pairs)
