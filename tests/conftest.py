"""Shared fixtures: the repository root, tiny notebooks, and the book executed once per session
in the smoke profile (``_build/executed/smoke``) for the chapter, site and browser tests.

The tests mirror the package: ``unit/<part>/`` (core, book, viz, assign_add, leading_terms, pythia,
chapters, exercises) and ``integration/`` (what trains for real, spawns a process or a kernel,
executes a notebook or builds the site). ``helpers/`` and every folder of tests are put on
``sys.path`` here, so a test imports a helper (``from lt_markov import ...``) or a name of another
test module (``from test_aa_release import needs_release``) by its basename in any selection of
folders; basenames are unique across folders (pytest's default import mode needs that anyway)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat
import pytest

import mechbook  # noqa: F401  (before any test loads numpy or torch: it pins their CPU kernels)

ROOT = Path(__file__).resolve().parent.parent
#: The TinyStories text the tests read: the environment's choice, else the offline sample beside the checkout.
SAMPLE = Path(
    os.environ.get("MECHBOOK_TINYSTORIES", ROOT.parent / "shared" / "data" / "tinystories" / "tinystories-sample.txt")
)
TESTS = Path(__file__).resolve().parent
for _folder in [TESTS / "helpers", *sorted({p.parent for p in TESTS.rglob("test_*.py")})]:
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


def make_notebook(path: Path, cells: list[tuple[str, str]], parameters: str | None = 'profile = "cpu"') -> Path:
    """Write a notebook of ``(kind, source)`` cells (kind ``code`` or ``md``) with a parameters cell
    first when ``parameters`` is given."""
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": KERNELSPEC})
    if parameters is not None:
        nb.cells.append(nbformat.v4.new_code_cell(parameters, metadata={"tags": ["parameters"]}))
    for kind, source in cells:
        nb.cells.append(nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source))
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def smoke_book():
    """Execute every chapter of ``_toc.yml`` in the smoke profile once per session (cached runs
    are reused) and return the results."""
    from mechbook.book.config import ExecuteConfig
    from mechbook.book.run import execute_book

    os.environ.setdefault("MECHBOOK_TINYSTORIES", str(SAMPLE))
    cfg = ExecuteConfig(profile="smoke", root=ROOT, cell_timeout=600)  # a hung cell fails, not CI
    return cfg, execute_book(cfg)


@pytest.fixture(scope="session")
def built_site(smoke_book):
    """The HTML site built from the smoke execution (Sphinx warnings are errors)."""
    from mechbook.book.site import build_site

    cfg, _ = smoke_book
    return build_site(cfg)
