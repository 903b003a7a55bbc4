"""Where tensors live: CUDA when present, otherwise the CPU (every chapter); how many cores there are."""

from __future__ import annotations

import os


def default_device() -> str:
    """Return ``"cuda"`` when a GPU is visible to torch, else ``"cpu"``.

    ``MECHBOOK_DEVICE`` overrides the choice (e.g. ``MECHBOOK_DEVICE=cpu`` on a GPU machine
    to reproduce the CPU numbers exactly).
    """
    forced = os.environ.get("MECHBOOK_DEVICE")
    if forced:
        return forced
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def available_cores() -> int:
    """The CPU cores this process may run on (the book's lanes, the stacks of chapters 8 and 11)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
