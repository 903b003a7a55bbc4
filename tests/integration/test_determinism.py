"""Same seed, same bits: every trained or sampled artifact hashes the same in separate processes,
at 1 and at 2 threads (mechbook/determinism.py), and the context restores the process's settings.
Part II's runs are checked in both precisions (fp32, and bf16 where the CPU has it natively)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import ROOT

from mechbook.determinism import THREADS, deterministic

SCRIPT = ROOT / "tests" / "helpers" / "det_hashes.py"
SAMPLE = ROOT.parent / "shared" / "data" / "tinystories" / "tinystories-sample.txt"


def _start(threads: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "MECHBOOK_QUIET": "1",
    }
    env.setdefault("MECHBOOK_TINYSTORIES", str(SAMPLE))
    return subprocess.Popen(
        [sys.executable, str(SCRIPT)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.fixture(scope="module")
def hashes() -> list[dict[str, str]]:
    """The artifacts' sha256 from three processes: 1 thread, 2 threads, 2 threads again (run at
    once: each artifact computes on one thread, so the three share two cores well)."""
    procs = [_start(t) for t in (1, 2, 2)]
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr[-3000:]
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def test_the_processes_ran_at_the_thread_counts_asked(hashes):
    assert [h.pop("threads") for h in hashes] == [1, 2, 2]


@pytest.mark.parametrize(
    "artifact",
    [
        "part2_train",
        "part2_train_bf16",
        "part2_train_smoke_profile",
        "part2_stacked",
        "part2_stacked_bf16",
        "part2_probes",
        "part2_patching",
        "part2_eval_samples",
        "part1_train",
        "pythia_miniature",
    ],
)
def test_artifact_is_bit_identical_across_processes_and_thread_counts(hashes, artifact):
    one, two, two_again = (h[artifact] for h in hashes)
    assert two == two_again, f"{artifact}: two processes at 2 threads gave different bits"
    assert one == two, f"{artifact}: 1 thread and 2 threads gave different bits"


def test_the_bf16_artifacts_are_trained_in_bf16_where_the_cpu_has_it(hashes):
    from mechbook.assign_add.config import native_bf16

    for name in ("part2_train", "part2_stacked"):
        bf16 = hashes[0][f"{name}_bf16"]
        if native_bf16("cpu"):
            assert bf16 not in ("no native bf16", hashes[0][name]), f"{name}_bf16 is not a bf16 run"
        else:
            assert bf16 == "no native bf16"


def test_deterministic_restores_the_settings_and_works_as_a_decorator():
    before = torch.get_num_threads()
    torch.set_num_threads(THREADS + 1)
    threads, algos = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    seen = []

    @deterministic()
    def inside() -> None:
        seen.append((torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()))

    inside()
    with deterministic():
        with deterministic():
            inside()
        seen.append((torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()))
    assert seen == [(THREADS, True)] * 3
    assert (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()) == (threads, algos)
    with pytest.raises(RuntimeError, match="boom"), deterministic():
        raise RuntimeError("boom")
    assert (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()) == (threads, algos)
    torch.set_num_threads(before)


def _fresh(code: str, **env: str) -> subprocess.CompletedProcess:
    """``python -c code`` in a fresh process with ``env`` added (and every variable this process's
    pin set unset unless given), from the checkout."""
    from mechbook.determinism import NATIVE_ENV, set_by_pin

    base = {k: v for k, v in os.environ.items() if k not in {*set_by_pin(), NATIVE_ENV}}
    base["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, timeout=300, check=True
    )


PROBE = (
    "import os, mechbook, torch; from mechbook.determinism import openblas_core; "
    "print(os.environ.get('MKL_CBWR'), torch.backends.cpu.get_cpu_capability(), openblas_core())"
)


def test_import_mechbook_pins_the_avx2_kernel_paths_unless_told_otherwise():
    from mechbook.determinism import _cpu_has_avx2

    if not _cpu_has_avx2():
        assert _fresh(PROBE).stdout.split()[:2] == ["None", torch.backends.cpu.get_cpu_capability()]
        return
    from mechbook.determinism import PORTABLE_KERNELS, set_by_pin

    callers = {k for k in PORTABLE_KERNELS if k in os.environ} - set_by_pin()
    if callers:
        pytest.skip(f"this run sets {sorted(callers)} itself; the pin leaves them as they are")
    assert _fresh(PROBE).stdout.split() == ["AVX2", "AVX2", "Haswell"]
    assert _fresh(PROBE, ATEN_CPU_CAPABILITY="default").stdout.split()[:2] == ["AVX2", "DEFAULT"]  # the caller's wins
    native = _fresh(PROBE, MECHBOOK_NATIVE_KERNELS="1").stdout.split()
    assert native[0] == "None"


def test_the_kernel_path_decides_the_bits_and_the_committed_hashes_hold_on_their_cpu():
    """Training's bits move with torch's kernel path (so pinning it is what can make CPUs agree),
    and where mechbook/book/weight_hashes.json holds this CPU model's entry every run gives those bits."""
    from mechbook.hashes import committed, comparable, machine

    run = "from mechbook.hashes import part2_cpu_run_start as f; print(f())"
    pinned = _fresh(run, MECHBOOK_QUIET="1", ATEN_CPU_CAPABILITY="avx2").stdout.split()[-1]
    generic = _fresh(run, MECHBOOK_QUIET="1", ATEN_CPU_CAPABILITY="default").stdout.split()[-1]
    assert pinned != generic, "the generic kernels gave the pinned kernels' bits: the pin would decide nothing"
    here = machine()
    mine = committed().get(here["model"])
    if mine is None or not comparable(mine, here):
        pytest.skip(f"no hashes committed for {here['model']} on these paths: `python -m mechbook hashes --write`")
    assert pinned == mine["hashes"]["part2_cpu_run_start"], "re-run `python -m mechbook hashes --write`"
    out = subprocess.run(
        [sys.executable, "-m", "mechbook", "hashes"],
        env={**os.environ, "MECHBOOK_QUIET": "1", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout
