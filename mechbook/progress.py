"""Progress bars for long work (every chapter that trains or scans a corpus).

tqdm bars in Jupyter and the console; silent when ``MECHBOOK_QUIET=1`` (set by the book's
executor, so the static site shows no bars).
"""

from __future__ import annotations

import os
from typing import Any, Iterable, TypeVar

T = TypeVar("T")


def quiet() -> bool:
    """True when progress output should be suppressed (static build, or ``MECHBOOK_QUIET=1``)."""
    return os.environ.get("MECHBOOK_QUIET", "") not in ("", "0")


def progress(iterable: Iterable[T] | None = None, **kwargs: Any):
    """A ``tqdm.auto`` bar over ``iterable`` (or a manual bar with ``total=``), quiet in builds."""
    from tqdm.auto import tqdm

    kwargs.setdefault("disable", quiet())
    kwargs.setdefault("dynamic_ncols", True)
    return tqdm(iterable, **kwargs)
