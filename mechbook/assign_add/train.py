"""Training Assign-and-Add runs (chapters 8-11): one run, or several at once as one stacked model.

The one training loop is :func:`train_stacked`; a run trained alone (:func:`train`) is a stack
of one, and :func:`load_or_train` caches it. A step draws a batch of rows with replacement, lays
out fresh contexts, and minimises the cross-entropy of the logits at '=' (position 15) over the N
residues. Every ``eval_every`` steps it scores the nine pools (fixed sequences, so the curves move
only when the model does) and keeps a float16 copy of the weights; at the end it keeps those
every ``keep_every`` steps and, densely, those where some pool moved by at least ``keep_change``
(:func:`~mechbook.assign_add.config.keep_steps`), so the phase transitions are resolved to one
evaluation. Every ``resume_every`` steps the model, optimizer and data-RNG states are written
atomically to a resume folder; an interrupted run continues from there to bit-identical weights.

A sweep trains one small model per knob value. Alone, each such model leaves most of a CPU's or a
GPU's arithmetic idle. :func:`train_stacked` trains K runs that share the model's shape and the
optimiser's settings together: every parameter is stacked into a (K, ...) tensor, the forward
pass (:func:`~mechbook.assign_add.lookup.lookup_logits`, the model as table lookups before layer
2's attention) is batched over K, and the loss is the sum of the K runs' mean losses, so the
gradient of slice k is the gradient of run k alone. AdamW is elementwise, so one AdamW over the
stacked tensors is exactly K independent AdamWs. Each run keeps its own task (its r or f), its
own initialisation (``model.seed``) and its own data stream (``numpy.random.default_rng(seed)``),
so run k computes the same mathematics as training it alone. On a CPU (one thread, as
:func:`~mechbook.determinism.deterministic` sets) each run's products are the same kernels on the
same numbers whatever K, so a stacked run equals the run trained alone bit for bit
(tests/unit/assign_add/test_aa_stacked.py asserts ``torch.equal``); on a GPU the batched kernels may round
differently, and AdamW's normalised steps carry the difference forward.

Batches are drawn ``chunk`` steps at a time. With ``workers > 1`` the runs' streams are drawn in
a pool of (spawned, CUDA-free) processes while the previous chunk trains, which is what keeps a GPU
busy; the streams, hence the results, are the same for any number of workers.

:func:`train_groups` cuts the runs into stacks of at most :data:`GROUP_SIZE` and, on a
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
import shutil
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from mechbook.assign_add.config import POOL_SHORT, TrainConfig, TrainResult, compute_dtype, keep_steps
from mechbook.assign_add.lookup import lookup_logits
from mechbook.assign_add.model import AssignAddModel, stack_parameters
from mechbook.assign_add.task import Task, TaskConfig
from mechbook.cache import (
    cache_root,
    cached,
    code_digest,
    fingerprint,
    load_verified,
    save_verified,
    torch_dumps,
    torch_loads,
)
from mechbook.determinism import deterministic, subnormals_flushed
from mechbook.device import available_cores, default_device
from mechbook.lifeline import WorkerPool
from mechbook.progress import PROGRESS_ENV, progress
from mechbook.safe_format import NotSafeFormat

SHARED_FIELDS = (
    "steps",
    "batch_size",
    "lr",
    "betas",
    "weight_decay",
    "eval_every",
    "eval_per_pool",
    "eval_seed",
    "resume_every",
    "precision",
    "compile",
    "stop_loss",
)
"""TrainConfig fields every stacked run must share (the model's shape too, all but its seed)."""

GROUP_SIZE = 3
"""The most runs :func:`train_groups` trains in one stack (so five seeds train as stacks of
3 and 2, and a CPU's two cores train both at once)."""


def stack_key(cfg: TrainConfig) -> tuple:
    """What runs must share to train in one stack (:data:`SHARED_FIELDS`, the model's shape, the
    task's vocabulary and length): runs with equal keys stack."""
    return (
        tuple(getattr(cfg, name) for name in SHARED_FIELDS),
        dataclasses.replace(cfg.model, seed=0),
        cfg.task.d_vocab,
        cfg.task.seq_len,
    )


def check_stackable(cfgs: Sequence[TrainConfig]) -> None:
    """Raise a ValueError naming the field when ``cfgs`` cannot be trained as one stack."""
    if not cfgs:
        raise ValueError("train_stacked needs at least one TrainConfig")
    first = cfgs[0]
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


class NonFiniteLoss(FloatingPointError):
    """A run whose training loss became NaN or infinite: the run stops and nothing is cached."""

    def __init__(self, cfg: TrainConfig, step: int, loss: float) -> None:
        super().__init__(
            f"the training loss became {loss} by step {step} (lr={cfg.lr}, seed={cfg.seed}): the run diverged and "
            f"nothing was cached; train with a smaller lr"
        )


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
    and labels (n, batch) in the smallest unsigned integer type that holds them (uint8 for the
    paper's 74 tokens and 59 residues), and the generator state to continue from."""
    task = _task(task_cfg)
    rng = np.random.default_rng(seed)
    if rng_state is not None:
        rng.bit_generator.state = rng_state
    xs = np.empty((n, batch, task_cfg.seq_len), dtype=np.min_scalar_type(task_cfg.d_vocab - 1))
    ys = np.empty((n, batch), dtype=np.min_scalar_type(task_cfg.modulus - 1))
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

    def keep(self, positions: Sequence[int]) -> None:
        """Go on with the streams at ``positions`` only (the runs that have not stopped)."""
        self.cfgs = [self.cfgs[i] for i in positions]
        self.states = [self.states[i] for i in positions]
        if self.pending is not None:
            self.pending = [self.pending[i] for i in positions]

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


def make_step(
    params: dict[str, torch.Tensor],
    opt: torch.optim.Optimizer,
    dtype: torch.dtype,
    compile: bool = False,
    logits: Callable[[dict[str, torch.Tensor], torch.Tensor, torch.dtype], torch.Tensor] = lookup_logits,
) -> Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """One training step of the stack ``params`` (:func:`~mechbook.assign_add.model.stack_parameters`):
    ``step(tokens (K, B, P), labels (K, B))`` runs the forward ``logits`` in ``dtype`` (the
    table-lookup forward of :mod:`mechbook.assign_add.lookup`; the benchmark passes the direct
    products of :func:`~mechbook.assign_add.model.stacked_logits` as its baseline), backpropagates
    the sum of the K runs' mean losses (so slice k gets run k's own gradient) and steps ``opt``;
    returns the K losses and accuracies, detached, on the device (no host sync). With ``compile``
    the forward and its backward go through ``torch.compile`` (compiled once, at the first step)."""

    def forward(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = logits(params, x, dtype)
        losses = F.cross_entropy(out.flatten(0, 1), y.flatten(), reduction="none").view(y.shape).mean(1)
        return losses, (out.detach().argmax(-1) == y).float().mean(1)

    run = torch.compile(forward, dynamic=False) if compile else forward

    def step(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        losses, accs = run(x, y)
        opt.zero_grad(set_to_none=True)
        losses.sum().backward()
        opt.step()
        return losses.detach(), accs

    return step


def adamw(params: dict[str, torch.Tensor], cfg: TrainConfig, device: str) -> torch.optim.AdamW:
    """AdamW over the stacked ``params`` with ``cfg``'s settings: fused (one kernel for every
    tensor) on a CPU and on CUDA; elementwise either way, so one AdamW over the stack is K
    independent AdamWs."""
    fused = torch.device(device).type in ("cpu", "cuda")
    return torch.optim.AdamW(
        list(params.values()), lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay, fused=fused or None
    )


def _resume_file(path: Path) -> object | None:
    """The value saved at ``path`` in a resume folder, or None when it is missing, damaged or not
    in the safe format (a folder an older mechbook pickled: the run then starts from step 0)."""
    data = load_verified(path)
    if data is None:
        return None
    try:
        return torch_loads(data)
    except NotSafeFormat as exc:
        warnings.warn(f"{path} cannot be resumed from ({exc}); training from step 0", stacklevel=3)
        return None


class _Stack:
    """A stack being trained: the state :func:`train_stacked` carries from step to step (K models'
    parameters on a first axis, one AdamW, K data streams, the evaluation pools) and what it has
    made so far (each run's history rows, kept weights, final weights and stop step), with the
    steps of a run as methods: :meth:`restore`, :meth:`fit` (:meth:`evaluate`, :meth:`narrow`,
    :meth:`save_resume_state` on the way) and :meth:`results`."""

    def __init__(
        self, cfgs: Sequence[TrainConfig], device: str, workers: int | None, keep: bool, resume_dir: str | Path | None
    ) -> None:
        self.cfgs, self.cfg, self.device, self.keep = list(cfgs), cfgs[0], device, keep
        self.dtype = compute_dtype(self.cfg.precision, device)
        K = len(cfgs)
        self.params = stack_parameters([AssignAddModel(c.model) for c in cfgs], device)
        self.opt = adamw(self.params, self.cfg, device)
        self.step_fn = make_step(self.params, self.opt, self.dtype, self.cfg.compile)
        pools = [Task(c.task).eval_pools(self.cfg.eval_per_pool, self.cfg.eval_seed) for c in cfgs]
        self.pool_names = list(pools[0])
        stacked = [np.stack([np.concatenate([p[n][i] for n in self.pool_names]) for p in pools]) for i in (0, 1)]
        self.eval_x, self.eval_y = (torch.as_tensor(a, device=device) for a in stacked)
        self.sizes = [len(pools[0][n][1]) for n in self.pool_names]
        self.streams = _Streams(cfgs, default_workers(K, device) if workers is None else workers)
        self.rows: list[list[dict]] = [[] for _ in cfgs]
        self.saved: dict[int, list[dict[str, torch.Tensor] | None]] = {}  # step -> per run (None: stopped before)
        self.step, self.elapsed = 0, 0.0
        self.live = list(range(K))  # the runs still training; the stacked tensors hold these, in order
        self.finals: dict[int, dict[str, torch.Tensor]] = {}  # run -> float32 weights where it stopped
        self.ended: dict[int, int] = {}  # run -> the step it stopped at
        self.columns: torch.Tensor | None = None  # the live runs' columns of the chunk being trained
        self.acc_sum = torch.zeros(K, device=device)  # per live run, since the last evaluation
        self.loss_sum = torch.zeros(K, device=device)
        self.resume = Path(resume_dir) if resume_dir is not None else None
        self.writing = self.resume is not None  # False once a resume write failed: training goes on without
        self.tag = fingerprint(list(cfgs))

    def narrow(self, positions: list[int]) -> None:
        """Go on with the live runs at ``positions``: their slices of the parameters, of AdamW's
        state, of the evaluation pools and of the streams (elementwise state, so each run's
        numbers are unchanged)."""
        index = torch.tensor(positions, device=self.device)
        kept = {n: p.detach().index_select(0, index).clone().requires_grad_() for n, p in self.params.items()}
        new_opt = adamw(kept, self.cfg, self.device)
        for n, p in self.params.items():
            new_opt.state[kept[n]] = {
                key: v.index_select(0, index).clone() if v.shape == p.shape else v.clone()
                for key, v in self.opt.state.get(p, {}).items()
            }
        self.params, self.opt = kept, new_opt
        self.step_fn = make_step(self.params, self.opt, self.dtype, self.cfg.compile)
        self.eval_x, self.eval_y = self.eval_x.index_select(0, index), self.eval_y.index_select(0, index)
        self.acc_sum, self.loss_sum = self.acc_sum.index_select(0, index), self.loss_sum.index_select(0, index)
        self.streams.keep(positions)
        self.live = [self.live[i] for i in positions]
        self.columns = index if self.columns is None else self.columns.index_select(0, index)

    def restore(self) -> None:
        """Continue from the state saved in the resume folder, if it is these configs' and every
        checkpoint it names is there; refuse another config's state."""
        if self.resume is None:
            return
        state = _resume_file(self.resume / "state.pt")
        if state is not None and state["config"] != self.tag:
            raise ValueError(
                f"{self.resume} holds the state of another TrainConfig; delete it or pass another resume_dir"
            )
        found = {s: _resume_file(self.resume / f"ckpt_{s}.pt") for s in (state or {}).get("checkpoint_steps", [])}
        if state is not None and all(v is not None for v in found.values()):
            if state["live"] != self.live:
                self.narrow(state["live"])
            self.finals, self.ended = state["finals"], state["ended"]
            with torch.no_grad():
                for n, p in self.params.items():
                    p.copy_(state["params"][n])
            self.opt.load_state_dict(state["optim"])
            self.streams.states = state["rng"]
            self.step, self.rows, self.elapsed = state["step"], state["history"], state["elapsed"]
            self.saved = dict(found)
        elif state is not None:
            warnings.warn(
                f"{self.resume} misses some checkpoints of its saved state; training from step 0", stacklevel=4
            )

    def write(self, name: str, value: object) -> None:
        """Save ``value`` as ``name`` in the resume folder. A write that fails (a full or read-only
        disk) warns once and stops the resume points; the training goes on and returns its result."""
        if not self.writing:
            return
        try:
            save_verified(self.resume / name, torch_dumps(value))
        except OSError as exc:
            self.writing = False
            warnings.warn(
                f"could not save the resume state in {self.resume} ({exc}); training goes on without resume points",
                stacklevel=2,
            )

    @torch.no_grad()
    def evaluate(self, train_acc: torch.Tensor | None, train_loss: torch.Tensor | None) -> None:
        """Score the nine pools (float32), append the rows, keep a float16 copy of the weights."""
        logits = lookup_logits({n: p.detach() for n, p in self.params.items()}, self.eval_x)
        correct = (logits.argmax(-1) == self.eval_y).float()
        loss = F.cross_entropy(logits.flatten(0, 1), self.eval_y.flatten(), reduction="none").view_as(correct)
        accs = [c.split(self.sizes, dim=-1) for c in correct.cpu()]
        losses = [c.split(self.sizes, dim=-1) for c in loss.cpu()]
        for i, k in enumerate(self.live):
            for name, a, l in zip(self.pool_names, accs[i], losses[i]):
                self.rows[k].append(
                    {"step": self.step, "pool": name, "accuracy": float(a.mean()), "loss": float(l.mean())}
                )
            if train_acc is not None and train_loss is not None:
                self.rows[k].append(
                    {"step": self.step, "pool": "train", "accuracy": float(train_acc[i]), "loss": float(train_loss[i])}
                )
        if self.keep:
            weights = {
                k: {n: p[i].detach().to("cpu", torch.float16).clone() for n, p in self.params.items()}
                for i, k in enumerate(self.live)
            }
            self.saved[self.step] = [weights.get(k) for k in range(len(self.cfgs))]
            self.write(f"ckpt_{self.step}.pt", self.saved[self.step])

    def end_of_interval(self, bar: object) -> None:
        """At an evaluation step: refuse a diverged run, score the pools with the training rows
        since the last evaluation, and let the runs that fit their data (``stop_loss``) stop."""
        cfg = self.cfg
        seen = (self.step - 1) % cfg.eval_every + 1
        train_loss = (self.loss_sum / seen).cpu()
        diverged = [i for i in range(len(self.live)) if not torch.isfinite(train_loss[i])]
        if diverged:
            raise NonFiniteLoss(self.cfgs[self.live[diverged[0]]], self.step, float(train_loss[diverged[0]]))
        self.evaluate((self.acc_sum / seen).cpu(), train_loss)
        self.acc_sum.zero_()
        self.loss_sum.zero_()
        last = [r for r in self.rows[self.live[0]][-10:] if r["pool"] in POOL_SHORT]
        bar.set_postfix({POOL_SHORT[r["pool"]]: f"{r['accuracy']:.2f}" for r in last})
        fit = [cfg.stop_loss is not None and float(v) <= cfg.stop_loss for v in train_loss]
        for i in [i for i, f in enumerate(fit) if f or self.step == cfg.steps]:
            self.finals[self.live[i]] = {
                n: p[i].detach().to("cpu", torch.float32).clone() for n, p in self.params.items()
            }
            self.ended[self.live[i]] = self.step
        if all(fit):
            self.live = []
        elif any(fit) and self.step < cfg.steps:
            self.narrow([i for i, f in enumerate(fit) if not f])

    def save_resume_state(self, start: float) -> None:
        """Everything needed to continue to the same bits, at a resume point."""
        self.write(
            "state.pt",
            {
                "config": self.tag,
                "step": self.step,
                "live": self.live,
                "finals": self.finals,
                "ended": self.ended,
                "params": {n: p.detach().cpu() for n, p in self.params.items()},
                "optim": self.opt.state_dict(),
                "rng": self.streams.states,
                "history": self.rows,
                "checkpoint_steps": sorted(self.saved),
                "elapsed": self.elapsed + time.perf_counter() - start,
            },
        )

    def chunk_after(self, done: int, chunk: int) -> int:
        """Steps in the chunk of batches that starts after ``done`` steps (0 at the end); with a
        resume folder chunks end at resume points, so a saved generator state is the one after
        the last batch used."""
        n = min(chunk, self.cfg.steps - done)
        return min(n, self.cfg.resume_every - done % self.cfg.resume_every) if self.resume is not None else n

    def fit(self, chunk: int, desc: str, on_step: Callable[[int], None] | None) -> None:
        """Train until every run has stopped: chunks of batches, each step forward, backward and
        AdamW with no host sync, an evaluation every ``eval_every`` steps and a resume point every
        ``resume_every``; ``on_step`` gets the steps done over all runs after each step."""
        cfg = self.cfg
        if self.step == 0:
            self.evaluate(None, None)
        bar = progress(total=cfg.steps, initial=self.step, desc=f"{desc} ({cfg.precision})")
        start = time.perf_counter()
        run_steps = sum(self.ended.values()) + self.step * len(self.live)
        try:
            while self.live and self.step < cfg.steps:
                n = self.chunk_after(self.step, chunk)
                xs, ys = self.streams.next(n, self.chunk_after(self.step + n, chunk))
                xs = torch.as_tensor(xs, device=self.device).long()
                ys = torch.as_tensor(ys, device=self.device).long()
                self.columns = None
                for x, y in zip(xs, ys):
                    if self.columns is not None:
                        x, y = x.index_select(0, self.columns), y.index_select(0, self.columns)
                    losses, accs = self.step_fn(x, y)
                    self.step += 1
                    run_steps += len(self.live)
                    self.loss_sum += losses
                    self.acc_sum += accs
                    if self.step % cfg.eval_every == 0 or self.step == cfg.steps:
                        self.end_of_interval(bar)
                    if (
                        self.resume is not None
                        and self.step % cfg.resume_every == 0
                        and self.step < cfg.steps
                        and self.live
                    ):
                        self.save_resume_state(start)
                    bar.update(1)
                    if on_step is not None:
                        on_step(run_steps)
                    if not self.live:
                        break
        finally:
            self.streams.close()
            bar.close()
        self.elapsed += time.perf_counter() - start

    def results(self) -> list[TrainResult]:
        """One :class:`TrainResult` per config, in order: float32 final weights, the kept float16
        checkpoints (or the final step's), the history, and its share of the training time."""
        out = []
        for k, cfg in enumerate(self.cfgs):
            final = self.finals[k]
            history = pd.DataFrame(self.rows[k])
            kept = {s: self.saved[s][k] for s in keep_steps(history, cfg)} if self.keep else {}
            out.append(
                TrainResult(
                    history=history,
                    checkpoints=kept or {self.ended[k]: {n: v.to(torch.float16) for n, v in final.items()}},
                    final_state=final,
                    config=cfg,
                    train_seconds=self.elapsed * self.ended[k] / max(1, sum(self.ended.values())),
                )
            )
        return out


@deterministic()
def train_stacked(
    cfgs: Sequence[TrainConfig],
    device: str | None = None,
    chunk: int = 200,
    workers: int | None = None,
    desc: str = "stacked training",
    keep: bool = False,
    on_step: Callable[[int], None] | None = None,
    resume_dir: str | Path | None = None,
) -> list[TrainResult]:
    """Train every config of ``cfgs`` for their shared ``steps`` at once; one :class:`TrainResult`
    per config, in order. The one training loop of Part II: a run trained alone
    (:func:`train`) is a stack of one. With their shared ``stop_loss``, a run stops at the first
    evaluation whose training loss is at most it (chapter 11's sweep points) and leaves the stack;
    the others go on as a smaller stack, to the same bits as without it on a CPU, and a stopped
    run is the run of ``steps`` = its stop step.

    Each result has the history (nine pools every ``eval_every`` steps, scored in float32, and the
    ``train`` rows: mean accuracy and loss of the batches since the previous evaluation) and its
    final weights. ``checkpoints`` holds the final step only (a sweep reads final accuracies), or
    with ``keep`` the steps of :func:`~mechbook.assign_add.config.keep_steps` (every
    ``keep_every`` and densely where a pool moved), as float16. ``on_step`` is called after each
    step with the steps done over all runs of the stack (a stopped run's count stays at its stop).
    With ``resume_dir``, the state is saved there every ``resume_every`` steps and a stack that
    finds a saved state continues from it, to the same bits. Subnormal floats are flushed to zero
    (:func:`~mechbook.determinism.subnormals_flushed`).
    """
    check_stackable(cfgs)
    stack = _Stack(cfgs, device or default_device(), workers, keep, resume_dir)
    stack.restore()
    with subnormals_flushed():
        stack.fit(chunk, desc, on_step)
    return stack.results()


_DONE = None
"""In a worker process of :func:`train_groups`: the shared array of steps done per group."""


def _init_worker(done) -> None:
    """Worker set-up: the shared step counters; no bars of its own (the parent shows one)."""
    global _DONE
    _DONE = done
    os.environ.pop(PROGRESS_ENV, None)
    os.environ["MECHBOOK_QUIET"] = "1"


def _train_group(index: int, cfgs: list[TrainConfig], device: str, keep: bool) -> list[TrainResult]:
    def tick(run_steps: int) -> None:
        _DONE[index] = run_steps

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
    bar = progress(
        total=cfgs[0].steps * len(cfgs), desc=f"{desc} ({len(groups)} stacks on {processes} cores)", unit="run-step"
    )
    with WorkerPool(processes, initializer=_init_worker, initargs=(done,)) as pool:
        futures = [pool.submit(_train_group, i, g, device, keep) for i, g in enumerate(groups)]
        try:
            while wait(futures, timeout=0.5).not_done:
                bar.update(sum(done) - bar.n)
            bar.update(sum(done) - bar.n)
        finally:
            bar.close()
        return [r for f in futures for r in f.result()]


def train(cfg: TrainConfig, resume_dir: str | Path | None = None, device: str | None = None) -> TrainResult:
    """Train a model for ``cfg.steps`` steps and return its :class:`TrainResult`, with the
    checkpoints of :func:`~mechbook.assign_add.config.keep_steps`: a stack of one in
    :func:`train_stacked` (the one training loop).

    With ``resume_dir``, the state is saved there every ``cfg.resume_every`` steps and a run that
    finds a saved state continues from it (the weights at the end are the same as uninterrupted).
    """
    (result,) = train_stacked([cfg], device, keep=True, resume_dir=resume_dir, desc="training")
    return result


def resume_folder(cfg: TrainConfig, device: str | None = None) -> Path:
    """Where :func:`load_or_train` keeps the resumable state of ``cfg`` while it trains (keyed
    like the cached run: config, device, the code this module reaches)."""
    key = {"cfg": cfg, "device": device or default_device(), "code": code_digest([__name__])}
    return cache_root() / "assign_add" / "resume" / fingerprint(key)


def load_or_train(cfg: TrainConfig, device: str | None = None, refresh: bool = False) -> TrainResult:
    """The cached :class:`TrainResult` of ``cfg`` (key: config, device, and the code it reaches);
    trains, resumably, when it is missing (chapters 8-10 for a seed the reader picks outside the
    seed stack)."""
    device = device or default_device()
    folder = resume_folder(cfg, device)
    result = cached(
        "assign_add/train", {"cfg": cfg, "device": device}, lambda: train(cfg, folder, device), refresh=refresh
    )
    shutil.rmtree(folder, ignore_errors=True)
    return result
