"""Execute the book's notebooks with papermill, reusing a run whose inputs did not change.

Used by ``python -m mechbook execute|build|spread`` (see :mod:`mechbook.__main__`), ``make
book`` and the chapter and site tests.

Each notebook listed in ``_toc.yml`` runs through papermill with ``profile`` (and any knob)
injected into its ``parameters`` cell, in the notebook's own folder, with :data:`KERNEL_ENV`
(no progress bars in the outputs, ``explore`` in its static form), ``MECHBOOK_PROFILE`` and the
paths of the environment made absolute. Papermill writes into ``_build/running/<profile>/``;
the finished notebook is moved into ``_build/executed/<profile>/<same path>`` in one
``os.replace``, so an executed notebook is never half written.

An executed notebook is reused when its cache key is unchanged. The key (:func:`cache_key`) is
the SHA-256 of: the code cells (source and tags), the kernel name, the injected parameters, the
code (docstrings and comments left out, :func:`mechbook.cache.code_fingerprint`) of every
``mechbook`` module the cells' imports reach (:func:`mechbook.cache.module_closure`, chapters,
charts and records included) and of this module and :mod:`mechbook.book.environment`,
``requirements.txt`` and ``requirements.lock`` (:data:`REQUIREMENTS`) and :func:`mechbook.book.environment.key_environment` (the digests of the
data that environment variables choose, device and network variables, torch and numpy
versions). Markdown cells are *not* part of the key: editing prose re-renders the page with the
stored outputs instead of re-running the chapter; rewording a chapter module's prose builder
re-executes that chapter only, and a docstring edit re-executes none. A failed chapter is never
reused, and an executed notebook that cannot be read counts as not executed.

With ``lanes`` > 1 (``make book`` sets one per core), the chapters to run are dealt to that many
``python -m mechbook execute --lane NAME`` processes by their expected cost (:func:`lanes_of`): a
chapter that opens another's runs stays in that chapter's process, after it (:func:`chains`), and
the costliest groups go first, each to the least loaded lane (:func:`schedule`), so that neither
core idles for long while the other has work (chapter 8's seeds on one, Part I and chapter 11 on
the other). The plan prints each lane's timeline; the ETA is that of the longest lane.

On a failing cell papermill stops that chapter and keeps the executed notebook, traceback
included, as the report; the other chapters still run, and the command exits non-zero naming
each failed chapter, its code cell (1-based among the chapter's code cells) and the line of it
the traceback names.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

import nbformat
from IPython.core.inputtransformer2 import TransformerManager

from mechbook.book import costs, environment
from mechbook.book.config import ChapterResult, ExecuteConfig
from mechbook.book.environment import (
    DigestMemo,
    check_inputs,
    key_environment,
    make_paths_absolute,
    patched_environ,
)
from mechbook.book.pages import pages_data
from mechbook.book.relay import NOTICES_ENV, PROGRESS_ENV, Relay, format_seconds
from mechbook.book.toc import select, toc_notebooks
from mechbook.cache import COMPUTED_ENV, code_fingerprint, imports_of, module_digests, sha256_file
from mechbook.lifeline import stop_kernels_on_signals

KERNEL = "python3"
#: Set for every kernel: no progress bars in the outputs, ``explore`` in its static form.
KERNEL_ENV: dict[str, str] = {"MECHBOOK_QUIET": "1", "MECHBOOK_STATIC": "1"}
#: The tag myst-nb honours to leave a cell off the page.
HIDDEN_TAG = "remove-cell"
INJECTED_TAG = "injected-parameters"
#: Arguments of every kernel: its own log stays off the console. It holds transport notes ("Kernel
#: is running over TCP without encryption") and the "KeyboardInterrupt caught in kernel" line that
#: the SIGINT jupyter_client sends before every shutdown can leave; a cell's errors go to the
#: executed notebook and the one failure line, not to this log.
KERNEL_ARGS: tuple[str, ...] = ("--IPKernelApp.log_level=CRITICAL",)


REQUIREMENTS = ("requirements.txt", "requirements.lock")
"""The files that pin the Python environment: the direct pins and the full lock."""


def _cell_imports(source: str, root: Path) -> set[str]:
    """The ``mechbook`` modules a code cell imports (IPython magics and shell lines read as the
    kernel reads them); a cell that is not Python imports nothing: it fails, and a failed chapter
    is never reused."""
    try:
        tree = ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return set()
    return imports_of(tree, root)


def _code_digests(cells: list[str], root: Path) -> dict[str, str]:
    """The code (docstrings and comments left out) of every ``mechbook`` module under ``root``
    that the notebook's code ``cells`` reach through imports, presentation modules included
    (``unkeyed=()``: the notebook's prose, charts and records come from them)."""
    return module_digests(set().union(*(_cell_imports(c, root) for c in cells)), root, unkeyed=())


def _executor_digests() -> dict[str, str]:
    """The code of the executor's modules that start a kernel and shape the notebook it returns
    (this module and :mod:`mechbook.book.environment`), as they run now."""
    return {m.__name__: code_fingerprint(m.__file__) for m in (sys.modules[__name__], environment)}


def digest_memo(root: Path) -> DigestMemo:
    """The memo of data digests kept in ``_build/digests.json`` under ``root``."""
    return DigestMemo(root / "_build" / "digests.json")


def cache_key(notebook: Path, parameters: dict[str, Any], root: Path, memo: DigestMemo | None = None) -> str:
    """SHA-256 of everything that decides a chapter's outputs (see the module docstring).

    Code cells count with their source and tags; markdown and raw cells do not.
    """
    memo = memo or digest_memo(root)
    nb = nbformat.read(notebook, as_version=4)
    code = [[c.source, sorted(c.get("metadata", {}).get("tags", []))] for c in nb.cells if c.cell_type == "code"]
    requirements = {name: sha256_file(root / name) for name in REQUIREMENTS if (root / name).exists()}
    payload = {
        "code": code,
        "kernel": nb.metadata.get("kernelspec", {}).get("name"),
        "parameters": parameters,
        "mechbook": _code_digests([c.source for c in nb.cells if c.cell_type == "code"], root),
        "executor": _executor_digests(),
        "requirements": requirements,
        "env": key_environment(memo),
    }
    memo.save()
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def read_executed(path: Path) -> tuple[nbformat.NotebookNode | None, str | None]:
    """``(notebook, None)``, or ``(None, why)`` when ``path`` is missing or cannot be read as a
    notebook (truncated by a kill or a full disk): such a chapter counts as not executed."""
    if not path.exists():
        return None, f"{path} does not exist"
    try:
        return nbformat.read(path, as_version=4), None
    except Exception as exc:  # NotJSONError, a truncated file, bad encoding
        first = (str(exc).strip().splitlines() or [""])[0][:120]
        return None, f"{path} cannot be read ({type(exc).__name__}: {first})"


def mechbook_meta(nb: nbformat.NotebookNode) -> dict[str, Any]:
    """What the executor stored about a run: cache key, profile, status, seconds, failure."""
    return nb.metadata.get("mechbook", {})


def write_atomic(nb: nbformat.NotebookNode, path: Path) -> None:
    """Write ``nb`` to ``path`` through a temporary file and one ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        nbformat.write(nb, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def hide_parameters(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Tag the chapter's ``parameters`` cell and papermill's injected one ``remove-cell`` (myst-nb
    leaves them off the page, where the chapter's ``ran_with`` note says what ran); in place."""
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if ({"parameters", INJECTED_TAG} & set(tags)) and HIDDEN_TAG not in tags:
            tags.append(HIDDEN_TAG)
    return nb


def check_knobs(notebook: Path, parameters: dict[str, Any]) -> None:
    """Refuse (``ValueError``) parameters that the notebook's ``parameters`` cell does not name,
    before any kernel starts: papermill would only log them and run with the defaults."""
    import papermill

    declared = papermill.inspect_notebook(str(notebook))
    unknown = sorted(set(parameters) - set(declared))
    if unknown:
        raise ValueError(
            f"{notebook}: unknown knob(s) {', '.join(unknown)}; its parameters cell declares "
            f"{', '.join(sorted(declared)) or 'nothing'}"
        )


def refresh_prose(executed: nbformat.NotebookNode, source: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The source notebook's cells with the executed code cells' outputs put back in order.

    Valid when the code cells are unchanged (same cache key): markdown edits show up without
    re-running anything. Papermill's injected-parameters cell is kept after the parameters cell.
    """
    ran = [c for c in executed.cells if c.cell_type == "code" and INJECTED_TAG not in c.metadata.get("tags", [])]
    injected = [c for c in executed.cells if INJECTED_TAG in c.metadata.get("tags", [])]
    merged = nbformat.from_dict(json.loads(json.dumps(executed)))
    cells = []
    code_iter = iter(ran)
    for cell in source.cells:
        if cell.cell_type == "code":
            done = next(code_iter)
            cells.append(nbformat.from_dict({**done, "source": cell.source}))
            if "parameters" in cell.metadata.get("tags", []):
                cells.extend(injected)
        else:
            cells.append(cell)
    merged.cells = cells
    return merged


#: Where an IPython traceback names the cell's own frame: ``Cell In[12], line 3``.
_CELL_FRAME = re.compile(r"Cell In\[\d*\], line (\d+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def failing_line(cell: nbformat.NotebookNode) -> int | None:
    """The 1-based line of ``cell`` its error output's traceback names (the cell's own frame, the
    outermost ``Cell In[..], line N``); None when the cell has no error output or the traceback
    names no line of it (a dead kernel)."""
    for output in cell.get("outputs", []):
        if output.get("output_type") != "error":
            continue
        found = _CELL_FRAME.search(_ANSI.sub("", "\n".join(output.get("traceback", []))))
        if found:
            return int(found.group(1))
    return None


def last_started_cell(nb: nbformat.NotebookNode) -> tuple[int, int | None, str] | None:
    """``(number, failing line, text)`` of the last code cell papermill started, numbered from 1
    among the chapter's own code cells (the injected-parameters cell is not counted): the line its
    traceback names and that line's text, or (no such line: a dead kernel) None and
    the cell's first line. None when no cell started. A cell that raised, timed out or killed its
    kernel is the last one started."""
    found = None
    number = 0
    for cell in nb.cells:
        if cell.cell_type != "code" or INJECTED_TAG in cell.metadata.get("tags", []):
            continue
        number += 1
        if (cell.metadata.get("papermill") or {}).get("start_time"):
            lines = cell.source.splitlines()
            line = failing_line(cell)
            if line is not None and 1 <= line <= len(lines):
                found = (number, line, lines[line - 1].strip()[:80])
            else:
                first = cell.source.strip().splitlines()
                found = (number, None, first[0][:80] if first else "")
    return found


def describe_failure(exc: BaseException | None, nb: nbformat.NotebookNode | None, report: Path) -> str:
    """``code cell N line L ('that line'): Error: first line of its message (report: path)``
    (``code cell N ('first line')`` where the traceback names no line); ``start-up`` when no
    cell ran."""
    cell = last_started_cell(nb) if nb is not None else None
    if cell is None:
        where = "start-up"
    else:
        number, line, text = cell
        where = f"code cell {number}" + (f" line {line}" if line is not None else "") + f" ({text!r})"
    if exc is None:
        what = "stopped (papermill marked the cell failed: a timeout?)"
    else:
        ename = getattr(exc, "ename", None) or type(exc).__name__
        evalue = (str(getattr(exc, "evalue", None) or exc).strip().splitlines() or [""])[0]
        if isinstance(exc, KeyboardInterrupt):
            what = "interrupted (Ctrl-C or a signal)"
        elif type(exc).__name__ == "DeadKernelError":
            what = f"the kernel died ({ename}: {evalue[:200]})"
        else:
            what = f"{ename}: {evalue}".rstrip(": ")
        if ename == "CellTimeoutError":
            what += " (the limit --cell-timeout set: raise --cell-timeout or leave it out for none)"
    return f"{where}: {what} (report: {report})"


def _papermill_failed(nb: nbformat.NotebookNode) -> bool:
    return any((c.metadata.get("papermill") or {}).get("status") == "failed" for c in nb.cells)


def reusable(source: Path, cfg: ExecuteConfig, key: str) -> tuple[nbformat.NotebookNode | None, str | None]:
    """``(executed notebook, None)`` when the chapter's last run is valid for ``key``; else
    ``(None, why not)``, why not being a line for the user when the executed file is unreadable."""
    if cfg.force:
        return None, None
    out = cfg.out_dir / source
    if not out.exists():
        return None, None
    old, problem = read_executed(out)
    if old is None:
        return None, f"{problem}; it counts as not executed"
    meta = mechbook_meta(old)
    if meta.get("cache_key") == key and meta.get("status") == "ok":
        return old, None
    return None, None


def execute_chapter(
    source: Path,
    cfg: ExecuteConfig,
    memo: DigestMemo | None = None,
    progress_file: Path | None = None,
    notices_file: Path | None = None,
) -> ChapterResult:
    """Run one notebook (repo-relative ``source``) with papermill unless its cached run is valid;
    its progress bars write their state to ``progress_file`` and its notices
    (:func:`mechbook.notices.notice`) to ``notices_file`` when given (see
    :mod:`mechbook.book.relay`)."""
    import papermill

    src = cfg.root / source
    out = cfg.out_dir / source
    params = cfg.parameters()
    check_knobs(src, params)
    make_paths_absolute()
    key = cache_key(src, params, cfg.root, memo)
    source_nb = nbformat.read(src, as_version=4)
    old, problem = reusable(source, cfg, key)
    if problem:
        print(f"note: {problem}", flush=True)
    if old is not None:
        write_atomic(hide_parameters(refresh_prose(old, source_nb)), out)
        return ChapterResult(source, out, "cached", 0.0)
    running = cfg.running_dir / source
    running.parent.mkdir(parents=True, exist_ok=True)
    running.unlink(missing_ok=True)
    env = {**KERNEL_ENV, "MECHBOOK_PROFILE": cfg.profile}
    if progress_file is not None:
        env[PROGRESS_ENV] = str(progress_file)
    if notices_file is not None:
        env[NOTICES_ENV] = str(notices_file)
    computed_file = running.with_name(running.name + ".computed")
    computed_file.unlink(missing_ok=True)
    env[COMPUTED_ENV] = str(computed_file)
    start = time.perf_counter()
    error: BaseException | None = None
    interrupted = False
    try:
        with patched_environ(env):
            papermill.execute_notebook(
                str(src),
                str(running),
                parameters=params,
                kernel_name=KERNEL,
                cwd=str(src.parent),
                progress_bar=False,
                execution_timeout=cfg.cell_timeout,
                extra_arguments=list(KERNEL_ARGS),
            )
    except KeyboardInterrupt as exc:
        error, interrupted = exc, True
    except Exception as exc:  # papermill's execution error, a dead kernel, a timeout
        error = exc
    seconds = time.perf_counter() - start
    computed = computed_file.exists() and computed_file.stat().st_size > 0
    computed_file.unlink(missing_ok=True)
    done, _ = read_executed(running)
    running.unlink(missing_ok=True)
    failed = error is not None or (done is not None and _papermill_failed(done))
    failure = describe_failure(error, done, out) if failed else None
    if done is None:  # papermill could not even start: keep the source as the report
        done = nbformat.from_dict(json.loads(json.dumps(source_nb)))
    status = "interrupted" if interrupted else ("failed" if failed else "ok")
    hide_parameters(done).metadata["mechbook"] = {
        "cache_key": key,
        "profile": cfg.profile,
        "parameters": params,
        "status": status,
        "seconds": round(seconds, 2),
        "failure": failure,
    }
    write_atomic(done, out)
    if interrupted:
        raise KeyboardInterrupt(f"{source} interrupted at {failure}")
    return ChapterResult(source, out, "failed" if failed else "executed", seconds, failure, computed)


def failures(results: list[ChapterResult]) -> list[str]:
    """One line per failed chapter, naming it and the cell."""
    return [f"{r.source}: {r.failure}" for r in results if r.failure]


def plan(cfg: ExecuteConfig, chosen: list[Path], memo: DigestMemo) -> list[tuple[Path, bool]]:
    """``(chapter, will run)`` for each chosen chapter: False when its executed notebook is
    valid for its cache key and will be reused."""
    out = []
    for source in chosen:
        key = cache_key(cfg.root / source, cfg.parameters(), cfg.root, memo)
        old, _ = reusable(source, cfg, key)
        out.append((source, old is None))
    return out


def chains(chosen: list[Path], opens: dict[str, list[str]]) -> list[list[Path]]:
    """The chosen chapters in groups that must run in one process, each in book order: a chapter
    that opens another's cached results (``pages.json``'s ``opens``: chapter 9 opens chapter 8's
    runs) joins the group of the chapter it opens, and chapters that open the same one share a
    group even when that one is not chosen, so each finds the runs trained instead of training
    them a second time beside another. Groups in the order of their first chapter."""
    group_of: dict[str, int] = {}
    groups: list[list[Path]] = []
    for source in chosen:
        opened = opens.get(source.stem, [])
        known = [group_of[s] for s in opened if s in group_of]
        index = known[0] if known else len(groups)
        if not known:
            groups.append([])
        groups[index].append(source)
        for stem in [source.stem, *opened]:
            group_of.setdefault(stem, index)
    return groups


def schedule(groups: list[list[Path]], seconds: dict[str, float], lanes: int) -> list[list[Path]]:
    """``groups`` (:func:`chains`) dealt to at most ``lanes`` lanes by their expected ``seconds``
    (per stem; 0 where unknown or cached): the costliest group first, each to the lane with the
    least work so far (longest processing time first, within 4/3 of the best split). Each lane
    runs its chapters in book order; lanes without work are left out."""
    order = {source: i for i, source in enumerate(p for g in groups for p in g)}
    work = [0.0] * lanes
    dealt: list[list[Path]] = [[] for _ in range(lanes)]
    for group in sorted(groups, key=lambda g: -sum(seconds.get(p.stem, 0.0) for p in g)):
        lane = min(range(lanes), key=lambda i: (work[i], i))
        dealt[lane] += group
        work[lane] += sum(seconds.get(p.stem, 0.0) for p in group)
    return [sorted(lane, key=order.__getitem__) for lane in dealt if lane]


def lanes_of(
    cfg: ExecuteConfig, chosen: list[Path], seconds: dict[str, float] | None = None
) -> list[tuple[str, list[Path]]]:
    """The chosen chapters dealt to ``cfg.lanes`` processes by their expected ``seconds``
    (:func:`schedule` of :func:`chains`), named ``lane 1``, ``lane 2``, ... when ``cfg.lanes`` > 1
    and more than one group can run at once; otherwise one group of them all."""
    if cfg.lanes > 1 and cfg.lane is None:
        dealt = schedule(chains(chosen, pages_data(cfg.root)["opens"]), seconds or {}, cfg.lanes)
        if len(dealt) > 1:
            return [(f"lane {i}", lane) for i, lane in enumerate(dealt, 1)]
    return [(cfg.lane or "book", chosen)]


@dataclasses.dataclass(frozen=True)
class Estimate:
    """The seconds the plan expects per chapter when it computes its models (``costs``: a cold
    model cache), which of them are the shipped times scaled to this machine (``extrapolated``),
    by how much (``scale``: this machine's calibration against ``reference``'s,
    :mod:`mechbook.book.calibrate`), this machine's figure (``rate``; None when nothing needed
    scaling or the shipped times name no reference machine), and this machine's times of the
    chapters it last ran from a warm model cache (``warm``)."""

    costs: dict[str, float]
    extrapolated: frozenset[str]
    scale: float
    rate: float | None
    reference: dict[str, Any] | None
    warm: dict[str, float] = dataclasses.field(default_factory=dict)

    def seconds(self, stems: list[str]) -> tuple[float, list[str]]:
        """``(seconds, stems of unknown cost)`` for running ``stems``."""
        return sum(self.costs[s] for s in stems if s in self.costs), [s for s in stems if s not in self.costs]


def estimate_plan(cfg: ExecuteConfig, to_run: list[str], rate: float | None = None) -> Estimate:
    """The costs of ``to_run`` (notebook stems) on this machine: its own measured times, else the
    shipped ones scaled by the calibration ratio, timed here (about a second, only when a shipped
    time is needed) unless ``rate`` gives this machine's figure."""
    from mechbook.book.calibrate import calibrate, slowdown

    reference = costs.reference(cfg.root)
    _, shipped_only = costs.scaled_costs(cfg.root, cfg.profile, 1.0)
    scale = 1.0
    if reference is not None and shipped_only & set(to_run):
        rate = calibrate() if rate is None else rate
        scale = slowdown(float(reference["steps_per_s"]), rate)
    else:
        rate = None
    table, extrapolated = costs.scaled_costs(cfg.root, cfg.profile, scale)
    warm = costs.warm_costs(cfg.root, cfg.profile)
    return Estimate(table, frozenset(extrapolated & set(to_run)), scale, rate, reference, warm)


def _extrapolation_line(est: Estimate) -> str | None:
    """What the plan says when some of its times are the shipped ones, not this machine's."""
    if not est.extrapolated:
        return None
    n = len(est.extrapolated)
    if est.rate is None or est.reference is None:
        return (
            f"  extrapolated: {n} chapter time(s) measured on another machine, not scaled "
            "(the shipped costs name no calibration figure)"
        )
    return (
        f"  extrapolated: {n} chapter time(s) measured on {est.reference.get('cpu', 'another machine')}, "
        f"x{est.scale:.2f} for this machine (calibration {est.rate:,.0f} training steps/s here, "
        f"{float(est.reference['steps_per_s']):,.0f} there); its own times replace them once it has run them"
    )


def _warm_line(est: Estimate, to_run: list[str], groups: list[tuple[str, list[Path]]] | None) -> str | None:
    """The plan's second figure: the time when the chapters this machine last ran from a warm model
    cache read it again (their warm times, the others' cold ones), on the same lanes; None when it
    has no warm time of a chapter to run."""
    if not set(to_run) & set(est.warm):
        return None
    lanes = [[p.stem for p in part if p.stem in to_run] for _, part in groups] if groups else [to_run]
    seconds = max(sum(est.warm.get(s, est.costs.get(s, 0.0)) for s in lane) for lane in lanes)
    cold = max(sum(est.costs.get(s, 0.0) for s in lane) for lane in lanes)
    if format_seconds(seconds) == format_seconds(cold):
        return None
    return f"  if their models are cached (as when this machine last ran them): ~{format_seconds(seconds)}"


def plan_lines(
    cfg: ExecuteConfig,
    planned: list[tuple[Path, bool]],
    groups: list[tuple[str, list[Path]]] | None = None,
    rate: float | None = None,
    est: Estimate | None = None,
) -> list[str]:
    """The lines printed before the work starts: which chapters run (with their expected cost,
    :func:`estimate_plan`, or ``est``), which come from cache, with several ``groups`` running at
    once each lane's timeline (its chapters in order, each with the minute it is expected to
    start) and the floor no split could beat (the chapters' times over the lanes, or the costliest
    group that must stay in one process), and the estimated total (that of the longest lane),
    saying which times are extrapolated."""
    to_run = [s.stem for s, runs in planned if runs]
    est = est or estimate_plan(cfg, to_run, rate)
    opens = pages_data(cfg.root)["opens"]
    lines = [
        f"{len(planned)} chapter(s) in profile {cfg.profile}: {len(to_run)} to run, "
        f"{len(planned) - len(to_run)} from cache"
    ]
    for source, runs in planned:
        if not runs:
            lines.append(f"  cached  {source}")
        else:
            cost = est.costs.get(source.stem)
            shown = "unknown" if cost is None else "~" + format_seconds(cost)
            lines.append(f"  run     {source}  ({shown}{', extrapolated' if source.stem in est.extrapolated else ''})")
    seconds, unknown = est.seconds(to_run)
    parallel = ""
    if groups and len(groups) > 1:
        per_lane = []
        for name, part in groups:
            start, steps = 0.0, []
            for p in part:
                if p.stem in to_run:
                    steps.append(f"{p.stem} at {format_seconds(start)}")
                    start += est.costs.get(p.stem, 0.0)
            per_lane.append((name, start))
            lines.append(f"  {name} (~{format_seconds(start)}): " + (", ".join(steps) or "nothing to run"))
        seconds = max(t for _, t in per_lane)
        ran = [
            [p for p in group if p.stem in to_run] for group in chains([p for _, part in groups for p in part], opens)
        ]
        floor = max(sum(t for _, t in per_lane) / len(groups), *(est.seconds([p.stem for p in g])[0] for g in ran))
        lines.append(
            f"  floor: ~{format_seconds(floor)} (no split of these chapters on {len(groups)} lanes takes less; "
            "a chapter that opens another's runs stays after it)"
        )
        parallel = (
            f" with {len(groups)} lanes at once ("
            + ", ".join(f"{name} ~{format_seconds(t)}" for name, t in per_lane)
            + ")"
        )
    if not to_run:
        lines.append("ETA: nothing to run")
    elif unknown and len(unknown) == len(to_run):
        lines.append("ETA: unknown (no measured cost for these chapters in this profile yet)")
    elif unknown:
        lines.append(
            f"ETA: {format_seconds(seconds)}{parallel} for {len(to_run) - len(unknown)} chapter(s), "
            f"plus {len(unknown)} of unknown cost ({', '.join(unknown)})"
        )
    else:
        lines.append(f"ETA: {format_seconds(seconds)}{parallel}")
    warm_line = _warm_line(est, to_run, groups)
    if warm_line and not unknown:
        lines[-1] += " if the chapters compute their models (an empty model cache)"
        lines.append(warm_line)
    extrapolation = _extrapolation_line(est)
    return lines + ([extrapolation] if extrapolation else [])


def lane_command(cfg: ExecuteConfig, name: str, sources: list[Path], results: Path) -> list[str]:
    """The ``python -m mechbook execute`` command that runs one part's ``sources`` in order and
    writes their results to ``results`` (JSON)."""
    cmd = [sys.executable, "-m", "mechbook", "execute", "--profile", cfg.profile, "--root", str(cfg.root)]
    cmd += ["--lane", name, "--results", str(results), "--only", *[str(s.with_suffix("")) for s in sources]]
    if cfg.force:
        cmd.append("--force")
    if cfg.cell_timeout is not None:
        cmd += ["--cell-timeout", str(cfg.cell_timeout)]
    for knob, value in cfg.knobs:
        cmd += ["--knob", f"{knob}={json.dumps(value)}"]
    return cmd


def write_results(path: Path, results: list[ChapterResult]) -> None:
    """What a lane's chapters gave, as JSON, for the process that started the lane."""
    rows = [
        {
            "source": str(r.source),
            "output": str(r.output),
            "status": r.status,
            "seconds": r.seconds,
            "failure": r.failure,
        }
        for r in results
    ]
    path.write_text(json.dumps(rows), encoding="utf-8")


def read_results(path: Path, sources: list[Path], cfg: ExecuteConfig) -> list[ChapterResult]:
    """A lane's results; a chapter the lane never reported (its process died) counts as failed."""
    try:
        rows = {r["source"]: r for r in json.loads(path.read_text(encoding="utf-8"))}
    except (OSError, ValueError):
        rows = {}
    out = []
    for source in sources:
        r = rows.get(str(source))
        if r is None:
            out.append(
                ChapterResult(source, cfg.out_dir / source, "failed", 0.0, "its lane stopped before reporting it")
            )
        else:
            out.append(ChapterResult(source, Path(r["output"]), r["status"], float(r["seconds"]), r["failure"]))
    return out


def execute_lanes(cfg: ExecuteConfig, groups: list[tuple[str, list[Path]]]) -> list[ChapterResult]:
    """Run each lane of ``groups`` in its own process (:func:`lane_command`), at most
    ``cfg.lanes`` at once; the results lane by lane."""
    with tempfile.TemporaryDirectory(prefix="mechbook-lanes-") as tmp:
        pending = [(name, part, Path(tmp) / f"lane-{i}.json") for i, (name, part) in enumerate(groups)]
        running: list[tuple[subprocess.Popen, tuple[str, list[Path], Path]]] = []
        done: list[tuple[str, list[Path], Path]] = []
        try:
            while pending or running:
                while pending and len(running) < cfg.lanes:
                    lane = pending.pop(0)
                    print(f"{lane[0]}: {len(lane[1])} chapter(s) in their own process", flush=True)
                    running.append((subprocess.Popen(lane_command(cfg, *lane)), lane))
                time.sleep(0.5)
                for proc, lane in [r for r in running if r[0].poll() is not None]:
                    running.remove((proc, lane))
                    done.append(lane)
        finally:
            for proc, _ in running:
                proc.terminate()
                proc.wait()
        by_source = {r.source: r for _, part, path in done for r in read_results(path, part, cfg)}
    return [by_source[s] for _, part in groups for s in part]


def execute_book(cfg: ExecuteConfig, stream: TextIO | None = None) -> list[ChapterResult]:
    """Execute the chosen chapters in book order: first the inputs the chapters to run need
    (:func:`mechbook.book.environment.check_inputs`: a missing one ends the run before any
    chapter starts), then the plan (which run, which come from
    cache, the ETA from :mod:`mechbook.book.costs`), then one line per chapter while its
    progress is relayed (to ``stream``, default stderr), then what each chapter took. The
    seconds of each chapter executed to the end refresh the costs. With ``cfg.lanes`` > 1 the
    parts run at once (:func:`execute_lanes`). SIGTERM and SIGINT kill the kernels' process
    groups and end the run with :class:`KeyboardInterrupt`
    (:func:`mechbook.lifeline.stop_kernels_on_signals`)."""
    with stop_kernels_on_signals():
        return _execute_book(cfg, stream)


def _execute_book(cfg: ExecuteConfig, stream: TextIO | None) -> list[ChapterResult]:
    chosen = select(toc_notebooks(cfg.root), cfg.only)
    for source in chosen:
        try:
            check_knobs(cfg.root / source, cfg.parameters())
        except ValueError as exc:
            raise SystemExit(str(exc)) from None
    make_paths_absolute()
    memo = digest_memo(cfg.root)
    groups = lanes_of(cfg, chosen)
    if cfg.lane is None:
        planned = plan(cfg, chosen, memo)
        to_run = [s.stem for s, runs in planned if runs]
        missing = check_inputs(pages_data(cfg.root)["needs"], to_run)
        for line in missing[:-1]:
            print(f"error: {line}", file=sys.stderr, flush=True)
        if missing:
            raise SystemExit(missing[-1])
        est = estimate_plan(cfg, to_run)
        known = [est.costs[s] for s in to_run if s in est.costs]
        unknown = sum(known) / len(known) if known else 1.0  # a chapter never timed weighs as the average
        groups = lanes_of(cfg, chosen, {stem: est.costs.get(stem, unknown) for stem in to_run})
        for line in plan_lines(cfg, planned, groups, est=est):
            print(line, flush=True)
    if len(groups) > 1:
        start = time.perf_counter()
        order = {source: i for i, source in enumerate(chosen)}
        results = sorted(execute_lanes(cfg, groups), key=lambda r: order[r.source])
        _print_took(results, time.perf_counter() - start)
        return results
    prefix = f"{cfg.lane} " if cfg.lane else ""
    results = []
    for i, source in enumerate(chosen, 1):
        tag = f"{prefix}[{i}/{len(chosen)}] {source} ({cfg.profile})"
        print(f"{tag}: running", flush=True)
        with Relay(
            f"{prefix}[{i}/{len(chosen)}] {source.stem}", stream=stream, live=False if cfg.lane else None
        ) as relay:
            result = execute_chapter(source, cfg, memo, progress_file=relay.path, notices_file=relay.notices)
        note = f"FAILED at {result.failure}" if result.failure else result.status
        print(f"{tag}: {note} ({result.seconds:.1f} s)", flush=True)
        results.append(result)
        if result.status == "executed":
            costs.save_costs(cfg.root, cfg.profile, {source.stem: result.seconds}, cold=result.computed)
    if cfg.lane is None:
        _print_took(results, sum(r.seconds for r in results))
    return results


def _print_took(results: list[ChapterResult], wall: float) -> None:
    """What each chapter took, and the wall time of them all."""
    print("took:", flush=True)
    for r in results:
        print(f"  {format_seconds(r.seconds):>12}  {r.status:<8}  {r.source}", flush=True)
    print(f"  {format_seconds(wall):>12}  in all", flush=True)
