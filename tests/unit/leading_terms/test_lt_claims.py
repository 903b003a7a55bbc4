"""Part I's claims tables (mechbook.leading_terms.claims): each claim of the introduction and chapters 1 to 5 on
both sides of its rule."""

from __future__ import annotations

import dataclasses

import pytest
from test_ch01_corpus_maps import _named, _numbers, _with_fig5
from test_ch03_training import readings

from mechbook import claims
from mechbook.leading_terms.claims import CH01_CLAIMS, CH03_CLAIMS, CH04_CLAIMS, CH05_CLAIMS, INTRO
from mechbook.leading_terms.maps import FIGURE5, FIGURE5_TOP


@pytest.mark.parametrize(
    ("knob", "holds", "fails", "partly"),
    [
        ("drop", 0.01, 0.5, 0.1),
        ("rank", 1, 2, None),
        ("noun_ratio", 2.5, 1.0, 1.5),
        ("phi", 4.0, 50.0, 20.0),
        ("b_over_phi", 5.0, 1.0, 2.0),
        ("class_ratio", 2.2, 1.0, 1.5),
        ("other_over_phi", 3.0, 1.0, 2.0),
    ],
)
def test_ch01_each_claim_on_both_sides_of_its_rule(knob, holds, fails, partly):
    cid = {
        "drop": "ch01.drop_keeps_little",
        "rank": "ch01.upon_after_once",
        "noun_ratio": "ch01.adjective_nouns",
        "phi": "ch01.scene_pairs",
        "b_over_phi": "ch01.phi_not_b",
        "class_ratio": "ch01.word_classes",
        "other_over_phi": "ch01.pairs_not_frequency",
    }[knob]
    claim = next(c for c in CH01_CLAIMS if c.id == cid)
    good, bad = (
        claims.evidence(CH01_CLAIMS, _numbers(**{knob: holds}))[cid],
        claims.evidence(CH01_CLAIMS, _numbers(**{knob: fails}))[cid],
    )
    assert good.verdict == "reproduced" and bad.verdict == "not reproduced"
    yes, no = ("Holds", "Does not hold") if claim.source == "book" else ("Reproduced", "Not reproduced")
    assert good.sentence().startswith(f"**{yes}.**") and bad.sentence().startswith(f"**{no}.**")
    assert claim.statement in good.sentence()
    if partly is not None:
        assert claims.evidence(CH01_CLAIMS, _numbers(**{knob: partly}))[cid].verdict == "partly"


def test_no_scene_pair_in_the_vocabulary_leaves_the_pair_claims_untested_and_says_why():
    """A corpus too small to hold any scene pair: no ranks to compare, so the two pair claims are
    untested with the reason, and the prose says there is nothing to read (no NaN reaches a word)."""
    n = dataclasses.replace(
        _numbers(), phi_pair_median_rank=None, b_pair_median_rank=None, n_context_pairs=0, vocab_size=144
    )
    ev = claims.evidence(CH01_CLAIMS, n)
    for cid in ("ch01.scene_pairs", "ch01.phi_not_b", "ch01.pairs_not_frequency"):
        assert ev[cid].verdict == "untested" and "no scene pair" in ev[cid].sentence()
        assert "vocabulary of 144 tokens" in ev[cid].untested
    assert ev["ch01.upon_after_once"].verdict != "untested"
    # pairs in the vocabulary but no mismatched control: untested, and no reason is invented
    no_control = claims.evidence(CH01_CLAIMS, dataclasses.replace(_numbers(), phi_pair_mismatched_median_rank=None))
    assert no_control["ch01.pairs_not_frequency"].verdict == "untested"
    assert no_control["ch01.pairs_not_frequency"].untested is None


@pytest.mark.parametrize("a", FIGURE5, ids=lambda a: a.key)
def test_each_figure5_group_on_both_sides_of_its_rule_and_untested_without_its_words(a):
    """All named words in the top 30: reproduced; half: partly; none: not; a word outside the
    vocabulary: untested, naming it and |V|."""
    cid = f"ch01.fig5_{a.key}"
    claim = next(c for c in CH01_CLAIMS if c.id == cid)
    assert claim.source == "paper" and claim.paper == a.paper and claim.section == "ch01-paper-figures"

    def verdict(**kw):
        return claims.evidence(CH01_CLAIMS, _with_fig5(_numbers(), a.key, _named(a, **kw)))[cid]

    k = len(a.partners)
    assert verdict(ranks=[FIGURE5_TOP] * k).verdict == "reproduced"
    assert verdict(ranks=[FIGURE5_TOP + 1] * k).verdict == "not reproduced"
    half = [1] * (k - k // 2) + [FIGURE5_TOP + 1] * (k // 2)
    assert verdict(ranks=half).verdict == ("partly" if k > 1 else "reproduced")
    if k == 3:
        assert verdict(ranks=[1, 99, 99]).verdict == "not reproduced", "one of three is under half"
    lacking = verdict(missing=[a.partners[-1]])
    assert lacking.verdict == "untested"
    assert f"*{a.partners[-1]}* is not in this profile's vocabulary of |V| = 1000 tokens" in lacking.sentence()


def test_figure3_claim_ranks_pond_among_the_sentences_words():
    cid = "ch01.fig3_pond_for_fish"

    def ev(**reading):
        base = {"scores": {"the": 1.0, "pond": 2.0}, "missing": ["contains"], "pond_rank": 1}
        return claims.evidence(CH01_CLAIMS, dataclasses.replace(_numbers(), fig3_fish={**base, **reading}))[cid]

    assert ev().verdict == "reproduced" and ev(pond_rank=2).verdict == "not reproduced"
    no_fish = ev(scores={}, missing=["fish", "contains"], pond_rank=None)
    assert (
        no_fish.verdict == "untested" and "*fish* is not in this profile's vocabulary of |V| = 1000" in no_fish.untested
    )
    alone = ev(scores={"pond": 2.0}, missing=["the", "contains"], pond_rank=None)
    assert alone.verdict == "untested" and "no other word of the sentence" in alone.untested


CASES = [
    ("ch03.table1_attention", {"first": 0.999}, {"first": 0.995}, {"first": 0.9}),
    ("ch03.table1_value", {"small": 0.9995}, {"small": 0.992}, {"small": 0.5}),
    ("ch03.table1_output", {"small": 0.9995}, {"small": 0.992}, {"small": 0.5}),
    ("ch03.table2_value", {"bpe": 0.998}, {"bpe": 0.995}, {"bpe": 0.9}),
    ("ch03.figure4_30_epochs", {"large": 0.95}, None, {"large": 0.85}),
    ("ch03.figure4_100_epochs", {"large": 0.95, "late": 0.75}, None, {"large": 0.95, "late": 0.65}),
    ("ch03.figure4_loss", {"large_loss": 3.5}, {"large_loss": 4.2}, {"large_loss": 5.0}),
    ("ch03.paper_lr_learned", {"small_loss": 5.0}, None, {"small_loss": 5.29}),
    ("ch03.whole_set_terms_hold", {"small": 0.995, "bpe": 0.999}, None, {"small": 0.995, "bpe": 0.98}),
    ("ch03.first_batch_bounds_the_paper_measure", {"ceiling": 0.97}, None, {"ceiling": 0.999}),
    ("ch03.large_lr_drifts", {"large": 0.95}, None, {"large": 0.995}),
    ("ch03.attention_most_fragile", {"p_large": 0.5}, None, {"p_large": 0.999}),
]


@pytest.mark.parametrize(("cid", "holds", "partly", "fails"), CASES)
def test_ch03_each_claim_on_both_sides_of_its_rule(cid, holds, partly, fails):
    assert claims.evidence(CH03_CLAIMS, readings(**holds))[cid].verdict == "reproduced"
    if partly is not None:
        assert claims.evidence(CH03_CLAIMS, readings(**partly))[cid].verdict == "partly"
    bad = claims.evidence(CH03_CLAIMS, readings(**fails))[cid]
    assert bad.verdict == "not reproduced" and bad.sentence().startswith(("**Not reproduced.**", "**Does not hold.**"))


@pytest.mark.parametrize("claim", CH04_CLAIMS, ids=lambda c: c.id)
def test_ch04_each_claim_on_both_sides_of_its_rule(claim):
    rule = claim.rule
    above, below = rule.threshold + 0.05, rule.partly - 0.05
    hold, fail = claim.evidence(above), claim.evidence(below)
    assert hold.verdict == "reproduced" and fail.verdict == "not reproduced"
    assert claim.evidence((rule.threshold + rule.partly) / 2).verdict == "partly"
    word = "Reproduced" if claim.source == "paper" else "Holds"
    assert hold.sentence().startswith(f"**{word}.**") and f"{above:.2f}" in hold.sentence()
    assert fail.sentence().startswith("**Not reproduced.**" if claim.source == "paper" else "**Does not hold.**")
    assert claim.section == "ch04-overlap" and claim.chapter == "04_associations"


@pytest.mark.parametrize("claim", CH05_CLAIMS, ids=lambda c: c.id)
def test_ch05_each_claim_on_both_sides_of_its_rule(claim):
    rule = claim.rule
    if rule.op == "==":
        hold, fail = rule.threshold, "V"
    else:
        step = 0.05 if claim.spec.endswith("%") else 0.01
        sign = 1 if rule.op in (">", ">=") else -1
        hold, fail = rule.threshold + sign * step, rule.threshold - sign * (step if rule.partly is None else 1.0)
    good, bad = claim.evidence(hold), claim.evidence(fail)
    assert good.verdict == "reproduced" and bad.verdict == "not reproduced"
    yes, no = ("Reproduced", "Not reproduced") if claim.source == "paper" else ("Holds", "Does not hold")
    assert good.sentence().startswith(f"**{yes}.**") and bad.sentence().startswith(f"**{no}.**")
    assert claims_fmt(hold, claim.spec) in good.sentence()
    if rule.partly is not None:
        assert claim.evidence((rule.threshold + rule.partly) / 2).verdict == "partly"
    assert claim.section and claim.section.startswith("ch05-") and claim.chapter == "05_cooperation"


def claims_fmt(value, spec):
    from mechbook.claims import fmt

    return fmt(value, spec)


@pytest.mark.parametrize("claim", INTRO, ids=lambda c: c.id)
def test_intro_each_claim_on_both_sides_of_its_rule(claim):
    t = claim.rule.threshold
    hold, fail = (t - 0.01, t + 0.01) if claim.rule.op == "<" else (t + 0.01, t - 0.5)
    assert claim.evidence(hold).verdict == "reproduced" and claim.evidence(fail).verdict == "not reproduced"
    assert claim.evidence(hold).sentence().startswith("**Holds.**")
    assert claim.evidence(fail).sentence().startswith("**Does not hold.**")
    assert claim.section.startswith("intro-")
