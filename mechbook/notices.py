"""Warnings that change what a reader gets, sent to the executor's console as well as the notebook.

A recomputed cache entry, a cache that cannot be written, fewer stories than asked, a stray file
ignored beside the released checkpoints: :func:`notice` warns as usual (the executed notebook
shows it) and, when the executor named a side-channel file in :data:`NOTICES_ENV`, appends the
message there; :class:`mechbook.book.relay.Relay` prints each distinct message once on the
console of ``python -m mechbook execute|build|spread``.
"""

from __future__ import annotations

import json
import os
import warnings

NOTICES_ENV = "MECHBOOK_NOTICES_FILE"


def notice(message: str, category: type[Warning] = UserWarning, stacklevel: int = 2) -> None:
    """``warnings.warn(message, category)`` from the caller's caller (``stacklevel`` as for
    ``warnings.warn``, counted from the function calling this one), and the message appended
    to the executor's notices file when :data:`NOTICES_ENV` names one."""
    warnings.warn(message, category, stacklevel=stacklevel + 1)
    path = os.environ.get(NOTICES_ENV)
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"category": category.__name__, "message": message}) + "\n")
    except OSError:
        pass  # the notebook still shows the warning
