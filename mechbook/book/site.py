"""The HTML site: stage the executed chapters with the book's pages, then build with Sphinx.

Used by ``python -m mechbook build`` and the site tests.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from mechbook.book.config import ExecuteConfig
from mechbook.book.ledger import PAGE, ledger_page
from mechbook.book.run import read_executed
from mechbook.book.toc import toc_files, toc_notebooks


def stage_site(cfg: ExecuteConfig) -> Path:
    """Assemble the site's sources in ``cfg.out_dir``: config, toc, pages and executed notebooks.

    A notebook never executed for this profile, or whose executed file cannot be read, is copied
    unexecuted (its page has no outputs) with a note naming the file, so ``build --only`` still
    gives a whole site. The claims ledger (``book/appendix/ledger.md``) is computed here from the
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
        if not target.exists():
            print(f"note: {rel} has not been executed for profile {cfg.profile}; its page has no outputs")
            shutil.copy2(path, target)
            continue
        executed, problem = read_executed(target)
        if executed is None:
            print(f"note: {problem}; its page is built from {rel}, without outputs")
            shutil.copy2(path, target)
    if ledger is not None:
        (out / PAGE).write_text(ledger, encoding="utf-8")
    return out


def build_site(cfg: ExecuteConfig) -> Path:
    """Build the HTML site from the staged sources into ``_build/html`` (Sphinx warnings are errors)."""
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
    if result != 0:
        raise SystemExit(f"the site build failed ({result}); see the warnings above")
    return html
