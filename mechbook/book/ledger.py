"""The claims ledger: every claim of the book with its verdict, read from the executed chapters.

Each chapter records its claims as ``claim.<id>`` records (:func:`mechbook.claims.record_claims`);
its part's library declares them in one table per chapter (``TABLES`` of the modules in
:data:`PARTS`). This module reads both for one profile and

- computes the appendix page ``book/appendix/ledger.md`` of the staged site
  (:func:`ledger_page`, called by :func:`mechbook.book.site.stage_site`), so the page is
  computed when the site is built and can never be out of date with the executed chapters;
- compares each recorded verdict with the one stored in ``book/thresholds/claims.yml``
  (:func:`check_claims`, part of ``python -m mechbook check``) and rewrites that file
  (:func:`write_expected`, ``python -m mechbook claims --write``).

A claim a table declares that the executed chapter did not record (the chapter was not executed in
this profile, or its run failed) is listed as untested, with why.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import yaml

from mechbook.book.config import ExecuteConfig
from mechbook.book.draws import Stored, Tally, is_draw, tally
from mechbook.book.run import mechbook_meta, read_executed
from mechbook.book.toc import select, toc_notebooks, toc_parts
from mechbook.claims import VERDICTS, Claim, id_prefix, read_claims
from mechbook.records import read_records

#: The generated page, repo-relative (a stub is committed there so the toc and the sources tests
#: see the file; the site build overwrites the staged copy).
PAGE = Path("book/appendix/ledger.md")
#: The verdict each claim had when last recorded, per profile: ``{profile: {claim_id: verdict}}``.
EXPECTED = Path("book/thresholds/claims.yml")
EXPECTED_HEADER = """\
# The verdict of every claim when it was last recorded, per profile: {profile: {claim_id: verdict}},
# and for a claim decided over seeds {verdict: V, holds: k, of: n, release: true|false}: its rule
# held on k of the n seeds (and on the released run, or not).
# `python -m mechbook check --profile P` fails when an executed chapter's verdict differs from the
# one here, unless it is a draw (mechbook/book/draws.py: the released run as recorded and the new
# count of seeds inside what k of n measured), which it prints as a note with both counts.
# Written by `python -m mechbook claims --profile P --write` from the executed chapters: rewrite it
# when a verdict changes on purpose, and say why in the commit.
"""
#: Profiles where a recorded claim not in ``claims.yml`` yet is a note, not a failure: smoke runs on
#: every edit while chapters gain claims; cpu and paper guard the published book, where a claim
#: without a stored verdict is a regression nothing would catch.
NEW_IS_A_NOTE = ("smoke",)
PARTS = ("mechbook.leading_terms.claims", "mechbook.pythia.claims", "mechbook.assign_add.claims")
"""The part libraries whose ``TABLES`` hold the book's claims, by notebook stem."""


def declared_claims(stem: str) -> tuple[Claim, ...]:
    """The claims of chapter ``stem``: its table in the part libraries of :data:`PARTS`."""
    out: tuple[Claim, ...] = ()
    for name in PARTS:
        out += importlib.import_module(name).TABLES.get(stem, ())
    return out


@dataclass(frozen=True)
class Chapter:
    """One chapter's part of the ledger in one profile: ``records`` are its ``claim.<id>`` records
    by id (None when it has no valid run in the profile, ``why`` saying so), ``declared`` the
    claims its table declares, ``title`` its first heading."""

    source: Path
    title: str
    records: dict[str, dict[str, Any]] | None
    why: str | None
    declared: tuple[Claim, ...]

    @property
    def stem(self) -> str:
        return self.source.stem

    def entries(self) -> list[dict[str, Any]]:
        """Every claim of the chapter as a record: the recorded ones, then each declared claim not
        recorded, untested with why. Paper claims first, then the book's readings."""
        recorded = dict(self.records or {})
        why = self.why or "the chapter did not record it in this profile"
        for claim in self.declared:
            if claim.id not in recorded:
                recorded[claim.id] = claim.evidence(untested=why).as_record()
        return sorted(recorded.values(), key=lambda r: r["source"] != "paper")

    def undeclared(self) -> list[str]:
        """Ids a valid run recorded that no claims table declares."""
        declared = {c.id for c in self.declared}
        return [cid for cid in self.records or {} if cid not in declared]

    def tally(self, cid: str) -> Tally | None:
        """The recorded claim ``cid``'s count over seeds under its declared rule
        (:func:`mechbook.book.draws.tally`; None when it is not decided over seeds)."""
        rec = (self.records or {}).get(cid)
        claim = next((c for c in self.declared if c.id == cid), None)
        if rec is None or claim is None:
            return None
        return tally(claim, rec.get("seeds") or [], rec.get("values") or [], rec.get("release"))

    def unrecorded(self) -> list[str]:
        """Ids the chapter's table declares that a valid run of the chapter did not record."""
        if self.records is None:
            return []
        return [c.id for c in self.declared if c.id not in self.records]


def _title(notebook: nbformat.NotebookNode, stem: str) -> str:
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return stem


def read_chapter(
    cfg: ExecuteConfig,
    source: Path,
    declared: Callable[[str], tuple[Claim, ...]] = declared_claims,
) -> Chapter:
    """Chapter ``source`` (repo-relative notebook) of the ledger for ``cfg.profile``: its claim
    records from ``cfg.out_dir`` and its declared claims (``declared(stem)``)."""
    notebook = nbformat.read(cfg.root / source, as_version=4)
    title, claims = _title(notebook, source.stem), declared(source.stem)
    out = cfg.out_dir / source
    not_run = f"the chapter was not executed in profile {cfg.profile}"
    if not out.exists():
        return Chapter(source, title, None, not_run, claims)
    nb, _ = read_executed(out)
    if nb is None:
        return Chapter(source, title, None, f"its executed notebook for profile {cfg.profile} cannot be read", claims)
    status = mechbook_meta(nb).get("status")
    if status is None:  # the unexecuted copy a site build stages in its place
        return Chapter(source, title, None, not_run, claims)
    if status != "ok":  # the page says what happened, not where the report lies (check does)
        return Chapter(source, title, None, f"its last run in profile {cfg.profile} {status}", claims)
    return Chapter(source, title, read_claims(read_records(nb)), None, claims)


def read_ledger(
    cfg: ExecuteConfig,
    declared: Callable[[str], tuple[Claim, ...]] = declared_claims,
) -> list[tuple[str, list[Chapter]]]:
    """``(part caption, chapters)`` for every part of ``_toc.yml``, in book order."""
    toc = yaml.safe_load((cfg.root / "_toc.yml").read_text(encoding="utf-8"))
    captions = {str(p.get("caption", "")).split(":")[0]: p.get("caption") for p in toc.get("parts", [])}
    return [
        (captions.get(name) or name, [read_chapter(cfg, s, declared) for s in sources])
        for name, sources in toc_parts(cfg.root)
    ]


def _cell(text: Any) -> str:
    """Text fit for one cell of a Markdown table."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _tallies(entries: Iterable[Mapping[str, Any]]) -> str:
    """The tally of the papers' claims, then of the book's readings and of the specification
    checks, each apart: ``"The papers' claims: 3 reproduced and 1 partly, of 4 claims. The book's
    readings: ..."``."""
    entries = list(entries)
    groups = {
        "The papers' claims": [e for e in entries if e.get("basis") != "specification" and e["source"] == "paper"],
        "The book's readings": [e for e in entries if e.get("basis") != "specification" and e["source"] == "book"],
        "Checks of the task's specification": [e for e in entries if e.get("basis") == "specification"],
    }
    parts = [f"{name}: {_tally(group)}" for name, group in groups.items() if group]
    decided = [e for e in groups["The papers' claims"] if e["verdict"] not in ("untested", "confounded")]
    if decided:
        own = sum(1 for e in decided if not e.get("setting"))
        parts[0] += f" Decided in the paper's own setting: {own} of the {len(decided)} papers' claims decided here."
    return " ".join(parts) or "no claims."


def _basis(entry: Mapping[str, Any]) -> str:
    """What a row was decided on: a specification check, the rebuild, the released run, or both."""
    if entry.get("basis") == "specification":
        return "specification check"
    sides = (["rebuild"] if entry["values"] else []) + (["released run"] if entry.get("release") is not None else [])
    if sides == ["released run"]:
        return "released run only"
    basis = " and ".join(sides) or "—"
    return f"{basis}: {entry['run']}" if entry.get("run") else basis


def _tally(entries: Iterable[Mapping[str, Any]]) -> str:
    """``"3 reproduced, 1 partly and 2 untested, of 6 claims."``"""
    counts = Counter(e["verdict"] for e in entries)
    total = sum(counts.values())
    if not total:
        return "no claims."
    parts = [f"{counts[v]} {v}" for v in VERDICTS if counts[v]]
    listed = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
    return f"{listed}, of {total} claim{'s' if total != 1 else ''}."


def drawn(chapter: Chapter, entry: Mapping[str, Any], stored: Mapping[str, Any]) -> str:
    """``" (a draw: recorded as reproduced, 6 of 6 seeds)"`` where ``entry``'s verdict differs
    from the one stored for it (``stored``: one profile's ``claims.yml``) within the draw its
    stored count measured (:func:`mechbook.book.draws.is_draw`); else ``""``."""
    if entry["id"] not in stored or entry["verdict"] in ("untested", "confounded"):
        return ""
    was = Stored.parse(stored[entry["id"]])
    if was.verdict == entry["verdict"] or not is_draw(was, chapter.tally(entry["id"])):
        return ""
    return f" (a draw: recorded as {was.verdict}, {was.tally.text()})"


def _row(entry: Mapping[str, Any], source: Path, draw: str = "") -> str:
    where = f"{{ref}}`{entry['section']}`" if entry.get("section") else f"{{doc}}`/{source.with_suffix('')}`"
    claim = f"{entry['statement'].rstrip('. ')}. {entry['measure'][:1].upper()}{entry['measure'][1:]}, rule {entry['rule']}. Shown in {where}."
    paper = entry["paper"] if entry["source"] == "paper" else "(the book's reading)"
    if entry["source"] == "paper":
        paper += f" Setting: {entry['setting'].rstrip('. ')}." if entry.get("setting") else " Setting: the paper's."
    rebuild = entry["summary"] if entry["values"] else "—"
    release = entry.get("release_text") or "—"
    verdict = entry["verdict"]
    where = (entry.get("where") or "").removeprefix("It ").rstrip(".")
    if verdict == "untested":
        verdict = f"untested: {(entry.get('untested') or 'no value was measured').rstrip('. ')}"
    elif verdict == "confounded":
        verdict = f"untested (confounded: {(entry.get('confounded') or '').rstrip('. ')})"
    elif where and (verdict == "partly" or len(entry["values"]) > 1):
        verdict = f"{verdict}: {where}"
    verdict += draw
    return "| " + " | ".join(_cell(x) for x in (claim, paper, _basis(entry), rebuild, release, verdict)) + " |"


def ledger_markdown(
    parts: list[tuple[str, list[Chapter]]], profile: str, stored: Mapping[str, Any] | None = None
) -> str:
    """The ledger page: per part and chapter, a table claim | paper | basis | rebuild | released
    run | verdict (with where the rule holds, over seeds, and whether it moved as a draw from the
    verdict ``stored`` for it, one profile's ``claims.yml``), each claim linking to the section that
    shows it (else its chapter); the tallies count the papers' claims apart from the book's
    readings and the specification checks, and say how many of the papers' decided claims were
    decided in the paper's own setting (a claim's ``setting`` names what differs otherwise)."""
    stored = stored or {}
    everything = [e for _, chapters in parts for ch in chapters for e in ch.entries()]
    lines = [
        "(appendix-ledger)=",
        "# Claims ledger",
        "",
        "Every claim of the two papers that the book tests, and every reading of the book that one of "
        "its sentences asserts, with the verdict of its one rule over the rebuild's seeds and the "
        "authors' released run: reproduced when every value meets the rule; partly when some do, at "
        "least one seed of the rebuild among them (or, for a claim decided on one value, when it meets "
        "the looser threshold its rule states); released run only when every seed of the rebuild fails "
        "and the released run holds; not reproduced when none holds; untested (confounded) when the "
        "values were measured but the profile's budget confounds them, with why. This page is computed when the site is built, "
        f"from the `claim.*` records of the chapters executed in the `{profile}` profile; a claim a "
        "chapter declares but did not record in this profile is listed as untested, with why. The "
        "rebuild column gives one value, or the median and range over seeds; the verdict says on how "
        "many seeds the rule holds. The basis says what a row was decided on: the rebuild, the released run "
        "only, or a check that the task as built is the paper's specification (not a result). The paper "
        "column ends with the setting a paper's claim was decided in: the paper's own (its rates, steps, "
        "batch-to-data ratio, initialisation and tokenisation, with |V|, T and the data scaled as the "
        "profile states), or what differs and why.",
        "",
        "Every seed is a draw: another processor, or other seeds, trains other bits, and a verdict that "
        "needs every seed to hold can move with them. A verdict marked *a draw* differs from the one "
        "recorded for this profile (`book/thresholds/claims.yml`) while the released run holds as it "
        "did and the count of seeds is inside the central 95% of what a fresh draw of as many seeds "
        "gives, given the recorded count (a beta-binomial with a uniform prior; `mechbook/book/draws.py`). "
        "`python -m mechbook check` passes such a verdict with a note and fails any other change.",
        "",
        f"In all: {_tallies(everything)}",
    ]
    for caption, chapters in parts:
        lines += ["", f"## {caption}", "", _tallies(e for ch in chapters for e in ch.entries())]
        for chapter in chapters:
            entries = chapter.entries()
            lines += ["", f"### {chapter.title}", ""]
            if not entries:
                lines.append(f"{{doc}}`/{chapter.source.with_suffix('')}` declares no claims.")
                continue
            lines += [
                "| claim | paper | basis | rebuild | released run | verdict |",
                "|---|---|---|---|---|---|",
                *(_row(e, chapter.source, drawn(chapter, e, stored)) for e in entries),
            ]
    return "\n".join(lines) + "\n"


def differences_markdown(profile: str) -> str:
    """The section listing how ``profile``'s runs differ from the papers' own: Part I's
    (:func:`mechbook.leading_terms.runs.differences_from_paper`) and Part II's
    (:func:`mechbook.assign_add.runs.differences_from_paper` of its training profile)."""
    from mechbook.assign_add.runs import TRAIN_PROFILES
    from mechbook.assign_add.runs import differences_from_paper as part2
    from mechbook.leading_terms.runs import differences_from_paper as part1

    lines = ["", "## How this profile differs from the papers' settings", ""]
    for caption, table in (
        ("Part I (chapter 3's runs, which chapters 4 and 5 read)", part1(profile)),
        ("Part II (the training run of chapters 8-10)", part2(TRAIN_PROFILES[profile])),
    ):
        n = len(table)
        differ = "the paper's setting." if not n else f"{n} setting{'s differ' if n > 1 else ' differs'}."
        lines += [f"{caption}: {differ}", ""]
        if not table.empty:
            lines += [
                "| " + " | ".join(table.columns) + " |",
                "|" + "---|" * len(table.columns),
                *("| " + " | ".join(_cell(str(v)) for v in row) + " |" for row in table.itertuples(index=False)),
                "",
            ]
    return "\n".join(lines)


def ledger_page(cfg: ExecuteConfig) -> str:
    """The ledger page of ``cfg.profile``, from the chapters executed into ``cfg.out_dir``, with how
    the profile's runs differ from the papers' (:func:`differences_markdown`)."""
    page = ledger_markdown(read_ledger(cfg), cfg.profile, load_expected(cfg.root).get(cfg.profile) or {})
    return page + differences_markdown(cfg.profile)


def load_expected(root: Path) -> dict[str, dict[str, str]]:
    """``book/thresholds/claims.yml``: ``{profile: {claim_id: verdict}}`` (empty when missing)."""
    path = root / EXPECTED
    data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None
    return data or {}


def check_claims(chapters: Iterable[Chapter], expected: Mapping[str, Any], profile: str) -> tuple[list[str], list[str]]:
    """``(problems, notes)`` of the chapters' recorded verdicts against ``expected`` (one
    profile's ``claims.yml``). Problems: a verdict that differs from the stored one and is no draw
    (:func:`mechbook.book.draws.is_draw`), a stored claim that a valid run no longer records, a
    declared claim a valid run did not record or a recorded one no table declares, an unknown
    verdict in the file. Notes: a verdict that moved as a draw, with both counts; a recorded claim
    not in the file yet (new), in the profiles of :data:`NEW_IS_A_NOTE` (a problem in the others)."""
    write = f"`python -m mechbook claims --profile {profile} --write`"
    stored = {cid: Stored.parse(entry) for cid, entry in expected.items()}
    problems: list[str] = []
    notes: list[str] = []
    for chapter in chapters:
        if chapter.records is None:
            continue
        for cid, rec in chapter.records.items():
            if cid not in stored:
                line = f"{chapter.source}: new claim {cid} ({rec['verdict']}); store its verdict with {write}"
                (notes if profile in NEW_IS_A_NOTE else problems).append(line)
                continue
            was, now = stored[cid], chapter.tally(cid)
            if rec["verdict"] == was.verdict:
                continue
            counts = f"{now.text()} here" if now else rec["summary"]
            if was.tally:
                counts += f", {was.tally.text()} when recorded"
            if is_draw(was, now):
                notes.append(
                    f"{chapter.source}: claim {cid} is {rec['verdict']!r} here, recorded as {was.verdict!r}: a draw "
                    f"of its seeds ({counts}; rule {rec['rule']})"
                )
            else:
                problems.append(
                    f"{chapter.source}: claim {cid} is {rec['verdict']!r}, recorded as {was.verdict!r} in "
                    f"{EXPECTED} ({counts}; rule {rec['rule']}); if the change is meant, run {write}"
                )
        prefix = id_prefix(chapter.stem)
        for cid in sorted(stored):
            if cid.startswith(prefix) and cid not in chapter.records:
                problems.append(f"{chapter.source}: claim {cid} in {EXPECTED} is no longer recorded; run {write}")
        problems += [
            f"{chapter.source}: claim {cid} is declared in its part's claims table but not recorded: record it in "
            "record_all "
            "(untested='why' where it cannot be measured)"
            for cid in chapter.unrecorded()
        ]
        problems += [
            f"{chapter.source}: claim {cid} is recorded but not declared in a claims table (TABLES of "
            f"{', '.join(PARTS)}): declare it there"
            for cid in chapter.undeclared()
        ]
    problems += [
        f"{EXPECTED}: claim {cid} has verdict {entry.verdict!r}; use one of {', '.join(VERDICTS)}"
        for cid, entry in sorted(stored.items())
        if entry.verdict not in VERDICTS
    ]
    return problems, notes


class _ExpectedDumper(yaml.SafeDumper):
    """``claims.yml``'s layout: profiles and claims as blocks, one line per claim, a count
    (:meth:`mechbook.book.draws.Stored.as_yaml`) as an inline mapping on its claim's line."""

    def represent_mapping(self, tag, mapping, flow_style=None):
        inline = isinstance(mapping, dict) and "verdict" in mapping
        return super().represent_mapping(tag, mapping, flow_style=inline)


def write_expected(cfg: ExecuteConfig, chapters: Iterable[Chapter]) -> tuple[Path, list[str]]:
    """Store the recorded verdicts of the chapters with a valid run in ``cfg.profile``'s section
    of ``claims.yml`` (their old entries replaced; other chapters' and profiles' kept). Returns
    the file and one line per chapter left as it was, with why."""
    data = load_expected(cfg.root)
    section = dict(data.get(cfg.profile) or {})
    kept = []
    for chapter in chapters:
        if chapter.records is None:
            kept.append(f"{chapter.source}: kept as it was ({chapter.why})")
            continue
        prefix = id_prefix(chapter.stem)
        section = {k: v for k, v in section.items() if not k.startswith(prefix)}
        section.update(
            {cid: Stored(rec["verdict"], chapter.tally(cid)).as_yaml() for cid, rec in chapter.records.items()}
        )
    data[cfg.profile] = dict(sorted(section.items()))
    path = cfg.root / EXPECTED
    path.write_text(
        EXPECTED_HEADER + yaml.dump(data, Dumper=_ExpectedDumper, sort_keys=False, allow_unicode=True),
        encoding="utf-8",
    )
    return path, kept


def claims_command(cfg: ExecuteConfig, write: bool = False) -> int:
    """``python -m mechbook claims``: print each chosen chapter's claims with their verdicts (and
    the stored verdict where it differs); with ``write``, store the verdicts in ``claims.yml``.
    Without ``write`` the exit status is 1 when :func:`check_claims` finds a problem."""
    chapters = [read_chapter(cfg, source) for source in select(toc_notebooks(cfg.root), cfg.only)]
    expected = load_expected(cfg.root).get(cfg.profile) or {}
    for chapter in chapters:
        print(f"{chapter.source}" + (f" ({chapter.why})" if chapter.why else ""))
        for entry in chapter.entries():
            stored = Stored.parse(expected[entry["id"]]).verdict if entry["id"] in expected else None
            was = "" if stored in (None, entry["verdict"]) else f", stored as {stored}"
            print(f"  {entry['id']}: {entry['verdict']}{was} (rebuild {entry['summary']}; rule {entry['rule']})")
    if write:
        path, kept = write_expected(cfg, chapters)
        for line in kept:
            print(f"note: {line}")
        print(f"wrote the {cfg.profile} verdicts to {path}")
        return 0
    problems, notes = check_claims(chapters, expected, cfg.profile)
    for line in notes:
        print(f"note: {line}")
    for line in problems:
        print(f"FAIL {line}")
    return 1 if problems else 0
