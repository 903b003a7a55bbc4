"""The HTML site: stage the executed chapters with the book's pages, then build with Sphinx.

Used by ``python -m mechbook build`` and the site tests.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat

from mechbook.book.config import ExecuteConfig
from mechbook.book.ledger import PAGE, ledger_page
from mechbook.book.pages import add_cost_note, cost_note
from mechbook.book.run import mechbook_meta, read_executed, write_atomic
from mechbook.book.toc import toc_files, toc_notebooks

#: The picture a figure shows whose chart its page never computed, staged at the site's root.
PLACEHOLDER = "book/not-computed.svg"
PLACEHOLDER_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="480" height="80" viewBox="0 0 480 80">'
    '<rect x="1" y="1" width="478" height="78" fill="none" stroke="#888" stroke-dasharray="6 4"/>'
    '<text x="240" y="46" text-anchor="middle" font-family="sans-serif" font-size="16" fill="#555">'
    "not computed: this chapter has not run to this figure</text></svg>\n"
)
_GLUE_FIGURE = re.compile(r"^(\s*(?:```+|:::+)\s*)\{glue:figure\}\s+(\S+)", re.M)


def glued_names(nb: nbformat.NotebookNode) -> set[str]:
    """The names the notebook's outputs glue (myst-nb keeps them under ``scrapbook``)."""
    return {
        str(o.get("metadata", {}).get("scrapbook", {}).get("name"))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("metadata", {}).get("scrapbook")
    }


def placeholder_figures(nb: nbformat.NotebookNode) -> int:
    """Turn each ``{glue:figure} NAME`` whose chart the notebook never glued (a page not
    executed, or stopped before the figure) into a ``{figure}`` of :data:`PLACEHOLDER` with the
    same options and caption, so its ``:name:`` still numbers and links and the site builds;
    in place, returning how many it changed."""
    glued = glued_names(nb)
    changed = 0

    def swap(match: re.Match) -> str:
        nonlocal changed
        if match.group(2) in glued:
            return match.group(0)
        changed += 1
        return f"{match.group(1)}{{figure}} /{PLACEHOLDER}"

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _GLUE_FIGURE.sub(swap, cell.source)
    return changed


def stage_site(cfg: ExecuteConfig) -> Path:
    """Assemble the site's sources in ``cfg.out_dir``: config, toc, pages and executed notebooks.

    A notebook never executed for this profile, or whose executed file cannot be read, is copied
    unexecuted (its page has no outputs) with a note naming the file, so ``build --only`` still
    gives a whole site. Every chapter page gets the note of what it costs under its profile line
    (:mod:`mechbook.book.pages`), which also marks a page never executed or whose last run
    failed. The claims ledger (``book/appendix/ledger.md``) is computed here from the
    executed chapters (:mod:`mechbook.book.ledger`) when ``_toc.yml`` lists it.
    """
    out = cfg.out_dir
    out.mkdir(parents=True, exist_ok=True)
    ledger = ledger_page(cfg) if PAGE in toc_files(cfg.root) else None  # before unexecuted copies join out
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy2(cfg.root / name, out / name)
    listed = set(toc_notebooks(cfg.root))
    for path in sorted((cfg.root / "book").rglob("*")):
        rel = path.relative_to(cfg.root)
        if (
            not path.is_file()
            or ".ipynb_checkpoints" in rel.parts
            or rel.parts[:2] == ("book", "thresholds")
            or (path.suffix == ".ipynb" and rel not in listed)
        ):
            continue
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix != ".ipynb":
            shutil.copy2(path, target)
            continue
        executed, problem = read_executed(target) if target.exists() else (None, None)
        meta = mechbook_meta(executed) if executed is not None else {}
        if not meta:  # never executed, unreadable, or the unexecuted copy an earlier staging left
            print(
                f"note: {problem or f'{rel} has not been executed for profile {cfg.profile}'}; its page has no outputs"
            )
            executed = nbformat.read(path, as_version=4)
            shown = (
                f"This page has not been executed for the {cfg.profile} profile: "
                f"`python -m mechbook build --profile {cfg.profile} --only {rel.stem}` runs it."
            )
        elif meta.get("status") != "ok":
            failure = str(meta.get("failure") or meta.get("status")).split(" (report: ")[0]
            shown = f"Its last run stopped, at `{failure.replace('`', chr(39))}`."
        else:
            shown = None
        placeholder_figures(executed)
        write_atomic(add_cost_note(executed, cost_note(cfg.root, cfg.profile, rel.stem, shown)), target)
    (out / PLACEHOLDER).parent.mkdir(parents=True, exist_ok=True)
    (out / PLACEHOLDER).write_text(PLACEHOLDER_SVG, encoding="utf-8")
    if ledger is not None:
        (out / PAGE).write_text(ledger, encoding="utf-8")
    return out


def build_site(cfg: ExecuteConfig) -> Path:
    """Build the HTML site from the staged sources into ``_build/html`` (Sphinx warnings are
    errors); an interrupted build raises :class:`KeyboardInterrupt` (exit 130 on the command
    line), a failed one ``SystemExit`` with one line."""
    from jupyter_book.sphinx import build_sphinx

    src = stage_site(cfg)
    html = cfg.root / "_build" / "html"
    result = build_sphinx(
        src,
        html,
        noconfig=True,
        path_config=str(src / "_config.yml"),
        confoverrides={"external_toc_path": str(src / "_toc.yml"), "latex_individualpages": False},
        doctreedir=cfg.root / "_build" / ".doctrees" / cfg.profile,
        warningiserror=True,
        keep_going=True,
        quiet=True,
        freshenv=True,
    )
    if isinstance(result, KeyboardInterrupt):  # build_sphinx returns what it caught
        raise KeyboardInterrupt(
            "the site build was interrupted (Ctrl-C or a signal); the executed chapters are kept: "
            "run the build again to finish the site"
        )
    if isinstance(result, BaseException):
        raise SystemExit(f"the site build failed ({type(result).__name__}: {result}); see the message above")
    if result != 0:
        raise SystemExit(f"the site build failed (status {result}); see the warnings above")
    return html
