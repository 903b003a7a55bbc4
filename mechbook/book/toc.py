"""The chapters of the book: the files ``_toc.yml`` names, and a choice among them (``--only``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent.parent


def toc_files(root: Path = ROOT) -> list[Path]:
    """Every file ``_toc.yml`` names (root first), repo-relative, with its extension resolved."""
    path = root / "_toc.yml"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: run from the book's repository (the folder holding _toc.yml)")
    toc = yaml.safe_load(path.read_text(encoding="utf-8"))
    entries = [toc["root"]]

    def walk(items: list[dict[str, Any]]) -> None:
        for item in items:
            if "file" in item:
                entries.append(item["file"])
            walk(item.get("sections", []))

    for part in toc.get("parts", []):
        walk(part.get("chapters", []))
    walk(toc.get("chapters", []))
    found = []
    for entry in entries:
        matches = [root / f"{entry}{ext}" for ext in ("", ".ipynb", ".md") if (root / f"{entry}{ext}").is_file()]
        if not matches:
            raise FileNotFoundError(f"_toc.yml lists {entry!r} but neither {entry}.ipynb nor {entry}.md exists")
        found.append(matches[0].relative_to(root))
    return found


def toc_parts(root: Path = ROOT) -> list[tuple[str, list[Path]]]:
    """``(name, notebooks)`` per part of ``_toc.yml``, in book order: the name is the caption up
    to its colon (``Part I``), the root page joins the first part, and chapters outside any part
    form a part of their own. The parts share no cached computation, so they can run at once."""
    path = root / "_toc.yml"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: run from the book's repository (the folder holding _toc.yml)")
    toc = yaml.safe_load(path.read_text(encoding="utf-8"))
    notebooks = set(toc_notebooks(root))

    def files(items: list[dict[str, Any]]) -> list[str]:
        out = []
        for item in items:
            if "file" in item:
                out.append(item["file"])
            out += files(item.get("sections", []))
        return out

    groups = [
        (part.get("caption", f"part {i + 1}").split(":")[0], files(part.get("chapters", [])))
        for i, part in enumerate(toc.get("parts", []))
    ]
    groups.append(("chapters", files(toc.get("chapters", []))))
    if groups:
        groups[0] = (groups[0][0], [toc["root"], *groups[0][1]])
    out = []
    for name, entries in groups:
        found = [root / f"{e}.ipynb" for e in entries]
        chapters = [f.relative_to(root) for f in found if f.relative_to(root) in notebooks]
        if chapters:
            out.append((name, chapters))
    return out


def toc_notebooks(root: Path = ROOT) -> list[Path]:
    """The notebooks of ``_toc.yml`` in book order, repo-relative."""
    return [p for p in toc_files(root) if p.suffix == ".ipynb"]


def select(notebooks: list[Path], only: tuple[str, ...]) -> list[Path]:
    """The notebooks whose stem (or repo-relative path without suffix) is in ``only``, in book
    order and each once; all of them if ``only`` is empty."""
    if not only:
        return notebooks
    known = {p.stem: p for p in notebooks} | {str(p.with_suffix("")): p for p in notebooks}
    missing = [o for o in dict.fromkeys(only) if o not in known]
    if missing:
        raise SystemExit(f"unknown chapter(s) {missing}; _toc.yml has {sorted(p.stem for p in notebooks)}")
    return [p for p in notebooks if p.stem in only or str(p.with_suffix("")) in only]
