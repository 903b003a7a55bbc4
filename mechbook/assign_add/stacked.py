"""Training several Assign-and-Add runs at once, as one stacked model (chapter 8's seeds,
chapter 11's sweeps).

A sweep trains one small model per knob value. Alone, each such model leaves most of a CPU's or a
GPU's arithmetic idle (a step is a few small matrix products). :func:`train_stacked` trains K runs
that share the model's shape and the optimiser's settings together: every parameter is stacked
into a (K, ...) tensor, the forward pass is :func:`torch.func.vmap` of the ordinary model over K,
and the loss is the sum of the K runs' mean losses, so the gradient of slice k is the gradient of
run k alone. AdamW is elementwise, so one AdamW over the stacked tensors is exactly K independent
AdamWs. Each run keeps its own task (its r or f), its own initialisation (``model.seed``) and its
own data stream (``numpy.random.default_rng(seed)`` drawn in the same order as
:func:`~mechbook.assign_add.train.train`), so run k computes the same mathematics as training it
alone; only the floating-point rounding of the batched products may differ. On a CPU the stacked
runs equal the runs trained alone bit for bit (tests/test_aa_stacked.py); on a GPU the batched
kernels round differently, and AdamW's normalised steps carry the difference forward
(book/appendix/reproducing.md gives what was measured on an H200).

Batches are drawn ``chunk`` steps at a time. With ``workers > 1`` the runs' streams are drawn in
a pool of (spawned, CUDA-free) processes while the previous chunk trains, which is what keeps a GPU
busy; the streams, hence the results, are the same for any number of workers.

:func:`load_or_train_stacked` cuts the runs into stacks of at most :data:`GROUP_SIZE` and, on a
CPU, trains those stacks in parallel processes, one per core (each process on one thread, as
:func:`~mechbook.determinism.deterministic` asks): a step of a small stack already keeps one core
busy, so the second core is where a CPU's speed-up lies. The cut depends on the runs alone, never
on the cores, so the results do not depend on the machine's core count. On a GPU all the runs
form one stack.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch.func import functional_call, vmap

from mechbook.assign_add.model import AssignAddModel
from mechbook.assign_add.task import Task, TaskConfig
from mechbook.assign_add.train import POOL_SHORT, TrainConfig, TrainResult, keep_steps
from mechbook.cache import cached
from mechbook.determinism import deterministic
from mechbook.device import available_cores, default_device
from mechbook.lifeline import WorkerPool
from mechbook.progress import PROGRESS_ENV, progress

SHARED_FIELDS = ("steps", "batch_size", "lr", "betas", "weight_decay", "eval_every", "eval_per_pool", "eval_seed")
"""TrainConfig fields every stacked run must share (the model's shape too, all but its seed)."""

GROUP_SIZE = 3
"""The most runs :func:`load_or_train_stacked` trains in one stack (so five seeds train as stacks of
3 and 2, and a CPU's two cores train both at once)."""


def check_stackable(cfgs: Sequence[TrainConfig]) -> None:
    """Raise a ValueError naming the field when ``cfgs`` cannot be trained as one stack."""
    if not cfgs:
        raise ValueError("train_stacked needs at least one TrainConfig")
    first = cfgs[0]
    if first.task.d_vocab > 256 or first.task.modulus > 256:
        raise ValueError(
            f"stacked training stores tokens and labels as uint8, but this task has {first.task.d_vocab} tokens and "
            f"{first.task.modulus} residues; train it with mechbook.assign_add.train.train instead"
        )
    shape = dataclasses.replace(first.model, seed=0)
    for i, cfg in enumerate(cfgs[1:], start=1):
        for name in SHARED_FIELDS:
            if getattr(cfg, name) != getattr(first, name):
                raise ValueError(
                    f"run {i} has {name}={getattr(cfg, name)!r} but run 0 has {getattr(first, name)!r}: stacked runs "
                    "share steps, batch, optimiser and evaluation settings; train the others in another stack"
                )
        if dataclasses.replace(cfg.model, seed=0) != shape:
            raise ValueError(
                f"run {i} has model {cfg.model} but run 0 has {first.model}: stacked runs share the model's shape"
            )
        if (cfg.task.d_vocab, cfg.task.seq_len) != (first.task.d_vocab, first.task.seq_len):
            raise ValueError(f"run {i}'s task has another vocabulary or length than run 0's; stacked runs share them")


_TASKS: dict[TaskConfig, Task] = {}


def _task(cfg: TaskConfig) -> Task:
    """The Task of ``cfg``, built once per process (building the training rows takes a while)."""
    if cfg not in _TASKS:
        _TASKS[cfg] = Task(cfg)
    return _TASKS[cfg]


def _draw_stream(
    task_cfg: TaskConfig, seed: int, rng_state: dict | None, batch: int, n: int
) -> tuple[np.ndarray, np.ndarray, dict]:
    """``n`` consecutive training batches of one run, as ``train`` draws them: tokens (n, batch, P)
    as uint8, labels (n, batch) as uint8, and the generator state to continue from."""
    task = _task(task_cfg)
    rng = np.random.default_rng(seed)
    if rng_state is not None:
        rng.bit_generator.state = rng_state
    xs = np.empty((n, batch, task_cfg.seq_len), dtype=np.uint8)
    ys = np.empty((n, batch), dtype=np.uint8)
    for i in range(n):
        xs[i], ys[i] = task.sample(batch, rng)
    return xs, ys, rng.bit_generator.state


class _Streams:
    """The K runs' batch streams in chunks of steps. With a process pool, the chunk after the one
    being trained on is drawn meanwhile (each run's stream stays sequential: a chunk starts from the
    generator state where the previous one ended)."""

    def __init__(self, cfgs: Sequence[TrainConfig], workers: int) -> None:
        self.cfgs = list(cfgs)
        self.states: list[dict | None] = [None] * len(cfgs)
        self.pool = WorkerPool(workers) if workers > 1 else None
        self.pending: list[Future] | None = None
        self.pending_n = 0

    def _submit(self, n: int) -> list[Future]:
        assert self.pool is not None
        return [
            self.pool.submit(_draw_stream, c.task, c.seed, s, c.batch_size, n) for c, s in zip(self.cfgs, self.states)
        ]

    def next(self, n: int, following: int) -> tuple[np.ndarray, np.ndarray]:
        """The next ``n`` steps, tokens (n, K, batch, P) and labels (n, K, batch); starts drawing
        the ``following`` steps after them in the background (0: none)."""
        if self.pool is None:
            out = [_draw_stream(c.task, c.seed, s, c.batch_size, n) for c, s in zip(self.cfgs, self.states)]
        else:
            if self.pending is None or self.pending_n != n:
                self.pending = self._submit(n)
            out = [f.result() for f in self.pending]
        self.states = [o[2] for o in out]
        self.pending, self.pending_n = (self._submit(following), following) if self.pool and following else (None, 0)
        return np.stack([o[0] for o in out], axis=1), np.stack([o[1] for o in out], axis=1)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)


def default_workers(n_runs: int, device: str) -> int:
    """Processes drawing batches: one per run up to the cores this process may use, less one, on a
    GPU machine (the GPU outpaces one core drawing K batches); 1 (in-process) on a CPU, where the
    steps are the cost, or where only one core is available."""
    if not str(device).startswith("cuda"):
        return 1
    return max(1, min(n_runs, available_cores() - 1))


@deterministic()
def train_stacked(
    cfgs: Sequence[TrainConfig],
    device: str | None = None,
    chunk: int = 200,
    workers: int | None = None,
    desc: str = "stacked training",
    keep: bool = False,
    on_step: Callable[[int], None] | None = None,
) -> list[TrainResult]:
    """Train every config of ``cfgs`` for their shared ``steps`` at once; one :class:`TrainResult`
    per config, in order.

    Each result has the history of :func:`~mechbook.assign_add.train.train` (nine pools every
    ``eval_every`` steps and the ``train`` rows) and its final weights. ``checkpoints`` holds the
    final step only (a sweep reads final accuracies), or with ``keep`` the steps that ``train``
    keeps (:func:`~mechbook.assign_add.train.keep_steps`: every ``keep_every`` and densely where
    a pool moved), as float16, for runs a chapter dissects. ``on_step`` is called with the number
    of steps done after each step.
    """
    check_stackable(cfgs)
    cfg0 = cfgs[0]
    device = device or default_device()
    K, steps = len(cfgs), cfg0.steps
    models = [AssignAddModel(c.model) for c in cfgs]
    template = models[0].to(device)
    names = [n for n, _ in template.named_parameters()]
    params = {
        n: torch.stack([dict(m.named_parameters())[n].detach().cpu() for m in models]).to(device).requires_grad_()
        for n in names
    }
    opt = torch.optim.AdamW(list(params.values()), lr=cfg0.lr, betas=cfg0.betas, weight_decay=cfg0.weight_decay)

    def run_one(p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return functional_call(template, p, (x,), {"last_only": True})

    forward = vmap(run_one)
    tasks = [Task(c.task) for c in cfgs]
    pools = [t.eval_pools(cfg0.eval_per_pool, cfg0.eval_seed) for t in tasks]
    pool_names = list(pools[0])
    eval_x = torch.as_tensor(np.stack([np.concatenate([p[n][0] for n in pool_names]) for p in pools]), device=device)
    eval_y = torch.as_tensor(np.stack([np.concatenate([p[n][1] for n in pool_names]) for p in pools]), device=device)
    sizes = [len(pools[0][n][1]) for n in pool_names]

    rows: list[list[dict]] = [[] for _ in cfgs]
    saved: list[dict[int, dict[str, torch.Tensor]]] = [{} for _ in cfgs]

    @torch.no_grad()
    def log_eval(step: int, train_acc: torch.Tensor | None, train_loss: torch.Tensor | None) -> None:
        logits = forward({n: p.detach() for n, p in params.items()}, eval_x)
        correct = (logits.argmax(-1) == eval_y).float()
        loss = F.cross_entropy(logits.flatten(0, 1), eval_y.flatten(), reduction="none").view_as(correct)
        accs = [c.split(sizes, dim=-1) for c in correct.cpu()]
        losses = [c.split(sizes, dim=-1) for c in loss.cpu()]
        for k in range(K):
            for name, a, l in zip(pool_names, accs[k], losses[k]):
                rows[k].append({"step": step, "pool": name, "accuracy": float(a.mean()), "loss": float(l.mean())})
            if train_acc is not None and train_loss is not None:
                rows[k].append(
                    {"step": step, "pool": "train", "accuracy": float(train_acc[k]), "loss": float(train_loss[k])}
                )
            if keep:
                saved[k][step] = {n: p[k].detach().to("cpu", torch.float16).clone() for n, p in params.items()}

    log_eval(0, None, None)
    streams = _Streams(cfgs, default_workers(K, device) if workers is None else workers)
    bar = progress(total=steps, desc=desc)
    start = time.perf_counter()
    acc_sum = torch.zeros(K, device=device)
    loss_sum = torch.zeros(K, device=device)
    step = 0
    try:
        while step < steps:
            n = min(chunk, steps - step)
            xs, ys = streams.next(n, min(chunk, steps - step - n))
            xs = torch.as_tensor(xs, device=device).long()
            ys = torch.as_tensor(ys, device=device).long()
            for x, y in zip(xs, ys):
                logits = forward(params, x)
                losses = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view(K, -1).mean(1)
                opt.zero_grad(set_to_none=True)
                losses.sum().backward()
                opt.step()
                step += 1
                loss_sum += losses.detach()
                acc_sum += (logits.detach().argmax(-1) == y).float().mean(1)
                if step % cfg0.eval_every == 0 or step == steps:
                    n = (step - 1) % cfg0.eval_every + 1
                    log_eval(step, (acc_sum / n).cpu(), (loss_sum / n).cpu())
                    acc_sum.zero_()
                    loss_sum.zero_()
                    last = [r for r in rows[0][-10:] if r["pool"] in POOL_SHORT]
                    bar.set_postfix({POOL_SHORT[r["pool"]]: f"{r['accuracy']:.2f}" for r in last})
                bar.update(1)
                if on_step is not None:
                    on_step(step)
    finally:
        streams.close()
        bar.close()
    seconds = time.perf_counter() - start
    results = []
    for k, cfg in enumerate(cfgs):
        final = {n: p[k].detach().to("cpu", torch.float32).clone() for n, p in params.items()}
        history = pd.DataFrame(rows[k])
        kept = {s: saved[k][s] for s in keep_steps(history, cfg)} if keep else {}
        results.append(
            TrainResult(
                history=history,
                checkpoints=kept or {steps: {n: v.to(torch.float16) for n, v in final.items()}},
                final_state=final,
                config=cfg,
                train_seconds=seconds / K,
            )
        )
    return results


_DONE = None
"""In a worker process of :func:`train_groups`: the shared array of steps done per group."""


def _init_worker(done) -> None:
    """Worker set-up: the shared step counters; no bars of its own (the parent shows one)."""
    global _DONE
    _DONE = done
    os.environ.pop(PROGRESS_ENV, None)
    os.environ["MECHBOOK_QUIET"] = "1"


def _train_group(index: int, cfgs: list[TrainConfig], device: str, keep: bool) -> list[TrainResult]:
    def tick(step: int) -> None:
        _DONE[index] = step

    return train_stacked(cfgs, device, workers=1, keep=keep, on_step=tick)


def groups_of(cfgs: Sequence[TrainConfig], size: int = GROUP_SIZE) -> list[list[TrainConfig]]:
    """``cfgs`` cut, in order, into ``ceil(len / size)`` stacks as equal as possible (5 runs at
    size 3: 3 and 2)."""
    if size < 1:
        raise ValueError(f"a stack holds at least one run, got size {size}")
    n = -(-len(cfgs) // size)
    bounds = [round(i * len(cfgs) / n) for i in range(n + 1)]
    return [list(cfgs[a:b]) for a, b in zip(bounds, bounds[1:])]


def train_groups(
    cfgs: Sequence[TrainConfig],
    device: str | None = None,
    workers: int | None = None,
    desc: str = "stacked training",
    keep: bool = False,
    processes: int | None = None,
) -> list[TrainResult]:
    """:func:`train_stacked` of ``cfgs``, one result per config in order. On a GPU, one stack of
    them all (a GPU is busiest with the widest stack). On a CPU, the stacks of :func:`groups_of`,
    trained in ``processes`` spawned processes (None: one per available core, at most one per
    stack) behind one bar that counts the steps of every run."""
    check_stackable(cfgs)
    device = device or default_device()
    if str(device).startswith("cuda"):
        return train_stacked(cfgs, device, workers=workers, keep=keep, desc=desc)
    groups = groups_of(cfgs)
    processes = min(len(groups), processes or available_cores())
    if processes <= 1:
        return [
            r
            for i, g in enumerate(groups)
            for r in train_stacked(g, device, workers=workers, keep=keep, desc=f"{desc}, stack {i + 1}/{len(groups)}")
        ]
    ctx = multiprocessing.get_context("spawn")
    done = ctx.Array("q", len(groups), lock=False)
    sizes = [len(g) for g in groups]
    bar = progress(
        total=cfgs[0].steps * len(cfgs), desc=f"{desc} ({len(groups)} stacks on {processes} cores)", unit="run-step"
    )
    with WorkerPool(processes, initializer=_init_worker, initargs=(done,)) as pool:
        futures = [pool.submit(_train_group, i, g, device, keep) for i, g in enumerate(groups)]
        try:
            while wait(futures, timeout=0.5).not_done:
                bar.update(sum(d * k for d, k in zip(done, sizes)) - bar.n)
            bar.update(sum(d * k for d, k in zip(done, sizes)) - bar.n)
        finally:
            bar.close()
        return [r for f in futures for r in f.result()]


def load_or_train_stacked(
    cfgs: Sequence[TrainConfig],
    device: str | None = None,
    workers: int | None = None,
    desc: str = "stacked training",
    keep: bool = False,
) -> list[TrainResult]:
    """The cached results of :func:`train_groups` for ``cfgs`` (key: every config, the device and
    ``keep``; ``workers`` and the number of processes do not change results).
    Chapter 8 trains its seeds this way (with ``keep``), chapter 11 each sweep."""
    device = device or default_device()
    key = {"cfgs": list(cfgs), "device": device, "keep": keep}
    return cached("assign_add/stacked", key, lambda: train_groups(cfgs, device, workers=workers, desc=desc, keep=keep))
