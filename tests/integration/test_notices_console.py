"""The console says what matters (issue 22, item 5), in a real execution: reader-facing warnings
reach the executor's console once each and kernel transport chatter does not."""

from __future__ import annotations

import pytest
from conftest import make_notebook
from test_notices import WARNING_CELL

from mechbook.book.config import ExecuteConfig
from mechbook.book.run import execute_book


@pytest.mark.book
def test_reader_facing_warnings_reach_the_console_once_and_transport_chatter_does_not(tmp_path, capfd, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "mechbook").mkdir(parents=True)
    (repo / "_config.yml").write_text("title: tiny\n")
    (repo / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: book/warns\n")
    (repo / "book" / "intro.md").parent.mkdir()
    (repo / "book" / "intro.md").write_text("# Intro\n")
    make_notebook(repo / "book" / "warns.ipynb", [("code", WARNING_CELL)], parameters='profile = "smoke"')
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path / "cache"))
    [result] = execute_book(ExecuteConfig(profile="smoke", root=repo, lanes=1), stream=None)
    assert result.status == "executed", result.failure
    out, err = capfd.readouterr()
    console = out + err
    fewer = [line for line in console.splitlines() if "fewer than the 50 asked for" in line]
    assert len(fewer) == 1 and fewer[0].startswith("[1/1] warns: warning: ")
    assert sum("could not serialise the value of the cache entry" in line for line in console.splitlines()) == 1
    assert "without encryption" not in console and "IPKernelApp" not in console
    assert "KeyboardInterrupt" not in console
