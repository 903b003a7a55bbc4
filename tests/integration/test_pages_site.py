"""A site that builds with what exists (issue 31, item 5), built for real: missing and failed
chapters are marked, their figures placeholders."""

from __future__ import annotations

import re

import nbformat
from test_pages import _book_of_two

from mechbook.book.run import write_atomic
from mechbook.book.site import build_site, stage_site


def test_a_site_of_missing_and_failed_chapters_builds_and_marks_them(tmp_path, capsys):
    cfg = _book_of_two(tmp_path)
    failed = nbformat.read(tmp_path / "book" / "p" / "09_b.ipynb", as_version=4)
    failed.metadata["mechbook"] = {
        "status": "failed",
        "failure": "code cell 2 line 2 ('x'): KeyError: 'x' (report: /r)",
    }
    write_atomic(failed, cfg.out_dir / "book" / "p" / "09_b.ipynb")
    stage_site(cfg)
    assert "book/p/08_a.ipynb has not been executed for profile cpu" in capsys.readouterr().out
    html = build_site(cfg)
    eight = (html / "book" / "p" / "08_a.html").read_text(encoding="utf-8")
    nine = (html / "book" / "p" / "09_b.html").read_text(encoding="utf-8")
    text = re.sub(r"<[^>]+>", "", eight)
    assert "What this page costs." in text and "this page trains two runs" in text
    assert "It took 2 min 05 s on the machine that timed the book (Test CPU, 2 cores)" in text
    assert "Chapter 9 opens its runs" in text
    assert "This page has not been executed for the cpu profile" in text
    assert "not-computed.svg" in eight and "Fig. 1" in eight, "the figure keeps its number and link"
    assert "Its last run stopped, at" in re.sub(r"<[^>]+>", "", nine) and "/r" not in re.sub(r"<[^>]+>", "", nine)
    assert eight.index("What this page costs") < eight.index("not-computed.svg"), "under the profile line"
