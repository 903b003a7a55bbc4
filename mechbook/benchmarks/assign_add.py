"""Benchmark of Part II's training step: ``python -m mechbook bench assign-add [--quick] [--compile]``.

At the paper's configuration (d_model 128, d_mlp 512, batch 512; chapters 8-10's cpu profile
trains it) and at the quarter-width run of chapter 11's cpu sweeps
(:data:`mechbook.assign_add.runs.QUARTER_RUN`), on one thread under
:func:`~mechbook.determinism.deterministic` (how every training run computes):

1. ms per step of the baseline (the training loop's step with the direct products of
   :func:`~mechbook.assign_add.model.stacked_logits`, eager fp32: the step before the lookups), of
   the training loop's step (:func:`~mechbook.assign_add.train.make_step` with the table lookups
   of :func:`~mechbook.assign_add.lookup.lookup_logits`) in fp32, in bf16 where the CPU multiplies
   bf16 natively, with ``--compile`` also compiled (the compile's seconds are printed, paid once
   per process), and of a stack of three runs per run;
2. the machine's own GEMM rate in each precision (8192x128x128, 8192x128x512, 512x128x512 on one
   thread), and the baseline's share of their median; the CPU's model and the vector flags that
   decide its kernels (AVX2, AVX-512, AVX512-BF16, AMX);
3. data generation: :meth:`Task.sample` (vectorised) against :meth:`Task.sample_loop`.

The variants are timed in interleaved rounds (a shared CPU's load falls on all of them alike) and
each is reported as the median over rounds. Prints a table and a final JSON line; exits 1 if the
lookup step disagrees with the hooked model (loss and gradients) or data generation is below its
target; the training speed-up target is printed beside the measured one, not enforced (it
depends on the hardware: benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from mechbook.assign_add.config import TrainConfig, native_bf16
from mechbook.assign_add.lookup import autograd_lookup_logits, lookup_logits
from mechbook.assign_add.model import AssignAddModel, ModelConfig, stack_parameters, stacked_logits
from mechbook.assign_add.runs import PAPER_RUN, QUARTER_RUN
from mechbook.assign_add.task import Task
from mechbook.assign_add.train import adamw, make_step
from mechbook.determinism import deterministic

GEMM_SHAPES = ((8192, 128, 128), (8192, 128, 512), (512, 128, 512))
"""(m, k, n) of the products timed for the machine's GEMM rate: the step's own shapes at the
paper's size (batch x positions rows, d_model and d_mlp columns)."""

STACK = 3
"""Runs in the stacked row (the largest stack :mod:`mechbook.assign_add.train` trains on a CPU)."""


def step_flops(model: ModelConfig, batch: int) -> float:
    """Floating-point operations of one training step of ``model`` on ``batch`` sequences,
    counting matrix products only (every other operation is a small share): the forward's
    products (layer 1 at all positions; layer 2's keys and values at all positions, its query, MLP
    and unembedding at '=' only) times 3, since each product's backward is two products of its
    size (every input needs its gradient: the embedding's too). 5.57 GFLOP at the paper's size."""
    b, p, d, h, m, v = batch, model.n_ctx, model.d_model, model.d_head, model.d_mlp, model.d_out
    layer1 = 2 * b * p * d * h * 3 + 2 * 2 * b * p * p * h + 2 * b * p * h * d
    layer2 = 2 * b * p * d * h * 2 + 2 * b * d * h + 2 * 2 * b * p * h + 2 * b * h * d + 2 * 2 * b * d * m
    return 3.0 * (layer1 + layer2 + 2 * b * d * v)


def gemm_products(dtypes: list[torch.dtype]) -> dict[tuple[str, str], tuple[Callable[[], object], float]]:
    """(precision, "mxkxn") -> (a product ``a @ b`` of that shape in that precision, its FLOP
    count), for each of :data:`GEMM_SHAPES`: what the machine's GEMM rate is timed on."""
    out = {}
    gen = torch.Generator().manual_seed(0)
    for dtype in dtypes:
        for m, k, n in GEMM_SHAPES:
            a, b = torch.randn(m, k, generator=gen).to(dtype), torch.randn(k, n, generator=gen).to(dtype)
            out[(_PRECISION[dtype], f"{m}x{k}x{n}")] = (lambda a=a, b=b: a @ b, 2.0 * m * k * n)
    return out


_PRECISION = {torch.float32: "fp32", torch.bfloat16: "bf16"}


def gemm_rate(rates: dict[str, dict[str, float]]) -> dict[str, float]:
    """The machine's GEMM rate per precision: the median over :data:`GEMM_SHAPES` (on a shared
    CPU the 512-row product, whose operands stay in cache, keeps its rate while the 8192-row ones,
    most of a step's products, lose theirs: the median is the step's fair yardstick)."""
    return {precision: statistics.median(r.values()) for precision, r in rates.items()}


def _seconds(fn: Callable[[], object], calls: int) -> float:
    """Mean wall time of ``calls`` calls of ``fn``."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
"""The /proc/cpuinfo flags that decide which kernels torch and oneDNN run (fp32 vector width, native bf16)."""


def cpu_description() -> dict[str, object]:
    """This CPU's model name (with its family and model numbers, which tell Zen 3 from Zen 4 where a
    virtual machine's name says only "AMD EPYC") and which of :data:`CPU_FLAGS` it has
    (``/proc/cpuinfo``; the platform's processor string elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {"model": platform.processor() or "unknown", "flags": {}}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get("flags", "").split())
    name = fields.get("model name") or platform.processor() or "unknown"
    model = f"{name}, family {fields.get('cpu family', '?')} model {fields.get('model', '?')}"
    return {"model": model, "flags": {f: f in flags for f in CPU_FLAGS}}


def loop_step(
    cfg: TrainConfig, runs: int = 1, logits: Callable = lookup_logits
) -> Callable[[torch.Tensor, torch.Tensor], object]:
    """The training loop's step for ``runs`` stacked copies of ``cfg``'s model (its precision and
    compile switch), with the forward ``logits`` (the lookups, or the baseline's direct products)."""
    models = [AssignAddModel(dataclasses.replace(cfg.model, seed=cfg.model.seed + i)) for i in range(runs)]
    params = stack_parameters(models, "cpu")
    dtype = torch.bfloat16 if cfg.precision == "bf16" else torch.float32
    return make_step(params, adamw(params, cfg, "cpu"), dtype, cfg.compile, logits)


def agreement(cfg: TrainConfig, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """|loss difference| and the largest relative gradient difference between the hooked model
    and :func:`~mechbook.assign_add.lookup.lookup_logits` in fp32, from the same weights."""
    model = AssignAddModel(cfg.model)
    params = stack_parameters([model], "cpu")
    loss_a = F.cross_entropy(model(x[0], last_only=True), y[0])
    loss_b = F.cross_entropy(lookup_logits(params, x)[0], y[0])
    grads_a = torch.autograd.grad(loss_a, list(model.parameters()))
    grads_b = torch.autograd.grad(loss_b, list(params.values()))
    rel = max(float((a - b[0]).abs().max() / a.abs().max().clamp_min(1e-30)) for a, b in zip(grads_a, grads_b))
    return abs(loss_a.item() - loss_b.item()), rel


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m mechbook bench assign-add", description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=4, help="steps per variant per round (default 4)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds; medians reported (default 5)")
    p.add_argument("--compile", action="store_true", help="also time the torch.compile'd steps (minutes to compile)")
    p.add_argument("--quick", action="store_true", help="1 step, 2 rounds, no stack row: a fast check")
    p.add_argument("--profile", action="store_true", help="print the top operators of the step before and after")
    p.add_argument("--train-target", type=float, default=12.0, help="speed-up aimed at over the baseline (printed)")
    p.add_argument(
        "--autograd-target", type=float, default=2.0, help="speed-up aimed at over autograd's backward (printed)"
    )
    p.add_argument("--data-target", type=float, default=20.0)
    return p


def _variants(cfg: TrainConfig, bf16: bool, compiled: bool, stack: bool) -> dict[str, tuple[Callable, int]]:
    """name -> (step, runs it trains) for one configuration; building a compiled step compiles
    nothing yet (the first call does, timed by the caller)."""
    out: dict[str, tuple[Callable, int]] = {
        "fp32, direct products (baseline)": (loop_step(cfg, 1, stacked_logits), 1),
        AUTOGRAD_ROW: (loop_step(cfg, 1, autograd_lookup_logits), 1),
    }
    precisions = ["fp32", "bf16"] if bf16 else ["fp32"]
    for precision in precisions:
        out[f"{precision}, lookup step"] = (loop_step(dataclasses.replace(cfg, precision=precision)), 1)
    if compiled:
        for precision in precisions:
            c = dataclasses.replace(cfg, precision=precision, compile=True)
            out[f"{precision}, lookup step, compiled"] = (loop_step(c), 1)
    if stack:
        for precision in precisions:
            out[f"{precision}, lookup step, stack of {STACK} (per run)"] = (
                loop_step(dataclasses.replace(cfg, precision=precision), STACK),
                STACK,
            )
    return out


AUTOGRAD_ROW = "fp32, lookup, autograd's backward"
"""The row of the lookups with autograd's backward (:func:`~mechbook.assign_add.lookup.autograd_lookup_logits`):
the training step before the hand-written backward."""


def counted(step: Callable, x: torch.Tensor, y: torch.Tensor) -> tuple[float, int]:
    """One call of ``step(x, y)`` counted: the floating-point operations of its matrix products
    (torch's FLOP counter, forward and backward) and the bytes of the tensors its forward keeps
    for the backward (each storage once)."""
    from torch.utils.flop_counter import FlopCounterMode

    storages: dict[int, int] = {}

    def keep(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with FlopCounterMode(display=False) as counter, torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        step(x, y)
    return float(counter.get_total_flops()), sum(storages.values())


def profile_table(step: Callable, x: torch.Tensor, y: torch.Tensor, rows: int = 12) -> str:
    """The ``rows`` operators of most self CPU time over three calls of ``step(x, y)`` (torch's profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            step(x, y)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def bench_config(name: str, cfg: TrainConfig, args: argparse.Namespace, bf16: bool) -> dict:
    """Time every variant at ``cfg`` and the GEMMs of :func:`gemm_products` in the same
    interleaved rounds (so they see the same load); medians, as one dict of results."""
    task = Task(cfg.task)
    xs, ys = task.sample(cfg.batch_size * STACK, np.random.default_rng(0))
    x_all = torch.as_tensor(xs).long().view(STACK, cfg.batch_size, -1)
    y_all = torch.as_tensor(ys).long().view(STACK, cfg.batch_size)
    flops = step_flops(cfg.model, cfg.batch_size)
    loss_diff, grad_diff = agreement(cfg, x_all[:1], y_all[:1])
    variants = _variants(cfg, bf16, args.compile, not args.quick)
    warm = {}
    for label, (step, runs) in variants.items():
        start = time.perf_counter()
        step(x_all[:runs], y_all[:runs])  # the first call compiles a compiled step
        warm[label] = time.perf_counter() - start
    gemms = gemm_products([torch.float32, torch.bfloat16] if bf16 else [torch.float32])
    times: dict[str, list[float]] = {label: [] for label in variants}
    gemm_times: dict[tuple[str, str], list[float]] = {key: [] for key in gemms}
    for _ in range(args.rounds):
        for label, (step, runs) in variants.items():
            times[label].append(
                _seconds(lambda step=step, runs=runs: step(x_all[:runs], y_all[:runs]), args.steps) / runs
            )
        for key, (product, gemm_flops) in gemms.items():
            gemm_times[key].append(_seconds(product, max(3, int(2e8 / gemm_flops))))
    per_step = {label: statistics.median(t) for label, t in times.items()}
    work = {
        label: counted(step, x_all[:runs], y_all[:runs])
        for label, (step, runs) in variants.items()
        if "compiled" not in label
    }
    profiles = {}
    if args.profile:
        for label in (AUTOGRAD_ROW, "fp32, lookup step"):
            profiles[label] = profile_table(variants[label][0], x_all[:1], y_all[:1])
    rates: dict[str, dict[str, float]] = {}
    for (precision, shape), t in gemm_times.items():
        rates.setdefault(precision, {})[shape] = gemms[(precision, shape)][1] / statistics.median(t) / 1e9
    return {
        "config": name,
        "d_model": cfg.model.d_model,
        "d_mlp": cfg.model.d_mlp,
        "batch": cfg.batch_size,
        "gflop_per_step": flops / 1e9,
        "ms_per_step": {k: v * 1e3 for k, v in per_step.items()},
        "gflops": {k: flops / v / 1e9 for k, v in per_step.items()},
        "own_gflop_per_step": {k: w[0] / variants[k][1] / 1e9 for k, w in work.items()},
        "saved_mb_per_step": {k: w[1] / variants[k][1] / 2**20 for k, w in work.items()},
        "profiles": profiles,
        "first_call_s": warm,
        "gemm_gflops": rates,
        "loss_abs_diff": loss_diff,
        "grad_max_rel_diff": grad_diff,
    }


def main(argv: list[str]) -> int:
    """Run the benchmark; 0 when the steps agree with the baseline and data generation meets its target."""
    args = _parser().parse_args(argv)
    if args.quick:
        args.steps, args.rounds = 1, 2
    bf16 = native_bf16("cpu")
    configs = {"paper": PAPER_RUN, "quarter": QUARTER_RUN}
    with deterministic():
        results = [bench_config(name, cfg, args, bf16) for name, cfg in configs.items()]

    task = Task()
    rng = np.random.default_rng(1)
    loop_x, loop_y = task.sample_loop(512, rng)
    same_rules = bool(
        ((loop_x[:, 12] == task.cfg.plus) & (loop_x[:, 15] == task.cfg.eq)).all() and loop_y.max() < task.cfg.modulus
    )
    t_vec = statistics.median(_seconds(lambda: task.sample(512, rng), 1) for _ in range(max(args.rounds, 3)))
    t_loop = statistics.median(_seconds(lambda: task.sample_loop(512, rng), 1) for _ in range(max(args.rounds, 3)))
    data_speedup = t_loop / t_vec

    print(f"assign-add training step, one thread, deterministic kernels; medians of {args.rounds} interleaved rounds")
    cpu = cpu_description()
    flags = ", ".join(f"{f} {'yes' if on else 'no'}" for f, on in cpu["flags"].items())
    print(f"  CPU: {cpu['model']} ({flags})")
    print(
        f"  native bf16 on this CPU: {'yes' if bf16 else 'no (bf16 rows skipped: emulated bf16 is slower than fp32)'}"
    )
    for res in results:
        print(
            f"\n  {res['config']} configuration: d_model {res['d_model']}, d_mlp {res['d_mlp']}, batch {res['batch']}, "
            f"{res['gflop_per_step']:.2f} GFLOP a step"
        )
        rate = gemm_rate(res["gemm_gflops"])
        for precision, r in res["gemm_gflops"].items():
            shapes = ", ".join(f"{s} {g:.0f}" for s, g in r.items())
            print(f"    GEMM rate {precision} (same rounds): {shapes} GFLOP/s; median {rate[precision]:.0f}")
        base = next(iter(res["ms_per_step"].values()))
        print(
            f"    {'step':42s} {'ms':>8s} {'own GFLOP':>9s} {'own GFLOP/s':>11s} {'of GEMM':>7s} {'saved MB':>8s}  vs baseline"
        )
        for label, ms in res["ms_per_step"].items():
            precision = "bf16" if label.startswith("bf16") else "fp32"
            own = res["own_gflop_per_step"].get(label)
            saved = res["saved_mb_per_step"].get(label)
            work = f"{own:9.3f} {own / ms * 1e3:11.0f} {own / ms * 1e3 / rate[precision]:7.0%}" if own else " " * 29
            kept = f"{saved:8.1f}" if saved is not None else " " * 8
            compile_note = f", first call {res['first_call_s'][label]:.0f} s" if "compiled" in label else ""
            print(f"    {label:42s} {ms:8.1f} {work} {kept}  x{base / ms:4.2f}{compile_note}")
        floor = res["own_gflop_per_step"]["fp32, lookup step"] / rate["fp32"] * 1e3
        print(
            f"    the lookup step's own products at the median fp32 GEMM rate: {floor:.1f} ms (its floor, before any "
            "other operation)"
        )
        print(
            f"    the lookup step against the hooked model: |loss diff| {res['loss_abs_diff']:.1e}, "
            f"largest relative gradient difference {res['grad_max_rel_diff']:.1e}"
        )
        for label, table in res["profiles"].items():
            print(f"\n    profile, {label} (three steps):\n{table}")
    paper = results[0]["ms_per_step"]
    speedup = paper["fp32, direct products (baseline)"] / paper["fp32, lookup step"]
    over_autograd = paper[AUTOGRAD_ROW] / paper["fp32, lookup step"]
    rate = gemm_rate(results[0]["gemm_gflops"])
    print(
        f"\n  paper configuration: the fp32 lookup step x{speedup:.2f} over the baseline (target x{args.train_target}), "
        f"x{over_autograd:.2f} over the lookups with autograd's backward (target x{args.autograd_target}); "
        f"the bf16 GEMM rate is x{rate.get('bf16', rate['fp32']) / rate['fp32']:.2f} the fp32 one (medians over shapes)"
    )
    print(f"  data, vectorised {t_vec * 1e3:.2f} ms vs per-sequence loop {t_loop * 1e3:.2f} ms: x{data_speedup:.1f}")
    agree = all(r["loss_abs_diff"] < 1e-5 and r["grad_max_rel_diff"] < 1e-3 for r in results)
    ok = agree and same_rules and data_speedup >= args.data_target
    print(
        json.dumps(
            {
                "benchmark": "assign-add",
                "cpu": cpu,
                "native_bf16": bf16,
                "configs": results,
                "paper_speedup": speedup,
                "paper_speedup_over_autograd": over_autograd,
                "autograd_target": args.autograd_target,
                "train_target": args.train_target,
                "train_target_met": speedup >= args.train_target,
                "data_speedup": data_speedup,
                "data_target": args.data_target,
                "agree": agree,
                "ok": ok,
            }
        )
    )
    return 0 if ok else 1
