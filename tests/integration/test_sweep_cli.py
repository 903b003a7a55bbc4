"""``python -m mechbook sweep`` (mechbook.assign_add.jobs): the smoke grid of chapter 11 through
submitit's local executor for real (a job killed while it trains, the rerun, the cache against the
same runs trained here), and the Slurm array script against a golden file."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from mechbook.__main__ import main
from mechbook.assign_add import jobs, run_cache
from mechbook.assign_add.sweeps import point_configs
from mechbook.cache import load_verified, torch_loads, unbind
from mechbook.chapters import ch11_how_much_data as ch11

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "sweep_smoke_ch11.sbatch"
SLURM = ["--executor", "slurm", "--partition", "gpu", "--gpus-per-job", "1", "--max-parallel", "4"]


def normalised(text: str, cache: Path) -> str:
    """The script with this machine's paths replaced by placeholders."""
    return text.replace(str(cache), "$CACHE").replace(sys.executable, "$PYTHON")


def test_the_slurm_array_script_matches_the_golden_file(tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"
    monkeypatch.setenv("MECHBOOK_CACHE", str(cache))
    monkeypatch.setenv("MECHBOOK_QUIET", "1")
    argv = ["sweep", "--profile", "smoke", "--chapter", "11", "--seeds", "2", *SLURM, "--timeout-min", "120"]
    assert main([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    script = out[out.index("#!/bin/bash") : out.index("dry run: nothing submitted")].strip() + "\n"
    assert normalised(script, cache.resolve()) == GOLDEN.read_text()
    assert "#SBATCH --array=0-7%4" in script  # 2 seeds x (2 f + 2 r points), at most 4 at once
    assert out.count("to run ") == 8 and "GPU hours" in out
    assert not (cache / "jobs").exists()  # submitted nothing


def test_the_chapters_seed_knob_reads_the_seed_jobs():
    runs = {c for _, c, _ in jobs.chapter_runs("smoke", 11, 3)}
    for seed in (0, 1, None):
        cfg = ch11.resolve("smoke", seed=seed)
        for knob, base, values in (("f", cfg.f_train, cfg.f_values), ("r", cfg.r_train, cfg.r_values)):
            assert set(point_configs(base, knob, values, cfg.seeds)) <= runs


def sweep(cache: Path, *extra: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("MECHBOOK_PROGRESS_FILE", "MECHBOOK_PROFILE")}
    env.update(PYTHONPATH=str(ROOT), MECHBOOK_CACHE=str(cache), MECHBOOK_QUIET="0")
    argv = ["sweep", "--profile", "smoke", "--chapter", "11", "--executor", "local", "--max-parallel", "4", *extra]
    return subprocess.Popen(
        [sys.executable, "-m", "mechbook", *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill_a_training_job(folder: Path, proc: subprocess.Popen) -> tuple[str, Path]:
    """SIGKILL the process of the first job whose log shows its training bar; its job id and log."""
    deadline = time.monotonic() + 900
    while proc.poll() is None and time.monotonic() < deadline:
        for log in sorted(folder.glob("*_0_log.err")):
            if "run seed" in log.read_text(errors="replace"):
                controller = log.name.split("_")[0]
                tasks = Path(f"/proc/{controller}/task/{controller}/children").read_text().split()
                assert tasks, f"job {controller} has no process to kill"
                for pid in tasks:
                    os.kill(int(pid), signal.SIGKILL)
                return controller, log
        time.sleep(0.05)
    raise AssertionError("no job started training")


@pytest.mark.timeout(1800)
def test_local_jobs_report_a_killed_one_resume_and_equal_the_runs_trained_here(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    folder = cache / "jobs" / "smoke-ch11"
    monkeypatch.setenv("MECHBOOK_CACHE", str(cache))
    n = len(jobs.plan("smoke", 11, 1, "cpu").jobs)  # every point at each of the profile's seeds
    proc = sweep(cache)
    job_id, log = kill_a_training_job(folder, proc)
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 1, out + err
    assert f"{n} to submit" in out and f"{n - 1} of {n} job(s) done, 1 failed" in out
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1 and f"(job {job_id})" in failed[0]
    name = failed[0].split("  ", 1)[1].rsplit(" (job", 1)[0]
    reports = [line for line in err.splitlines() if line.startswith("FAILED ")]
    assert reports == [next(r for r in reports if r.startswith(f"FAILED {name}: "))]
    assert reports[0].endswith(f"; log: {log}")

    left = jobs.plan("smoke", 11, 1, "cpu")
    assert [j.name for j in left.missing] == [name]

    rerun = sweep(cache)
    out, err = rerun.communicate(timeout=900)
    assert rerun.returncode == 0, out + err
    assert f"{n - 1} cached, 1 to submit" in out and "submitted 1 job(s)" in out and "1 of 1 job(s) done" in out

    cfgs = [j.cfg for j in left.jobs]
    from_jobs = [torch_loads(unbind(load_verified(run_cache.entry(c, "cpu", False)))[1]) for c in cfgs]
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path / "here"))
    monkeypatch.setenv("MECHBOOK_QUIET", "1")
    here = run_cache.load_or_train_runs(cfgs, "cpu", desc="the smoke sweeps in process")
    for a, b in zip(from_jobs, here):
        assert a.config == b.config
        assert a.history.equals(b.history)
        for key in b.final_state:
            assert torch.equal(a.final_state[key], b.final_state[key]), key
        assert a.checkpoints.keys() == b.checkpoints.keys()
        for step, state in b.checkpoints.items():
            for key in state:
                assert torch.equal(a.checkpoints[step][key], state[key]), (step, key)
