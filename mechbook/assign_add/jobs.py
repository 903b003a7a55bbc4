"""Chapter 8's seeds and chapter 11's sweep points as jobs on a cluster or on this machine
(``python -m mechbook sweep``; book/appendix/reproducing.md).

One job trains one run (:func:`mechbook.assign_add.run_cache.train_job`) and writes it into that
run's own entry of the cache the chapters read, so with ``MECHBOOK_CACHE`` on a shared filesystem
a chapter finds the runs the jobs trained as if it had trained them itself. The jobs go through
`submitit <https://github.com/facebookincubator/submitit>`_: a Slurm job array whose concurrent
tasks are capped (``array_parallelism``), or the same jobs as local subprocesses. Nothing here
schedules: :func:`plan` lists the jobs and which are cached, :func:`submit` hands the missing
ones to submitit, :func:`follow` reports them as they finish.

Seeds: a chapter's own runs come first (chapter 11: every sweep point at its profile's seeds,
``SWEEPS[profile].seeds``, or the run's own seed where that is None;
chapter 8: the seeds of ``SEED_RUNS[profile]``), then seeds 0, 1, 2, ... (each setting ``seed``
and ``model.seed``, as :func:`~mechbook.assign_add.seeds.seed_configs` does) until each run has
``seeds`` of them. Chapter 11 with the knob ``seed=k`` (what ``python -m mechbook spread``
injects) reads the seed-k runs of every point.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mechbook.assign_add.config import TrainConfig
from mechbook.assign_add.run_cache import is_cached, train_job
from mechbook.assign_add.runs import SEED_RUNS, SWEEPS
from mechbook.assign_add.seeds import seed_configs
from mechbook.assign_add.sweeps import point_config
from mechbook.assign_add.train import train_stacked
from mechbook.progress import progress
from mechbook.validation import at_least, check_fields

CHAPTERS = (8, 11)
"""The chapters whose runs can be trained as jobs."""


@dataclass(frozen=True)
class Job:
    """One run to train: ``name`` says which (chapter, point, seed), ``keep`` whether it keeps
    checkpoints (chapter 8's runs do), ``cached`` whether its entry is already there."""

    name: str
    cfg: TrainConfig
    keep: bool
    cached: bool


@dataclass(frozen=True)
class Plan:
    """The jobs of one chapter in one profile, on ``device`` (part of every run's cache key)."""

    profile: str
    chapter: int
    device: str
    jobs: tuple[Job, ...]

    @property
    def missing(self) -> list[Job]:
        """The jobs whose runs are not cached yet (what a submission sends)."""
        return [j for j in self.jobs if not j.cached]


def run_seeds(own: Sequence[int], seeds: int) -> list[int]:
    """The chapter's ``own`` seeds, then 0, 1, 2, ... (skipping those already there) until there
    are ``seeds`` of them (never fewer than ``own``)."""
    if seeds < 1:
        raise ValueError(f"--seeds must be at least 1 (the chapter's own runs), got {seeds}")
    out = list(dict.fromkeys(own))
    k = 0
    while len(out) < seeds:
        if k not in out:
            out.append(k)
        k += 1
    return out


def chapter_runs(profile: str, chapter: int, seeds: int) -> list[tuple[str, TrainConfig, bool]]:
    """``(name, config, keep)`` of every run ``chapter`` (8 or 11) reads in ``profile``, with
    ``seeds`` seeds per run (:func:`run_seeds`)."""
    if chapter == 11:
        sweeps = SWEEPS[profile]
        out = []
        for knob, base, values in (("f", sweeps.f_train, sweeps.f_values), ("r", sweeps.r_train, sweeps.r_values)):
            for seed in run_seeds(list(sweeps.seeds or (base.seed,)), seeds):
                for value in values:
                    (cfg,) = seed_configs(point_config(base, knob, value), [seed])
                    out.append((f"ch11 {knob}={value:g} seed {seed}", cfg, False))
        return out
    if chapter == 8:
        runs = SEED_RUNS[profile]
        chosen = run_seeds(runs.seeds, seeds)
        return [(f"ch08 seed {s}", c, True) for s, c in zip(chosen, seed_configs(runs.train, chosen))]
    raise ValueError(f"--chapter must be one of {CHAPTERS} (8: the seed runs, 11: the f and r sweeps), got {chapter}")


def plan(profile: str, chapter: int, seeds: int, device: str) -> Plan:
    """The jobs of ``chapter`` in ``profile`` on ``device``, each marked cached or not."""
    jobs = tuple(Job(n, c, k, is_cached(c, device, k)) for n, c, k in chapter_runs(profile, chapter, seeds))
    return Plan(profile, chapter, device, jobs)


def step_rate(cfg: TrainConfig, device: str, steps: int = 12) -> float:
    """Training steps a second of ``cfg``'s run on ``device``, measured here over ``steps`` steps
    of a stack of one (the first step, a warm-up, and the final evaluation are left out; batches
    are drawn before the timed steps, so the rate counts neither evaluations nor batch drawing)."""
    if steps < 3:
        raise ValueError(f"steps must be at least 3 (one warm-up, one timed, one evaluated), got {steps}")
    short = dataclasses.replace(cfg, steps=steps, eval_every=steps, keep_every=steps, resume_every=steps)
    stamps: list[float] = []
    train_stacked(
        [short], device, workers=1, desc="measuring the step rate", on_step=lambda _: stamps.append(time.perf_counter())
    )
    return (steps - 2) / (stamps[-2] - stamps[0])


@dataclass(frozen=True)
class Cost:
    """The estimated device hours of a plan's missing jobs: one job's hours per step rate, summed.
    ``longest`` is the longest job's hours; ``rates`` maps each run shape measured (``d_model``,
    ``batch``) to its steps a second."""

    hours: float
    longest: float
    rates: dict[tuple[int, int], float]
    measured_on: str


def estimate(jobs: Sequence[Job], device: str, measure_on: str) -> Cost:
    """The hours ``jobs`` take on ``device`` from the step rate :func:`step_rate` measures here on
    ``measure_on`` (``device`` when this machine has it), once per run shape."""
    rates: dict[tuple[int, int], float] = {}
    each = []
    for job in jobs:
        shape = (job.cfg.model.d_model, job.cfg.batch_size)
        if shape not in rates:
            rates[shape] = step_rate(job.cfg, measure_on)
        each.append(job.cfg.steps / rates[shape] / 3600)
    return Cost(sum(each), max(each, default=0.0), rates, measure_on)


@dataclass(frozen=True)
class Resources:
    """What each job asks of the executor: ``partition`` (Slurm), ``gpus_per_job``,
    ``max_parallel`` (jobs at once: Slurm's array cap; locally, the jobs run in waves of this
    many), ``timeout_min`` (a job's time limit in minutes)."""

    partition: str | None = None
    gpus_per_job: int = 0
    max_parallel: int = 8
    timeout_min: int = 60

    def __post_init__(self) -> None:
        check_fields(
            self,
            gpus_per_job=at_least(0, "--gpus-per-job; 0 for CPU jobs"),
            max_parallel=at_least(1, "--max-parallel"),
            timeout_min=at_least(1, "--timeout-min"),
        )


def slurm_parameters(p: Plan, res: Resources, cache: Path) -> dict:
    """The parameters of :class:`submitit.SlurmExecutor` for ``p``'s job array (also what
    :func:`sbatch_script` renders)."""
    params: dict = {
        "job_name": f"mechbook-{p.profile}-ch{p.chapter:02d}",
        "time": res.timeout_min,
        "cpus_per_task": 1,
        "array_parallelism": res.max_parallel,
        "setup": [f"export MECHBOOK_CACHE={shlex.quote(str(cache))}"],
    }
    if res.partition:
        params["partition"] = res.partition
    if res.gpus_per_job:
        params["gpus_per_node"] = res.gpus_per_job
    return params


def submit_command(folder: Path) -> str:
    """The command each submitit job runs (the one :class:`submitit.SlurmExecutor` writes)."""
    return f"{shlex.quote(sys.executable)} -u -m submitit.core._submit {shlex.quote(str(folder))}"


def sbatch_script(p: Plan, res: Resources, cache: Path, folder: Path) -> str:
    """The sbatch script submitit writes for the array of ``p``'s missing jobs (rendered by
    submitit's own writer, so ``--dry-run`` shows what would be submitted)."""
    from submitit.slurm.slurm import _make_sbatch_string

    n = len(p.missing)
    return _make_sbatch_string(
        command=submit_command(folder), folder=folder, map_count=max(n, 1), **slurm_parameters(p, res, cache)
    )


@dataclass(frozen=True)
class Failure:
    """A job that did not write its run: its name, why (submitit's error, first line) and log."""

    name: str
    reason: str
    log: Path


def executor_for(kind: str, p: Plan, res: Resources, cache: Path, folder: Path):
    """The submitit executor: :class:`submitit.SlurmExecutor` with :func:`slurm_parameters`
    (``kind="slurm"``) or :class:`submitit.LocalExecutor` (``"local"``)."""
    import submitit

    if kind == "slurm":
        ex = submitit.SlurmExecutor(folder=folder)
        ex.update_parameters(**slurm_parameters(p, res, cache))
    elif kind == "local":
        ex = submitit.LocalExecutor(folder=folder)
        ex.update_parameters(timeout_min=res.timeout_min, gpus_per_node=res.gpus_per_job)
    else:
        raise ValueError(f"--executor must be 'slurm' or 'local', got {kind!r}")
    return ex


def run_jobs(p: Plan, res: Resources, kind: str, cache: Path, folder: Path, poll_s: float = 0.5) -> list[Failure]:
    """Submit ``p``'s missing jobs through submitit and wait for them, one line as each finishes
    and a bar of jobs done; returns the jobs that failed, with their logs. Slurm gets them as one
    array (at most ``res.max_parallel`` running at once, enforced by Slurm); the local executor,
    which has no cap of its own, gets them in waves of ``res.max_parallel``."""
    ex = executor_for(kind, p, res, cache, folder)
    jobs = p.missing
    size = len(jobs) if kind == "slurm" else res.max_parallel
    failures: list[Failure] = []
    bar = progress(total=len(jobs), desc="sweep jobs", unit="job")
    try:
        for start in range(0, len(jobs), size):
            wave = jobs[start : start + size]
            handles = ex.map_array(train_job, [j.cfg for j in wave], [p.device] * len(wave), [j.keep for j in wave])
            print(f"submitted {len(wave)} job(s) ({kind}), logs in {folder}", flush=True)
            pending = list(zip(wave, handles))
            while pending:
                for job, handle in [q for q in pending if q[1].done()]:
                    pending.remove((job, handle))
                    error = handle.exception()
                    if error is None:
                        print(f"done    {job.name} (job {handle.job_id})", flush=True)
                    else:
                        text = str(error).strip()
                        reason = text.splitlines()[0] if text else type(error).__name__
                        failures.append(Failure(job.name, reason, Path(handle.paths.stderr)))
                        print(f"FAILED  {job.name} (job {handle.job_id})", flush=True)
                    bar.update(1)
                if pending:
                    time.sleep(poll_s)
    finally:
        bar.close()
    return failures


def describe(p: Plan, cost: Cost | None, gpus_per_job: int) -> str:
    """The plan in words: each job and whether it is cached, then the count and the cost."""
    lines = [f"{'cached ' if j.cached else 'to run '} {j.name}" for j in p.jobs]
    n = len(p.missing)
    lines.append(
        f"chapter {p.chapter}, profile {p.profile}, device {p.device}: {len(p.jobs)} runs, "
        f"{len(p.jobs) - n} cached, {n} to submit"
    )
    if cost is not None and n:
        unit = "GPU" if gpus_per_job else "CPU"
        total = cost.hours * max(gpus_per_job, 1)
        rates = ", ".join(f"d_model {d}, batch {b}: {r:.1f} steps/s" for (d, b), r in cost.rates.items())
        lines.append(
            f"estimated {total:.2f} {unit} hours ({rates}, measured here on {cost.measured_on} over a few "
            "training steps; evaluations and batch drawing not counted)"
        )
    return "\n".join(lines)


def sweep_command(
    profile: str,
    chapter: int,
    seeds: int,
    kind: str,
    res: Resources,
    dry_run: bool = False,
    folder: Path | None = None,
) -> int:
    """``python -m mechbook sweep``: print the plan and its cost; with ``dry_run`` the submission
    script too, submitting nothing; else run the missing jobs and name each failed one with its
    log. Exit status 1 when a job failed."""
    import os

    from mechbook.cache import cache_root
    from mechbook.device import default_device

    if kind not in ("slurm", "local"):
        raise ValueError(f"--executor must be 'slurm' or 'local', got {kind!r}")
    cache = cache_root().resolve()
    os.environ["MECHBOOK_CACHE"] = str(cache)  # the jobs inherit it (a relative path would move with their cwd)
    folder = (folder or cache / "jobs" / f"{profile}-ch{chapter:02d}").resolve()
    device = "cuda" if res.gpus_per_job else "cpu"
    p = plan(profile, chapter, seeds, device)
    here = default_device()
    cost = estimate(p.missing, device, device if here.startswith(device) else "cpu") if p.missing else None
    print(describe(p, cost, res.gpus_per_job), flush=True)
    if cost is not None and cost.longest * 60 > res.timeout_min:
        print(
            f"warning: the longest job is estimated at {cost.longest * 60:.0f} min, over --timeout-min "
            f"{res.timeout_min}: raise it, or the jobs will be stopped before they finish",
            flush=True,
        )
    if dry_run:
        if kind == "slurm":
            print(f"\nsbatch script of the array ({len(p.missing)} jobs):\n")
            print(sbatch_script(p, res, cache, folder))
        else:
            print(f"\neach job runs as a local subprocess: {submit_command(folder)}")
        print("dry run: nothing submitted")
        return 0
    if not p.missing:
        print("every run is cached: nothing to submit")
        return 0
    failures = run_jobs(p, res, kind, cache, folder)
    done = len(p.missing) - len(failures)
    print(f"{done} of {len(p.missing)} job(s) done, {len(failures)} failed")
    for f in failures:
        print(f"FAILED {f.name}: {f.reason}; log: {f.log}", file=sys.stderr)
    if failures:
        print("run the same command again to submit only the runs still missing", file=sys.stderr)
    return 1 if failures else 0
