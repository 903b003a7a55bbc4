"""The exercise form of a chapter notebook: its solutions replaced by stubs (``python -m mechbook
exercises``, and the site's third download).

A solution cell (tags ``exercise`` and ``solution``) marks what the reader writes the way nbgrader
does::

    def bigram_map(tokens, vocab_size):
        ### BEGIN SOLUTION
        ...
        ### END SOLUTION

:func:`exercise_form` replaces each region, markers included, by one
``raise NotImplementedError("bigram_map: write it, then run the check below")`` at the region's
indentation; the check cell after it then prints "not written yet" instead of raising. Used for
every chapter (1-11).
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import nbformat

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
_DEF = re.compile(r"^\s*(?:async\s+)?def\s+(\w+)\s*\(")


def _function_name(lines: list[str], at: int) -> str:
    """The name of the innermost ``def`` above line ``at`` that encloses it (by indentation)."""
    indent = len(lines[at]) - len(lines[at].lstrip())
    for line in reversed(lines[:at]):
        match = _DEF.match(line)
        if match and len(line) - len(line.lstrip()) < indent:
            return match.group(1)
    return "this exercise"


def stub_source(source: str, where: str = "cell") -> str:
    """``source`` with every BEGIN/END SOLUTION region replaced by a ``NotImplementedError`` stub.

    ``where`` names the cell in the error for a marker without its partner (one line)."""
    lines = source.splitlines()
    out: list[str] = []
    begin: int | None = None
    for i, line in enumerate(lines):
        text = line.strip()
        if text == BEGIN:
            if begin is not None:
                raise ValueError(f"{where}: line {i + 1} opens a solution region inside another; add {END!r} first")
            begin = i
            indent = line[: len(line) - len(line.lstrip())]
            name = _function_name(lines, i)
            out.append(f'{indent}raise NotImplementedError("{name}: write it, then run the check below")')
        elif text == END:
            if begin is None:
                raise ValueError(f"{where}: line {i + 1} closes a solution region that was never opened ({BEGIN!r})")
            begin = None
        elif begin is None:
            out.append(line)
    if begin is not None:
        raise ValueError(f"{where}: the solution region opened on line {begin + 1} has no {END!r}; add it")
    return "\n".join(out)


def exercise_form(nb: Any, where: str = "notebook") -> Any:
    """A copy of ``nb`` with every solution region stubbed (:func:`stub_source`) and every code
    cell's outputs and execution count cleared; ``nb`` is left as it was."""
    form = copy.deepcopy(nb)
    for index, cell in enumerate(form.cells):
        if cell.cell_type != "code":
            continue
        if BEGIN in cell.source or END in cell.source:
            cell.source = stub_source(cell.source, f"{where}, cell {index}")
        cell.outputs = []
        cell.execution_count = None
    return form


MANIFEST = ".mechbook-exercises.json"
"""In the output folder: the sha256 of each notebook as the last run wrote it, so a later run can
tell a reader's edited notebook (kept) from its own unchanged one (replaced)."""


def write_exercises(notebooks: list[Path], root: Path, out: Path) -> list[tuple[Path, str]]:
    """Write the exercise form of each of ``notebooks`` (paths relative to ``root``, under
    ``book/``) to ``out/<part>/<stem>.ipynb``, each file whole or not at all; return each path with
    what happened: ``wrote``, or ``kept`` where the file there is not what the last run wrote (a
    reader's edits, or a file of their own), in which case the fresh form goes beside it as
    ``<stem>.fresh.ipynb`` and the reader's file is left as it is."""
    from mechbook.cache import atomic_write_bytes

    manifest_path = out / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        manifest = {}
    done = []
    for rel in notebooks:
        nb = nbformat.read(root / rel, as_version=4)
        parts = Path(rel).parts
        target = out.joinpath(*parts[1:]) if parts[0] == "book" else out / rel
        key = target.relative_to(out).as_posix()
        data = nbformat.writes(exercise_form(nb, str(rel))).encode()
        if target.exists() and _sha256(target) != manifest.get(key):
            atomic_write_bytes(target.with_suffix(".fresh.ipynb"), data)
            done.append((target, "kept"))
            continue
        atomic_write_bytes(target, data)
        manifest[key] = hashlib.sha256(data).hexdigest()
        atomic_write_bytes(manifest_path, json.dumps(manifest, indent=1, sort_keys=True).encode())
        done.append((target, "wrote"))
    return done


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
