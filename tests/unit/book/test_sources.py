"""The committed sources: notebooks are clean nbformat with one parameters cell and kernel
python3, and _toc.yml lists exactly the pages under book/ (book/thresholds holds the
chapters' bounds, not pages)."""

from __future__ import annotations

import nbformat
import pytest
from conftest import ROOT

from mechbook.book.toc import toc_files

NOTEBOOKS = sorted(p for p in (ROOT / "book").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_clean_and_parameterised(path):
    nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    assert nb.nbformat == 4
    nbformat.validate(nb)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", "kernel must be python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "a chapter has code"
    for c in code:
        assert not c.get("outputs"), f"committed with outputs: {c.source[:40]!r}"
        assert c.get("execution_count") is None, f"committed with an execution count: {c.source[:40]!r}"
    tagged = [i for i, c in enumerate(code) if "parameters" in c.metadata.get("tags", [])]
    assert tagged == [0], "exactly one cell tagged 'parameters', and it is the first code cell"
    assert 'profile = "cpu"' in code[0].source


def test_toc_lists_every_book_file_and_only_existing_ones(root):
    listed = {str(p) for p in toc_files(root)}
    on_disk = {
        str(p.relative_to(root))
        for p in (root / "book").rglob("*")
        if p.suffix in {".ipynb", ".md"} and ".ipynb_checkpoints" not in p.parts and "thresholds" not in p.parts
    }
    assert not on_disk - listed, f"not in _toc.yml: {sorted(on_disk - listed)}"
    assert listed <= on_disk, f"_toc.yml lists files outside book/: {sorted(listed - on_disk)}"
