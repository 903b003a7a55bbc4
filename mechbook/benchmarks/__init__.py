"""Benchmarks: ``python -m mechbook bench NAME [args]`` (one module per benchmark).

``NAME`` with ``-`` read as ``_`` names a module of this package; it must define
``main(argv: list[str]) -> int`` and print a final JSON line with its measurements.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path


def available() -> list[str]:
    """The benchmark names this package holds (module names with ``_`` shown as ``-``)."""
    return sorted(m.name.replace("_", "-") for m in pkgutil.iter_modules([str(Path(__file__).parent)]))


def run(name: str, argv: list[str]) -> int:
    """Import ``mechbook.benchmarks.<name with - as _>`` and return its ``main(argv)``."""
    module_name = name.replace("-", "_")
    if not module_name.isidentifier() or module_name not in {n.replace("-", "_") for n in available()}:
        raise SystemExit(f"no benchmark named {name!r}; available: {', '.join(available()) or 'none yet'}")
    module = importlib.import_module(f"{__name__}.{module_name}")
    main = getattr(module, "main", None)
    if not callable(main):
        raise SystemExit(f"mechbook/benchmarks/{module_name}.py has no main(argv) -> int")
    return int(main(argv))
