"""Benchmark of chapter 3's training step: ``python -m mechbook bench attention-model [--quick]``.

Times SGD steps (forward, backward, update) of :class:`~mechbook.leading_terms.model.AttentionModel`
(layer 1 as gathers W^(1)[x_t, x_j] and V^(1)[x]; layer 2 from h^(1) M = M[x] + A^(1) (V^(1) M)[x]
for M = W^(2), V^(2); position bias by one precomputed index) against the
literal formulation :func:`~mechbook.leading_terms.model.dense_reference_logits` (one-hot matmuls
at every layer, DM(P) filled in a Python loop) at the same size, after checking that both give the
same loss and gradients. Prints a table and a final JSON line; exits 1 if they disagree or the
speed-up is below ``--target``. The two take turns step by step, so that other load on the machine
falls on both alike.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from mechbook.leading_terms.model import AttentionModel, ModelConfig, dense_reference_logits


def _positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m mechbook bench attention-model", description=__doc__.splitlines()[0])
    p.add_argument("--vocab", type=_positive, default=256, help="|V| (default 256)")
    p.add_argument("--context", type=_positive, default=64, help="T (default 64)")
    p.add_argument("--batch", type=_positive, default=128, help="sequences per step (default 128)")
    p.add_argument("--layers", type=_positive, default=3)
    p.add_argument("--steps", type=_positive, default=9, help="timed steps per formulation (default 9)")
    p.add_argument("--quick", action="store_true", help="small size (|V| 64, T 16, batch 32) for a fast check")
    p.add_argument("--target", type=float, default=2.0, help="required speed-up (default 2)")
    p.add_argument("--device", default=None, help="torch device (default: CUDA when present)")
    return p


def _loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def _seconds_per_step(
    model: AttentionModel, forwards: list[Callable[[torch.Tensor], torch.Tensor]], seqs: torch.Tensor, steps: int
) -> list[float]:
    """Median wall time of one SGD step (lr 0: the weights, hence the work, stay the same) for each
    forward. The forwards take turns, one step each per round after one untimed round, so that
    load from other processes on a shared machine falls on all of them alike."""
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    times: list[list[float]] = [[] for _ in forwards]
    for _ in range(steps + 1):
        for forward, spent in zip(forwards, times):
            if seqs.is_cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            _loss(forward(seqs[:, :-1]), seqs[:, 1:]).backward()
            opt.step()
            if seqs.is_cuda:
                torch.cuda.synchronize()
            spent.append(time.perf_counter() - start)
    return [sorted(spent[1:])[len(spent[1:]) // 2] for spent in times]


def main(argv: list[str]) -> int:
    """Run the benchmark; 0 when the formulations agree and the speed-up meets the target."""
    args = _parser().parse_args(argv)
    if args.quick:
        args.vocab, args.context, args.batch = 64, 16, 32
    torch.manual_seed(0)
    model = AttentionModel(ModelConfig(args.vocab, args.context, args.layers), device=args.device)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.05)
    seqs = torch.randint(0, args.vocab, (args.batch, args.context + 1), device=model.W_O.device)

    params = list(model.parameters())
    fast_loss = _loss(model(seqs[:, :-1]), seqs[:, 1:])
    dense_loss = _loss(dense_reference_logits(model, seqs[:, :-1]), seqs[:, 1:])
    g_fast = torch.autograd.grad(fast_loss, params)
    g_dense = torch.autograd.grad(dense_loss, params)
    loss_diff = abs(fast_loss.item() - dense_loss.item())
    grad_diff = max(float((a - b).abs().max() / b.abs().max().clamp_min(1e-30)) for a, b in zip(g_fast, g_dense))
    agree = loss_diff < 1e-4 * max(1.0, abs(dense_loss.item())) and grad_diff < 1e-3

    fast, dense = _seconds_per_step(model, [model, lambda x: dense_reference_logits(model, x)], seqs, args.steps)
    speedup = dense / fast
    print(
        f"attention model |V|={args.vocab} T={args.context} batch={args.batch} layers={args.layers} on {model.W_O.device}"
    )
    print(f"  fast (gathers, layer-2 expansion): {fast * 1e3:9.1f} ms/step")
    print(f"  dense (one-hot + loop bias):       {dense * 1e3:9.1f} ms/step")
    print(
        f"  speed-up {speedup:.1f}x (target {args.target}x); |loss diff| {loss_diff:.2e}, max rel. grad diff {grad_diff:.2e}"
    )
    ok = agree and speedup >= args.target
    print(
        json.dumps(
            {
                "benchmark": "attention-model",
                "vocab_size": args.vocab,
                "context": args.context,
                "batch": args.batch,
                "layers": args.layers,
                "device": str(model.W_O.device),
                "fast_s_per_step": fast,
                "dense_s_per_step": dense,
                "speedup": speedup,
                "target": args.target,
                "loss_abs_diff": loss_diff,
                "grad_max_rel_diff": grad_diff,
                "agree": agree,
                "ok": ok,
            }
        )
    )
    return 0 if ok else 1
