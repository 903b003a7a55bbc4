"""Progress bars for long work (every chapter that trains, sweeps or scans a corpus).

tqdm bars in Jupyter and the console; silent when ``MECHBOOK_QUIET=1`` (set by the book's
executor, so the executed notebooks and the site show no bars). When the executor also sets
``MECHBOOK_PROGRESS_FILE``, each bar instead writes its state (``desc``, steps done and total,
rate, elapsed and remaining seconds) as JSON to that file, at most every ``mininterval``
seconds (0.5 by default), and the executor relays it to the console
(:mod:`mechbook.book.relay`); nothing reaches the notebook's outputs.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

#: The environment variable naming the side-channel file of the running chapter's bars.
PROGRESS_ENV = "MECHBOOK_PROGRESS_FILE"


def quiet() -> bool:
    """True when progress output should be suppressed (static build, or ``MECHBOOK_QUIET=1``)."""
    return os.environ.get("MECHBOOK_QUIET", "") not in ("", "0")


class _Null:
    """A stream that drops what is written (the relayed bars print nowhere)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


_LOCK = threading.Lock()
_ACTIVE: dict[int, dict[str, Any]] = {}
_IDS = itertools.count()


def _write_states(path: Path) -> None:
    """Write every open bar's state, outermost first, to ``path`` (atomically: the reader never
    sees half a file)."""
    states = [state for _, state in sorted(_ACTIVE.items())]
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        tmp.write_text(json.dumps({"bars": states}), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def relayed_bar(iterable: Iterable[T] | None, path: Path, **kwargs: Any):
    """A tqdm bar that prints nothing and writes its state to ``path`` whenever tqdm would
    redraw it (throttled by ``mininterval``) and once more when it closes."""
    from tqdm.std import tqdm

    class Relayed(tqdm):
        def __init__(self, *args: Any, **kw: Any):
            self._relay_id = next(_IDS)
            super().__init__(*args, **kw)

        def _state(self, done: bool) -> dict[str, Any]:
            d = self.format_dict
            rate = d.get("rate") or (d["n"] / d["elapsed"] if d["elapsed"] and d["n"] else None)
            total = d.get("total")
            remaining = (total - d["n"]) / rate if rate and total is not None else None
            return {
                "desc": d.get("prefix") or "",
                "n": d["n"],
                "total": total,
                "unit": d.get("unit") or "it",
                "rate": rate,
                "elapsed": d["elapsed"],
                "remaining": remaining,
                "done": done,
            }

        def display(self, msg: str | None = None, pos: int | None = None) -> bool:
            with _LOCK:
                _ACTIVE[self._relay_id] = self._state(done=False)
                _write_states(path)
            return True

        def close(self) -> None:
            if self.disable:
                return
            super().close()
            with _LOCK:
                _ACTIVE.pop(self._relay_id, None)
                _write_states(path)

    kwargs.setdefault("mininterval", 0.5)
    kwargs["file"] = _Null()
    kwargs.pop("dynamic_ncols", None)
    return Relayed(iterable, **kwargs)


def progress(iterable: Iterable[T] | None = None, **kwargs: Any):
    """A ``tqdm.auto`` bar over ``iterable`` (or a manual bar with ``total=``): quiet in builds,
    relayed to the executor's console when ``MECHBOOK_PROGRESS_FILE`` is set."""
    side = os.environ.get(PROGRESS_ENV)
    if side and not kwargs.get("disable"):
        return relayed_bar(iterable, Path(side), **kwargs)
    from tqdm.auto import tqdm

    kwargs.setdefault("disable", quiet())
    kwargs.setdefault("dynamic_ncols", True)
    return tqdm(iterable, **kwargs)
