"""Same seed, same bits on another machine? ``python -m mechbook hashes [--write] [--trace]``
trains a few short runs and prints the SHA-256 of their weights beside those committed in
``mechbook/book/weight_hashes.json``, one entry per CPU model that measured them.

The runs: Part II's smoke run (the paper's model, 300 steps), the first 200 steps of the cpu
profile's run, two stacked sweep runs, and a Part I model trained on seeded random tokens (no
corpus needed). Each trains in a fresh state under :func:`mechbook.determinism.deterministic`, on
the CPU code paths that ``import mechbook`` pins (:func:`mechbook.determinism.pin_portable_kernels`).
A run matches the bits of this CPU model (what ``check`` and the thresholds were measured on
where it is the README's), and the other models' entries say which CPUs agree with it.

``--trace`` bisects a disagreement: it records the digest of every operation's inputs and outputs
over the first training steps of both parts (:func:`trace`) in ``mechbook/book/kernel_traces/``,
one file per CPU model and kernel label, and names, against each other trace committed there, the
first operation that gives other bits and whether its inputs already differed (:func:`first_difference`).
tests/integration/test_determinism.py checks the same runs across processes and thread counts on one machine.
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


TRAINING_CODE = ("mechbook.assign_add.train", "mechbook.leading_terms.train")
"""The modules whose import closure holds the code the runs compute with (both parts' training loops)."""


def machine() -> dict[str, str]:
    """What decides a run's bits: the CPU (``model``: name, family and model numbers; ``cpu``:
    with its vector flags), torch's version, the kernel paths, and the code (``code``: a digest
    of :data:`TRAINING_CODE`'s closure, docstrings and comments left out)."""
    import torch

    from mechbook.benchmarks.assign_add import cpu_description
    from mechbook.cache import code_digest
    from mechbook.determinism import kernel_paths

    cpu = cpu_description()
    flags = " ".join(f for f, on in cpu["flags"].items() if on)
    return {
        "model": str(cpu["model"]),
        "cpu": f"{cpu['model']} ({flags})",
        "torch": torch.__version__,
        "kernels": kernel_paths(),
        "code": code_digest(TRAINING_CODE)[:16],
    }


def committed() -> dict[str, dict[str, Any]]:
    """The committed hashes by CPU model (empty when there is no file)."""
    return json.loads(COMMITTED.read_text()) if COMMITTED.is_file() else {}


def comparable(entry: dict[str, Any], here: dict[str, str]) -> bool:
    """Whether ``entry`` was measured with this torch, these kernel paths and this code (else its
    bits say nothing about this CPU's: a change to the training code moves them on every CPU, and
    an entry from before it is stale until that CPU measures again)."""
    return all(entry.get(k) == here[k] for k in ("torch", "kernels", "code"))


def main(write: bool = False, trace_ops: bool = False) -> int:
    """Print this machine's hashes against those committed for this CPU model, and which other CPU
    models agree (``write``: store this model's entry; ``trace_ops``: also record and compare the
    op traces, :func:`trace_main`); 1 when a run differs from this model's committed bits."""
    here = machine()
    hashes = {name: run() for name, run in RUNS.items()}
    book = committed()
    status = trace_main(here, write) if trace_ops else 0
    if write:
        book[here["model"]] = {**here, "python": platform.python_version(), "hashes": hashes}
        COMMITTED.write_text(json.dumps(dict(sorted(book.items())), indent=2) + "\n")
        print(f"wrote {len(hashes)} hashes measured on {here['cpu']} to {COMMITTED}")
        return status
    print(f"this machine: {here['cpu']}, torch {here['torch']}, {here['kernels']}")
    mine = book.get(here["model"])
    if mine is None or not comparable(mine, here):
        why = (
            "none committed"
            if mine is None
            else f"committed with torch {mine['torch']}, {mine['kernels']}, code {mine.get('code', 'before digests')}"
        )
        print(f"this CPU model: {why}; `python -m mechbook hashes --write` stores them")
    differ = 0
    for name, value in hashes.items():
        want = mine["hashes"].get(name) if mine and comparable(mine, here) else None
        same = "same" if value == want else ("not committed" if want is None else "DIFFERENT")
        differ += want is not None and value != want
        print(f"  {name:28s} {value[:16]}  {same}")
    if mine and comparable(mine, here):
        print(f"{len(hashes) - differ} of {len(hashes)} runs give the committed bits of this CPU model")
    for model, entry in sorted(book.items()):
        if model != here["model"]:
            agree = sum(entry["hashes"].get(name) == value for name, value in hashes.items())
            paths = (
                ""
                if comparable(entry, here)
                else f" (other paths or code: torch {entry['torch']}, {entry['kernels']}, code {entry.get('code', '?')})"
            )
            print(f"  agrees with {model} on {agree} of {len(hashes)} runs{paths}")
    return 1 if differ else status


# ---------------------------------------------------------------- bisecting a disagreement

TRACES = COMMITTED.parent / "kernel_traces"
"""One trace per CPU model and kernel label (:func:`trace`), committed to compare across machines."""

TRACE_OPS = 3000
"""Operations a trace records per run: the first training steps' forward, backward and update."""


def _tensor_digest(t: Any) -> str:
    """The first 16 hex digits of the sha256 of a dense tensor's bytes (``sparse`` otherwise)."""
    import torch

    if t.layout != torch.strided:
        return "sparse"
    t = t.detach().cpu()
    if t.dtype in (torch.bfloat16, torch.float16):  # numpy has no bf16: hash the same bits as int16
        t = t.view(torch.int16)
    return hashlib.sha256(t.resolve_conj().resolve_neg().numpy().tobytes()).hexdigest()[:16]


def _traced(fn: Callable[[], Any], limit: int = TRACE_OPS) -> list[dict[str, Any]]:
    """Run ``fn`` and record, for each of its first ``limit`` torch operations, the op's name and
    the digests of its tensor inputs and outputs."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    rows: list[dict[str, Any]] = []

    class Trace(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if len(rows) < limit:
                ins = [_tensor_digest(x) for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)]
                outs = [_tensor_digest(x) for x in tree_flatten(out)[0] if isinstance(x, torch.Tensor)]
                rows.append({"op": str(func), "in": ins, "out": outs})
            return out

    with Trace():
        fn()
    return rows


def _part2_first_steps() -> None:
    from mechbook.assign_add.config import with_overrides
    from mechbook.assign_add.runs import TRAIN_PROFILES
    from mechbook.assign_add.train import train

    cfg = with_overrides(TRAIN_PROFILES["smoke"], steps=2, eval_every=1, keep_every=1, resume_every=1)
    train(cfg, device="cpu")


def _part1_first_steps() -> None:
    from mechbook.leading_terms.model import ModelConfig
    from mechbook.leading_terms.stats import corpus_stats
    from mechbook.leading_terms.train import TrainConfig, train

    tokens = np.random.default_rng(0).integers(0, 64, size=(256, 33))
    stats = corpus_stats(tokens, 64)
    train(
        tokens,
        stats,
        ModelConfig(d_vocab=64, n_ctx=32, n_layers=3),
        TrainConfig(lr=0.05, steps=2, batch_size=256, seed=1),
    )


TRACED: dict[str, Callable[[], None]] = {
    "part2_first_steps": _part2_first_steps,
    "part1_first_steps": _part1_first_steps,
}


def trace() -> dict[str, list[dict[str, Any]]]:
    """Every :data:`TRACED` run's operations (:func:`_traced`), each in a fresh deterministic state."""
    from mechbook.determinism import deterministic

    out = {}
    for name, fn in TRACED.items():
        with deterministic():
            out[name] = _traced(fn)
    return out


def first_difference(mine: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> str:
    """Where two traces of one run part: the first operation whose outputs differ, and whether its
    own inputs already differed (from outside torch: numpy, the data) or it gave other bits on the
    same inputs (its kernel rounds otherwise); or where the op sequences part (another code path)."""
    made = set()
    for i, (a, b) in enumerate(zip(mine, theirs)):
        if a["op"] != b["op"]:
            return f"op {i}: the code paths part ({a['op']} here, {b['op']} there)"
        if a["out"] != b["out"]:
            if a["in"] == b["in"]:
                return f"op {i}, {a['op']}: other bits from the same inputs (its kernel rounds otherwise)"
            outside = [k for k, (x, y) in enumerate(zip(a["in"], b["in"])) if x != y and x not in made]
            source = "from outside torch (numpy, scipy or the data)" if outside else "from earlier ops"
            return f"op {i}, {a['op']}: its inputs {outside or ''} already differ, {source}"
        made.update(a["out"])
    if len(mine) != len(theirs):
        return f"the first {min(len(mine), len(theirs))} ops agree; one trace is longer"
    return f"all {len(mine)} ops give the same bits"


def _trace_file(here: dict[str, str]) -> Path:
    slug = "".join(c if c.isalnum() else "-" for c in f"{here['model']} {here['kernels']}").strip("-")
    return TRACES / f"{slug.lower()}.json"


def trace_main(here: dict[str, str], write: bool) -> int:
    """Trace this machine (:func:`trace`), compare it with every committed trace and print where each
    run first parts; ``write`` stores this machine's trace. Returns 0."""
    mine = trace()
    for path in sorted(TRACES.glob("*.json")):
        if path == _trace_file(here):
            continue
        theirs = json.loads(path.read_text())
        print(f"against {theirs['cpu']} ({theirs['kernels']}):")
        for name, rows in mine.items():
            print(f"  {name}: {first_difference(rows, theirs['runs'].get(name, []))}")
    if write:
        TRACES.mkdir(exist_ok=True)
        _trace_file(here).write_text(json.dumps({**here, "runs": mine}, separators=(",", ":")) + "\n")
        print(f"wrote the op trace of this machine to {_trace_file(here)}")
    return 0
