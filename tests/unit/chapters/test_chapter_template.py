"""Every chapter follows one template: its module holds ``STEM``, ``ChapterConfig``, ``CONFIGS`` per
profile, ``resolve`` with flat keyword knobs, and ``record_all``; its notebook stays thin (at most 80
code lines outside exercise solutions), labels its figures ``fig-chNN-``, and follows one input
rule: a cell that binds a name shows its code, a cell that only presents hides it (``hide-input``),
exercise solutions fold, and the record cell is removed (DEVELOPING.md, "Chapter template"). A chapter
module presents: it never decides a claim (``evidence(``, ``by_id(``), imports torch or loads a model."""

from __future__ import annotations

import ast
import importlib
import inspect
import re

import nbformat
import pytest
from conftest import ROOT
from IPython.core.inputtransformer2 import TransformerManager

NOTEBOOKS = sorted((ROOT / "book").rglob("*.ipynb"))
NOTEBOOKS = [p for p in NOTEBOOKS if "_build" not in p.parts and ".ipynb_checkpoints" not in p.parts]
MAX_CODE_LINES = 80
BINDS = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)
OWN_TAGS = {"parameters", "exercise", "solution", "remove-cell"}


def _module_of(nb: nbformat.NotebookNode) -> str:
    (name,) = {
        m.group(1)
        for c in nb.cells
        if c.cell_type == "code"
        for m in re.finditer(r"from mechbook\.chapters import (\w+)", c.source)
    }
    return f"mechbook.chapters.{name}"


def _figure_prefix(stem: str) -> str:
    return f"fig-ch{stem[:2]}-" if stem[:2].isdigit() else f"fig-{stem}-"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_chapter_module_holds_the_template(path):
    module = importlib.import_module(_module_of(nbformat.read(path, as_version=4)))
    assert path.stem == module.STEM
    assert set(module.CONFIGS) >= {"smoke", "cpu", "paper"}
    assert all(isinstance(c, module.ChapterConfig) for c in module.CONFIGS.values())
    knobs = list(inspect.signature(module.resolve).parameters)
    assert knobs[0] == "profile" and not [k for k in knobs if "__" in k], knobs
    assert callable(module.record_all)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_notebook_is_thin_and_labels_its_figures_by_chapter(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code" and "solution" not in c.metadata.get("tags", [])]
    assert sum(len(c.source.splitlines()) for c in code) <= MAX_CODE_LINES
    labels = re.findall(r'figure\(\s*"([^"]+)"', "\n".join(c.source for c in code))
    assert all(label.startswith(_figure_prefix(path.stem)) for label in labels), labels


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_one_input_rule_decides_which_code_a_reader_sees(path):
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        tags = set(cell.metadata.get("tags", [])) if cell.cell_type == "code" else set()
        if cell.cell_type != "code" or tags & OWN_TAGS:
            assert "remove-input" not in tags, (path.stem, i)
            continue
        tree = ast.parse(TransformerManager().transform_cell(cell.source))
        binds = any(isinstance(node, BINDS) for node in tree.body)
        assert ("hide-input" in tags) == (not binds) and "remove-input" not in tags, (path.stem, i, cell.source[:60])


CHAPTER_MODULES = sorted(p for p in (ROOT / "mechbook" / "chapters").glob("*.py") if p.name != "__init__.py")
FORBIDDEN = {
    "evidence(": "decides the claims: the notebook computes `ev = evidence(TABLE, readings)` once",
    "by_id(": "decides a claim again: read its verdict from the notebook's `ev`",
    "import torch": "computes: tensors belong to the part's library",
    "from torch": "computes: tensors belong to the part's library",
    ".model(": "loads a model: the library loads it",
    "load_state_dict(": "loads a model: the library loads it",
    "from_pretrained(": "loads a model: the library loads it",
    "load_or_train(": "trains or loads a model: the notebook's visible cell does, through the library",
}
# Chapter modules that still decide claims or compute; empty: the rule holds for every chapter. A
# chapter added here must leave again once it presents only.
STILL_DECIDING: set[str] = set()


@pytest.mark.parametrize("path", CHAPTER_MODULES, ids=lambda p: p.stem)
def test_the_chapter_module_presents_and_never_decides_or_computes(path):
    """A chapter module presents what the library read and the notebook decided: it never calls
    ``evidence(`` or ``by_id(``, imports torch or loads a model. The known remainder may still
    decide, and must leave the list once it no longer does."""
    source = path.read_text(encoding="utf-8")
    found = {pattern: why for pattern, why in FORBIDDEN.items() if pattern in source}
    if path.stem in STILL_DECIDING:
        assert found, f"{path.stem} no longer decides or computes: take it off STILL_DECIDING"
        return
    assert not found, f"{path.name}: " + "; ".join(f"`{p}` {why}" for p, why in found.items())


def test_the_known_remainder_names_chapter_modules():
    assert {p.stem for p in CHAPTER_MODULES} >= STILL_DECIDING
