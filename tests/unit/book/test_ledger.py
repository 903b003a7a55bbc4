"""mechbook.book.ledger: the ledger page computed from fake executed chapters' ``claim.*`` records
and their claims tables, and ``check`` failing when a claim's verdict differs from the one stored
in book/thresholds/claims.yml (no kernel, no Sphinx)."""

from __future__ import annotations

import dataclasses
import json
import sys
import types
from pathlib import Path

import nbformat
import pytest
import yaml
from conftest import make_notebook

from mechbook.__main__ import main
from mechbook.book import ledger
from mechbook.book.checks import check_book
from mechbook.book.config import ExecuteConfig
from mechbook.book.site import stage_site
from mechbook.claims import Claim, Rule
from mechbook.records import GLUE_PREFIX

JUMP = Claim(
    "ch08.jump_step",
    "08_fake",
    "paper",
    "The binding jump comes near step 5,300",
    "step of the binding jump",
    Rule("<=", 6000, partly=9000),
    paper="about 5,300",
    section="ch08-jump",
    spec=",d",
)
SHARE = Claim(
    "ch08.top2_share",
    "08_fake",
    "book",
    "Layer 1 | attends to the operands",
    "top-2 attention share",
    Rule(">=", 0.9),
    spec=".2f",
)
LATER = Claim("ch08.never_recorded", "08_fake", "book", "Something the chapter forgot", "a value", Rule(">=", 0))
ASSOC = Claim("ch01.overlap", "01_fake", "paper", "G matches V W_O", "top-10 overlap", Rule(">=", 0.5), paper="98%")


def _fake_tables(tables: dict[str, tuple[Claim, ...]], monkeypatch) -> None:
    """A part library holding ``tables``, the only one the ledger reads."""
    module = types.ModuleType("mechbook.fake_part.claims")
    module.TABLES = tables
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(ledger, "PARTS", (module.__name__,))


def _outputs(records: dict) -> list:
    return [
        nbformat.v4.new_output(
            "display_data",
            data={GLUE_PREFIX + "application/json": json.dumps({"value": value}), GLUE_PREFIX + "text/plain": "x"},
            metadata={"scrapbook": {"name": name, "mime_prefix": GLUE_PREFIX}},
        )
        for name, value in records.items()
    ]


def _execute(repo: Path, source: str, evidences: list, status: str = "ok") -> None:
    """Write the executed notebook of ``source`` with these claims recorded (what papermill leaves)."""
    nb = nbformat.read(repo / source, as_version=4)
    nb.cells[-1].outputs = _outputs({f"claim.{ev.claim.id}": ev.as_record() for ev in evidences} | {"n": 1})
    nb.metadata["mechbook"] = {"status": status, "failure": "cell 2" if status != "ok" else None}
    out = repo / "_build" / "executed" / "smoke" / source
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out)


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    """A two-part book: chapter 1 (Part I) never executed, chapter 8 (Part II) executed."""
    _fake_tables({"01_fake": (ASSOC,), "08_fake": (JUMP, SHARE, LATER)}, monkeypatch)
    (tmp_path / "_config.yml").write_text("title: t\n")
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nparts:\n"
        '  - caption: "Part I: Leading terms"\n    chapters:\n      - file: book/p1/01_fake\n'
        '  - caption: "Part II: Assign and Add"\n    chapters:\n      - file: book/p2/08_fake\n'
        "  - caption: Appendix\n    chapters:\n      - file: book/appendix/ledger\n"
    )
    (tmp_path / "book" / "appendix").mkdir(parents=True)
    (tmp_path / "book" / "intro.md").write_text("# Intro\n")
    (tmp_path / "book" / "appendix" / "ledger.md").write_text("# Claims ledger\n\nplaceholder\n")
    make_notebook(
        tmp_path / "book" / "p1" / "01_fake.ipynb",
        [("md", "# 1. Maps"), ("code", "from mechbook.chapters import ch01_fake as ch01")],
    )
    make_notebook(
        tmp_path / "book" / "p2" / "08_fake.ipynb",
        [
            ("md", "# 8. Dynamics\n\n(ch08-jump)=\n## The jump"),
            ("code", "from mechbook.chapters import ch08_fake as ch08"),
        ],
    )
    thresholds = tmp_path / "book" / "thresholds"
    thresholds.mkdir()
    for stem in ("01_fake", "08_fake"):
        (thresholds / f"{stem}.yml").write_text("smoke:\n  n: {equals: 1}\n")
    _execute(
        tmp_path,
        "book/p2/08_fake.ipynb",
        [JUMP.evidence({0: 5401, 1: 8000, 2: 4000}, release=5401), SHARE.evidence({0: 0.96, 1: 0.95}, release=0.96)],
    )
    return tmp_path


def test_the_page_lists_every_claim_by_part_and_chapter(repo):
    page = (stage_site(ExecuteConfig(profile="smoke", root=repo)) / ledger.PAGE).read_text()
    part1, part2 = page.index("## Part I: Leading terms"), page.index("## Part II: Assign and Add")
    assert part1 < page.index("### 1. Maps") < part2 < page.index("### 8. Dynamics")
    assert "placeholder" not in page
    jump = next(line for line in page.splitlines() if "binding jump comes" in line)
    assert jump.startswith("| The binding jump comes near step 5,300. Step of the binding jump, rule ≤ 6,000")
    assert "Shown in {ref}`ch08-jump`" in jump
    assert (
        "| about 5,300 Setting: the paper's. | rebuild and released run | median 5,401 (4,000 to 8,000 over 3 seeds) | 5,401 | partly: holds "
        "on 2 of 3 seeds of this rebuild and holds on the released run |"
    ) in jump
    share = next(line for line in page.splitlines() if "operands" in line)
    assert "Layer 1 \\| attends" in share, "a pipe in a statement is escaped, not a new column"
    assert "Shown in {doc}`/book/p2/08_fake`" in share, "without a section the row links to its chapter"
    assert (
        "| (the book's reading) | rebuild and released run | median 0.95 (0.95 to 0.96 over 2 seeds) | 0.96 | "
        "reproduced: holds on every seed of this rebuild and holds on the released run |"
    ) in share
    never = next(line for line in page.splitlines() if "forgot" in line)
    assert never.endswith("| — | — | — | untested: the chapter did not record it in this profile |")
    overlap = next(line for line in page.splitlines() if "G matches" in line)
    assert overlap.endswith(
        "| 98% Setting: the paper's. | — | — | — | untested: the chapter was not executed in profile smoke |"
    )
    assert (
        "In all: The papers' claims: 1 partly and 1 untested, of 2 claims. Decided in the paper's own setting: 1 of "
        "the 1 papers' claims decided here. The book's readings: 1 reproduced and 1 untested, of 2 claims." in page
    )
    assert "## How this profile differs from the papers' settings" in page and "| vocab_size | 3000 | 200 |" in page
    assert page.index("operands") > page.index("binding jump comes"), "paper claims come before the book's readings"


def test_a_failed_run_lists_its_claims_as_untested_with_why(repo):
    _execute(repo, "book/p2/08_fake.ipynb", [JUMP.evidence(1000)], status="failed")
    (chapter,) = [c for _, chs in ledger.read_ledger(ExecuteConfig(profile="smoke", root=repo)) for c in chs][1:]
    assert chapter.records is None
    assert {e["verdict"] for e in chapter.entries()} == {"untested"}
    assert chapter.entries()[0]["untested"] == "its last run in profile smoke failed"


def test_check_fails_on_a_changed_verdict_and_notes_a_new_claim(repo, capsys):
    cfg = ExecuteConfig(profile="smoke", root=repo, only=("08_fake",))
    expected = repo / ledger.EXPECTED
    expected.write_text(yaml.safe_dump({"smoke": {"ch08.jump_step": "reproduced"}, "cpu": {"ch08.x": "partly"}}))
    problems = check_book(cfg)
    assert any("claim ch08.jump_step is 'partly', recorded as 'reproduced'" in p for p in problems)
    assert any("ch08.never_recorded is declared in its part's claims table but not recorded" in p for p in problems)
    assert not any("top2_share" in p for p in problems), "a claim not stored yet is new, not a failure"
    assert "new claim ch08.top2_share (reproduced)" in capsys.readouterr().out

    assert main(["claims", "--profile", "smoke", "--root", str(repo), "--write"]) == 0
    stored = yaml.safe_load(expected.read_text())
    assert stored["smoke"] == {
        "ch08.jump_step": {"verdict": "partly", "holds": 2, "of": 3, "release": True},
        "ch08.top2_share": {"verdict": "reproduced", "holds": 2, "of": 2, "release": True},
    }, "a claim over seeds is stored with its count"
    assert stored["cpu"] == {"ch08.x": "partly"}, "other profiles are kept"
    assert expected.read_text().startswith("# The verdict of every claim")
    problems = check_book(cfg)
    assert problems == [
        "book/p2/08_fake.ipynb: claim ch08.never_recorded is declared in its part's claims table but not recorded: "
        "record it in record_all (untested='why' where it cannot be measured)"
    ]

    stray = Claim("ch08.stray", "08_fake", "book", "s", "m", Rule(">=", 0))
    _execute(repo, "book/p2/08_fake.ipynb", [JUMP.evidence({0: 5000, 1: 5200}, release=5401), stray.evidence(1)])
    problems = check_book(cfg)
    assert any("ch08.stray is recorded but not declared in a claims table" in p for p in problems)
    # 2 of 2 bound seeds now against 2 of 3 stored, the released run as it was: a draw, noted, not failed
    assert not any("ch08.jump_step" in p for p in problems)
    assert "ch08.jump_step is 'reproduced' here, recorded as 'partly': a draw of its seeds" in capsys.readouterr().out
    assert any("ch08.top2_share in book/thresholds/claims.yml is no longer recorded" in p for p in problems)


def test_write_keeps_the_verdicts_of_a_chapter_without_a_valid_run(repo):
    cfg = ExecuteConfig(profile="smoke", root=repo)
    (repo / ledger.EXPECTED).write_text(yaml.safe_dump({"smoke": {"ch01.overlap": "reproduced"}}))
    chapters = [c for _, chs in ledger.read_ledger(cfg) for c in chs]
    path, kept = ledger.write_expected(cfg, chapters)
    assert yaml.safe_load(path.read_text())["smoke"]["ch01.overlap"] == "reproduced"
    assert kept == ["book/p1/01_fake.ipynb: kept as it was (the chapter was not executed in profile smoke)"]
    problems, _ = ledger.check_claims(chapters, {"ch08.jump_step": "maybe"}, "smoke")
    assert any(
        "has verdict 'maybe'; use one of reproduced, partly, released run only, not reproduced, confounded, untested"
        in p
        for p in problems
    )


def test_declared_claims_come_from_the_part_tables(repo):
    assert ledger.declared_claims("08_fake") == (JUMP, SHARE, LATER)
    assert ledger.declared_claims("09_other") == ()


def test_a_new_claim_fails_check_outside_smoke(repo):
    chapters = [c for _, chs in ledger.read_ledger(ExecuteConfig(profile="smoke", root=repo)) for c in chs]
    stored = {"ch08.jump_step": "partly"}
    problems, notes = ledger.check_claims(chapters, stored, "smoke")
    assert any("new claim ch08.top2_share" in n for n in notes)
    problems, notes = ledger.check_claims(chapters, stored, "cpu")
    assert any("new claim ch08.top2_share (reproduced)" in p for p in problems) and not notes


def test_every_claims_section_is_a_label_above_a_heading_of_its_own_chapter():
    """The ledger links each claim to its section with {ref}, which needs a label directly above a
    heading (a label above a paragraph fails the site build); the label must be in the chapter that
    declares the claim."""
    import re

    from mechbook.book.toc import ROOT, toc_notebooks

    for source in toc_notebooks(ROOT):
        nb = nbformat.read(ROOT / source, as_version=4)
        text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        headed = set(re.findall(r"^\(([\w-]+)\)=\s*\n#+ ", text, re.M))
        every = set(re.findall(r"^\(([\w-]+)\)=", text, re.M))
        assert every == headed, f"{source}: labels not above a heading: {sorted(every - headed)}"
        for claim in ledger.declared_claims(source.stem):
            assert claim.section is None or claim.section in headed, (source, claim.id, claim.section)


def test_each_row_names_its_basis_and_the_tallies_keep_specification_checks_apart():
    spec = Claim("ch07.split", "07_task", "paper", "1,045 pairs are held out", "pairs", Rule("==", 1045), paper="1,045")
    spec = Claim(**{**spec.__dict__, "basis": "specification"})
    rows = [
        spec.evidence(1045).as_record(),
        JUMP.evidence(release=5401).as_record(),
        JUMP.evidence({0: 9500, 1: 9100}).as_record(),
    ]
    cells = [ledger._row(e, Path("book/p2/07_task.ipynb")).split(" | ") for e in rows]
    assert [c[2] for c in cells] == ["specification check", "released run only", "rebuild"]
    assert cells[2][-1].startswith("not reproduced: fails on every seed of this rebuild")
    tally = ledger._tallies(rows)
    assert tally.startswith("The papers' claims: 1 reproduced and 1 not reproduced, of 2 claims.")
    assert tally.endswith("Checks of the task's specification: 1 reproduced, of 1 claim.")
    with pytest.raises(ValueError, match="basis must be"):
        Claim(**{**spec.__dict__, "basis": "guess"})


def _six_seeds(repo: Path, held: int, release: float = 0.96) -> None:
    """Chapter 8 executed with SHARE over six seeds, ``held`` of them at or above its 0.9 rule."""
    values = {s: 0.95 if s < held else 0.5 for s in range(6)}
    _execute(repo, "book/p2/08_fake.ipynb", [JUMP.evidence(5000), SHARE.evidence(values, release=release)])


@pytest.mark.parametrize(
    ("held", "release", "draw"),
    [(5, 0.96, True), (3, 0.96, True), (2, 0.96, False), (5, 0.5, False)],
    ids=["one-seed-fewer", "half", "outside-the-draw", "released-run-moved"],
)
def test_check_passes_a_verdict_that_moved_within_its_measured_draw_and_fails_any_other(repo, held, release, draw):
    """Stored: SHARE reproduced on 6 of 6 seeds and the released run. A new draw of seeds that
    holds on 3-5 of 6 is inside the beta-binomial's central 95% (a draw, a note with both
    counts); 2 of 6 is not; nor is the released run failing, whose bits do not move."""
    cfg = ExecuteConfig(profile="smoke", root=repo, only=("08_fake",))
    stored = {
        "ch08.jump_step": "reproduced",
        "ch08.top2_share": {"verdict": "reproduced", "holds": 6, "of": 6, "release": True},
    }
    _six_seeds(repo, held, release)
    (chapter,) = [c for _, chs in ledger.read_ledger(cfg) for c in chs if c.stem == "08_fake"]
    problems, notes = ledger.check_claims([chapter], stored, "cpu")
    moved = [line for line in problems + notes if "ch08.top2_share" in line]
    assert len(moved) == 1
    assert (moved[0] in notes) == draw
    assert f"{held} of 6 seeds" in moved[0] and "6 of 6 seeds, the released run holds when recorded" in moved[0]
    row = next(
        line
        for line in ledger.ledger_markdown(ledger.read_ledger(cfg), "smoke", stored).splitlines()
        if "attention share" in line
    )
    assert row.endswith("(a draw: recorded as reproduced, 6 of 6 seeds, the released run holds) |") == draw


def test_a_claim_without_a_stored_count_must_keep_its_verdict(repo):
    """The plain ``claim_id: verdict`` form (and a claim over one run) has no draw."""
    cfg = ExecuteConfig(profile="smoke", root=repo, only=("08_fake",))
    _six_seeds(repo, 5)
    (chapter,) = [c for _, chs in ledger.read_ledger(cfg) for c in chs if c.stem == "08_fake"]
    problems, _ = ledger.check_claims(
        [chapter], {"ch08.jump_step": "reproduced", "ch08.top2_share": "reproduced"}, "cpu"
    )
    assert any("claim ch08.top2_share is 'partly', recorded as 'reproduced'" in p for p in problems)
    assert chapter.tally("ch08.jump_step") is None, "one value is no draw over seeds"


def test_claims_yml_keeps_one_line_per_claim_with_counts_inline(repo):
    """The written file: profiles and claims as blocks, a count as an inline mapping on its line."""
    cfg = ExecuteConfig(profile="smoke", root=repo)
    (repo / ledger.EXPECTED).write_text(yaml.safe_dump({"cpu": {"ch08.x": "partly", "ch08.y": "reproduced"}}))
    ledger.write_expected(cfg, [c for _, chs in ledger.read_ledger(cfg) for c in chs])
    body = (repo / ledger.EXPECTED).read_text()
    assert "  ch08.jump_step: {verdict: partly, holds: 2, of: 3, release: true}\n" in body
    assert "cpu:\n  ch08.x: partly\n  ch08.y: reproduced\n" in body


def test_a_paper_claim_decided_elsewhere_names_its_setting_and_is_counted_apart():
    elsewhere = dataclasses.replace(JUMP, setting="on a miniature, for time")
    row = ledger._row(elsewhere.evidence(5000).as_record(), Path("book/p2/08_fake.ipynb"))
    assert "about 5,300 Setting: on a miniature, for time. |" in row
    tally = ledger._tallies([elsewhere.evidence(5000).as_record(), JUMP.evidence(5000).as_record()])
    assert "Decided in the paper's own setting: 1 of the 2 papers' claims decided here." in tally
    with pytest.raises(ValueError, match="a book's reading has none"):
        dataclasses.replace(SHARE, setting="anything")
