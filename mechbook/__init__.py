"""mechbook: the helper package every chapter of the book imports.

Heavy modules (torch models, TransformerLens, Altair) are imported lazily by the chapters that use
them, so ``import mechbook`` stays cheap. What lives here:

- ``record`` / ``read_records`` (:mod:`mechbook.records`): a chapter's headline numbers.
- ``PROFILES`` / ``resolve_profile`` / ``ran_with`` (:mod:`mechbook.profiles`): smoke, cpu and
  paper, knobs, and the note saying which a page ran with.
- ``default_device`` (:mod:`mechbook.device`): CUDA when present, else CPU.

Importing it first pins torch's, MKL's and OpenBLAS's CPU code paths to AVX2
(:func:`mechbook.determinism.pin_portable_kernels`), so a seed gives the same bits on AMD CPUs of
other generations (measured: Zen 3 and Zen 4); an Intel CPU still gives other bits.
"""

from mechbook.determinism import pin_portable_kernels

pin_portable_kernels()

from mechbook.device import default_device  # noqa: E402
from mechbook.profiles import PROFILES, ran_with, resolve_profile  # noqa: E402
from mechbook.records import read_records, record  # noqa: E402

__all__ = [
    "PROFILES",
    "default_device",
    "ran_with",
    "read_records",
    "record",
    "resolve_profile",
]
