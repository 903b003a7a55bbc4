"""Every claim table of the book, one test: each claim's cases are derived from its rule's two sides
(a value that holds, one that fails, one between the partly threshold and the rule), and each
must give its verdict, in the words of its source, with its value and rule in the sentence."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
from conftest import ROOT

from mechbook.assign_add import claims as assign_add_claims
from mechbook.claims import Claim, Rule, by_id
from mechbook.leading_terms import claims as leading_terms_claims
from mechbook.pythia import claims as pythia_claims

TABLES: dict[str, tuple[Claim, ...]] = {
    **leading_terms_claims.TABLES,
    **pythia_claims.TABLES,
    **assign_add_claims.TABLES,
}
ALL = [c for table in TABLES.values() for c in table]


def sides(rule: Rule) -> tuple[Any, Any, Any | None]:
    """(a value that holds, one that fails and misses ``partly``, one that only meets ``partly``
    (None without a partly threshold)), derived from the rule alone."""
    t = rule.threshold
    if rule.op == "==":
        if isinstance(t, bool):
            return t, not t, None
        return (t, t + 1, None) if isinstance(t, int) else (t, f"{t} and more", None)
    edge = t if rule.partly is None else rule.partly
    scale = max(abs(t), abs(edge), 1e-3)
    up = rule.op in (">=", ">")
    good = t + scale if up else t - scale
    bad = edge - scale if up else edge + scale
    between = None if rule.partly is None or rule.partly == t else (t + rule.partly) / 2
    return good, bad, between


def _notebook_text(stem: str) -> str:
    (path,) = [p for p in (ROOT / "book").rglob(f"{stem}.ipynb")]
    return "".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown")


def test_ids_are_unique_and_each_table_holds_its_own_chapters_claims():
    assert len(by_id(ALL)) == len(ALL)
    for stem, table in TABLES.items():
        prefix = f"ch{stem[:2]}." if stem[:2].isdigit() else f"{stem}."
        assert table and all(c.chapter == stem and c.id.startswith(prefix) for c in table), stem
        assert all(c.read is not None for c in table), stem


@pytest.mark.parametrize("stem", sorted(TABLES))
def test_every_section_a_claim_names_is_a_label_of_its_page(stem):
    text = _notebook_text(stem)
    for claim in TABLES[stem]:
        assert claim.section and f"({claim.section})=" in text, claim.id


@pytest.mark.parametrize("claim", ALL, ids=lambda c: c.id)
def test_each_claim_is_decided_by_its_rule_on_both_sides(claim):
    good, bad, between = sides(claim.rule)
    words = ("Reproduced", "Not reproduced", "Partly reproduced")
    if claim.source == "book":
        words = ("Holds", "Does not hold", "Holds in part")
    for value, verdict, word in ((good, "reproduced", words[0]), (bad, "not reproduced", words[1])):
        ev = claim.evidence({0: value, 1: value}, release=value)
        assert ev.verdict == verdict, (claim.id, value)
        sentence = ev.sentence()
        assert sentence.startswith(f"**{word}.**") and claim.rule.text(claim.spec) in sentence
        assert claim.rule.shown(value, claim.spec) in sentence
    mixed = claim.evidence({0: good}, release=bad)
    assert mixed.verdict == "partly" and mixed.sentence().startswith(f"**{words[2]}.**")
    if between is not None:
        assert claim.evidence([between]).verdict == "partly"
    assert claim.evidence([None, None]).verdict == "not reproduced"  # a seed without a value counts against
    assert claim.evidence(untested="no run").sentence().startswith("**Untested here.**")


@pytest.mark.parametrize("rule", [Rule(">=", 0.9, partly=0.5), Rule("<", 0.0), Rule("<=", 100, partly=1000)])
def test_the_derived_sides_fall_where_they_say(rule):
    good, bad, between = sides(rule)
    assert rule.holds(good) and not rule.holds(bad) and not rule.partly_holds(bad)
    assert between is None or (rule.partly_holds(between) and not rule.holds(between))
    assert all(math.isfinite(v) for v in (good, bad))


def test_no_chapter_module_declares_or_reads_claims_itself():
    for module in sorted((ROOT / "mechbook" / "chapters").glob("*.py")):
        text = module.read_text()
        assert not re.search(r"^CLAIMS\b|^MEASURES\b|^BY_ID\b|\bClaim\(", text, re.M), module.name
