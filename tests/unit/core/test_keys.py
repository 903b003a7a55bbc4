"""Keys that change only when results can (issue 30): code digests that ignore docstrings and
comments (mechbook/cache.py), and a chapter's execution key that follows the import closure of
its notebook's cells (mechbook/book/run.py)."""

from __future__ import annotations

import ast
import os
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest
from conftest import make_notebook
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook import cache
from mechbook.book.run import cache_key
from mechbook.cache import code_digest, code_fingerprint, module_closure

LIB = '''"""The module's docstring."""

import math

# a comment
SCALE = 3
"""An attribute docstring."""


class Model:
    """A class docstring."""

    def forward(self, x):
        """A method docstring."""
        return x * SCALE  # an end-of-line comment


def helper(x):
    """A function docstring."""
    if x:
        """A string standing alone in a branch."""
        return math.sqrt(x)
    return 0.0
'''


def _write(file: Path, text: str) -> None:
    """Write ``text`` with a modification time later than the file's last one (the digests are
    memoised by size and mtime, and a coarse clock could give two writes the same)."""
    old = file.stat().st_mtime_ns if file.exists() else 0
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)
    now = max(file.stat().st_mtime_ns, old + 1_000_000)
    os.utime(file, ns=(now, now))


def _edit(file: Path, old: str, new: str) -> None:
    text = file.read_text()
    assert old in text, f"{old!r} is not in {file}"
    _write(file, text.replace(old, new, 1))


@pytest.fixture
def package(tmp_path) -> Path:
    """A temporary ``mechbook`` package: ``lib`` (code with every kind of docstring and comment),
    ``user`` (imports ``lib``), ``alone`` (imports nothing) and a chapter ``chapters.ch01`` that
    imports the chart module ``viz`` (both unkeyed for the cache); the folder above it returned."""
    pkg = tmp_path / "mechbook"
    _write(pkg / "__init__.py", '"""A package."""\n')
    _write(pkg / "lib.py", LIB)
    _write(pkg / "user.py", "from mechbook.lib import helper\n\nVALUE = helper(4)\n")
    _write(pkg / "alone.py", "X = 1\n")
    _write(pkg / "viz.py", "WIDTH = 300\n")
    _write(pkg / "chapters" / "__init__.py", "")
    _write(pkg / "chapters" / "ch01.py", "from mechbook import viz\n\nTITLE = 'one'\n")
    return tmp_path


PROSE_EDITS = [
    ('"""The module\'s docstring."""', '"""The module\'s docstring, reworded at length."""'),
    ('"""An attribute docstring."""', '"""Another attribute docstring."""'),
    ('"""A class docstring."""', '"""A class docstring\n\n    over two paragraphs."""'),
    ('"""A method docstring."""', "'''A method docstring, other quotes.'''"),
    ('"""A function docstring."""', ""),
    ('"""A string standing alone in a branch."""', '"""Reworded."""'),
    ("# a comment", "# a comment, reworded\n# and a second line"),
    ("  # an end-of-line comment", ""),
    ("import math\n", "import math\n\n\n"),
]
CODE_EDITS = [
    ("SCALE = 3", "SCALE = 4"),
    ("return x * SCALE", "return x + SCALE"),
    ("return 0.0", "return 1.0"),
    ("import math\n", "import math\nimport cmath\n"),
    ('"""A function docstring."""', '_ = """A function docstring."""'),
]


@pytest.mark.parametrize("old, new", PROSE_EDITS)
def test_a_docstring_or_comment_edit_changes_no_code_digest(package, old, new):
    before = code_digest(["mechbook.user"], package)
    _edit(package / "mechbook" / "lib.py", old, new)
    assert code_digest(["mechbook.user"], package) == before


@pytest.mark.parametrize("old, new", CODE_EDITS)
def test_a_changed_constant_or_statement_changes_the_code_digest(package, old, new):
    before = code_digest(["mechbook.user"], package)
    alone = code_digest(["mechbook.alone"], package)
    _edit(package / "mechbook" / "lib.py", old, new)
    assert code_digest(["mechbook.user"], package) != before
    assert code_digest(["mechbook.alone"], package) == alone, "a module that does not import lib keeps its key"


#: Characters of a docstring or a comment: letters, digits, punctuation and spaces, no quote or backslash.
PROSE = st.characters(categories=("L", "N", "P", "Zs"), exclude_characters='"\\')


@settings(max_examples=30, deadline=None)
@given(doc=st.text(PROSE, max_size=40), comment=st.text(PROSE, max_size=40), value=st.integers(-1000, 1000))
def test_the_fingerprint_sees_the_constant_and_nothing_of_the_prose(doc, comment, value):
    with tempfile.TemporaryDirectory() as folder:
        plain, worded, changed = (Path(folder) / f"{n}.py" for n in ("plain", "worded", "changed"))
        plain.write_text(f"def f():\n    return {value}\n")
        worded.write_text(f'"""{doc}"""\n# {comment}\ndef f():\n    """{doc}"""\n    return {value}  # {comment}\n')
        changed.write_text(f"def f():\n    return {value + 1}\n")
        assert code_fingerprint(worded) == code_fingerprint(plain)
        assert code_fingerprint(changed) != code_fingerprint(plain)


PACKAGE = Path(cache.__file__).resolve().parent


@pytest.fixture
def package_copy(tmp_path) -> Path:
    """A temporary copy of the real mechbook package (the folder above it returned)."""
    shutil.copytree(PACKAGE, tmp_path / "mechbook", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _first_docstring(file: Path) -> str:
    text = file.read_text()
    start = text.index('"""') + 3
    return text[start : text.index('"""', start)]


def test_rewording_the_training_modules_docstring_keeps_part_two_training_key(package_copy):
    """The issue's case: a one-word docstring edit of ``assign_add/train.py`` retrained every
    cached Part II run."""
    train = package_copy / "mechbook" / "assign_add" / "train.py"
    modules = ["mechbook.assign_add.train"]
    before = code_digest(modules, package_copy)
    doc = _first_docstring(train)
    _edit(train, doc, doc + " Reworded.")
    _edit(train, "\n\n", "\n\n# a new comment\n")
    assert code_digest(modules, package_copy) == before
    _write(train, train.read_text() + "\nEXTRA = 1\n")
    assert code_digest(modules, package_copy) != before


def test_a_notebook_closure_follows_presentation_modules_but_not_other_chapters(package_copy):
    """The cache stops at UNKEYED modules; a notebook's key follows them (its prose, charts and
    records come from them), and still reaches no other chapter."""
    starts = ["mechbook", "mechbook.chapters.ch08_training_dynamics", "mechbook.chapters.common"]
    full = module_closure(starts, package_copy, unkeyed=())
    assert {"mechbook.records", "mechbook.profiles", "mechbook.assign_add.model"} <= set(full)
    assert [m for m in full if m.startswith("mechbook.chapters.ch")] == ["mechbook.chapters.ch08_training_dynamics"]
    keyed = module_closure(starts, package_copy)
    assert "mechbook.records" not in keyed and "mechbook.records" in full


def _book(root: Path) -> tuple[Path, Path]:
    """Two chapters in a temporary checkout: one imports ``mechbook.user`` (hence ``lib``), the
    other only ``mechbook.alone``."""
    (root / "requirements.txt").write_text("numpy==2.4.6\n")
    first = make_notebook(
        root / "book" / "p" / "01_uses_lib.ipynb",
        [("md", "# One"), ("code", "import mechbook\nfrom mechbook import user\nuser.VALUE")],
    )
    second = make_notebook(
        root / "book" / "p" / "02_alone.ipynb",
        [("md", "# Two"), ("code", "%time x = 1\nfrom mechbook.alone import X\n!true")],
    )
    return first, second


def _keys(root: Path, notebooks: tuple[Path, Path]) -> list[str]:
    return [cache_key(nb, {"profile": "smoke"}, root) for nb in notebooks]


def test_a_chapter_key_follows_the_modules_its_cells_import(package):
    notebooks = _book(package)
    first, second = _keys(package, notebooks)
    lib = package / "mechbook" / "lib.py"
    for old, new in PROSE_EDITS[:3]:
        _edit(lib, old, new)
    _edit(package / "mechbook" / "__init__.py", "A package.", "A package, reworded.")
    assert _keys(package, notebooks) == [first, second], "a docstring edit anywhere re-executes nothing"

    _edit(lib, "SCALE = 3", "SCALE = 4")
    changed, kept = _keys(package, notebooks)
    assert changed != first, "the chapter that imports user (which imports lib) re-executes"
    assert kept == second, "the chapter that does not reach lib is kept, magics and all"

    _write(package / "mechbook" / "unused.py", "Y = 2\n")
    assert _keys(package, notebooks) == [changed, kept], "a module no notebook imports re-executes nothing"
    _edit(package / "mechbook" / "alone.py", "X = 1", "X = 2")
    assert _keys(package, notebooks)[1] != kept


def test_a_chapter_key_follows_its_chapter_module_and_the_charts_it_imports(package):
    """Chapters and charts are unkeyed for the cache (they change no trained value) but make a
    notebook's prose and figures: its key follows them."""
    notebook = make_notebook(
        package / "book" / "p" / "03_chapter.ipynb", [("code", "from mechbook.chapters import ch01")]
    )
    base = cache_key(notebook, {"profile": "smoke"}, package)
    _edit(package / "mechbook" / "chapters" / "ch01.py", "'one'", "'one, reworded'")
    reworded = cache_key(notebook, {"profile": "smoke"}, package)
    assert reworded != base
    _edit(package / "mechbook" / "viz.py", "300", "320")
    assert cache_key(notebook, {"profile": "smoke"}, package) != reworded


def test_a_chapter_key_still_follows_its_cells_and_notebook(package):
    notebooks = _book(package)
    first, _ = _keys(package, notebooks)
    nb = nbformat.read(notebooks[0], as_version=4)
    nb.cells[-1].source = "import mechbook.alone\n" + nb.cells[-1].source
    nbformat.write(nb, notebooks[0])
    with_alone = _keys(package, notebooks)[0]
    assert with_alone != first, "a new import is a new cell source and a new closure"
    _edit(package / "mechbook" / "alone.py", "X = 1", "X = 2")
    assert _keys(package, notebooks)[0] != with_alone, "the newly imported module is followed"


def _reworded(source: str) -> str:
    """``source`` with a word added at the start of every docstring (module, classes, functions)
    and a comment line before every top-level statement."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    at = []
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and cache._is_prose(body[0]):
            doc = body[0].value
            text = lines[doc.lineno - 1][doc.col_offset :]
            opening = len(text) - len(text.lstrip("rRuU"))  # a string prefix (r"""...)
            quotes = 3 if text[opening : opening + 3] in ('"""', "'''") else 1
            at.append((doc.lineno - 1, doc.col_offset + opening + quotes))
    for line, col in sorted(at, reverse=True):
        lines[line] = lines[line][:col] + "Reworded. " + lines[line][col:]
    for stmt in reversed(tree.body):
        lines.insert(stmt.lineno - 1, "# a new comment\n")
    return "".join(lines)


def test_rewording_every_docstring_of_the_package_changes_no_fingerprint(tmp_path):
    """The issue's 'a docstring edit anywhere re-executes nothing', on every module of the package."""
    files = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
    assert len(files) > 100
    for i, file in enumerate(files):
        copy = tmp_path / f"{i}.py"
        copy.write_text(_reworded(file.read_text()))
        assert copy.read_text() != file.read_text() and code_fingerprint(copy) == code_fingerprint(file), file
