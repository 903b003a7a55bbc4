"""Training the Assign-and-Add model: AdamW, nine evaluation pools, checkpoints, resume, cache.

Every run's configuration per profile lives in :mod:`mechbook.assign_add.runs`; a run trained
alone is cached by :func:`load_or_train`. The loop draws a batch of rows with replacement, lays out fresh contexts,
and minimises the cross-entropy of the logits at '=' (position 15) over the N residues. Every
``eval_every`` steps it scores the nine pools (fixed sequences, so the curves move only when the
model does) and keeps a float16 copy of the weights; at the end it keeps those every
``keep_every`` steps and, densely, those where some pool moved by at least ``keep_change`` since
the previous or before the next evaluation, so the phase transitions are resolved to one eval.

Every ``resume_every`` steps the model, optimizer and data-RNG states are written atomically to a
resume folder; an interrupted run continues from there and ends with bit-identical weights.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from mechbook.assign_add.model import AssignAddModel, ModelConfig
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
from mechbook.determinism import deterministic
from mechbook.device import default_device
from mechbook.progress import progress

POOL_SHORT = {
    "0var_train": "0t",
    "0var_heldout": "0h",
    "1var_train": "1t",
    "1var_heldout": "1h",
    "1var_misplaced": "1m",
    "2var_train": "2t",
    "2var_heldout": "2h",
    "2var_misplaced_one": "2m1",
    "2var_misplaced_both": "2m2",
}


@dataclass(frozen=True)
class TrainConfig:
    """One training run: AdamW on batches of ``batch_size`` training rows."""

    steps: int = 40_000
    batch_size: int = 512
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.02
    seed: int = 42
    eval_every: int = 100
    eval_per_pool: int = 512
    eval_seed: int = 1
    keep_every: int = 500
    keep_change: float = 0.05
    resume_every: int = 500
    task: TaskConfig = field(default_factory=TaskConfig)
    model: ModelConfig = field(default_factory=ModelConfig)

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "eval_every", "eval_per_pool", "keep_every", "resume_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.resume_every % self.eval_every or self.keep_every % self.eval_every:
            raise ValueError(
                f"resume_every ({self.resume_every}) and keep_every ({self.keep_every}) must be multiples "
                f"of eval_every ({self.eval_every})"
            )
        t, m = self.task, self.model
        expected = {"d_vocab": t.d_vocab, "d_out": t.modulus, "n_ctx": t.seq_len}
        wrong = {k: (getattr(m, k), v) for k, v in expected.items() if getattr(m, k) != v}
        if wrong:
            fix = ", ".join(f"{k}={v[1]}" for k, v in wrong.items())
            raise ValueError(f"the model does not fit the task ({wrong} as model vs task): use ModelConfig({fix})")


@dataclass
class TrainResult:
    """A finished run: ``history`` has one row per (step, pool) with ``accuracy`` and ``loss``
    (pool ``"train"`` = mean over the training batches since the previous evaluation);
    ``checkpoints`` maps steps to float16 state dicts; ``final_state`` is float32."""

    history: pd.DataFrame
    checkpoints: dict[int, dict[str, torch.Tensor]]
    final_state: dict[str, torch.Tensor]
    config: TrainConfig
    train_seconds: float

    def accuracy(self) -> pd.DataFrame:
        """Accuracy as a (step x pool) table."""
        return self.history.pivot(index="step", columns="pool", values="accuracy")


def _compact(state: dict[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", dtype).clone() for k, v in state.items()}


@torch.no_grad()
def evaluate(
    model: AssignAddModel, pools: dict[str, tuple[torch.Tensor, torch.Tensor]]
) -> dict[str, tuple[float, float]]:
    """``{pool: (accuracy, mean cross-entropy)}`` of the logits at '=' (chapter 8)."""
    out = {}
    for name, (tokens, labels) in pools.items():
        logits = model(tokens, last_only=True)
        out[name] = (float((logits.argmax(-1) == labels).float().mean()), float(F.cross_entropy(logits, labels)))
    return out


def keep_steps(history: pd.DataFrame, cfg: TrainConfig) -> list[int]:
    """Steps whose checkpoints are kept: multiples of ``keep_every``, the last, and each eval step
    where some pool's accuracy moved by >= ``keep_change`` from the previous eval or to the next."""
    acc = history[history.pool != "train"].pivot(index="step", columns="pool", values="accuracy").sort_index()
    moved = acc.diff().abs().max(axis=1).fillna(0) >= cfg.keep_change
    dense = moved | moved.shift(-1, fill_value=False)
    steps = acc.index.to_numpy()
    keep = (steps % cfg.keep_every == 0) | (steps == steps.max()) | dense.to_numpy()
    return [int(s) for s in steps[keep]]


@deterministic()
def train(cfg: TrainConfig, resume_dir: str | Path | None = None, device: str | None = None) -> TrainResult:
    """Train a model for ``cfg.steps`` steps and return its :class:`TrainResult`.

    With ``resume_dir``, the state is saved there every ``cfg.resume_every`` steps and a run that
    finds a saved state continues from it (the weights at the end are the same as uninterrupted).
    """
    device = device or default_device()
    task = Task(cfg.task)
    model = AssignAddModel(cfg.model).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay)
    rng = np.random.default_rng(cfg.seed)
    pools = {
        k: (torch.as_tensor(x, device=device), torch.as_tensor(y, device=device))
        for k, (x, y) in task.eval_pools(cfg.eval_per_pool, cfg.eval_seed).items()
    }
    rows: list[dict] = []
    checkpoints: dict[int, dict[str, torch.Tensor]] = {}
    step, elapsed = 0, 0.0
    resume = Path(resume_dir) if resume_dir is not None else None
    tag = fingerprint(cfg)
    if resume is not None:
        data = load_verified(resume / "state.pt")
        state = torch_loads(data) if data is not None else None
        if state is not None and state["config"] != tag:
            raise ValueError(f"{resume} holds the state of another TrainConfig; delete it or pass another resume_dir")
        saved = {s: load_verified(resume / f"ckpt_{s}.pt") for s in (state or {}).get("checkpoint_steps", [])}
        if state is not None and all(v is not None for v in saved.values()):
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optim"])
            rng.bit_generator.state = state["rng"]
            step, rows, elapsed = state["step"], state["history"], state["elapsed"]
            checkpoints = {s: torch_loads(v) for s, v in saved.items()}
        elif state is not None:
            warnings.warn(f"{resume} misses some checkpoints of its saved state; training from step 0", stacklevel=2)

    def log_eval(train_acc: float, train_loss: float) -> None:
        for name, (acc, loss) in evaluate(model, pools).items():
            rows.append({"step": step, "pool": name, "accuracy": acc, "loss": loss})
        if step > 0:
            rows.append({"step": step, "pool": "train", "accuracy": train_acc, "loss": train_loss})
        checkpoints[step] = _compact(model.state_dict(), torch.float16)
        if resume is not None:
            save_verified(resume / f"ckpt_{step}.pt", torch_dumps(checkpoints[step]))

    if step == 0:
        log_eval(float("nan"), float("nan"))
    bar = progress(total=cfg.steps, initial=step, desc="training")
    acc_sum = loss_sum = 0.0
    start = time.perf_counter()
    while step < cfg.steps:
        x, y = task.sample(cfg.batch_size, rng)
        x, y = torch.as_tensor(x, device=device), torch.as_tensor(y, device=device)
        logits = model(x, last_only=True)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        loss_sum += float(loss.detach())
        acc_sum += float((logits.detach().argmax(-1) == y).float().mean())
        if step % cfg.eval_every == 0 or step == cfg.steps:
            n = (step - 1) % cfg.eval_every + 1
            log_eval(acc_sum / n, loss_sum / n)
            acc_sum = loss_sum = 0.0
            bar.set_postfix(
                {POOL_SHORT[r["pool"]]: f"{r['accuracy']:.2f}" for r in rows[-10:] if r["pool"] in POOL_SHORT}
            )
        if resume is not None and step % cfg.resume_every == 0 and step < cfg.steps:
            state = {
                "config": tag,
                "step": step,
                "model": model.state_dict(),
                "optim": opt.state_dict(),
                "rng": rng.bit_generator.state,
                "history": rows,
                "checkpoint_steps": sorted(checkpoints),
                "elapsed": elapsed + time.perf_counter() - start,
            }
            save_verified(resume / "state.pt", torch_dumps(state))
        bar.update(1)
    bar.close()
    history = pd.DataFrame(rows)
    keep = keep_steps(history, cfg)
    return TrainResult(
        history=history,
        checkpoints={s: checkpoints[s] for s in keep},
        final_state=_compact(model.state_dict(), torch.float32),
        config=cfg,
        train_seconds=elapsed + time.perf_counter() - start,
    )


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


def load_model(result: TrainResult, step: int | None = None, device: str = "cpu") -> AssignAddModel:
    """The model of ``result`` at checkpoint ``step`` (the final weights if None), in eval mode."""
    if step is None:
        state = result.final_state
    elif step in result.checkpoints:
        state = result.checkpoints[step]
    else:
        near = sorted(result.checkpoints, key=lambda s: abs(s - step))[:5]
        raise KeyError(f"no checkpoint at step {step}; the nearest kept steps are {sorted(near)}")
    model = AssignAddModel(result.config.model)
    model.load_state_dict(state)
    return model.to(device).eval()


def with_overrides(cfg: TrainConfig, **changes) -> TrainConfig:
    """``cfg`` with top-level fields replaced; ``task__x=...`` / ``model__x=...`` reach the nested
    configs (e.g. ``with_overrides(cfg, task__two_var_fraction=0.2)`` for chapter 11's sweeps)."""
    nested: dict[str, dict] = {"task": {}, "model": {}}
    top = {}
    for key, value in changes.items():
        head, _, tail = key.partition("__")
        if tail:
            if head not in nested:
                raise ValueError(f"unknown nested config {head!r} in {key!r}; use task__... or model__...")
            nested[head][tail] = value
        else:
            top[key] = value
    if nested["task"]:
        top["task"] = dataclasses.replace(cfg.task, **nested["task"])
    if nested["model"]:
        top["model"] = dataclasses.replace(cfg.model, **nested["model"])
    return dataclasses.replace(cfg, **top)
