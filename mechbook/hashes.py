"""Same seed, same bits on another machine? ``python -m mechbook hashes [--write]`` trains a few
short runs and prints the SHA-256 of their weights beside those committed in
``mechbook/book/weight_hashes.json`` with the CPU they were measured on.

The runs: Part II's smoke run (the paper's model, 300 steps), the first 200 steps of the cpu
profile's run, two stacked sweep runs, and a Part I model trained on seeded random tokens (no
corpus needed). Each trains in a fresh state under :func:`mechbook.determinism.deterministic`, on
the CPU code paths that ``import mechbook`` pins (:func:`mechbook.determinism.pin_portable_kernels`).
A match on another CPU is evidence that the book's numbers do not depend on the processor; a
mismatch names the run whose bits moved. tests/integration/test_determinism.py checks the same runs across
processes and thread counts on one machine.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

COMMITTED = Path(__file__).resolve().parent / "book" / "weight_hashes.json"
"""The hashes measured on one machine, with its CPU, torch version and kernel paths."""


def digest(obj: Any) -> str:
    """sha256 over the raw bytes of every tensor, array and number in ``obj`` (dict keys sorted)."""
    import torch

    h = hashlib.sha256()

    def feed(x: Any) -> None:
        if isinstance(x, dict):
            for k in sorted(x, key=str):
                h.update(str(k).encode())
                feed(x[k])
        elif isinstance(x, (list, tuple)):
            for v in x:
                feed(v)
        elif isinstance(x, torch.Tensor):
            h.update(x.detach().cpu().contiguous().numpy().tobytes())
        elif isinstance(x, np.ndarray):
            if x.dtype == object:
                raise TypeError("object arrays hash their pointers; select numeric columns")
            h.update(np.ascontiguousarray(x).tobytes())
        elif dataclasses.is_dataclass(x):
            feed(dataclasses.asdict(x))
        else:
            h.update(repr(x).encode())

    feed(obj)
    return h.hexdigest()


def part2_smoke_run() -> str:
    """Part II's smoke-profile run, whole (the paper's model, 300 steps)."""
    from mechbook.assign_add.runs import TRAIN_PROFILES
    from mechbook.assign_add.train import train

    r = train(TRAIN_PROFILES["smoke"], device="cpu")
    return digest([r.final_state, r.history[["accuracy", "loss"]].to_numpy()])


def part2_cpu_run_start() -> str:
    """The first 200 steps of the cpu profile's run."""
    from mechbook.assign_add.config import with_overrides
    from mechbook.assign_add.runs import TRAIN_PROFILES
    from mechbook.assign_add.train import train

    cfg = with_overrides(TRAIN_PROFILES["cpu"], steps=200, eval_every=100, keep_every=100, resume_every=100)
    return digest(train(cfg, device="cpu").final_state)


def part2_stacked_sweep_runs() -> str:
    """Two of chapter 11's sweep points (smoke size) trained as one stack."""
    from mechbook.assign_add.runs import SWEEPS
    from mechbook.assign_add.sweeps import point_config
    from mechbook.assign_add.train import train_stacked

    base = SWEEPS["smoke"].f_train
    cfgs = [point_config(base, "f", 0.4), point_config(dataclasses.replace(base, seed=5), "f", 0.9)]
    return digest([r.final_state for r in train_stacked(cfgs, device="cpu")])


def part1_random_tokens_run() -> str:
    """Part I's attention-only model, 8 SGD steps on seeded uniform random tokens."""
    from mechbook.leading_terms.model import ModelConfig
    from mechbook.leading_terms.stats import corpus_stats
    from mechbook.leading_terms.train import TrainConfig, train

    tokens = np.random.default_rng(0).integers(0, 64, size=(256, 33))
    stats = corpus_stats(tokens, 64)
    r = train(
        tokens,
        stats,
        ModelConfig(d_vocab=64, n_ctx=32, n_layers=3),
        TrainConfig(lr=0.05, steps=8, batch_size=256, seed=1, log_every=4),
    )
    return digest([r.state, r.history[["loss", "norm", "cosine"]].to_numpy()])


RUNS: dict[str, Callable[[], str]] = {
    f.__name__: f for f in (part2_smoke_run, part2_cpu_run_start, part2_stacked_sweep_runs, part1_random_tokens_run)
}


def machine() -> dict[str, str]:
    """What decides a run's bits besides the code: the CPU, torch's version and the kernel paths."""
    import torch

    from mechbook.benchmarks.assign_add import cpu_description
    from mechbook.determinism import kernel_paths

    cpu = cpu_description()
    flags = " ".join(f for f, on in cpu["flags"].items() if on)
    return {"cpu": f"{cpu['model']} ({flags})", "torch": torch.__version__, "kernels": kernel_paths()}


def main(write: bool = False) -> int:
    """Print this machine's hashes against the committed ones (``write``: store these instead);
    1 when a run's hash differs from the committed one."""
    here = machine()
    hashes = {name: run() for name, run in RUNS.items()}
    if write:
        COMMITTED.write_text(
            json.dumps({**here, "python": platform.python_version(), "hashes": hashes}, indent=2) + "\n"
        )
        print(f"wrote {len(hashes)} hashes measured on {here['cpu']} to {COMMITTED}")
        return 0
    ref = json.loads(COMMITTED.read_text()) if COMMITTED.is_file() else {"hashes": {}, "cpu": "nothing committed"}
    print(f"this machine: {here['cpu']}, torch {here['torch']}, {here['kernels']}")
    print(f"committed:    {ref.get('cpu')}, torch {ref.get('torch')}, {ref.get('kernels')}")
    differ = 0
    for name, value in hashes.items():
        want = ref["hashes"].get(name)
        same = "same" if value == want else ("not committed" if want is None else "DIFFERENT")
        differ += value != want
        print(f"  {name:28s} {value[:16]}  {same}")
    print(f"{len(hashes) - differ} of {len(hashes)} runs give the committed bits")
    return 1 if differ else 0
