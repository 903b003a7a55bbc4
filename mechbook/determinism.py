"""Bit-identical seeded computations: one context manager for every training run and cached result.

Two things make a seeded CPU computation in torch give other bits in another process:

- kernels with no fixed order of floating-point additions (the embedding backward, an
  ``index_add`` over repeated rows): ``torch.use_deterministic_algorithms(True)`` picks the
  deterministic variants;
- the intra-op thread count. A reduction over all elements (``loss.mean()``, ``tensor.sum()``)
  and a matrix product with a long inner dimension (every weight gradient, ``xᵀ·δ`` summed over
  the batch) are split into one partial sum per thread, so 1 and 2 threads add the same numbers
  in another order. This holds with deterministic algorithms on; it is how ATen's reductions and
  MKL's GEMM share work. Running the block on one intra-op thread makes the result the same
  whatever ``OMP_NUM_THREADS`` or ``torch.set_num_threads`` the process was started with.

:func:`deterministic` does both, and restores the previous settings on exit. Part I's and Part II's
training loops, the stacked sweeps, the Pythia miniature and the probes run under it, and so does
every computation behind :func:`mechbook.cache.cached`. On CUDA it also asks cuBLAS and cuDNN for
their deterministic modes; that makes a GPU run repeatable on the same GPU, not equal to the CPU.

A third thing makes the same seed give other bits on another x86-64 CPU: torch's vectorised
kernels (softmax, reductions, elementwise) and MKL's matrix products each pick a code path for
the processor's widest vector unit (AVX2, AVX-512, AMX), and the paths add in other orders.
:func:`pin_portable_kernels`, called by ``import mechbook`` before anything loads a kernel, sets
``ATEN_CPU_CAPABILITY=avx2``, ``MKL_CBWR=AVX2`` (MKL's conditional numerical reproducibility) and
``ONEDNN_MAX_CPU_ISA=AVX2`` on every CPU that has AVX2, so every such CPU runs the AVX2 paths.
On an AVX2-only CPU these are the paths it takes anyway (the bits do not change there; measured in
the README); on an AVX-512 CPU the products lose their wider vectors. ``MECHBOOK_NATIVE_KERNELS=1``
keeps each CPU's own paths, and a variable set by the caller is left as it is.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from mechbook.notices import notice

THREADS = 1
"""Intra-op threads of a deterministic block (the result does not depend on the caller's count)."""

PORTABLE_KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
"""The variables that pin torch's, MKL's and oneDNN's CPU code paths to AVX2 (see the module's docstring)."""

NATIVE_ENV = "MECHBOOK_NATIVE_KERNELS"


def _cpu_has_avx2() -> bool:
    """Whether ``/proc/cpuinfo`` lists AVX2 (False where there is no such file: not x86 Linux)."""
    try:
        with open("/proc/cpuinfo") as fh:
            return any(line.startswith("flags") and " avx2" in line for line in fh)
    except OSError:
        return False


def pin_portable_kernels() -> dict[str, str]:
    """Set :data:`PORTABLE_KERNELS` in ``os.environ`` (each only where the caller has not set it)
    on a CPU with AVX2, unless ``MECHBOOK_NATIVE_KERNELS=1``; returns what is in force. Must run
    before torch runs its first kernel (``import mechbook`` calls it); child processes inherit it."""
    if os.environ.get(NATIVE_ENV) == "1" or not _cpu_has_avx2():
        return {}
    for name, value in PORTABLE_KERNELS.items():
        os.environ.setdefault(name, value)
    return {name: os.environ[name] for name in PORTABLE_KERNELS}


def kernel_paths() -> str:
    """The CPU code path torch's kernels take in this process (``AVX2``, ``AVX512``, ``DEFAULT``...)
    and MKL's reproducibility mode, as one label: part of what decides a seeded run's bits."""
    import torch

    return f"aten {torch.backends.cpu.get_cpu_capability()} mkl_cbwr {os.environ.get('MKL_CBWR', 'native')}"


_WARNED: list[str] = []


def _check_pinned(torch) -> None:
    """Warn once when the kernels run another path than the pinned one: torch ran a kernel before
    ``import mechbook`` pinned them, so this process's bits are its CPU's own."""
    want = os.environ.get("ATEN_CPU_CAPABILITY")
    got = torch.backends.cpu.get_cpu_capability()
    if want and got.lower() != want.lower() and got not in _WARNED:
        _WARNED.append(got)
        notice(
            f"torch's CPU kernels take the {got} path, not the pinned {want.upper()} one (torch ran before "
            "`import mechbook`): seeded results here may differ in their last bits from other CPUs'; import mechbook first"
        )


@contextlib.contextmanager
def deterministic() -> Iterator[None]:
    """Run the block (or, as ``@deterministic()``, the function) with deterministic torch kernels
    on :data:`THREADS` intra-op thread(s); the process's settings are restored afterwards.

    Kernels that have no deterministic variant warn instead of failing (a GPU run still finishes).
    """
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS's reproducible workspace
    _check_pinned(torch)
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    threads = torch.get_num_threads()
    cudnn = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_num_threads(THREADS)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.set_num_threads(threads)
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = cudnn
