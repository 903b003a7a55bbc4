"""The book's machinery (mechbook/book/): toc, cache key, papermill runs, failure reports,
thresholds, the command line and the bench dispatcher."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import types
from pathlib import Path

import nbformat
import pytest
from conftest import make_notebook
from hypothesis import given
from hypothesis import strategies as st

from mechbook.benchmarks import run as run_bench
from mechbook.book import environment, site, toc
from mechbook.book.checks import check_book, check_thresholds
from mechbook.book.config import ExecuteConfig
from mechbook.book.relay import format_seconds
from mechbook.book.run import cache_key, execute_book, failures
from mechbook.records import read_records


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
        [
            ("md", "# Ok\nfirst prose"),
            (
                "code",
                "import os, mechbook\nmechbook.record('profile_seen', profile)\n"
                "mechbook.record('quiet', os.environ.get('MECHBOOK_QUIET'))\n"
                "mechbook.record('cwd_name', os.path.basename(os.getcwd()))",
            ),
        ],
    )
    make_notebook(
        tmp / "book" / "p" / "02_bad.ipynb", [("code", "x = 1"), ("code", "raise ValueError('broken on purpose')")]
    )
    return tmp


def test_cache_key_tracks_code_package_requirements_parameters_not_prose(tmp_path, monkeypatch):
    repo = _tiny_repo(tmp_path)
    nb_path = repo / "book" / "p" / "01_ok.ipynb"
    params = {"profile": "smoke"}
    (repo / "mechbook" / "__init__.py").write_text("from mechbook import helper\n")  # the cells import mechbook
    base = cache_key(nb_path, params, repo)
    assert cache_key(nb_path, params, repo) == base

    nb = nbformat.read(nb_path, as_version=4)
    nb.cells[1].source += "\nmore prose"
    nbformat.write(nb, nb_path)
    assert cache_key(nb_path, params, repo) == base, "markdown edits must not invalidate the run"

    assert cache_key(nb_path, {"profile": "cpu"}, repo) != base
    (repo / "mechbook" / "helper.py").write_text("X = 22\n")
    k_pkg = cache_key(nb_path, params, repo)
    assert k_pkg != base
    (repo / "requirements.txt").write_text("numpy==2.4.5\n")
    k_txt = cache_key(nb_path, params, repo)
    assert k_txt != k_pkg
    (repo / "requirements.lock").write_text("numpy==2.4.5\nsix==1.16.0\n")
    k_req = cache_key(nb_path, params, repo)
    assert k_req != k_txt, "a change of the lock alone (a package beneath the pins) re-executes"
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
    tracebacks = [
        o for c in report.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"
    ]
    assert tracebacks and tracebacks[0].ename == "ValueError", "the failed notebook keeps its traceback"
    lines = failures(list(first.values()))
    assert len(lines) == 1 and lines[0].startswith("book/p/02_bad.ipynb: code cell 3 line 1 (")

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
    staged = site.stage_site(cfg)
    assert (staged / "_toc.yml").exists() and (staged / "book" / "intro.md").exists()
    assert (staged / "book" / "p" / "02_bad.ipynb").exists()


def test_select_rejects_unknown_chapter(tmp_path):
    repo = _tiny_repo(tmp_path)
    notebooks = toc.toc_notebooks(repo)
    assert [p.stem for p in toc.select(notebooks, ("02_bad",))] == ["02_bad"]
    with pytest.raises(SystemExit, match="unknown chapter"):
        toc.select(notebooks, ("nope",))


def test_toc_entry_without_file_is_reported(tmp_path):
    repo = _tiny_repo(tmp_path)
    (repo / "book" / "p" / "02_bad.ipynb").unlink()
    with pytest.raises(FileNotFoundError, match="02_bad"):
        toc.toc_files(repo)


def test_check_thresholds_bounds():
    records = {"a": 0.5, "n": 10, "s": "yes"}
    assert check_thresholds(records, {"a": {"min": 0.4, "max": 0.6}, "n": {"equals": 10}, "s": {"equals": "yes"}}) == []
    problems = check_thresholds(
        records, {"a": {"min": 0.6}, "n": {"max": 5}, "missing": {"min": 0}, "s": {"min": 1}, "a ": {"avg": 1}}
    )
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
    assert main(["bench", "no-such-bench"]) == 1
    assert capsys.readouterr().err.startswith("error: no benchmark named 'no-such-bench'")


def test_cli_exits_non_zero_naming_failed_chapter_and_cell(tmp_path, monkeypatch, capsys):
    import functools

    from mechbook.__main__ import main

    repo = _tiny_repo(tmp_path)
    monkeypatch.setattr("mechbook.book.config.ExecuteConfig", functools.partial(ExecuteConfig, root=repo))
    assert main(["execute", "--profile", "smoke", "--only", "02_bad"]) == 1
    captured = capsys.readouterr()
    assert "FAILED book/p/02_bad.ipynb: code cell 3 line 1 (\"raise ValueError('broken on purpose')\")" in captured.err
    assert "ValueError: broken on purpose" in captured.err
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


def test_cli_keeps_every_repeated_only():
    from mechbook.__main__ import _parser

    args = _parser().parse_args(["execute", "--only", "01_ok", "--only", "02_bad", "intro"])
    assert args.only == ["01_ok", "02_bad", "intro"]


def test_select_keeps_book_order_and_each_chapter_once(tmp_path):
    notebooks = toc.toc_notebooks(_tiny_repo(tmp_path))
    chosen = toc.select(notebooks, ("02_bad", "01_ok", "02_bad", "book/p/01_ok"))
    assert [p.stem for p in chosen] == ["01_ok", "02_bad"]


def test_failure_names_the_code_cell_among_code_cells_and_its_failing_line(tmp_path):
    repo = _tiny_repo(tmp_path)
    make_notebook(
        repo / "book" / "p" / "02_bad.ipynb",
        [
            ("md", "# Title"),
            ("code", "x = 1"),
            ("md", "prose"),
            ("code", "# comment\ny = 2"),
            ("md", "more"),
            ("code", "import math\n\ndef f(v):\n    return 1 / v\n\nz = math.sqrt(4)\nw = f(0)\nu = 3"),
        ],
    )
    (result,) = execute_book(ExecuteConfig(profile="smoke", root=repo, only=("02_bad",), cell_timeout=120))
    assert result.failure.startswith("code cell 4 line 7 ('w = f(0)'): ZeroDivisionError"), result.failure
    assert "import math" not in result.failure, "the failing line, not the cell's first"
    assert str(result.output) in result.failure


def test_a_dead_kernel_is_reported_at_the_cell_it_died_in(tmp_path):
    repo = _tiny_repo(tmp_path)
    make_notebook(
        repo / "book" / "p" / "02_bad.ipynb",
        [("code", "x = 1"), ("md", "prose"), ("code", "import os\nos._exit(3)"), ("code", "y = 2")],
    )
    (result,) = execute_book(ExecuteConfig(profile="smoke", root=repo, only=("02_bad",), cell_timeout=120))
    assert result.status == "failed"
    assert result.failure.startswith("code cell 3 ('import os'): the kernel died"), result.failure
    problems = check_book(ExecuteConfig(profile="smoke", root=repo, only=("02_bad",)))
    assert problems == [f"book/p/02_bad.ipynb: its last run failed at {result.failure}"]


def test_kernels_get_absolute_paths_and_the_profile(tmp_path, monkeypatch):
    repo = _tiny_repo(tmp_path)
    make_notebook(
        repo / "book" / "p" / "01_ok.ipynb",
        [
            (
                "code",
                "import os, mechbook\n"
                "mechbook.record('cache', os.environ['MECHBOOK_CACHE'])\n"
                "mechbook.record('stories', os.environ['MECHBOOK_TINYSTORIES'])\n"
                "mechbook.record('profile_env', os.environ['MECHBOOK_PROFILE'])",
            )
        ],
    )
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "stories.txt").write_text("a\n<|endoftext|>\n")
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.setenv("MECHBOOK_CACHE", "rel/cache")
    monkeypatch.setenv("MECHBOOK_TINYSTORIES", "stories.txt")
    (result,) = execute_book(ExecuteConfig(profile="smoke", root=repo, only=("01_ok",), cell_timeout=120))
    assert read_records(result.output) == {
        "cache": str(tmp_path / "work" / "rel" / "cache"),
        "stories": str(tmp_path / "work" / "stories.txt"),
        "profile_env": "smoke",
    }


def test_absolute_paths_only_rewrites_relative_path_variables(tmp_path):
    env = {
        "MECHBOOK_CACHE": "c",
        "MECHBOOK_AA_RELEASE": "/abs/release",
        "HF_HOME": "~/hf",
        "MECHBOOK_DEVICE": "cpu",
        "MECHBOOK_TINYSTORIES": "",
    }
    changed = environment.absolute_paths(env, tmp_path)
    assert changed == {"MECHBOOK_CACHE": str(tmp_path / "c"), "HF_HOME": str(Path("~/hf").expanduser())}


def test_cache_key_covers_data_contents_and_library_versions(tmp_path, monkeypatch):
    repo = _tiny_repo(tmp_path)
    nb_path = repo / "book" / "p" / "01_ok.ipynb"
    stories = tmp_path / "stories.txt"
    stories.write_text("one\n<|endoftext|>\ntwo\n")
    release = tmp_path / "release" / "checkpoints"
    release.mkdir(parents=True)
    (release / "checkpoint_step_1.pth").write_bytes(b"\x00" * 64)
    monkeypatch.setenv("MECHBOOK_TINYSTORIES", str(stories))
    monkeypatch.setenv("MECHBOOK_AA_RELEASE", str(release.parent))
    params = {"profile": "smoke"}
    base = cache_key(nb_path, params, repo)
    stories.write_text("one\n<|endoftext|>\n")  # same path, fewer stories
    k_file = cache_key(nb_path, params, repo)
    assert k_file != base
    (release / "checkpoint_step_1.pth").write_bytes(b"\x01" * 64)
    k_dir = cache_key(nb_path, params, repo)
    assert k_dir != k_file
    (release / "notes.txt").write_text("not a released file")
    assert cache_key(nb_path, params, repo) == k_dir, "what else the folder holds is not the release"
    (release / "checkpoint_step_101.pth").write_bytes(b"")
    k_new = cache_key(nb_path, params, repo)
    assert k_new != k_dir
    assert cache_key(nb_path, params, repo) == k_new
    real = environment.versions()
    monkeypatch.setattr(environment, "versions", lambda: {**real, "torch": "0.0.1"})
    assert cache_key(nb_path, params, repo) != k_new


def test_with_the_release_variable_unset_the_key_digests_the_folder_the_loader_reads(tmp_path, monkeypatch):
    repo = _tiny_repo(tmp_path)
    nb_path = repo / "book" / "p" / "01_ok.ipynb"
    beside = tmp_path / "beside"
    monkeypatch.delenv("MECHBOOK_AA_RELEASE", raising=False)
    monkeypatch.setattr(environment, "unset_release_folder", lambda: beside)
    params = {"profile": "smoke"}
    absent = cache_key(nb_path, params, repo)
    (beside / "checkpoints").mkdir(parents=True)
    (beside / "checkpoints" / "checkpoint_step_1.pth").write_bytes(b"\x00" * 8)
    present = cache_key(nb_path, params, repo)
    assert present != absent, "a release the loader would now find re-executes the chapters"
    monkeypatch.setenv("MECHBOOK_AA_RELEASE", str(beside))
    assert cache_key(nb_path, params, repo) == present, "the same files, named or found, give the same key"


def test_data_digests_are_memoised_by_path_size_and_mtime(tmp_path, monkeypatch):
    data = tmp_path / "d.txt"
    data.write_bytes(b"abc")
    memo_file = tmp_path / "memo.json"
    reads = []
    real = environment.sha256_file
    monkeypatch.setattr(environment, "sha256_file", lambda p: reads.append(p) or real(p))
    first = environment.DigestMemo(memo_file)
    digest = first.tree(data)
    first.save()
    assert environment.DigestMemo(memo_file).tree(data) == digest and len(reads) == 1
    data.write_bytes(b"abcd")
    assert environment.DigestMemo(memo_file).tree(data) != digest and len(reads) == 2
    memo_file.write_text("{not json")
    assert environment.DigestMemo(memo_file).tree(data) == real(data)


def _truncate(path: Path) -> None:
    text = path.read_text()
    path.write_text(text[: len(text) // 2])


def test_an_unreadable_executed_notebook_counts_as_not_executed_everywhere(tmp_path, capsys):
    repo = _tiny_repo(tmp_path)
    cfg = ExecuteConfig(profile="smoke", root=repo, only=("01_ok",), cell_timeout=120)
    (first,) = execute_book(cfg)
    _truncate(first.output)
    problems = check_book(cfg)
    assert len(problems) == 1 and str(first.output) in problems[0] and "counts as not executed" in problems[0]
    capsys.readouterr()
    site.stage_site(cfg)
    assert f"note: {first.output} cannot be read" in capsys.readouterr().out
    assert nbformat.read(first.output, as_version=4).cells, "staged from the source notebook"
    _truncate(first.output)
    (again,) = execute_book(cfg)
    assert again.status == "executed"
    assert f"note: {first.output} cannot be read" in capsys.readouterr().out
    assert read_records(again.output)["profile_seen"] == "smoke"


def test_an_interrupted_run_keeps_the_last_notebook_whole_and_check_says_so(tmp_path, monkeypatch):
    import papermill

    repo = _tiny_repo(tmp_path)
    cfg = ExecuteConfig(profile="smoke", root=repo, only=("01_ok",), cell_timeout=120)

    def interrupted_before_writing(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(papermill, "execute_notebook", interrupted_before_writing)
    with pytest.raises(KeyboardInterrupt):
        execute_book(cfg)
    assert "interrupted at start-up" in check_book(cfg)[0]

    def interrupted_in_cell_2(src, out, **kwargs):
        nb = nbformat.read(src, as_version=4)
        for i, cell in enumerate(nb.cells):
            cell.metadata["papermill"] = {"start_time": "2026-12-01T00:00:00" if i < 3 else None}
        out_path = Path(out)
        nbformat.write(nb, out_path)
        raise KeyboardInterrupt

    monkeypatch.setattr(papermill, "execute_notebook", interrupted_in_cell_2)
    with pytest.raises(KeyboardInterrupt):
        execute_book(cfg)
    (problem,) = check_book(cfg)
    assert "its last run was interrupted at code cell 2 ('import os, mechbook')" in problem
    assert "None" not in problem
    assert not list(cfg.running_dir.rglob("*.ipynb")), "nothing half-written is left behind"


def test_check_names_what_happened_to_a_notebook_the_executor_did_not_write(tmp_path):
    repo = _tiny_repo(tmp_path)
    cfg = ExecuteConfig(profile="smoke", root=repo, only=("01_ok",))
    target = cfg.out_dir / "book" / "p" / "01_ok.ipynb"
    target.parent.mkdir(parents=True)
    shutil.copy2(repo / "book" / "p" / "01_ok.ipynb", target)
    (problem,) = check_book(cfg)
    assert "no record of the executor" in problem and "None" not in problem


def test_bench_attention_model_refuses_zero_steps(capsys):
    with pytest.raises(SystemExit):
        run_bench("attention-model", ["--steps", "0"])
    assert "--steps: must be a positive integer, got 0" in capsys.readouterr().err


def _slow_repo(tmp: Path) -> Path:
    """The tiny repository plus a chapter whose nested bars run for about two seconds."""
    repo = _tiny_repo(tmp)
    (repo / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nparts:\n  - caption: P\n    chapters:\n"
        "      - file: book/p/01_ok\n      - file: book/p/03_slow\n"
    )
    make_notebook(
        repo / "book" / "p" / "03_slow.ipynb",
        [
            (
                "code",
                "import time\nfrom mechbook.progress import progress\n"
                "for run in progress(range(2), desc='sweep'):\n"
                "    for step in progress(range(10), desc='training', unit='step', mininterval=0.05):\n"
                "        time.sleep(0.1)\n"
                "print('done')",
            )
        ],
    )
    return repo


def test_progress_reaches_the_console_not_the_notebook_with_plan_eta_and_costs(tmp_path, capsys):
    import io

    from mechbook.book import costs

    repo = _slow_repo(tmp_path)
    cfg = ExecuteConfig(profile="smoke", root=repo, cell_timeout=120)
    console = io.StringIO()
    first = {r.source.stem: r for r in execute_book(cfg, stream=console)}
    out = capsys.readouterr().out
    assert "2 chapter(s) in profile smoke: 2 to run, 0 from cache" in out
    assert "run     book/p/03_slow.ipynb  (unknown)" in out and "ETA: unknown" in out
    assert "took:" in out and "in all" in out
    relayed = console.getvalue().splitlines()
    assert relayed and relayed[0].startswith("[2/2] 03_slow: sweep ")
    assert any("› training " in line and "/10 · " in line and " step/s · " in line for line in relayed)
    texts = [
        json.dumps(o) for c in nbformat.read(first["03_slow"].output, as_version=4).cells for o in c.get("outputs", [])
    ]
    assert any("done" in t for t in texts) and not any("training" in t or "sweep" in t for t in texts)
    measured = costs.load_costs(repo)["smoke"]
    assert set(measured) == {"01_ok", "03_slow"} and measured["03_slow"] >= 2.0

    (repo / "book" / "p" / "03_slow.ipynb").touch()
    forced = dataclasses.replace(cfg, force=True, only=("03_slow",))
    execute_book(forced, stream=io.StringIO())
    out = capsys.readouterr().out
    assert f"run     book/p/03_slow.ipynb  (~{format_seconds(measured['03_slow'])})" in out
    assert f"ETA: {format_seconds(measured['03_slow'])}" in out
    cached = execute_book(dataclasses.replace(cfg, only=("01_ok",)), stream=io.StringIO())
    assert cached[0].status == "cached"
    assert "1 to run" not in capsys.readouterr().out.splitlines()[0]


def test_costs_file_is_not_part_of_the_cache_key(tmp_path):
    from mechbook.book import costs

    repo = _tiny_repo(tmp_path)
    nb_path = repo / "book" / "p" / "01_ok.ipynb"
    base = cache_key(nb_path, {"profile": "smoke"}, repo)
    shipped = costs.costs_path(repo)
    shipped.parent.mkdir(parents=True, exist_ok=True)
    shipped.write_text('{"smoke": {"01_ok": 9.0, "02_bad": 4.0}, "cpu": {"01_ok": 60.0}}')
    costs.save_costs(repo, "smoke", {"01_ok": 3.0})
    (repo / "mechbook" / "book" / "pages.json").write_text('{"trains": {"cpu": {"01_ok": "nothing"}}}')
    assert costs.load_costs(repo) == {"smoke": {"01_ok": 3.0, "02_bad": 4.0}, "cpu": {"01_ok": 60.0}}
    assert cache_key(nb_path, {"profile": "smoke"}, repo) == base, "nor are the pages' cost notes"
    assert "9.0" in shipped.read_text(), "a run never rewrites the shipped costs"


def test_a_run_leaves_the_shipped_costs_alone(tmp_path):
    from mechbook.book import costs

    repo = _tiny_repo(tmp_path)
    costs.save_costs(repo, "smoke", {"01_ok": 3.0})
    assert not costs.costs_path(repo).exists() and costs.local_costs_path(repo).exists()


def _seeded_repo(tmp: Path) -> Path:
    """The tiny repository plus a chapter with a ``seed`` knob whose records depend on it."""
    repo = _tiny_repo(tmp)
    (repo / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nparts:\n  - caption: P\n    chapters:\n"
        "      - file: book/p/01_ok\n      - file: book/p/02_bad\n      - file: book/p/04_seeded\n"
    )
    make_notebook(
        repo / "book" / "p" / "04_seeded.ipynb",
        [
            (
                "code",
                "import mechbook\nseed = 0 if seed is None else seed\n"
                "mechbook.record('score', 0.5 + 0.1 * seed)\nmechbook.record('label', f's{seed}')",
            )
        ],
        parameters='profile = "cpu"\nseed = None',
    )
    return repo


def test_spread_runs_seeded_chapters_per_seed_and_deterministic_ones_once(tmp_path, monkeypatch, capsys):
    import functools

    import yaml

    from mechbook.__main__ import main
    from mechbook.book.checks import load_spread

    repo = _seeded_repo(tmp_path)
    monkeypatch.setattr("mechbook.book.config.ExecuteConfig", functools.partial(ExecuteConfig, root=repo))
    assert main(["spread", "--profile", "smoke", "--seeds", "3"]) == 1, "02_bad fails"
    assert "FAILED book/p/02_bad.ipynb seed None: code cell 3" in capsys.readouterr().err
    seeded = load_spread("04_seeded", repo)["smoke"]
    assert seeded["seeds"] == [0, 1, 2] and seeded["failed_seeds"] == []
    score = seeded["records"]["score"]
    assert score["values"] == pytest.approx([0.5, 0.6, 0.7]) and score["seeds"] == [0, 1, 2]
    assert (score["min"], score["max"]) == (pytest.approx(0.5), pytest.approx(0.7))
    assert seeded["records"]["label"] == {"values": ["s0", "s1", "s2"], "seeds": [0, 1, 2]}
    assert seeded["date"] and seeded["git"]
    once = load_spread("01_ok", repo)["smoke"]
    assert once["seeds"] == [None] and once["records"]["profile_seen"]["values"] == ["smoke"]
    assert not (repo / "book" / "thresholds" / "02_bad.spread.yml").exists()
    assert not (repo / "_build" / "executed").exists(), "the book's own executed notebooks are untouched"

    thresholds = repo / "book" / "thresholds"
    (thresholds / "04_seeded.yml").write_text(yaml.safe_dump({"smoke": {"score": {"min": 0.55}}}))
    (thresholds / "01_ok.yml").write_text(yaml.safe_dump({"smoke": {"profile_seen": {"equals": "smoke"}}}))
    problems = check_book(ExecuteConfig(profile="smoke", root=repo, only=("04_seeded", "01_ok")))
    inside = [p for p in problems if "sits inside the measured seed spread" in p]
    assert len(inside) == 1 and inside[0].startswith("book/p/04_seeded.ipynb: score: bound {'min': 0.55}")
    assert "[0.5, 0.7]" in inside[0] and "seed 0: 0.5" in inside[0]
    (thresholds / "04_seeded.yml").write_text(yaml.safe_dump({"smoke": {"score": {"min": 0.45}}}))
    problems = check_book(ExecuteConfig(profile="smoke", root=repo, only=("04_seeded",)))
    assert not [p for p in problems if "spread" in p]


def test_check_spread_matches_a_literal_loop_over_the_seeds():
    from mechbook.book.checks import check_spread

    @given(st.lists(st.floats(-10, 10), min_size=1, max_size=6), st.floats(-10, 10), st.floats(-10, 10))
    def agree(values, lo, hi):
        measured = {
            "records": {
                "v": {"min": min(values), "max": max(values), "values": values, "seeds": list(range(len(values)))}
            }
        }
        inside = check_spread({"v": {"min": lo, "max": hi}}, measured) != []
        assert inside == any(not (lo <= v <= hi) for v in values)

    agree()


def test_a_cell_timeout_is_a_failure_at_that_cell(tmp_path):
    repo = _tiny_repo(tmp_path)
    make_notebook(repo / "book" / "p" / "02_bad.ipynb", [("code", "x = 1"), ("code", "import time\ntime.sleep(60)")])
    (result,) = execute_book(ExecuteConfig(profile="smoke", root=repo, only=("02_bad",), cell_timeout=3))
    assert result.status == "failed"
    assert result.failure.startswith("code cell 3 line 2 ('time.sleep(60)'): CellTimeoutError: A cell timed out")
    assert "raise --cell-timeout or leave it out" in result.failure
    assert "\n" not in result.failure, "one line"


def _two_part_repo(tmp: Path) -> Path:
    """A repository of two parts with one chapter each; each records when it started and ended
    a 6 s wait; the second then fails."""
    repo = _tiny_repo(tmp)
    (repo / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nparts:\n  - caption: 'Part A: first'\n    chapters:\n"
        "      - file: book/a/01_a\n  - caption: 'Part B: second'\n    chapters:\n      - file: book/b/02_b\n"
    )
    timed = "import time, mechbook\nstart = time.time()\ntime.sleep(6)\nmechbook.record('window', [start, time.time()])"
    make_notebook(repo / "book" / "a" / "01_a.ipynb", [("code", timed)])
    make_notebook(repo / "book" / "b" / "02_b.ipynb", [("code", timed), ("code", "raise ValueError('b fails')")])
    return repo


def test_toc_parts_group_the_chapters_with_the_root_in_the_first_part(root):
    parts = toc.toc_parts(root)
    assert [name for name, _ in parts] == ["Part I", "Part II"]
    assert parts[0][1][0] == Path("book/intro.ipynb")
    assert [p for _, part in parts for p in part] == toc.toc_notebooks(root)


def test_lanes_run_the_parts_at_once_and_report_in_book_order(tmp_path, capfd):
    repo = _two_part_repo(tmp_path)
    results = execute_book(ExecuteConfig(profile="smoke", root=repo, lanes=2, cell_timeout=120))
    assert [(r.source.stem, r.status) for r in results] == [("01_a", "executed"), ("02_b", "failed")]
    assert "b fails" in results[1].failure and failures(results) == [f"{results[1].source}: {results[1].failure}"]
    (a0, a1), (b0, b1) = (read_records(r.output)["window"] for r in results)
    assert a0 < b1 and b0 < a1, "the two parts' chapters did not run at the same time"
    printed = capfd.readouterr().out
    assert "ETA: unknown" in printed
    assert "lane 1: 1 chapter(s) in their own process" in printed and "lane 2 [1/1]" in printed


def test_the_eta_of_lanes_at_once_is_that_of_the_longest_lane(tmp_path):
    from mechbook.book import costs
    from mechbook.book.run import lanes_of, plan_lines

    repo = _two_part_repo(tmp_path)
    cfg = ExecuteConfig(profile="smoke", root=repo, lanes=2)
    chosen = toc.toc_notebooks(repo)
    groups = lanes_of(cfg, chosen, {"01_a": 100.0, "02_b": 40.0})
    assert [(name, [p.stem for p in part]) for name, part in groups] == [("lane 1", ["01_a"]), ("lane 2", ["02_b"])]
    assert lanes_of(dataclasses.replace(cfg, lanes=1), chosen) == [("book", chosen)]
    costs.save_costs(repo, "smoke", {"01_a": 100.0, "02_b": 40.0})
    lines = plan_lines(cfg, [(p, True) for p in chosen], groups)
    assert "  lane 1 (~1 min 40 s): 01_a at 0 s" in lines and "  lane 2 (~40 s): 02_b at 0 s" in lines
    assert any(line.startswith("  floor: ~1 min 40 s (no split of these chapters on 2 lanes") for line in lines)
    assert lines[-1] == "ETA: 1 min 40 s with 2 lanes at once (lane 1 ~1 min 40 s, lane 2 ~40 s)"
    assert plan_lines(cfg, [(p, True) for p in chosen])[-1] == "ETA: 2 min 20 s"


def test_costs_saved_at_once_by_several_writers_are_all_kept(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from mechbook.book import costs

    def save(i: int) -> None:
        for j in range(25):
            costs.save_costs(tmp_path, "cpu", {f"w{i}_{j}": float(j)})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(save, range(8)))
    assert len(costs.load_costs(tmp_path)["cpu"]) == 8 * 25


def test_no_cell_limit_by_default_and_the_option_is_checked_at_the_door(capsys):
    from mechbook.__main__ import main

    assert ExecuteConfig().cell_timeout is None, "no clock kills long work unless asked"
    for bad in ("0", "-5", "2.5", "an hour"):
        with pytest.raises(SystemExit):
            main(["execute", "--only", "intro", "--cell-timeout", bad])
        err = capsys.readouterr().err.strip().splitlines()
        assert f"{bad!r} is not a whole number of seconds of at least 1" in err[-1], err
    with pytest.raises(ValueError, match=r"ExecuteConfig.cell_timeout must be at least 1 .*no limit"):
        ExecuteConfig(cell_timeout=0)


def test_lanes_pass_the_cell_limit_on():
    from mechbook.book.run import lane_command

    limited = lane_command(ExecuteConfig(cell_timeout=90), "Part I", [Path("book/intro.ipynb")], Path("r.json"))
    assert limited[limited.index("--cell-timeout") + 1] == "90"
    assert "--cell-timeout" not in lane_command(ExecuteConfig(), "Part I", [Path("book/intro.ipynb")], Path("r.json"))


def test_a_chapter_killed_in_its_analysis_reruns_from_the_cache_without_training_again(tmp_path, monkeypatch):
    """Issue 31: the training cell's result is cached as it finishes, so a kernel killed in a
    later analysis cell (a clock, the OOM killer, a reader) costs only the analysis on re-run."""
    repo = _tiny_repo(tmp_path)
    trained, kill = tmp_path / "trained.log", tmp_path / "kill-the-analysis"
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TRAINED_LOG", str(trained))
    monkeypatch.setenv("KILL_FLAG", str(kill))
    make_notebook(
        repo / "book" / "p" / "02_bad.ipynb",
        [
            (
                "code",
                "import os, torch, mechbook\nfrom mechbook.cache import cached\n\n"
                "def train():\n    with open(os.environ['TRAINED_LOG'], 'a') as log:\n        log.write('trained\\n')\n"
                "    return torch.arange(4.0)\n\nweights = cached('test/killed_run', {'steps': 4}, train)",
            ),
            (
                "code",
                "import signal\nif os.path.exists(os.environ['KILL_FLAG']):\n"
                "    os.kill(os.getpid(), signal.SIGKILL)\nmechbook.record('total', float(weights.sum()))",
            ),
        ],
    )
    kill.touch()
    cfg = ExecuteConfig(profile="smoke", root=repo, only=("02_bad",))
    (killed,) = execute_book(cfg)
    assert killed.status == "failed" and "code cell 3" in killed.failure and "the kernel died" in killed.failure
    assert trained.read_text() == "trained\n"
    kill.unlink()
    (again,) = execute_book(cfg)
    assert again.status == "executed", again.failure
    assert read_records(again.output)["total"] == 6.0
    assert trained.read_text() == "trained\n", "the re-run loaded the trained run instead of training again"
