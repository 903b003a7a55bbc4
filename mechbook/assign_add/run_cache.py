"""One cache entry per training run (chapter 8's seeds, chapter 11's sweep points), whether the run
was trained in a stack in this process or alone as a job on another machine.

:func:`load_or_train_runs` looks up each run's own entry (key: its :class:`TrainConfig`, the
device and ``keep``) in the store of :func:`mechbook.cache.cached` under ``$MECHBOOK_CACHE``,
trains only the missing runs, together, through
:func:`~mechbook.assign_add.train.train_groups`, and stores each under its own key.
:func:`train_job` is one job of ``python -m mechbook sweep`` (:mod:`mechbook.assign_add.jobs`):
it trains one run as a stack of one and writes it into the same entry. So when
``MECHBOOK_CACHE`` is a shared filesystem, a chapter finds a run trained by a job elsewhere exactly
as it finds one it trained itself, and a grid stopped half-way trains only what is missing.

Numerics: on a CPU a run's slice of a stack equals the run trained as a stack of one bit for bit
(weights and history; ``tests/unit/assign_add/test_aa_jobs.py`` checks it on a small config, and
``tests/integration/test_aa_stacked_processes.py`` that stacks trained in parallel processes equal stacks trained in
this one), so either way the entry holds the same numbers. On CUDA the batched products of a
wider stack round differently: an entry written by a GPU job holds that run's single-run (stack
of one) numerics, which differ slightly from the same run's slice of an in-process GPU stack; the
device is in the key, so CPU and GPU entries never mix.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

from mechbook.assign_add.config import TrainConfig, TrainResult
from mechbook.assign_add.train import stack_key, train_groups, train_stacked
from mechbook.cache import cached, entry_path
from mechbook.device import default_device

NAMESPACE = "assign_add/run"
"""Where the runs' entries live under the cache root."""


def run_key(cfg: TrainConfig, device: str, keep: bool) -> dict:
    """The key of one run's entry: everything that determines it besides the code."""
    return {"cfg": cfg, "device": device, "keep": keep}


def entry(cfg: TrainConfig, device: str, keep: bool) -> Path:
    """The file that holds the run's entry (what :func:`_cached_run` reads and writes: the code
    part of its key is this module's import closure, which holds the training code)."""
    return entry_path(NAMESPACE, run_key(cfg, device, keep), [__name__])


def is_cached(cfg: TrainConfig, device: str, keep: bool) -> bool:
    """Whether the run's entry and its checksum are on disk (a damaged one is retrained when read)."""
    path = entry(cfg, device, keep)
    return path.exists() and path.with_name(path.name + ".sha256").exists()


def _train_one(cfg: TrainConfig, device: str, keep: bool) -> TrainResult:
    (result,) = train_stacked([cfg], device, workers=1, keep=keep, desc=f"run seed {cfg.seed}")
    return result


def _result(trained: dict[TrainConfig, TrainResult], cfg: TrainConfig, device: str, keep: bool) -> TrainResult:
    """The run of ``cfg``: from ``trained`` when it was just trained in a stack, else trained alone."""
    return trained[cfg] if cfg in trained else _train_one(cfg, device, keep)


def _cached_run(trained: dict[TrainConfig, TrainResult], cfg: TrainConfig, device: str, keep: bool) -> TrainResult:
    """The one place that reads and writes a run's entry (its file is :func:`entry`)."""
    return cached(NAMESPACE, run_key(cfg, device, keep), functools.partial(_result, trained, cfg, device, keep))


def load_or_train_runs(
    cfgs: Sequence[TrainConfig], device: str | None = None, desc: str = "runs", keep: bool = False
) -> list[TrainResult]:
    """The result of every run of ``cfgs``, in order: each from its own cache entry, the missing
    ones trained together (:func:`~mechbook.assign_add.train.train_groups`), one call per set of
    runs that can share a stack (:func:`~mechbook.assign_add.train.stack_key`: chapter 11's f points
    stop at the fit, its r points do not), and stored one entry per run. Chapter 8's seeds
    (``keep=True``: the checkpoints a run trained alone keeps) and chapter 11's sweep points come
    through here."""
    device = device or default_device()
    missing = list(dict.fromkeys(c for c in cfgs if not is_cached(c, device, keep)))
    trained: dict[TrainConfig, TrainResult] = {}
    stackable: dict[tuple, list[TrainConfig]] = {}
    for c in missing:
        stackable.setdefault(stack_key(c), []).append(c)
    for group in stackable.values():
        label = f"{desc} ({len(group)} of {len(cfgs)} runs not cached)"
        trained.update(zip(group, train_groups(group, device, desc=label, keep=keep)))
    return [_cached_run(trained, c, device, keep) for c in cfgs]


def train_job(cfg: TrainConfig, device: str, keep: bool) -> str:
    """One job of ``python -m mechbook sweep``: the run of ``cfg`` trained as a stack of one on
    ``device`` and written into its entry (a run already there is not trained again). Returns the
    entry's path (the job's result stays small; the run itself is read from the cache)."""
    _cached_run({}, cfg, device, keep)
    return str(entry(cfg, device, keep))
