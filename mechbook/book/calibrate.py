"""How fast this machine trains, against the machine that measured the shipped costs.

Used by the plan of ``python -m mechbook execute|build`` (:func:`mechbook.book.run.plan_lines`):
the shipped per-chapter seconds (``mechbook/book/costs.json``) were measured on one machine,
whose figure of :func:`calibrate` is stored with them (:data:`REFERENCE_KEY`); on another
machine they are scaled by :func:`slowdown`, the ratio of the two figures.

The figure is the rate of a fixed fp32 workload shaped like the book's training: full training
steps (forward, backward, Adam) of a small two-layer network, on one intra-op thread as the
chapters train, timed for about a second (the median of five windows). A busy machine gives a lower figure, as it gives the
chapters less time.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

#: The key of ``costs.json`` that describes the machine its times were measured on.
REFERENCE_KEY = "measured_on"
#: The workload: batch, input and hidden widths of one training step.
BATCH, WIDTH, HIDDEN = 64, 128, 256
#: How many timed windows the calibration's second is cut into (their median is the figure).
WINDOWS = 5


def _step_function() -> Callable[[], None]:
    """One training step of the fixed workload, as a function of no arguments (seeded weights
    and data, so every machine does the same arithmetic)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(WIDTH, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, WIDTH))
    for p in model.parameters():
        p.data = torch.randn(p.shape, generator=gen) * 0.05
    x = torch.randn(BATCH, WIDTH, generator=gen)
    y = torch.randn(BATCH, WIDTH, generator=gen)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    return step


def calibrate(seconds: float = 1.0, clock: Callable[[], float] = time.perf_counter) -> float:
    """Training steps per second of the fixed workload on one thread: the median rate of
    :data:`WINDOWS` windows that together last about ``seconds``, after a few warm-up steps (the
    median keeps one burst or stall of a shared machine from deciding the figure; the torch
    thread setting is restored after)."""
    import torch

    if not seconds > 0:
        raise ValueError(f"seconds must be positive, got {seconds!r}")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        step = _step_function()
        for _ in range(5):
            step()
        rates = []
        while len(rates) < WINDOWS:
            steps, start = 0, clock()
            while True:
                for _ in range(10):
                    step()
                steps += 10
                elapsed = clock() - start
                if elapsed >= seconds / WINDOWS:
                    rates.append(steps / elapsed)
                    break
        return statistics.median(rates)
    finally:
        torch.set_num_threads(threads)


def cpu_model() -> str:
    """This machine's CPU as ``lscpu``/``/proc/cpuinfo`` name it, with its core count
    (``platform.processor()`` where neither is there)."""
    import os
    import platform

    name = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            name = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "")
    except OSError:
        pass
    name = name or platform.processor() or platform.machine() or "an unknown CPU"
    return f"{name}, {os.cpu_count() or '?'} cores"


def slowdown(reference_rate: float, rate: float) -> float:
    """How many times longer a chapter takes here than on the reference machine: the reference
    rate over this machine's (2.0: this machine does the workload at half the speed)."""
    if not (reference_rate > 0 and rate > 0):
        raise ValueError(f"calibration rates must be positive, got {reference_rate!r} and {rate!r}")
    return reference_rate / rate
