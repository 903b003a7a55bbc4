"""What each page says it costs (issue 31, item 3) and a site that builds with what exists
(item 5: missing and failed chapters are marked, their figures placeholders, no glue warning)."""

from __future__ import annotations

import json

import nbformat
from conftest import ROOT, make_notebook

from mechbook.book import pages
from mechbook.book.config import ExecuteConfig
from mechbook.book.relay import format_seconds
from mechbook.book.site import PLACEHOLDER, placeholder_figures
from mechbook.book.toc import toc_notebooks


def test_every_chapter_has_what_it_trains_and_a_profile_line_for_the_note_to_follow():
    data = pages.pages_data(ROOT)
    shipped = json.loads((ROOT / "mechbook" / "book" / "costs.json").read_text())
    for notebook in toc_notebooks(ROOT):
        assert notebook.stem in data["trains"]["cpu"], f"{notebook.stem}: say what it trains in pages.json"
        assert notebook.stem in shipped["cpu"], f"{notebook.stem}: no shipped cpu time"
        nb = nbformat.read(ROOT / notebook, as_version=4)
        assert any(c.cell_type == "code" and pages.PROFILE_LINE in c.source for c in nb.cells), notebook
    opened = {s for targets in data["opens"].values() for s in targets}
    assert opened <= {n.stem for n in toc_notebooks(ROOT)}


def test_chapter_8_says_what_it_trains_how_long_it_took_where_and_who_opens_its_runs():
    shipped = json.loads((ROOT / "mechbook" / "book" / "costs.json").read_text())
    note = pages.cost_note(ROOT, "cpu", "08_training_dynamics")
    assert "trains six seeds of the paper's model for 20,000 steps" in note
    assert f"It took {format_seconds(shipped['cpu']['08_training_dynamics'])} on the machine" in note
    assert shipped["measured_on"]["cpu"] in note
    assert "Chapter 9 and chapter 10 open its runs" in note
    assert "Chapter 4 and chapter 5 open its runs" in pages.cost_note(ROOT, "cpu", "03_training")
    assert "open its runs" not in pages.cost_note(ROOT, "smoke", "08_training_dynamics"), "cpu profile only"
    assert "open" not in pages.cost_note(ROOT, "cpu", "11_how_much_data").split("trains")[-1].split(".")[1]


def test_the_note_follows_the_profile_line_and_staging_twice_keeps_one():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Title"),
        nbformat.v4.new_code_cell("import mechbook"),
        nbformat.v4.new_code_cell("cfg = ch.resolve(profile)\nmechbook.ran_with(ch.CONFIGS, profile, cfg)"),
        nbformat.v4.new_markdown_cell("## First section"),
    ]
    pages.add_cost_note(nb, "first")
    pages.add_cost_note(nb, "second")
    assert [c.source for c in nb.cells][2:4] == [nb.cells[2].source, "second"]
    assert sum(c.get("metadata", {}).get("mechbook") == pages.NOTE_MARK for c in nb.cells) == 1


def test_only_figures_the_page_never_glued_become_placeholders():
    nb = nbformat.v4.new_notebook()
    glued = nbformat.v4.new_output("display_data", data={"text/plain": "x"}, metadata={"scrapbook": {"name": "fig-a"}})
    nb.cells = [
        nbformat.v4.new_code_cell("glue('fig-a', chart)", outputs=[glued]),
        nbformat.v4.new_markdown_cell("```{glue:figure} fig-a\n:name: fig-a\n\nA.\n```"),
        nbformat.v4.new_markdown_cell("```{glue:figure} fig-b\n:name: fig-b\n\nB.\n```"),
    ]
    assert placeholder_figures(nb) == 1
    assert nb.cells[1].source.startswith("```{glue:figure} fig-a")
    assert nb.cells[2].source == f"```{{figure}} /{PLACEHOLDER}\n:name: fig-b\n\nB.\n```"


def _book_of_two(tmp_path):
    """A two-chapter book in the cpu profile: 08_a (whose runs 09_b opens) and 09_b, each with a
    profile line, a glued figure and a reference to it; neither executed."""
    (tmp_path / "mechbook" / "book").mkdir(parents=True)
    (tmp_path / "_config.yml").write_text((ROOT / "_config.yml").read_text())
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nchapters:\n  - file: book/p/08_a\n  - file: book/p/09_b\n"
    )
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "intro.md").write_text("# Intro\n")
    for stem, title in (("08_a", "Eight"), ("09_b", "Nine")):
        make_notebook(
            tmp_path / "book" / "p" / f"{stem}.ipynb",
            [
                ("md", f"# {title}\n\nAs {{numref}}`fig-{stem}` shows."),
                ("code", "import mechbook\nmechbook.ran_with(CONFIGS, profile, cfg)"),
                ("md", f"```{{glue:figure}} fig-{stem}\n:name: fig-{stem}\n\nThe figure of {stem}.\n```"),
            ],
        )
    (tmp_path / "mechbook" / "book" / "costs.json").write_text(
        json.dumps({"measured_on": {"cpu": "Test CPU, 2 cores", "steps_per_s": 100.0}, "cpu": {"08_a": 125.0}})
    )
    (tmp_path / "mechbook" / "book" / "pages.json").write_text(
        json.dumps({"trains": {"cpu": {"08_a": "two runs"}}, "opens": {"09_b": ["08_a"]}})
    )
    return ExecuteConfig(profile="cpu", root=tmp_path)
