"""Execute the book's notebooks with papermill, cache them, build the site, check the records.

Used by ``python -m mechbook execute|build|check`` (see :mod:`mechbook.__main__`), by ``make book``
and by the chapter and site tests.

Each notebook listed in ``_toc.yml`` runs through papermill with ``profile`` injected into its
``parameters`` cell, in the notebook's own folder, with ``MECHBOOK_QUIET=1`` (no progress bars)
and ``MECHBOOK_STATIC=1`` (``explore`` renders its static form). The executed notebook lands in
``_build/executed/<profile>/<same path>``.

An executed notebook is reused when its cache key is unchanged. The key (:func:`cache_key`) is
the SHA-256 of: the code cells (source and tags), the kernel name, the injected parameters, every
file under ``mechbook/``, ``requirements.txt`` and the environment variables that choose data or
device (:data:`KEY_ENV`). Markdown cells are *not* part of the key: editing prose re-renders the
page with the stored outputs instead of re-running the chapter. A failed chapter is never
reused.

On a failing cell papermill stops that chapter and keeps the executed notebook, traceback
included, as the report; the other chapters still run, and the command exits non-zero naming
each failed chapter and cell.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Iterator

import nbformat
import yaml

from mechbook.profiles import PROFILES
from mechbook.records import read_records

ROOT = Path(__file__).resolve().parent.parent
KERNEL = "python3"
KEY_ENV: tuple[str, ...] = ("MECHBOOK_TINYSTORIES", "MECHBOOK_DEVICE", "MECHBOOK_OFFLINE", "HF_HUB_OFFLINE")
KERNEL_ENV: dict[str, str] = {"MECHBOOK_QUIET": "1", "MECHBOOK_STATIC": "1"}


@dataclasses.dataclass(frozen=True)
class ExecuteConfig:
    """What to execute: a profile, optionally only some chapters (by notebook stem)."""

    profile: str = "cpu"
    only: tuple[str, ...] = ()
    root: Path = ROOT
    force: bool = False
    cell_timeout: int | None = 3600
    knobs: tuple[tuple[str, Any], ...] = ()

    def parameters(self) -> dict[str, Any]:
        """What papermill injects: ``profile`` and the knobs (which override a knob named profile)."""
        return {"profile": self.profile, **dict(self.knobs)}

    @property
    def out_dir(self) -> Path:
        """Where executed notebooks and the staged site sources go."""
        return self.root / "_build" / "executed" / self.profile


@dataclasses.dataclass(frozen=True)
class ChapterResult:
    """The outcome of one chapter: ``executed``, ``cached`` or ``failed`` (with the cell)."""

    source: Path
    output: Path
    status: str
    seconds: float
    failure: str | None = None


def toc_files(root: Path = ROOT) -> list[Path]:
    """Every file ``_toc.yml`` names (root first), repo-relative, with its extension resolved."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
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


def toc_notebooks(root: Path = ROOT) -> list[Path]:
    """The notebooks of ``_toc.yml`` in book order, repo-relative."""
    return [p for p in toc_files(root) if p.suffix == ".ipynb"]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _package_digest(root: Path) -> dict[str, str]:
    """SHA-256 of every file under ``mechbook/`` (bytecode caches excluded)."""
    pkg = root / "mechbook"
    return {
        str(p.relative_to(pkg)): _sha256(p)
        for p in sorted(pkg.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def cache_key(notebook: Path, parameters: dict[str, Any], root: Path = ROOT) -> str:
    """SHA-256 of everything that decides a chapter's outputs (see the module docstring).

    Code cells count with their source and tags; markdown and raw cells do not.
    """
    nb = nbformat.read(notebook, as_version=4)
    code = [[c.source, sorted(c.get("metadata", {}).get("tags", []))] for c in nb.cells if c.cell_type == "code"]
    requirements = root / "requirements.txt"
    payload = {
        "code": code,
        "kernel": nb.metadata.get("kernelspec", {}).get("name"),
        "parameters": parameters,
        "mechbook": _package_digest(root),
        "requirements": _sha256(requirements) if requirements.exists() else None,
        "env": {k: os.environ.get(k) for k in KEY_ENV},
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@contextlib.contextmanager
def _kernel_env() -> Iterator[None]:
    """Set :data:`KERNEL_ENV` for the kernels started inside, then restore the environment."""
    saved = {k: os.environ.get(k) for k in KERNEL_ENV}
    os.environ.update(KERNEL_ENV)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _mechbook_meta(nb: nbformat.NotebookNode) -> dict[str, Any]:
    return nb.metadata.get("mechbook", {})


def refresh_prose(executed: nbformat.NotebookNode, source: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The source notebook's cells with the executed code cells' outputs put back in order.

    Valid when the code cells are unchanged (same cache key): markdown edits show up without
    re-running anything. Papermill's injected-parameters cell is kept after the parameters cell.
    """
    ran = [c for c in executed.cells if c.cell_type == "code" and "injected-parameters" not in c.metadata.get("tags", [])]
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    merged = nbformat.from_dict(json.loads(json.dumps(executed)))
    cells = []
    code_iter = iter(ran)
    for cell in source.cells:
        if cell.cell_type == "code":
            done = next(code_iter)
            cells.append(nbformat.from_dict({**done, "source": cell.source}))
            if "parameters" in cell.metadata.get("tags", []):
                cells.extend(injected)
        else:
            cells.append(cell)
    merged.cells = cells
    return merged


HIDDEN_TAG = "remove-cell"


def hide_parameters(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Tag the chapter's ``parameters`` cell and papermill's injected one ``remove-cell`` (myst-nb
    leaves them off the page, where the chapter's ``ran_with`` note says what ran); in place."""
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if ({"parameters", "injected-parameters"} & set(tags)) and HIDDEN_TAG not in tags:
            tags.append(HIDDEN_TAG)
    return nb


def check_knobs(notebook: Path, parameters: dict[str, Any]) -> None:
    """Refuse (``ValueError``) parameters that the notebook's ``parameters`` cell does not name,
    before any kernel starts: papermill would only log them and run with the defaults."""
    import papermill

    declared = papermill.inspect_notebook(str(notebook))
    unknown = sorted(set(parameters) - set(declared))
    if unknown:
        raise ValueError(
            f"{notebook}: unknown knob(s) {', '.join(unknown)}; its parameters cell declares "
            f"{', '.join(sorted(declared)) or 'nothing'}"
        )


def _describe_failure(exc: Exception, nb_path: Path) -> str:
    index = getattr(exc, "cell_index", None)
    ename = getattr(exc, "ename", type(exc).__name__)
    evalue = getattr(exc, "evalue", str(exc))
    source = (getattr(exc, "source", "") or "").strip().splitlines()
    where = f"cell {index}" + (f" ({source[0][:60]!r})" if source else "") if index is not None else "start-up"
    return f"{where}: {ename}: {str(evalue).strip()[:300]} (report: {nb_path})"


def execute_chapter(source: Path, cfg: ExecuteConfig) -> ChapterResult:
    """Run one notebook (repo-relative ``source``) with papermill unless its cached run is valid."""
    import papermill

    src = cfg.root / source
    out = cfg.out_dir / source
    params = cfg.parameters()
    check_knobs(src, params)
    key = cache_key(src, params, cfg.root)
    source_nb = nbformat.read(src, as_version=4)
    if out.exists() and not cfg.force:
        old = nbformat.read(out, as_version=4)
        meta = _mechbook_meta(old)
        if meta.get("cache_key") == key and meta.get("status") == "ok":
            nbformat.write(hide_parameters(refresh_prose(old, source_nb)), out)
            return ChapterResult(source, out, "cached", 0.0)
    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    failure = None
    with _kernel_env():
        try:
            papermill.execute_notebook(
                str(src),
                str(out),
                parameters=params,
                kernel_name=KERNEL,
                cwd=str(src.parent),
                progress_bar=False,
                execution_timeout=cfg.cell_timeout,
            )
        except Exception as exc:  # papermill's execution error, a dead kernel, a timeout
            failure = _describe_failure(exc, out)
    seconds = time.perf_counter() - start
    if not out.exists():  # papermill could not even start: keep the source as the report
        nbformat.write(source_nb, out)
    done = hide_parameters(nbformat.read(out, as_version=4))
    done.metadata["mechbook"] = {
        "cache_key": key,
        "profile": cfg.profile,
        "status": "failed" if failure else "ok",
        "seconds": round(seconds, 2),
        "failure": failure,
    }
    nbformat.write(done, out)
    return ChapterResult(source, out, "failed" if failure else "executed", seconds, failure)


def select(notebooks: list[Path], only: tuple[str, ...]) -> list[Path]:
    """The notebooks whose stem (or repo-relative path) is in ``only``; all if ``only`` is empty."""
    if not only:
        return notebooks
    known = {p.stem: p for p in notebooks} | {str(p.with_suffix("")): p for p in notebooks}
    missing = [o for o in only if o not in known]
    if missing:
        raise SystemExit(f"unknown chapter(s) {missing}; _toc.yml has {sorted(p.stem for p in notebooks)}")
    return [p for p in notebooks if p.stem in only or str(p.with_suffix("")) in only]


def execute_book(cfg: ExecuteConfig) -> list[ChapterResult]:
    """Execute the chosen chapters in book order, printing one progress line per chapter."""
    if cfg.profile not in PROFILES:
        raise SystemExit(f"unknown profile {cfg.profile!r}: choose one of {', '.join(PROFILES)}")
    chosen = select(toc_notebooks(cfg.root), cfg.only)
    for source in chosen:
        try:
            check_knobs(cfg.root / source, cfg.parameters())
        except ValueError as exc:
            raise SystemExit(str(exc)) from None
    results = []
    for i, source in enumerate(chosen, 1):
        tag = f"[{i}/{len(chosen)}] {source} ({cfg.profile})"
        print(f"{tag}: running", flush=True)
        result = execute_chapter(source, cfg)
        note = f"FAILED at {result.failure}" if result.failure else result.status
        print(f"{tag}: {note} ({result.seconds:.1f} s)", flush=True)
        results.append(result)
    return results


def failures(results: list[ChapterResult]) -> list[str]:
    """One line per failed chapter, naming it and the cell."""
    return [f"{r.source}: {r.failure}" for r in results if r.failure]


def stage_site(cfg: ExecuteConfig) -> Path:
    """Assemble the site's sources in ``cfg.out_dir``: config, toc, pages and executed notebooks.

    A notebook never executed for this profile is copied unexecuted (its page has no outputs)
    with a note, so ``build --only`` still gives a whole site.
    """
    out = cfg.out_dir
    out.mkdir(parents=True, exist_ok=True)
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
        elif not target.exists():
            print(f"note: {rel} has not been executed for profile {cfg.profile}; its page has no outputs")
            shutil.copy2(path, target)
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


def load_thresholds(stem: str, root: Path = ROOT) -> dict[str, dict[str, dict[str, Any]]]:
    """The per-profile bounds of ``book/thresholds/<stem>.yml`` (format: book/thresholds/README.md)."""
    path = root / "book" / "thresholds" / f"{stem}.yml"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: every chapter needs thresholds (see book/thresholds/README.md)")
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def check_thresholds(records: dict[str, Any], bounds: dict[str, dict[str, Any]]) -> list[str]:
    """Problems of ``records`` against ``{name: {min|max|equals: v}}``; empty when all hold."""
    problems = []
    for name, rule in bounds.items():
        unknown = set(rule) - {"min", "max", "equals"}
        if unknown:
            problems.append(f"{name}: unknown bound(s) {sorted(unknown)}; use min, max or equals")
            continue
        if name not in records:
            problems.append(f"{name}: not recorded by the chapter")
            continue
        value = records[name]
        if "equals" in rule and value != rule["equals"]:
            problems.append(f"{name} = {value!r}, expected {rule['equals']!r}")
        for bound, ok in (("min", lambda v, b: v >= b), ("max", lambda v, b: v <= b)):
            if bound in rule:
                if not isinstance(value, (int, float)) or isinstance(value, bool):
                    problems.append(f"{name} = {value!r} is not a number (bound {bound})")
                elif not ok(value, rule[bound]):
                    problems.append(f"{name} = {value!r} is outside {bound} {rule[bound]!r}")
    return problems


def check_book(cfg: ExecuteConfig) -> list[str]:
    """Compare every executed chapter's records with its thresholds for ``cfg.profile``."""
    problems = []
    for source in select(toc_notebooks(cfg.root), cfg.only):
        out = cfg.out_dir / source
        if not out.exists():
            problems.append(f"{source}: not executed for profile {cfg.profile} (run `python -m mechbook execute --profile {cfg.profile}`)")
            continue
        meta = _mechbook_meta(nbformat.read(out, as_version=4))
        if meta.get("status") != "ok":
            problems.append(f"{source}: its last run failed: {meta.get('failure')}")
            continue
        bounds = load_thresholds(source.stem, cfg.root).get(cfg.profile)
        if not bounds:
            problems.append(f"{source}: book/thresholds/{source.stem}.yml has no {cfg.profile} bounds")
            continue
        problems += [f"{source}: {p}" for p in check_thresholds(read_records(out), bounds)]
    return problems
