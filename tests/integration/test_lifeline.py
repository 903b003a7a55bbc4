"""Nothing outlives its run (issue 22, item 1): stacked training's workers die with their kernel,
and the executor takes its kernels' process groups down on SIGTERM and SIGINT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, make_notebook

from mechbook import lifeline

#: Seconds the run's processes get to go once one of them is killed (a liveness bound, generous
#: for a loaded 2-core machine; they go in well under a second when nothing is queued).
GONE_WITHIN_S = 30
STARTED_WITHIN_S = 300

TRAIN_CELL = """
from mechbook.assign_add.model import ModelConfig
from mechbook.assign_add.train import train_groups
from mechbook.assign_add.config import TrainConfig

model = ModelConfig(d_model=16, d_head=16, d_mlp=32)
cfgs = [TrainConfig(steps=10_000_000, batch_size=8, eval_per_pool=8, seed=s, model=model) for s in range(4)]
train_groups(cfgs, device="cpu", processes=2)
"""


def _state(pid: int) -> str | None:
    """The process state letter of ``pid`` (``Z`` for a zombie); None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2]


def _alive(pids: set[int]) -> set[int]:
    return {p for p in pids if _state(p) not in (None, "Z")}


def _descendants(pid: int) -> dict[int, str]:
    """``{pid: command line}`` of every process below ``pid``."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        stat = lifeline._stat(int(entry.name))
        if stat is not None:
            parents[int(entry.name)] = stat[0]
    found: dict[int, str] = {}
    todo = [pid]
    while todo:
        here = todo.pop()
        for child, parent in parents.items():
            if parent == here and child not in found:
                try:
                    found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    continue
                todo.append(child)
    return found


def _tiny_book(tmp: Path) -> Path:
    (tmp / "mechbook").mkdir(parents=True)
    (tmp / "_config.yml").write_text("title: tiny\n")
    (tmp / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: book/train\n")
    (tmp / "book").mkdir()
    (tmp / "book" / "intro.md").write_text("# Intro\n")
    make_notebook(tmp / "book" / "train.ipynb", [("code", TRAIN_CELL)], parameters='profile = "smoke"')
    return tmp


def _start(repo: Path, tmp: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MECHBOOK_CACHE": str(tmp / "cache")}
    env.pop("MECHBOOK_DEBUG", None)
    cmd = [sys.executable, "-m", "mechbook", "execute", "--profile", "smoke", "--root", str(repo), "--lanes", "1"]
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def _wait_for_workers(proc: subprocess.Popen, settle: float = 1.0) -> dict[int, str]:
    """The run's processes once both training workers exist and ``settle`` seconds more passed."""
    deadline = time.monotonic() + STARTED_WITHIN_S
    while time.monotonic() < deadline:
        tree = _descendants(proc.pid)
        workers = [p for p, cmd in tree.items() if "spawn_main" in cmd]
        if len(workers) >= 2:
            time.sleep(settle)
            return _descendants(proc.pid)
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.5)
    proc.kill()
    pytest.fail("the training workers never started")


@pytest.mark.book
@pytest.mark.parametrize("target", ["executor", "kernel"])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_nothing_outlives_a_killed_run(tmp_path, target, sig):
    repo = _tiny_book(tmp_path / "repo")
    proc = _start(repo, tmp_path)
    tree = _wait_for_workers(proc)
    kernels = [p for p, cmd in tree.items() if "ipykernel" in cmd and "spawn_main" not in cmd]
    assert len(kernels) == 1, tree
    run = set(tree) | {proc.pid}
    os.kill(proc.pid if target == "executor" else kernels[0], sig)
    deadline = time.monotonic() + GONE_WITHIN_S
    while _alive(run) and time.monotonic() < deadline:
        proc.poll()
        time.sleep(0.2)
    left = {p: tree.get(p, "executor") for p in _alive(run)}
    for pid in left:  # do not leave them to the next test
        os.kill(pid, signal.SIGKILL)
    assert not left, f"still running {GONE_WITHIN_S} s after {sig.name} to the {target}: {left}"
    out = proc.stdout.read()
    proc.wait()
    if target == "executor" and sig != signal.SIGKILL:
        assert proc.returncode == 130, out
        assert "Traceback" not in out, out
        assert "interrupted at code cell 2" in out, out
    if target == "kernel":
        assert proc.returncode != 0, out


def _pool_worker_parent_death(queue) -> None:
    """In a child: start a WorkerPool, report its worker's pid, then wait to be killed."""
    pool = lifeline.WorkerPool(1)
    queue.put(pool.submit(os.getpid).result())
    time.sleep(600)


def test_pool_workers_die_with_their_parent():
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    parent = ctx.Process(target=_pool_worker_parent_death, args=(queue,))
    parent.start()
    worker = queue.get(timeout=STARTED_WITHIN_S)
    assert _alive({worker})
    os.kill(parent.pid, signal.SIGKILL)
    parent.join()
    deadline = time.monotonic() + GONE_WITHIN_S
    while _alive({worker}) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive({worker})


def test_an_exception_in_the_with_block_kills_busy_workers():
    with pytest.raises(KeyboardInterrupt), lifeline.WorkerPool(1) as pool:
        pid = pool.submit(os.getpid).result()
        pool.submit(time.sleep, 600)
        raise KeyboardInterrupt
    assert not _alive({pid})


def test_die_with_parent_arms_the_parent_death_signal_on_linux():
    how = subprocess.run(
        [sys.executable, "-c", "from mechbook.lifeline import die_with_parent; print(die_with_parent())"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    ).stdout.strip()
    assert how == ("prctl" if sys.platform.startswith("linux") else "watchdog")


@pytest.mark.book
def test_workers_killed_while_they_start_die_too(tmp_path):
    """The kernel killed the moment its workers appear (still importing torch): they go as well,
    since the parent-death signal is armed before anything heavy is imported."""
    proc = _start(_tiny_book(tmp_path / "repo"), tmp_path)
    tree = _wait_for_workers(proc, settle=0.0)
    [kernel] = [p for p, cmd in tree.items() if "ipykernel" in cmd and "spawn_main" not in cmd]
    os.kill(kernel, signal.SIGKILL)
    deadline = time.monotonic() + GONE_WITHIN_S
    while _alive(set(tree) - {proc.pid}) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _alive(set(tree))
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    proc.communicate(timeout=GONE_WITHIN_S)
    assert not left


@pytest.mark.book
def test_a_closed_terminal_takes_the_kernels_down(tmp_path):
    """SIGHUP to the executor: its kernels' groups are killed and the run ends as interrupted."""
    repo = _tiny_book(tmp_path / "repo")
    proc = _start(repo, tmp_path)
    tree = _wait_for_workers(proc)
    os.kill(proc.pid, signal.SIGHUP)
    out, _ = proc.communicate(timeout=GONE_WITHIN_S)
    deadline = time.monotonic() + GONE_WITHIN_S
    while _alive(set(tree)) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _alive(set(tree))
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left and proc.returncode == 130, out


def test_child_groups_are_the_children_leading_their_own_group():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    same = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        groups = lifeline.child_groups()
        assert child.pid in groups
        assert same.pid not in groups
    finally:
        for p in (child, same):
            p.kill()
            p.wait()
