"""Where tensors live: CUDA when present, otherwise the CPU (every chapter); how many cores there are."""

from __future__ import annotations

import os

DEVICE_ENV = "MECHBOOK_DEVICE"


class DeviceUnavailable(ValueError):
    """``MECHBOOK_DEVICE`` names no device, or one this machine does not have."""


def check_device(name: str, source: str = DEVICE_ENV) -> str:
    """``name`` if torch can place tensors there (``cpu``, ``cuda``, ``cuda:N``, ``mps``); else a
    :class:`DeviceUnavailable` naming ``source`` and what to set instead."""
    import torch

    try:
        device = torch.device(name)
    except (RuntimeError, ValueError, TypeError):
        raise DeviceUnavailable(
            f"{source}={name!r} is not a device torch knows: use cpu, or cuda (cuda:N) on a machine with a GPU"
        ) from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise DeviceUnavailable(f"{source}={name!r} but torch sees no CUDA device here: unset it or use cpu")
        if device.index is not None and device.index >= count:
            raise DeviceUnavailable(f"{source}={name!r} but this machine has {count} CUDA device(s) (cuda:0 ...)")
    elif device.type == "mps" and not (torch.backends.mps.is_available()):
        raise DeviceUnavailable(f"{source}={name!r} but MPS is not available here: unset it or use cpu")
    elif device.type not in ("cpu", "cuda", "mps"):
        raise DeviceUnavailable(f"{source}={name!r}: the book runs on cpu, cuda or mps")
    return name


def default_device() -> str:
    """Return ``"cuda"`` when a GPU is visible to torch, else ``"cpu"``.

    ``MECHBOOK_DEVICE`` overrides the choice (e.g. ``MECHBOOK_DEVICE=cpu`` on a GPU machine
    to reproduce the CPU numbers exactly); a value that names no available device is a
    :class:`DeviceUnavailable` saying so (:func:`check_device`).
    """
    forced = os.environ.get(DEVICE_ENV)
    if forced:
        return check_device(forced)
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def available_cores() -> int:
    """The CPU cores this process may run on (the book's lanes, the stacks of chapters 8 and 11)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
