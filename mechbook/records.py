"""A chapter's headline numbers: ``record`` them while it runs, ``read_records`` them back.

Used by every chapter and by ``tests/integration/test_chapters.py``. ``record(name, value)`` emits a display
output whose MIME types carry myst-nb's glue prefix (``application/papermill.record/``), the form
``myst_nb.glue(..., display=False)`` writes: the site build shows nothing for it, the value stays in
the executed notebook as JSON, and a page can still quote it with ``{glue:}``.
"""

from __future__ import annotations

import json
import math
from numbers import Number
from pathlib import Path
from typing import Any

GLUE_PREFIX = "application/papermill.record/"


def _plain(value: Any) -> Any:
    """Convert numpy/torch scalars and containers to JSON-ready Python values."""
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, Number):
        value = float(value) if not isinstance(value, int) else value
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"cannot record a non-finite number ({value}); record None instead")
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    raise TypeError(f"record() takes numbers, strings, booleans, lists and dicts, not {type(value).__name__}")


def record(name: str, value: Any) -> Any:
    """Store ``value`` under ``name`` in the running notebook's outputs, invisibly; return it.

    ``value`` must be JSON-like (numbers, strings, booleans, None, lists, dicts); numpy and torch
    scalars are converted. Outside a notebook kernel this only validates and returns the value.
    Record each name once per notebook: the site build (myst-nb) treats a repeated name as an
    error.
    """
    if not name or not name.replace("_", "").replace(".", "").isalnum():
        raise ValueError(f"record name {name!r} must be letters, digits, '_' or '.'")
    plain = _plain(value)
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return plain
    if get_ipython() is None:
        return plain
    # nbformat requires string data for mime types that do not end in "json" after the prefix
    # (papermill refuses to save a notebook holding a dict there), hence the JSON text.
    bundle = {
        GLUE_PREFIX + "application/json": json.dumps({"value": plain}),
        GLUE_PREFIX + "text/plain": repr(plain),
    }
    display(bundle, raw=True, metadata={"scrapbook": {"name": name, "mime_prefix": GLUE_PREFIX}})
    return plain


def read_records(notebook: str | Path | dict) -> dict[str, Any]:
    """Return ``{name: value}`` for every ``record`` call in an executed notebook (path or dict).

    A later record of the same name overrides an earlier one, as re-running a cell would.
    """
    nb = notebook if isinstance(notebook, dict) else json.loads(Path(notebook).read_text(encoding="utf-8"))
    found: dict[str, Any] = {}
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            meta = (out.get("metadata") or {}).get("scrapbook") or {}
            data = out.get("data") or {}
            payload = data.get(GLUE_PREFIX + "application/json")
            if meta.get("name") and payload is not None:
                if isinstance(payload, str):
                    payload = json.loads(payload)
                found[meta["name"]] = payload["value"]
    return found
