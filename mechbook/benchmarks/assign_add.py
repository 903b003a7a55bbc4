"""Benchmark of chapter 8's training: ``python -m mechbook bench assign-add [--quick]``.

1. Training steps (forward, backward, AdamW) of :class:`~mechbook.assign_add.model.AssignAddModel`
   (logits, layer-2 query and MLP at '=' only; no layer-1 MLP) against a straightforward
   formulation of the same network: logits at all 16 positions and a zeroed, frozen layer-1 MLP
   that is still computed (how the original was set up). Both start from the same weights; the
   losses and gradients are checked to agree first.
2. The cost of determinism: the same fast training step under
   :func:`~mechbook.determinism.deterministic` (deterministic kernels, one intra-op thread: the
   setting every training run uses) against torch's defaults (its thread count, default kernels).
3. Data generation: :meth:`Task.sample` (vectorised numpy) against :meth:`Task.sample_loop` (one
   sequence at a time in Python), checked to follow the same rules.

Prints a table and a final JSON line; exits 1 if the formulations disagree or a speed-up is below
its target (2x for training, 20x for data).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from mechbook.assign_add.model import AssignAddModel
from mechbook.assign_add.task import Task
from mechbook.determinism import deterministic


class StraightforwardModel(nn.Module):
    """The same network written plainly: full-sequence logits, an MLP in both layers (layer 1's
    zeroed and frozen but computed), parameters copied from an :class:`AssignAddModel`."""

    def __init__(self, source: AssignAddModel) -> None:
        super().__init__()
        cfg = source.cfg
        self.params = nn.ParameterDict(
            {k.replace(".", "_"): nn.Parameter(v.detach().clone()) for k, v in source.state_dict().items()}
        )
        self.mlp0_in = nn.Parameter(torch.zeros(cfg.d_model, cfg.d_mlp), requires_grad=False)
        self.mlp0_out = nn.Parameter(torch.zeros(cfg.d_mlp, cfg.d_model), requires_grad=False)
        self.register_buffer("mask", torch.tril(torch.ones(cfg.n_ctx, cfg.n_ctx, dtype=torch.bool)))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        p = self.params
        x = p["embed_W_E"][tokens] + p["pos_embed_W_pos"]
        for layer in (0, 1):
            pre = f"blocks_{layer}_attn_"
            q, k, v = (x @ p[pre + n][0] for n in ("W_Q", "W_K", "W_V"))
            scores = (q @ k.transpose(1, 2)) / math.sqrt(q.shape[-1])
            pattern = scores.masked_fill(~self.mask, float("-inf")).softmax(-1)
            x = x + (pattern @ v) @ p[pre + "W_O"][0]
            w_in, w_out = (
                (self.mlp0_in, self.mlp0_out) if layer == 0 else (p["blocks_1_mlp_W_in"], p["blocks_1_mlp_W_out"])
            )
            x = x + torch.relu(x @ w_in) @ w_out
        return x @ p["unembed_W_U"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m mechbook bench assign-add", description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=512, help="sequences per step (default 512)")
    p.add_argument("--steps", type=int, default=10, help="timed training steps per formulation (default 10)")
    p.add_argument("--repeats", type=int, default=5, help="timed data batches per generator (default 5)")
    p.add_argument("--quick", action="store_true", help="batch 128, 3 steps, 2 repeats: a fast check")
    p.add_argument("--train-target", type=float, default=2.0)
    p.add_argument("--data-target", type=float, default=20.0)
    return p


def _best_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Best (smallest) wall time of ``fn()`` over ``repeats`` calls after one warm-up call: the
    least disturbed by other processes on a shared CPU (as ``timeit`` advises)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(min(times))


def _step_fn(model: nn.Module, forward: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, y: torch.Tensor):
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3, weight_decay=0.02)

    def step() -> None:
        loss = F.cross_entropy(forward(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def main(argv: list[str]) -> int:
    """Run the benchmark; 0 when the formulations agree and both speed-ups meet their targets."""
    args = _parser().parse_args(argv)
    if args.quick:
        args.batch, args.steps, args.repeats = 128, 3, 2
    task = Task()
    x_np, y_np = task.sample(args.batch, np.random.default_rng(0))
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)

    fast = AssignAddModel()
    plain = StraightforwardModel(fast)
    loss_fast = F.cross_entropy(fast(x, last_only=True), y)
    loss_plain = F.cross_entropy(plain(x)[:, -1], y)
    g_fast = torch.autograd.grad(loss_fast, list(fast.parameters()))
    g_plain = torch.autograd.grad(loss_plain, [plain.params[n.replace(".", "_")] for n, _ in fast.named_parameters()])
    loss_diff = abs(loss_fast.item() - loss_plain.item())
    grad_diff = max(float((a - b).abs().max() / b.abs().max().clamp_min(1e-30)) for a, b in zip(g_fast, g_plain))
    agree = loss_diff < 1e-5 and grad_diff < 1e-3

    t_fast = _best_seconds(_step_fn(fast, lambda t: fast(t, last_only=True), x, y), args.steps)
    t_plain = _best_seconds(_step_fn(plain, lambda t: plain(t)[:, -1], x, y), args.steps)
    with deterministic():
        t_det = _best_seconds(_step_fn(fast, lambda t: fast(t, last_only=True), x, y), args.steps)

    rng = np.random.default_rng(1)
    loop_x, loop_y = task.sample_loop(args.batch, rng)
    same_rules = bool(
        ((loop_x[:, 12] == task.cfg.plus) & (loop_x[:, 15] == task.cfg.eq)).all() and loop_y.max() < task.cfg.modulus
    )
    t_vec = _best_seconds(lambda: task.sample(args.batch, rng), args.repeats)
    t_loop = _best_seconds(lambda: task.sample_loop(args.batch, rng), args.repeats)

    train_speedup, data_speedup = t_plain / t_fast, t_loop / t_vec
    print(
        f"assign-add, batch {args.batch}, {torch.get_num_threads()} torch threads (timings inflated if the CPU is shared)"
    )
    print(f"  training step, logits at '=' only, no layer-1 MLP: {t_fast * 1e3:8.1f} ms")
    print(
        f"  training step, full-sequence logits, zero MLP 1:    {t_plain * 1e3:8.1f} ms   speed-up {train_speedup:.1f}x (target {args.train_target}x)"
    )
    print(
        f"  training step, deterministic (1 thread):            {t_det * 1e3:8.1f} ms   {t_det / t_fast:.2f}x the default's time"
    )
    print(f"  data, vectorised numpy:                           {t_vec * 1e3:8.2f} ms")
    print(
        f"  data, per-sequence Python loop:                   {t_loop * 1e3:8.2f} ms   speed-up {data_speedup:.1f}x (target {args.data_target}x)"
    )
    print(f"  |loss diff| {loss_diff:.2e}, max rel. grad diff {grad_diff:.2e}")
    ok = agree and same_rules and train_speedup >= args.train_target and data_speedup >= args.data_target
    print(
        json.dumps(
            {
                "benchmark": "assign-add",
                "batch": args.batch,
                "threads": torch.get_num_threads(),
                "train_fast_s_per_step": t_fast,
                "train_plain_s_per_step": t_plain,
                "train_speedup": train_speedup,
                "train_deterministic_s_per_step": t_det,
                "deterministic_vs_default": t_det / t_fast,
                "data_vec_s": t_vec,
                "data_loop_s": t_loop,
                "data_speedup": data_speedup,
                "train_target": args.train_target,
                "data_target": args.data_target,
                "loss_abs_diff": loss_diff,
                "grad_max_rel_diff": grad_diff,
                "agree": agree,
                "ok": ok,
            }
        )
    )
    return 0 if ok else 1
