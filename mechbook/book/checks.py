"""A chapter's records against its bounds, ``book/thresholds/<stem>.yml`` (format in
book/thresholds/README.md), and those bounds against the records' measured seed spread,
``book/thresholds/<stem>.spread.yml`` (written by :mod:`mechbook.book.spread`). Used by
``python -m mechbook check`` and the chapter tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from mechbook.book.config import ExecuteConfig
from mechbook.book.ledger import check_claims, load_expected, read_chapter
from mechbook.book.run import mechbook_meta, read_executed
from mechbook.book.toc import ROOT, select, toc_notebooks
from mechbook.records import read_records


def thresholds_dir(root: Path = ROOT) -> Path:
    """Where the chapters' bounds (and their measured seed spreads) live: ``book/thresholds``."""
    return root / "book" / "thresholds"


def load_thresholds(stem: str, root: Path = ROOT) -> dict[str, dict[str, dict[str, Any]]]:
    """The per-profile bounds of ``book/thresholds/<stem>.yml``."""
    path = thresholds_dir(root) / f"{stem}.yml"
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


def spread_path(stem: str, root: Path = ROOT) -> Path:
    """``book/thresholds/<stem>.spread.yml``."""
    return thresholds_dir(root) / f"{stem}.spread.yml"


def load_spread(stem: str, root: Path = ROOT) -> dict[str, Any]:
    """The measured spreads of a chapter per profile; empty when none was measured."""
    path = spread_path(stem, root)
    if not path.exists():
        return {}
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def check_spread(bounds: dict[str, dict[str, Any]], measured: dict[str, Any]) -> list[str]:
    """One line per bound that some measured seed's value does not meet: the bound sits inside
    the seed spread. ``bounds`` are one profile's thresholds, ``measured`` that profile's entry
    of the spread file."""
    problems = []
    records = (measured or {}).get("records", {})
    for name, rule in bounds.items():
        if name not in records:
            continue
        entry = records[name]
        bad = [
            (seed, value)
            for seed, value in zip(entry["seeds"], entry["values"])
            if check_thresholds({name: value}, {name: rule})
        ]
        if bad:
            span = f"[{entry['min']!r}, {entry['max']!r}]" if "min" in entry else repr(entry["values"])
            shown = ", ".join(f"seed {s}: {v!r}" for s, v in bad)
            problems.append(
                f"{name}: bound {rule} sits inside the measured seed spread {span} "
                f"(fails {shown}; measured {measured.get('date')} at {measured.get('git')})"
            )
    return problems


def _last_run(meta: dict[str, Any]) -> str:
    status = meta.get("status")
    failure = meta.get("failure")
    if status == "interrupted":
        return f"its last run was interrupted at {failure or 'an unknown cell'}; run it again"
    if status == "failed":
        return f"its last run failed at {failure or 'an unrecorded cell'}"
    if status is None:
        return "its executed notebook has no record of the executor (not written by `execute`); run it again"
    return f"its last run ended with status {status!r}"


def check_book(cfg: ExecuteConfig) -> list[str]:
    """Compare every executed chapter's records with its thresholds for ``cfg.profile``; a chapter
    not executed, unreadable, failed or interrupted, or run with knobs (not the profile), is a
    problem that says so. Every bound that
    sits inside the chapter's measured seed spread is a problem too, and so is every claim whose
    verdict differs from the one stored in ``book/thresholds/claims.yml``
    (:func:`mechbook.book.ledger.check_claims`; a claim not stored yet is a printed note in smoke)."""
    problems = []
    for source in select(toc_notebooks(cfg.root), cfg.only):
        measured = load_spread(source.stem, cfg.root).get(cfg.profile)
        if measured:
            bounds = load_thresholds(source.stem, cfg.root).get(cfg.profile) or {}
            problems += [f"{source}: {p}" for p in check_spread(bounds, measured)]
    run_it = f"run `python -m mechbook execute --profile {cfg.profile}`"
    for source in select(toc_notebooks(cfg.root), cfg.only):
        out = cfg.out_dir / source
        if not out.exists():
            problems.append(f"{source}: not executed for profile {cfg.profile} ({run_it})")
            continue
        nb, problem = read_executed(out)
        if nb is None:
            problems.append(f"{source}: {problem}; it counts as not executed ({run_it})")
            continue
        meta = mechbook_meta(nb)
        if meta.get("status") != "ok":
            problems.append(f"{source}: {_last_run(meta)}")
            continue
        knobs = {k: v for k, v in (meta.get("parameters") or {}).items() if k != "profile"}
        if knobs:
            shown = ", ".join(f"{k}={v!r}" for k, v in sorted(knobs.items()))
            problems.append(
                f"{source}: its last run had knobs ({shown}), so it is not the {cfg.profile} profile and is "
                f"not checked; run `python -m mechbook execute --profile {cfg.profile} --only {source.stem}` "
                "without --knob"
            )
            continue
        bounds = load_thresholds(source.stem, cfg.root).get(cfg.profile)
        if not bounds:
            problems.append(f"{source}: book/thresholds/{source.stem}.yml has no {cfg.profile} bounds")
            continue
        problems += [f"{source}: {p}" for p in check_thresholds(read_records(nb), bounds)]
    chapters = [read_chapter(cfg, source) for source in select(toc_notebooks(cfg.root), cfg.only)]
    claim_problems, notes = check_claims(chapters, load_expected(cfg.root).get(cfg.profile) or {}, cfg.profile)
    for note in notes:
        print(f"note: {note}")
    return problems + claim_problems
