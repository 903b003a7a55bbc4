"""Compare two computations of one function with the tolerance rounding allows, not one CPU's luck.

The same seeded arithmetic rounds differently on different CPUs (AVX2, AVX-512, AMX) and kernel
paths (``MECHBOOK_NATIVE_KERNELS``, ``ATEN_CPU_CAPABILITY``): a blocked matrix product or a
vectorised sum adds its terms in another order. An elementwise relative tolerance then fails on an
entry near cancellation (a small entry of a tensor with large ones), whose rounding error is set by
the large terms that cancelled, not by its own size. The standard forward error bound of a sum of
``n`` terms, ``|fl(s) - s| <= n * eps * sum |terms|``, scales with the tensor's magnitude instead,
and so does :func:`assert_close_scaled`::

    allowed = c * terms * eps(dtype) * scale

- ``eps`` is the machine epsilon of the less precise dtype of the two operands (float64 2.2e-16,
  float32 1.2e-7, float16 9.8e-4, bfloat16 7.8e-3); integers, bools and exact values do not lower
  it, and a comparison of two exact operands uses float64's.
- ``scale`` is the magnitude of the whole tensor: by default the largest absolute finite entry of
  ``expected``; a caller gives it when the arithmetic's magnitude is not the result's (a product
  whose entries cancel: the product of the operands' norms; a sum that should be zero: the largest
  summand times the count).
- ``terms`` is the number of terms summed along the longest reduction that produced an entry (the
  inner dimension of a product, a sequence length, a batch); for a chain of stages the caller adds
  the stages' lengths (to first order the stages' errors add). The default, 1, allows a few
  roundings per entry (elementwise arithmetic); any reduction must say its length.
- ``c`` is a safety constant, 8 by default, for the few roundings an entry carries besides its
  sums (exp, log, a division) and for the factors the first-order bound leaves out.

For float64 the allowance is about ``1e-12 * scale`` even for a thousand terms: far below what a
real error makes (a wrong sign, a factor 1.001, a transposed matrix, a dropped term), so the
comparison still fails on a bug. Shapes must match exactly (no broadcasting); a NaN or infinity
must be the same in both (NaN only with ``equal_nan``)."""

from __future__ import annotations

import numpy as np

try:
    import torch
except ImportError:  # pragma: no cover - the project always has torch
    torch = None

#: Machine epsilon of float64, the precision of Python floats and of a comparison of exact values.
EPS64 = float(np.finfo(np.float64).eps)
#: The default safety constant ``c``.
SAFETY = 8.0


def _as_float64(x, name: str) -> tuple[np.ndarray, float | None]:
    """``x`` (torch tensor, numpy array, pandas object, float, int, or nested list) as a float64
    array, with the machine epsilon of its dtype (None for an exact one: integers, bools)."""
    if torch is not None and isinstance(x, torch.Tensor):
        if x.dtype.is_complex:
            raise TypeError(f"{name}: complex tensors are not supported")
        eps = float(torch.finfo(x.dtype).eps) if x.dtype.is_floating_point else None
        return x.detach().cpu().to(torch.float64).numpy(), eps
    arr = np.asarray(x)
    if arr.dtype.kind == "f":
        return arr.astype(np.float64), float(np.finfo(arr.dtype).eps)
    if arr.dtype.kind in "iub":
        return arr.astype(np.float64), None
    raise TypeError(f"{name}: cannot compare values of dtype {arr.dtype}")


def _dtype_name(eps: float) -> str:
    names = {EPS64: "float64", float(np.finfo(np.float32).eps): "float32", float(np.finfo(np.float16).eps): "float16"}
    return names.get(eps, "bfloat16" if eps == 2.0**-7 else f"eps {eps:.3g}")


def scaled_bound(
    actual, expected, *, terms: int = 1, scale: float | None = None, c: float = SAFETY
) -> tuple[float, dict[str, float | str]]:
    """The allowed absolute difference ``c * terms * eps * scale`` for comparing ``actual`` with
    ``expected``, and its parts (for a message)."""
    _, eps_a = _as_float64(actual, "actual")
    e, eps_e = _as_float64(expected, "expected")
    eps = max((v for v in (eps_a, eps_e) if v is not None), default=EPS64)
    if scale is None:
        finite = np.abs(e[np.isfinite(e)])
        scale = float(finite.max()) if finite.size else 0.0
    if not (np.isfinite(scale) and scale >= 0):
        raise ValueError(f"scale must be finite and non-negative, got {scale}")
    if terms < 1 or c <= 0:
        raise ValueError(f"terms must be >= 1 and c > 0, got terms={terms}, c={c}")
    parts = {"c": float(c), "terms": int(terms), "dtype": _dtype_name(eps), "eps": eps, "scale": float(scale)}
    return float(c) * int(terms) * eps * float(scale), parts


def assert_close_scaled(
    actual,
    expected,
    *,
    terms: int = 1,
    scale: float | None = None,
    c: float = SAFETY,
    equal_nan: bool = False,
    msg: str | None = None,
) -> float:
    """Assert ``|actual - expected| <= c * terms * eps * scale`` for every entry (see the module's
    docstring for the parts and their defaults). Returns the largest difference; raises
    AssertionError naming the largest difference, where it is, the allowed bound and its parts."""
    a, _ = _as_float64(actual, "actual")
    e, _ = _as_float64(expected, "expected")
    prefix = f"{msg}: " if msg else ""
    if a.shape != e.shape:
        raise AssertionError(f"{prefix}shapes differ: actual {a.shape}, expected {e.shape}")
    bound, parts = scaled_bound(actual, expected, terms=terms, scale=scale, c=c)
    finite = np.isfinite(a) & np.isfinite(e)
    same_special = (a == e) | (equal_nan & np.isnan(a) & np.isnan(e))
    special = ~finite & ~same_special
    if special.any():
        where = tuple(int(i) for i in np.argwhere(special)[0])
        raise AssertionError(
            f"{prefix}{int(special.sum())} non-finite entries differ; first at index {where}: "
            f"actual {a[where]!r}, expected {e[where]!r}"
        )
    diff = np.abs(np.where(finite, a, 0.0) - np.where(finite, e, 0.0))
    worst = float(diff.max()) if diff.size else 0.0
    if worst > bound:
        where = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape))
        over = int((diff > bound).sum())
        relative = f"{worst / parts['scale']:.3g} of the scale" if parts["scale"] > 0 else "the scale is 0"
        raise AssertionError(
            f"{prefix}largest difference {worst:.6g} ({relative}) at index {where}: actual {a[where]!r}, "
            f"expected {e[where]!r}; allowed {bound:.6g} = c {parts['c']:g} x terms {parts['terms']} "
            f"x eps({parts['dtype']}) {parts['eps']:.3g} x scale {parts['scale']:.6g}; "
            f"{over} of {diff.size} entries exceed it"
        )
    return worst
