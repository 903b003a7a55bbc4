"""The executor (mechbook/execute.py): cache key, papermill runs, failure reports, thresholds,
and the bench dispatcher."""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path

import nbformat
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import make_notebook
from mechbook import execute
from mechbook.benchmarks import run as run_bench
from mechbook.execute import ExecuteConfig, cache_key, check_thresholds, execute_book, failures, read_records


def _tiny_repo(tmp: Path) -> Path:
    """A repository of two chapters (one ok, one failing at its third cell) and a fake package."""
    (tmp / "mechbook").mkdir()
    (tmp / "mechbook" / "helper.py").write_text("X = 1\n")
    (tmp / "requirements.txt").write_text("numpy==2.4.6\n")
    (tmp / "_config.yml").write_text("title: tiny\n")
    (tmp / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nparts:\n  - caption: P\n    chapters:\n"
        "      - file: book/p/01_ok\n      - file: book/p/02_bad\n"
    )
    (tmp / "book").mkdir()
    (tmp / "book" / "intro.md").write_text("# Intro\n")
    make_notebook(
        tmp / "book" / "p" / "01_ok.ipynb",
        [("md", "# Ok\nfirst prose"), ("code", "import os, mechbook\nmechbook.record('profile_seen', profile)\n"
                                               "mechbook.record('quiet', os.environ.get('MECHBOOK_QUIET'))\n"
                                               "mechbook.record('cwd_name', os.path.basename(os.getcwd()))")],
    )
    make_notebook(tmp / "book" / "p" / "02_bad.ipynb", [("code", "x = 1"), ("code", "raise ValueError('broken on purpose')")])
    return tmp


def test_cache_key_tracks_code_package_requirements_parameters_not_prose(tmp_path, monkeypatch):
    repo = _tiny_repo(tmp_path)
    nb_path = repo / "book" / "p" / "01_ok.ipynb"
    params = {"profile": "smoke"}
    base = cache_key(nb_path, params, repo)
    assert cache_key(nb_path, params, repo) == base

    nb = nbformat.read(nb_path, as_version=4)
    nb.cells[1].source += "\nmore prose"
    nbformat.write(nb, nb_path)
    assert cache_key(nb_path, params, repo) == base, "markdown edits must not invalidate the run"

    assert cache_key(nb_path, {"profile": "cpu"}, repo) != base
    (repo / "mechbook" / "helper.py").write_text("X = 2\n")
    k_pkg = cache_key(nb_path, params, repo)
    assert k_pkg != base
    (repo / "requirements.txt").write_text("numpy==2.4.5\n")
    k_req = cache_key(nb_path, params, repo)
    assert k_req != k_pkg
    monkeypatch.setenv("MECHBOOK_TINYSTORIES", "/elsewhere.txt")
    k_env = cache_key(nb_path, params, repo)
    assert k_env != k_req
    nb.cells[2].source += "\n1 + 1"
    nbformat.write(nb, nb_path)
    k_code = cache_key(nb_path, params, repo)
    assert k_code != k_env
    nb.cells[2].metadata["tags"] = ["hide-input"]
    nbformat.write(nb, nb_path)
    assert cache_key(nb_path, params, repo) != k_code


def test_execute_runs_caches_and_reports_failures(tmp_path):
    repo = _tiny_repo(tmp_path)
    cfg = ExecuteConfig(profile="smoke", root=repo, cell_timeout=120)
    first = {r.source.stem: r for r in execute_book(cfg)}
    assert first["01_ok"].status == "executed"
    assert read_records(first["01_ok"].output) == {"profile_seen": "smoke", "quiet": "1", "cwd_name": "p"}
    bad = first["02_bad"]
    assert bad.status == "failed" and "ValueError" in bad.failure and "broken on purpose" in bad.failure
    report = nbformat.read(bad.output, as_version=4)
    tracebacks = [o for c in report.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert tracebacks and tracebacks[0].ename == "ValueError", "the failed notebook keeps its traceback"
    lines = failures(list(first.values()))
    assert len(lines) == 1 and lines[0].startswith("book/p/02_bad.ipynb") and "cell" in lines[0]

    src = repo / "book" / "p" / "01_ok.ipynb"
    nb = nbformat.read(src, as_version=4)
    nb.cells[1].source = "# Ok\nrewritten prose"
    nbformat.write(nb, src)
    second = {r.source.stem: r for r in execute_book(cfg)}
    assert second["01_ok"].status == "cached"
    assert second["02_bad"].status == "failed", "a failed chapter is never reused"
    out = nbformat.read(second["01_ok"].output, as_version=4)
    assert any("rewritten prose" in c.source for c in out.cells if c.cell_type == "markdown")
    assert read_records(out) == read_records(first["01_ok"].output)
    assert any("injected-parameters" in c.metadata.get("tags", []) for c in out.cells)


def test_stage_site_copies_pages_and_unexecuted_notebooks(tmp_path):
    repo = _tiny_repo(tmp_path)
    cfg = ExecuteConfig(profile="smoke", root=repo)
    staged = execute.stage_site(cfg)
    assert (staged / "_toc.yml").exists() and (staged / "book" / "intro.md").exists()
    assert (staged / "book" / "p" / "02_bad.ipynb").exists()


def test_select_rejects_unknown_chapter(tmp_path):
    repo = _tiny_repo(tmp_path)
    notebooks = execute.toc_notebooks(repo)
    assert [p.stem for p in execute.select(notebooks, ("02_bad",))] == ["02_bad"]
    with pytest.raises(SystemExit, match="unknown chapter"):
        execute.select(notebooks, ("nope",))


def test_toc_entry_without_file_is_reported(tmp_path):
    repo = _tiny_repo(tmp_path)
    (repo / "book" / "p" / "02_bad.ipynb").unlink()
    with pytest.raises(FileNotFoundError, match="02_bad"):
        execute.toc_files(repo)


def test_check_thresholds_bounds():
    records = {"a": 0.5, "n": 10, "s": "yes"}
    assert check_thresholds(records, {"a": {"min": 0.4, "max": 0.6}, "n": {"equals": 10}, "s": {"equals": "yes"}}) == []
    problems = check_thresholds(records, {"a": {"min": 0.6}, "n": {"max": 5}, "missing": {"min": 0}, "s": {"min": 1}, "a ": {"avg": 1}})
    assert len(problems) == 5
    assert any("not recorded" in p for p in problems) and any("not a number" in p for p in problems)


@given(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6), st.floats(-1e6, 1e6))
def test_check_thresholds_matches_interval_membership(value, lo, hi):
    ok = check_thresholds({"v": value}, {"v": {"min": lo, "max": hi}}) == []
    assert ok == (lo <= value <= hi)


def test_bench_dispatch(monkeypatch):
    seen = []
    fake = types.ModuleType("mechbook.benchmarks.fake_bench")
    fake.main = lambda argv: seen.append(argv) or 3
    monkeypatch.setitem(sys.modules, "mechbook.benchmarks.fake_bench", fake)
    monkeypatch.setattr("mechbook.benchmarks.available", lambda: ["fake-bench"])
    assert run_bench("fake-bench", ["--n", "2"]) == 3 and seen == [["--n", "2"]]
    with pytest.raises(SystemExit, match="no benchmark named 'nope'"):
        run_bench("nope", [])


def test_cli(capsys):
    from mechbook.__main__ import main

    with pytest.raises(SystemExit):
        main(["execute", "--profile", "gpu"])
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="no benchmark named"):
        main(["bench", "no-such-bench"])


def test_cli_exits_non_zero_naming_failed_chapter_and_cell(tmp_path, monkeypatch, capsys):
    import functools

    from mechbook.__main__ import main

    repo = _tiny_repo(tmp_path)
    monkeypatch.setattr(execute, "ExecuteConfig", functools.partial(ExecuteConfig, root=repo))
    assert main(["execute", "--profile", "smoke", "--only", "02_bad"]) == 1
    captured = capsys.readouterr()
    assert "FAILED book/p/02_bad.ipynb: cell" in captured.err and "ValueError" in captured.err
    assert "[1/1] book/p/02_bad.ipynb (smoke)" in captured.out
    assert main(["execute", "--profile", "smoke", "--only", "01_ok"]) == 0
    (repo / "book" / "thresholds").mkdir(parents=True)
    (repo / "book" / "thresholds" / "01_ok.yml").write_text("smoke:\n  profile_seen: {equals: smoke}\n")
    assert main(["check", "--profile", "smoke", "--only", "01_ok"]) == 0
    (repo / "book" / "thresholds" / "01_ok.yml").write_text("smoke:\n  profile_seen: {equals: cpu}\n")
    assert main(["check", "--profile", "smoke", "--only", "01_ok"]) == 1


def test_parameters_cells_are_hidden_from_the_site(tmp_path):
    repo = _tiny_repo(tmp_path)
    cfg = ExecuteConfig(profile="smoke", root=repo, only=("01_ok",), cell_timeout=120)
    for _ in range(2):  # executed, then cached (the prose is refreshed from the source)
        (result,) = execute_book(cfg)
        nb = nbformat.read(result.output, as_version=4)
        tagged = {
            kind: [c for c in nb.cells if kind in c.metadata.get("tags", [])]
            for kind in ("parameters", "injected-parameters")
        }
        assert all(len(cells) == 1 for cells in tagged.values())
        for cells in tagged.values():
            assert "remove-cell" in cells[0].metadata["tags"]
        shown = [c for c in nb.cells if "remove-cell" not in c.metadata.get("tags", [])]
        assert shown and all("profile = " not in c.source for c in shown)
    assert result.status == "cached"


def test_unknown_injected_knob_is_refused_before_any_kernel(tmp_path, monkeypatch):
    import papermill

    repo = _tiny_repo(tmp_path)
    started = []
    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: started.append(a))
    cfg = ExecuteConfig(profile="smoke", root=repo, knobs=(("steps", 3),))
    with pytest.raises(SystemExit, match=r"unknown knob\(s\) steps; its parameters cell declares profile"):
        execute_book(cfg)
    assert not started and not cfg.out_dir.exists()
