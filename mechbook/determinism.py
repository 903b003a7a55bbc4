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

A third thing makes the same seed give other bits on another x86-64 CPU: each library picks its
kernels for the processor, and the paths add in other orders. :func:`pin_portable_kernels`,
called by ``import mechbook`` before anything loads a kernel, pins the ones that were measured to
decide bits (README, "The same seed on another CPU"), on every CPU that has AVX2:

- ``ATEN_CPU_CAPABILITY=avx2``: torch's vectorised kernels (softmax, reductions, elementwise);
- ``MKL_CBWR=AVX2``: MKL's conditional numerical reproducibility, for torch's float32 products;
- ``OPENBLAS_CORETYPE=Haswell``: numpy's and scipy's OpenBLAS (Part I's corpus statistics and
  closed forms), which takes its SkylakeX kernels on an AVX-512 CPU. Measured: an AMD Zen 4 gave
  a Zen 3's bits for Part II's runs under the first two pins, and for Part I's only with this one.

oneDNN is left free: no float32 run's bits depend on it (measured), and pinning it to AVX2 turns
off native bf16 (AVX512-BF16, AMX), making a bf16 step ten times slower than float32. Across
vendors the pins are not enough: an Intel Xeon with AVX-512 gave other bits than the AMD CPUs
for every run with the same pins in force (MKL's reproducibility modes are promised on Intel
processors only). ``python -m mechbook hashes --trace`` names the first operation that differs
between this CPU and another one's committed trace. ``MECHBOOK_NATIVE_KERNELS=1`` keeps each
CPU's own paths, and a variable set by the caller is left as it is.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from mechbook.notices import notice

THREADS = 1
"""Intra-op threads of a deterministic block (the result does not depend on the caller's count)."""

PORTABLE_KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "OPENBLAS_CORETYPE": "Haswell"}
"""The variables that pin torch's, MKL's and OpenBLAS's CPU code paths to AVX2 (see the module's docstring)."""

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
        if name not in os.environ:
            os.environ[name] = value
            _SET_HERE.append(name)
    return {name: os.environ[name] for name in PORTABLE_KERNELS}


_SET_HERE: list[str] = []


def set_by_pin() -> set[str]:
    """The variables of :data:`PORTABLE_KERNELS` this process's pin set itself (the others were the
    caller's, or the machine's: some machines set ``OPENBLAS_CORETYPE`` for an old OpenBLAS's sake)."""
    return set(_SET_HERE)


def openblas_core() -> str:
    """The kernel set numpy's OpenBLAS runs in this process (``Haswell``, ``SkylakeX``, ``Zen``...),
    read from the library numpy loaded; ``unknown`` where numpy bundles no OpenBLAS."""
    import ctypes
    from pathlib import Path

    import numpy as np

    for lib in sorted((Path(np.__file__).parent.parent / "numpy.libs").glob("libscipy_openblas*.so*")):
        handle = ctypes.CDLL(str(lib))
        for symbol in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename"):
            if hasattr(handle, symbol):
                getter = getattr(handle, symbol)
                getter.restype = ctypes.c_char_p
                return getter().decode()
    return "unknown"


def kernel_paths() -> str:
    """The CPU code path torch's kernels take in this process (``AVX2``, ``AVX512``, ``DEFAULT``...),
    MKL's reproducibility mode and numpy's OpenBLAS kernels, as one label: part of what decides a
    seeded run's bits."""
    import torch

    mkl = os.environ.get("MKL_CBWR", "native")
    return f"aten {torch.backends.cpu.get_cpu_capability()} mkl_cbwr {mkl} openblas {openblas_core()}"


_WARNED: list[str] = []


def _check_pinned(torch) -> None:
    """Warn once when the kernels run another path than the pinned one: torch ran a kernel before
    ``import mechbook`` pinned them, so this process's bits are its CPU's own."""
    paths = [("torch's CPU code", "ATEN_CPU_CAPABILITY", torch.backends.cpu.get_cpu_capability)]
    paths.append(("numpy's OpenBLAS", "OPENBLAS_CORETYPE", openblas_core))
    for library, variable, running in paths:
        want, got = os.environ.get(variable), running()
        if want and got.lower() != want.lower() and got not in _WARNED:
            _WARNED.append(got)
            notice(
                f"{library} runs the {got} path, not the pinned {want} one (loaded before `import mechbook`): "
                "seeded results here may differ in their last bits from other CPUs'; import mechbook first"
            )


@contextlib.contextmanager
def subnormals_flushed() -> Iterator[None]:
    """Run the block with the CPU flushing subnormal floats to zero (``torch.set_flush_denormal``),
    then turn it off again. Training from small weights (Part I's start at zero) makes values
    below float32's smallest normal number, and x86 arithmetic on them is many times slower; both
    parts' training loops run under it. The flush changes only those values, and the same way on
    every CPU."""
    import torch

    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


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
