"""Chapter 6's claims table (mechbook.pythia.claims): each claim on both sides of its rule."""

from __future__ import annotations

import pytest

from mechbook.pythia.claims import CH06_CLAIMS


@pytest.mark.parametrize("claim", CH06_CLAIMS, ids=lambda c: c.id)
def test_each_claim_on_both_sides_of_its_rule(claim):
    t, up = claim.rule.threshold, 0.05 if claim.rule.op in (">", ">=") else -0.05
    hold, fail = claim.evidence(t + up), claim.evidence(t - up)
    assert hold.verdict == "reproduced" and fail.verdict == "not reproduced"
    yes, no = ("Reproduced", "Not reproduced") if claim.source == "paper" else ("Holds", "Does not hold")
    assert hold.sentence().startswith(f"**{yes}.**") and fail.sentence().startswith(f"**{no}.**")
    assert f"{t + up:{claim.spec}}" in hold.sentence() and f"{t - up:{claim.spec}}" in fail.sentence()
    assert claim.section in ("ch06-reading", "ch06-controls", "ch06-findings")
    # the paper's claims are its findings, read over its window; the book's readings are the book's
    assert (claim.source == "paper") == (claim.section == "ch06-findings")
    if claim.source == "paper":
        assert "over the paper's window" in claim.measure and "the book's budget" in claim.measure
