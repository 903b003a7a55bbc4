"""Every chapter's exercises (mechbook/exercises, issue 24), found from the notebooks themselves:
as committed, every check passes; in exercise form (mechbook.exercises.notebooks), every check says
"not written yet" and nothing raises; each exercise has its three cells (task with a folded hint,
folded solution with matched markers, check) and is used by exactly one notebook. Also the stub
writer on literal notebooks and ``python -m mechbook exercises``."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import nbformat
import pytest

from mechbook.book.toc import ROOT, toc_files
from mechbook.exercises import EXERCISES
from mechbook.exercises.notebooks import BEGIN, END, exercise_form, stub_source, write_exercises

CHECK_CALL = re.compile(r"\bcheck_(\w+)\(")
NOTEBOOKS = [p for p in toc_files(ROOT) if p.suffix == ".ipynb"]


def _read(rel: Path):
    return nbformat.read(ROOT / rel, as_version=4)


def _tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def _exercise_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code" and "exercise" in _tags(c)]


WITH_EXERCISES = [p for p in NOTEBOOKS if _exercise_cells(_read(p))]


def _run_cells(cells) -> list[str]:
    """Run ``cells`` in order in one fresh namespace (as a reader's kernel would, with nothing of
    the chapter defined) and return the check lines they printed."""
    namespace: dict = {"__name__": "__exercises__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for cell in cells:
            exec(compile(cell.source, "<exercise cell>", "exec"), namespace)
    return [line for line in out.getvalue().splitlines() if re.match(r"[✓✗] check_", line)]


def _checks(nb) -> list[str]:
    return [m for c in _exercise_cells(nb) if "solution" not in _tags(c) for m in CHECK_CALL.findall(c.source)]


@pytest.mark.parametrize("rel", WITH_EXERCISES, ids=lambda p: p.stem)
def test_committed_solutions_pass_their_checks(rel):
    nb = _read(rel)
    lines = _run_cells(_exercise_cells(nb))
    assert len(lines) == len(_checks(nb)), lines
    assert all(line.startswith("✓") for line in lines), lines


@pytest.mark.parametrize("rel", WITH_EXERCISES, ids=lambda p: p.stem)
def test_exercise_form_stubs_say_not_written_and_raise_nothing(rel):
    nb = exercise_form(_read(rel), str(rel))
    cells = _exercise_cells(nb)
    assert not any(BEGIN in c.source or END in c.source for c in cells)
    lines = _run_cells(cells)
    assert len(lines) == len(_checks(nb)), lines
    assert all(line.startswith("✗") and "not written yet" in line for line in lines), lines


@pytest.mark.parametrize("rel", WITH_EXERCISES, ids=lambda p: p.stem)
def test_each_exercise_is_task_hint_folded_solution_then_check(rel):
    """Markdown task with its label, heading and folded hint; the solution cell (tags exercise,
    solution, hide-input; one BEGIN and one END per region, in order); then its check cell."""
    nb = _read(rel)
    chapter = rel.stem[:2]
    for i, cell in enumerate(nb.cells):
        if "solution" not in _tags(cell):
            continue
        task, check = nb.cells[i - 1], nb.cells[i + 1]
        assert set(_tags(cell)) >= {"exercise", "solution", "hide-input"}, (rel, i, _tags(cell))
        assert task.cell_type == "markdown" and re.search(rf"^\(ch{chapter}-ex-[\w-]+\)=$", task.source, re.M), (
            rel,
            i,
        )
        assert re.search(r"^### Exercise \d+\.\d+: ", task.source, re.M) and ":::{dropdown} Hint" in task.source
        assert check.cell_type == "code" and _tags(check) == ["exercise"] and CHECK_CALL.search(check.source)
        marks = [line.strip() for line in cell.source.splitlines() if line.strip() in (BEGIN, END)]
        assert marks and marks == [BEGIN, END] * (len(marks) // 2), (rel, i, marks)
        stub_source(cell.source, f"{rel}, cell {i}")
    for i, cell in enumerate(nb.cells):
        if BEGIN in cell.source or END in cell.source:
            assert "solution" in _tags(cell), f"{rel}, cell {i}: solution markers in a cell not tagged solution"


def test_every_exercise_is_used_by_exactly_one_notebook():
    used: dict[str, list[str]] = {}
    for rel in NOTEBOOKS:
        for name in _checks(_read(rel)):
            used.setdefault(name, []).append(rel.stem)
    assert set(used) <= set(EXERCISES), f"checks with no Exercise: {set(used) - set(EXERCISES)}"
    wrong = {name: used.get(name, []) for name in EXERCISES if len(used.get(name, [])) != 1}
    assert not wrong, f"exercises used by no notebook or by several: {wrong}"


CELL = '''import numpy as np


def outer(x):
    """Two regions, one nested deeper."""
    ### BEGIN SOLUTION
    y = x + 1
    ### END SOLUTION

    def inner(z):
        if z:
            ### BEGIN SOLUTION
            return z * 2
            ### END SOLUTION
        return 0

    return inner(y)
'''


def test_stub_source_replaces_each_region_at_its_indentation():
    stubbed = stub_source(CELL)
    assert stubbed.splitlines() == [
        "import numpy as np",
        "",
        "",
        "def outer(x):",
        '    """Two regions, one nested deeper."""',
        '    raise NotImplementedError("outer: write it, then run the check below")',
        "",
        "    def inner(z):",
        "        if z:",
        '            raise NotImplementedError("inner: write it, then run the check below")',
        "        return 0",
        "",
        "    return inner(y)",
    ]
    compile(stubbed, "<stub>", "exec")
    assert stub_source("x = 1\n") == "x = 1"


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("def f():\n    ### BEGIN SOLUTION\n    return 1\n", "region opened on line 2 has no '### END SOLUTION'"),
        ("def f():\n    return 1\n    ### END SOLUTION\n", "line 3 closes a solution region that was never opened"),
        ("def f():\n    ### BEGIN SOLUTION\n    ### BEGIN SOLUTION\n", "line 3 opens a solution region inside another"),
    ],
)
def test_unmatched_markers_are_one_clear_line(source, says):
    with pytest.raises(ValueError) as error:
        stub_source(source, "book/x.ipynb, cell 4")
    text = str(error.value)
    assert "\n" not in text and text.startswith("book/x.ipynb, cell 4: ") and says in text


def test_exercise_form_stubs_code_clears_outputs_and_leaves_the_notebook():
    nb = nbformat.v4.new_notebook()
    solution = nbformat.v4.new_code_cell(CELL, metadata={"tags": ["exercise", "solution"]}, execution_count=3)
    solution.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hi\n")]
    nb.cells = [nbformat.v4.new_markdown_cell(f"{BEGIN} in prose stays"), solution, nbformat.v4.new_code_cell("f(1)")]
    form = exercise_form(nb)
    assert form.cells[0].source == nb.cells[0].source and form.cells[2].source == "f(1)"
    assert form.cells[1].source == stub_source(CELL) and form.cells[1].metadata == solution.metadata
    assert all(c.outputs == [] and c.execution_count is None for c in form.cells if c.cell_type == "code")
    assert nb.cells[1].source == CELL and nb.cells[1].outputs, "the notebook itself is left as it was"
    broken = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell(BEGIN)])
    with pytest.raises(ValueError, match=r"^book/a\.ipynb, cell 1: "):
        exercise_form(broken, "book/a.ipynb")


def test_the_exercises_command_writes_every_chapter(tmp_path, capsys):
    from mechbook.__main__ import main

    assert main(["exercises", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == len(NOTEBOOKS)
    for rel in NOTEBOOKS:
        target = tmp_path.joinpath(*rel.parts[1:])
        assert f"wrote {target}" in printed
        written = nbformat.read(target, as_version=4)
        assert [c.source for c in written.cells] == [c.source for c in exercise_form(_read(rel)).cells]


def test_an_unwritable_folder_gets_one_line_not_errno_text(tmp_path, capsys):
    from mechbook.__main__ import main

    (tmp_path / "a-file").write_text("a file where a folder should be")
    assert main(["exercises", "--out", str(tmp_path / "a-file" / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: cannot write the exercises to ")
    assert "--out DIR" in err and "Errno" not in err


def test_a_second_run_keeps_a_readers_edited_notebook_and_writes_the_fresh_form_beside_it(tmp_path):
    rels = NOTEBOOKS[:2]
    first = dict(write_exercises(rels, ROOT, tmp_path))
    assert set(first.values()) == {"wrote"}
    edited, untouched = list(first)
    nb = nbformat.read(edited, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("my_work = 42"))
    nbformat.write(nb, edited)
    mine = edited.read_bytes()
    again = dict(write_exercises(rels, ROOT, tmp_path))
    assert again == {edited: "kept", untouched: "wrote"}
    assert edited.read_bytes() == mine, "the reader's notebook is left exactly as it was"
    fresh = nbformat.read(edited.with_suffix(".fresh.ipynb"), as_version=4)
    assert [c.source for c in fresh.cells] == [c.source for c in exercise_form(_read(rels[0])).cells]
    foreign = tmp_path / "other"
    foreign.mkdir()
    own = foreign.joinpath(*rels[1].parts[1:])
    own.parent.mkdir(parents=True)
    own.write_text("a file of the reader's, not written by a run")
    assert dict(write_exercises(rels[1:], ROOT, foreign)) == {own: "kept"}
    assert own.read_text() == "a file of the reader's, not written by a run"


def test_a_failed_write_leaves_no_half_notebook(tmp_path, monkeypatch):
    import errno
    import os as os_

    real = os_.fdopen

    def full_disk(fd, *args, **kwargs):
        fh = real(fd, *args, **kwargs)

        def write(data):
            raise OSError(errno.ENOSPC, "No space left on device")

        fh.write = write
        return fh

    monkeypatch.setattr("mechbook.cache.os.fdopen", full_disk)
    with pytest.raises(OSError, match="No space"):
        write_exercises(NOTEBOOKS[:1], ROOT, tmp_path)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()], "nothing, rather than a notebook cut short"
