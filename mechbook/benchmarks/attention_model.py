"""Benchmark of chapter 3's training step: ``python -m mechbook bench attention-model [--quick]``.

Times SGD steps (forward, backward, update) of :class:`~mechbook.leading_terms.model.AttentionModel`
(layer 1 as gathers W^(1)[x_t, x_j] and V^(1)[x]; layer 2 from h^(1) M = M[x] + A^(1) (V^(1) M)[x]
for M = W^(2), V^(2); position bias by one precomputed index) against the
literal formulation :func:`~mechbook.leading_terms.model.dense_reference_logits` (one-hot matmuls
at every layer, DM(P) filled in a Python loop) at the same size, after checking that both give the
same loss and gradients. The default size is the cpu profile's shared runs (|V| 512, T 64, batch
64, three layers). Each step's floating-point operations are counted with
``torch.utils.flop_counter.FlopCounterMode`` (matrix products only) and reported with the rate
they ran at. Steps run with subnormal floats flushed, as training does. Prints a table and a final
JSON line; exits 1 if the formulations disagree or the speed-up is below ``--target``. The two
take turns step by step, so that other load on the machine falls on both alike.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from mechbook.leading_terms.model import AttentionModel, ModelConfig, dense_reference_logits
from mechbook.leading_terms.runs import SHARED_RUNS
from mechbook.leading_terms.train import subnormals_flushed

_CPU_RUNS = SHARED_RUNS["cpu"]


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
    corpus = _CPU_RUNS.corpus
    p.add_argument("--vocab", type=_positive, default=corpus.vocab_size, help=f"|V| (default {corpus.vocab_size})")
    p.add_argument("--context", type=_positive, default=corpus.context, help=f"T (default {corpus.context})")
    p.add_argument(
        "--batch",
        type=_positive,
        default=_CPU_RUNS.batch_size,
        help=f"sequences per step (default {_CPU_RUNS.batch_size})",
    )
    p.add_argument("--layers", type=_positive, default=3)
    p.add_argument("--steps", type=_positive, default=9, help="timed steps per formulation (default 9)")
    p.add_argument("--quick", action="store_true", help="small size (|V| 64, T 16, batch 32) for a fast check")
    p.add_argument("--target", type=float, default=1.5, help="required speed-up (default 1.5)")
    p.add_argument("--threads", type=_positive, default=None, help="torch CPU threads (default: torch's)")
    p.add_argument("--device", default=None, help="torch device (default: CUDA when present)")
    return p


def _loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def _step(forward: Callable[[torch.Tensor], torch.Tensor], seqs: torch.Tensor, opt: torch.optim.Optimizer) -> None:
    """One SGD step of ``forward``'s next-token loss on ``seqs`` (batch, T+1)."""
    opt.zero_grad(set_to_none=True)
    _loss(forward(seqs[:, :-1]), seqs[:, 1:]).backward()
    opt.step()


def _step_flops(model: AttentionModel, forward: Callable[[torch.Tensor], torch.Tensor], seqs: torch.Tensor) -> int:
    """Floating-point operations of one step (forward and backward) of ``forward``, as torch's
    ``FlopCounterMode`` counts them: its matrix products."""
    counter = FlopCounterMode(display=False)
    with counter:
        _step(forward, seqs, torch.optim.SGD(model.parameters(), lr=0.0))
    return counter.get_total_flops()


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
            _step(forward, seqs, opt)
            if seqs.is_cuda:
                torch.cuda.synchronize()
            spent.append(time.perf_counter() - start)
    return [sorted(spent[1:])[len(spent[1:]) // 2] for spent in times]


def main(argv: list[str]) -> int:
    """Run the benchmark; 0 when the formulations agree and the speed-up meets the target."""
    args = _parser().parse_args(argv)
    if args.quick:
        args.vocab, args.context, args.batch = 64, 16, 32
    if args.threads is not None:
        torch.set_num_threads(args.threads)
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

    forwards = [model, lambda x: dense_reference_logits(model, x)]
    with subnormals_flushed():
        fast_flops, dense_flops = (_step_flops(model, forward, seqs) for forward in forwards)
        fast, dense = _seconds_per_step(model, forwards, seqs, args.steps)
    speedup = dense / fast
    print(
        f"attention model |V|={args.vocab} T={args.context} batch={args.batch} layers={args.layers} on "
        f"{model.W_O.device}, {torch.get_num_threads()} thread(s)"
    )
    print(
        f"  fast (gathers, layer-2 expansion): {fast * 1e3:9.1f} ms/step {fast_flops / 1e9:8.2f} GFLOP "
        f"{fast_flops / fast / 1e9:7.1f} GFLOP/s"
    )
    print(
        f"  dense (one-hot + loop bias):       {dense * 1e3:9.1f} ms/step {dense_flops / 1e9:8.2f} GFLOP "
        f"{dense_flops / dense / 1e9:7.1f} GFLOP/s"
    )
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
                "threads": torch.get_num_threads(),
                "fast_s_per_step": fast,
                "dense_s_per_step": dense,
                "fast_flops_per_step": fast_flops,
                "dense_flops_per_step": dense_flops,
                "fast_gflops_per_s": fast_flops / fast / 1e9,
                "dense_gflops_per_s": dense_flops / dense / 1e9,
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
