"""The seed spread of the chapters' records: ``python -m mechbook spread --profile smoke --seeds 5``.

A chapter whose numbers depend on randomness declares a top-level ``seed`` knob in its
parameters cell; it is executed once per seed ``0 .. n-1`` with ``seed=k`` injected. A chapter
without that knob is deterministic and is executed once. Each run goes through the executor
(:func:`mechbook.book.run.execute_chapter`, cached per seed) into
``_build/spread/seed-<k>/<profile>/``. What the records took over the seeds is written beside
the thresholds, ``book/thresholds/<stem>.spread.yml``:

.. code-block:: yaml

    smoke:
      date: '2026-12-01'
      git: 688666f-dirty
      seeds: [0, 1, 2, 3, 4]     # [null] for a deterministic chapter
      records:
        final_accuracy: {min: 0.97, max: 0.99, values: [...], seeds: [0, 1, 2, 3, 4]}

:func:`mechbook.book.checks.check_spread` then tells which bound of ``<stem>.yml`` sits inside the measured spread
(a bound that some seed's value does not meet), the defect a flaky chapter test comes from.
"""

from __future__ import annotations

import dataclasses
import datetime
import subprocess
from pathlib import Path
from typing import Any

import yaml

from mechbook.book.checks import load_spread, spread_path
from mechbook.book.config import ExecuteConfig
from mechbook.book.environment import make_paths_absolute
from mechbook.book.relay import Relay
from mechbook.book.run import check_knobs, digest_memo, execute_chapter
from mechbook.book.toc import select, toc_notebooks
from mechbook.lifeline import stop_kernels_on_signals
from mechbook.records import read_records

SEED_KNOB = "seed"


def seeded(notebook: Path) -> bool:
    """True when the notebook's parameters cell declares the ``seed`` knob."""
    import papermill

    return SEED_KNOB in papermill.inspect_notebook(str(notebook))


def summarise(by_seed: dict[int | None, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{record: {min, max, values, seeds}}`` over the runs ``{seed: records}`` (min and max
    for numeric records only; values in the order of the seeds)."""
    names = sorted({name for records in by_seed.values() for name in records})
    out = {}
    for name in names:
        seeds = [s for s, records in by_seed.items() if name in records]
        values = [by_seed[s][name] for s in seeds]
        entry: dict[str, Any] = {}
        numeric = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if numeric and len(numeric) == len(values):
            entry = {"min": min(numeric), "max": max(numeric)}
        out[name] = {**entry, "values": values, "seeds": seeds}
    return out


def git_describe(root: Path) -> str:
    """``git describe --always --dirty`` of ``root``; ``unknown`` outside a git checkout."""
    try:
        done = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        return done.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def write_spread(
    stem: str,
    profile: str,
    by_seed: dict[int | None, dict[str, Any]],
    root: Path,
    failed: list[int | None],
) -> Path:
    """Write (merge, for ``profile``) the spread of one chapter's records."""
    path = spread_path(stem, root)
    table = load_spread(stem, root)
    table[profile] = {
        "date": datetime.date.today().isoformat(),
        "git": git_describe(root),
        "seeds": list(by_seed),
        "failed_seeds": failed,
        "records": summarise(by_seed),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        f"# Records of {stem} over seeds, measured by `python -m mechbook spread`; the bounds in "
        f"{stem}.yml must admit every value here.\n"
    )
    text = yaml.safe_dump(table, sort_keys=True, default_flow_style=None, width=100)
    path.write_text(header + text, encoding="utf-8")
    return path


def spread_book(cfg: ExecuteConfig, seeds: int) -> tuple[list[Path], list[str]]:
    """Execute each chosen chapter once per seed (once when it has no ``seed`` knob), write its
    spread file, and return ``(spread files written, failed runs)``. SIGTERM and SIGINT take the
    kernels down (:func:`mechbook.lifeline.stop_kernels_on_signals`)."""
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise SystemExit(f"--seeds must be a whole number of at least 1, got {seeds!r}")
    if SEED_KNOB in dict(cfg.knobs):
        raise SystemExit(f"--knob {SEED_KNOB}=... is refused: spread sets the seeds itself; use --seeds N")
    with stop_kernels_on_signals():
        return _spread(cfg, seeds)


def _spread(cfg: ExecuteConfig, seeds: int) -> tuple[list[Path], list[str]]:
    chosen = select(toc_notebooks(cfg.root), cfg.only)
    make_paths_absolute()
    memo = digest_memo(cfg.root)
    written, failures = [], []
    for i, source in enumerate(chosen, 1):
        runs: list[int | None] = list(range(seeds)) if seeded(cfg.root / source) else [None]
        by_seed: dict[int | None, dict[str, Any]] = {}
        failed = []
        for seed in runs:
            knobs = dict(cfg.knobs) | ({} if seed is None else {SEED_KNOB: seed})
            run_cfg = dataclasses.replace(
                cfg,
                knobs=tuple(knobs.items()),
                out_subdir=f"spread/seed-{'none' if seed is None else seed}",
            )
            check_knobs(cfg.root / source, run_cfg.parameters())
            tag = f"[{i}/{len(chosen)}] {source} ({cfg.profile}, seed {seed if seed is not None else '-'})"
            print(f"{tag}: running", flush=True)
            with Relay(f"[{i}/{len(chosen)}] {source.stem} seed {seed}") as relay:
                result = execute_chapter(source, run_cfg, memo, progress_file=relay.path, notices_file=relay.notices)
            print(
                f"{tag}: {(result.failure and 'FAILED at ' + result.failure) or result.status} "
                f"({result.seconds:.1f} s)",
                flush=True,
            )
            if result.failure:
                failed.append(seed)
                failures.append(f"{source} seed {seed}: {result.failure}")
            else:
                by_seed[seed] = read_records(result.output)
        if by_seed:
            path = write_spread(source.stem, cfg.profile, by_seed, cfg.root, failed)
            written.append(path)
            print(f"spread: {path}", flush=True)
    return written, failures
