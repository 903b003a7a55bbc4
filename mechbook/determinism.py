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
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

THREADS = 1
"""Intra-op threads of a deterministic block (the result does not depend on the caller's count)."""


@contextlib.contextmanager
def deterministic() -> Iterator[None]:
    """Run the block (or, as ``@deterministic()``, the function) with deterministic torch kernels
    on :data:`THREADS` intra-op thread(s); the process's settings are restored afterwards.

    Kernels that have no deterministic variant warn instead of failing (a GPU run still finishes).
    """
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS's reproducible workspace
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
