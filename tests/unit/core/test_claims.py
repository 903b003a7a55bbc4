"""mechbook.claims: one rule a claim, its verdict over seeds and the released run, the one sentence
that states it, the record the ledger reads back, and comparison words that never contradict the
digits they sit beside (hypothesis, against numbers parsed back from the printed text)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mechbook import claims
from mechbook.claims import (
    Claim,
    Measured,
    Rule,
    Runs,
    Words,
    by_id,
    change,
    compare,
    difference,
    evidence,
    fmt,
    order,
    per_run,
    read_claims,
    record_claims,
    section_prose,
)

# (op, threshold, values that hold, values that do not)
SIDES = [
    (">=", 0.9, [0.9, 0.95, 3], [0.899, -1.0]),
    (">", 0.9, [0.901, 2], [0.9, 0.5]),
    ("<=", 100, [100, 99.5, -3], [100.01, 1e9]),
    ("<", 100, [99.99, 0], [100, 101]),
    ("==", True, [True], [False]),
    ("==", 59, [59], [58, 60]),
    ("==", "previous", ["previous"], ["first"]),
]


@pytest.mark.parametrize(("op", "threshold", "hold", "miss"), SIDES)
def test_rule_holds_on_one_side_of_its_threshold_only(op, threshold, hold, miss):
    rule = Rule(op, threshold)
    assert all(rule.holds(v) is True for v in hold)
    assert all(rule.holds(v) is False for v in miss)
    assert rule.holds(None) is None


@pytest.mark.parametrize("op", [">=", ">", "<=", "<"])
def test_ordering_rules_reject_nan_and_booleans_but_read_numpy_scalars(op):
    rule = Rule(op, 0.5)
    assert rule.holds(math.nan) is False and rule.holds(True) is False
    inside = 0.75 if op.startswith(">") else 0.25
    assert rule.holds(np.float32(inside)) is True and rule.holds(np.float64(inside)) is True


def test_rule_refuses_what_it_cannot_decide():
    with pytest.raises(ValueError, match="op must be one of"):
        Rule("=>", 1)
    with pytest.raises(TypeError, match="numeric threshold"):
        Rule(">=", "high")
    with pytest.raises(ValueError, match="looser"):
        Rule(">=", 0.9, partly=0.95)
    with pytest.raises(ValueError, match="looser"):
        Rule("<", 10, partly=5)
    with pytest.raises(ValueError, match="ordering op"):
        Rule("==", 1, partly=0)


@pytest.mark.parametrize(
    ("rule", "full", "part", "none"),
    [
        (Rule(">=", 0.99, partly=0.9), 0.995, 0.95, 0.85),
        (Rule("<", 1000, partly=2000), 999, 1500, 2500),
    ],
)
def test_partly_threshold_turns_a_near_miss_into_partly(rule, full, part, none):
    claim = _claim(rule)
    assert claim.evidence(full).verdict == "reproduced"
    assert claim.evidence(part).verdict == "partly"
    assert claim.evidence(none).verdict == "not reproduced"
    assert rule.partly_holds(part) is True and rule.partly_holds(none) is False
    assert Rule(">=", 1).partly_holds(5) is False  # no partly threshold, never partly


AT_LEAST_090 = Rule(">=", 0.9)


def _claim(rule: Rule = AT_LEAST_090, source: str = "paper", spec: str = ".2f", **kw) -> Claim:
    return Claim(
        id="ch08.top2_share",
        chapter="08_training_dynamics",
        source=source,
        statement="Layer 1's top-2 share from `=` rises across the binding jump.",
        measure="top-2 attention share after the jump",
        rule=rule,
        paper="0.12 -> 0.95" if source == "paper" else None,
        section="ch08-binding-jump",
        spec=spec,
        **kw,
    )


@pytest.mark.parametrize(
    ("rebuild", "release", "verdict"),
    [
        ({0: 0.95, 1: 0.92, 2: 0.91}, 0.96, "reproduced"),
        ({0: 0.95, 1: 0.92, 2: 0.91}, 0.5, "partly"),  # the released run misses
        ({0: 0.95, 1: 0.2, 2: 0.91}, 0.96, "partly"),  # one seed misses
        ({0: 0.95, 1: None}, None, "partly"),  # a seed that gave no value counts against
        ({0: 0.3, 1: 0.2}, 0.1, "not reproduced"),
        ({0: 0.3, 1: 0.2}, 0.95, "released run only"),  # every seed fails: never "partly"
        ({0: 0.3, 1: None}, 0.95, "released run only"),
        ({0: None, 1: None}, None, "not reproduced"),
        (None, 0.96, "reproduced"),  # the released run alone
        ([0.95, 0.97], None, "reproduced"),
        (0.5, None, "not reproduced"),
        (np.array([0.95, 0.5]), None, "partly"),
        (pd.Series({3: 0.95, 4: 0.91}), 0.2, "partly"),
        (None, None, "untested"),
    ],
)
def test_verdict_over_seeds_and_the_released_run(rebuild, release, verdict):
    assert _claim().evidence(rebuild, release=release).verdict == verdict


def test_untested_takes_no_values_and_says_why():
    claim = _claim()
    with pytest.raises(ValueError, match="untested="):
        claim.evidence({0: 0.9}, untested="the paper profile needs a GPU")
    ev = claim.evidence(untested="Pythia needs the network.")
    assert ev.verdict == "untested"
    assert ev.sentence() == (
        "**Untested here.** The paper (0.12 -> 0.95): Layer 1's top-2 share from `=` rises across the "
        "binding jump. Not measured: Pythia needs the network."
    )


@pytest.mark.parametrize(
    ("source", "rebuild", "release", "word"),
    [
        ("paper", {0: 0.95, 1: 0.92, 2: 0.91}, 0.96, "**Reproduced.** The paper (0.12 -> 0.95):"),
        ("paper", {0: 0.95, 1: 0.5, 2: 0.91}, 0.96, "**Partly reproduced.** The paper (0.12 -> 0.95):"),
        ("paper", {0: 0.5, 1: 0.4, 2: 0.3}, 0.2, "**Not reproduced.** The paper (0.12 -> 0.95):"),
        ("book", {0: 0.95, 1: 0.92, 2: 0.91}, 0.96, "**Holds.** The book's reading:"),
        ("book", {0: 0.95, 1: 0.5, 2: 0.91}, 0.96, "**Holds in part.** The book's reading:"),
        ("book", {0: 0.5, 1: 0.4, 2: 0.3}, 0.2, "**Does not hold.** The book's reading:"),
    ],
)
def test_sentence_states_the_verdict_with_its_numbers(source, rebuild, release, word):
    ev = _claim(source=source).evidence(rebuild, release=release)
    text = ev.sentence()
    values = sorted(rebuild.values())
    numbers = (
        f"Top-2 attention share after the jump: this rebuild median {values[1]:.2f} ({values[0]:.2f} to "
        f"{values[2]:.2f} over 3 seeds); the released run {release:.2f} (rule ≥ 0.90)."
    )
    where = " It holds on 2 of 3 seeds of this rebuild and holds on the released run." if "part" in word.lower() else ""
    assert text == f"{word} Layer 1's top-2 share from `=` rises across the binding jump. {numbers}{where}"
    assert text.count("..") == 0


def test_a_claim_that_fails_on_every_seed_never_reads_partly():
    """The referee's case: every rebuild seed fails and the released run holds. The verdict is its
    own kind, ``released run only``, counted apart, and its words say both sides."""
    claim = _claim()
    ev = claim.evidence({0: 0.5, 1: 0.4, 2: None}, release=0.96)
    assert ev.verdict == "released run only"
    assert ev.sentence().startswith("**Not reproduced by the rebuild; holds on the released run.** The paper")
    assert _claim(source="book").evidence({0: 0.5}, release=0.96).word() == (
        "does not hold in the rebuild; holds on the released run"
    )
    assert claim.evidence({0: 0.5}, release=0.96).where() == "It fails on this rebuild and holds on the released run."
    assert claim.evidence({0: 0.95, 1: 0.99}, release=0.5).where() == (
        "It holds on every seed of this rebuild and fails on the released run."
    )
    assert claim.evidence({0: 0.95, 1: 0.5}).where() == "It holds on 1 of 2 seeds of this rebuild."
    loose = _claim(Rule(">=", 0.9, partly=0.5))
    nowhere = loose.evidence({0: 0.6, 1: 0.3}, release=0.7)
    assert nowhere.verdict == "not reproduced", "a partly threshold lends nothing to a claim over several runs"
    assert nowhere.where() == (
        "It fails on every seed of this rebuild and on the released run; 2 of the 3 values reach its partly threshold."
    )
    assert loose.evidence({0: 0.6, 1: 0.3}, release=0.95).verdict == "released run only"
    single = loose.evidence(0.6)
    assert single.verdict == "partly", "one value alone is graded by the partly threshold"
    assert single.where() == "It fails on this rebuild; its value reaches the partly threshold."
    flag = _claim(Rule("==", True)).evidence({0: True, 1: False}, release=True)
    assert flag.sentence().endswith("(rule = yes).")  # "holds for 1 of 2 seeds" already says where
    assert single.word() == "partly reproduced" and claim.evidence(untested="x").word() == "untested"
    assert "It " not in claim.evidence({0: 0.95}, release=0.96).sentence().split("(rule")[1]  # reproduced: no clause


def test_a_confounded_claim_shows_its_values_and_decides_nothing():
    claim = _claim()
    ev = claim.evidence({0: 0.95, 1: 0.2}, release=0.96, confounded="the runs never fit their training data")
    assert ev.verdict == "confounded" and ev.word() == "untested (confounded)"
    assert ev.sentence().startswith("**Untested here (confounded).** The paper (0.12 -> 0.95):")
    assert ev.sentence().endswith("but it decides nothing here: the runs never fit their training data.")
    record = ev.as_record()
    assert record["verdict"] == "confounded" and record["where"] == ""
    assert record["confounded"] == "the runs never fit their training data"
    assert claim.evidence({0: 0.95, 1: 0.2}, release=0.96).verdict == "partly"


def test_summary_names_seeds_without_a_value_and_non_numeric_values():
    claim = _claim()
    assert (
        claim.evidence({0: 0.9, 1: None, 2: 0.8}).summary()
        == "median 0.85 (0.80 to 0.90 over 2 of 3 seeds; no value on 1)"
    )
    assert claim.evidence({0: None, 1: None}).summary() == "no value on any of 2 seeds"
    assert claim.evidence({0: None, 1: 0.9}).summary() == "0.90 on 1 of 2 seeds (no value on 1)"
    flag = Claim("ch09.prev", "09_circuits", "book", "The head is positional", "is positional", Rule("==", True))
    assert flag.evidence([True, False, True]).summary() == "holds for 2 of 3 seeds"
    assert flag.evidence(True).sentence().endswith("Is positional: this rebuild yes (rule = yes).")


def test_claim_ids_carry_their_chapter():
    Claim("intro.promise", "intro", "book", "s", "m", Rule(">=", 0))
    with pytest.raises(ValueError, match=r"must start with 'ch08\.'"):
        Claim("ch09.top2", "08_training_dynamics", "book", "s", "m", Rule(">=", 0))
    with pytest.raises(ValueError, match="letters, digits"):
        Claim("ch08.top-2", "08_training_dynamics", "book", "s", "m", Rule(">=", 0))
    with pytest.raises(ValueError, match="paper="):
        Claim("ch08.top2", "08_training_dynamics", "paper", "s", "m", Rule(">=", 0))


def test_records_round_trip_through_json_and_read_claims():
    claim = _claim()
    assert claim.evidence(pd.Series({5: 0.9, 7: 0.8})).rebuild == ((5, 0.9), (7, 0.8))
    ev = claim.evidence({0: np.float32(0.95), 3: 0.5}, release=np.float64(0.96))
    records = {"acc.final": 1.0, **record_claims([ev])}
    back = read_claims(json.loads(json.dumps(records)))
    assert list(back) == ["ch08.top2_share"]
    rec = back["ch08.top2_share"]
    assert rec == ev.as_record()
    assert rec["verdict"] == "partly" and rec["seeds"] == [0, 3] and rec["values"] == [pytest.approx(0.95), 0.5]
    assert rec["section"] == "ch08-binding-jump" and rec["rule"] == "≥ 0.90" and rec["release_text"] == "0.96"
    with pytest.raises(ValueError, match="recorded twice"):
        record_claims([ev, ev])


# ---- comparison words against the printed digits (parsed back independently of claims.printed)

SPECS = [".3f", ".2f", ".3g", ",d", ".1%"]
NUMBERS = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


def _shown(text: str) -> float:
    """A printed number read back as a reader would."""
    text = text.replace(",", "")
    return float(text[:-1]) / 100 if text.endswith("%") else float(text)


def _near(a: float):
    """A value close to ``a`` (so both often print alike, or one digit apart)."""
    return st.floats(min_value=-1e-3, max_value=1e-3).map(lambda d: a + d)


pairs = NUMBERS.flatmap(lambda a: st.tuples(st.just(a), st.one_of(NUMBERS, _near(a))))


@given(pairs, st.sampled_from(SPECS))
def test_compare_and_change_agree_with_the_printed_digits(pair, spec):
    a, b = pair
    sa, sb = _shown(fmt(a, spec)), _shown(fmt(b, spec))
    expected = "higher than" if sa > sb else "lower than" if sa < sb else "the same as"
    assert compare(a, b, spec) == expected
    assert (
        compare(a, b, spec, Words("more", "less", "as much"))
        == {
            "higher than": "more",
            "lower than": "less",
            "the same as": "as much",
        }[expected]
    )
    assert change(b, a, spec) == {"higher than": "rises", "lower than": "falls", "the same as": "stays"}[expected]


@given(pairs, st.sampled_from(SPECS))
def test_difference_says_higher_iff_the_printed_a_exceeds_the_printed_b(pair, spec):
    a, b = pair
    sa, sb = _shown(fmt(a, spec)), _shown(fmt(b, spec))
    text = difference(a, b, spec)
    if sa == sb:
        assert text == "no different"
        return
    gap, word = text.rsplit(" ", 1)
    assert word == ("higher" if sa > sb else "lower")
    # the printed gap is the printed a minus the printed b, to the precision the gap prints with
    assert gap == fmt(abs(sa - sb), spec) or math.isclose(_shown(gap), abs(sa - sb), rel_tol=5e-3)
    assert _shown(gap) > 0


@given(st.integers(-(10**6), 10**6), st.integers(-(10**6), 10**6))
def test_order_puts_steps_in_their_printed_order(step_a, step_b):
    expected = "before" if step_a < step_b else "after" if step_a > step_b else "at the same step as"
    assert order(step_a, step_b) == expected
    assert order(float(step_a) + 0.2, float(step_b) - 0.2) == expected  # steps print rounded


def test_the_examples_of_issue_19_read_the_right_way_round():
    assert difference(0.439, 0.442, ".3f") == "0.003 lower"
    assert difference(0.350, 0.348, ".3f") == "0.002 higher"
    assert difference(-0.0001, 0.0001, ".3f") == "no different"  # -0.000 and 0.000
    assert compare(-0.0001, 0.0001, ".3f") == "the same as"
    assert difference(0.5, 0.4, ".1%") == "10.0% higher"
    assert difference(5401, 3001, ",d") == "2,400 higher"
    assert difference(0.0031, 0.001, "+.3f") == "0.002 higher"
    assert change(0.14, 0.96, ".2f") == "rises" and change(0.90, 0.85, ".2f") == "falls"


def test_fmt_prints_what_the_book_prints():
    assert fmt(5400.6, ",d") == "5,401" and fmt(np.float32(0.5), ".2f") == "0.50"
    assert fmt(None) == "none" and fmt(True) == "yes" and fmt(np.bool_(False)) == "no"
    assert fmt(math.nan, ",d") == "nan"
    with pytest.raises(ValueError, match="a comparison needs two numbers"):
        compare(math.nan, 1.0)
    assert claims.printed(0.4567, ".1%") == claims.printed(0.457, ".3f")


@given(
    st.floats(min_value=-10, max_value=10, allow_nan=False),
    st.floats(min_value=-10, max_value=10, allow_nan=False),
    st.sampled_from([">=", ">", "<=", "<"]),
    st.sampled_from([".2f", ".3g", ".1%"]),
)
def test_a_printed_value_falls_on_the_side_of_the_rule_its_verdict_says(value, threshold, op, spec):
    """0.8996 against ≥ 0.9 must not print as 0.90 beside "not reproduced"."""
    rule = Rule(op, threshold)
    claim = _claim(rule, spec=spec)
    ev = claim.evidence(value)
    assert rule.holds(_shown(ev.summary())) == rule.holds(value) == (ev.verdict == "reproduced")
    assert _shown(claim.evidence(release=value).as_record()["release_text"]) == pytest.approx(value, abs=0.01)
    shown_threshold = rule.text(spec).split(" ", 1)[1]
    assert _shown(shown_threshold) == pytest.approx(threshold, rel=1e-9, abs=1e-12)


def test_near_the_threshold_values_print_with_the_digits_that_decide_them():
    rule = Rule(">=", 0.9, partly=0.85)
    assert rule.shown(0.8996, ".2f") == "0.8996" and rule.shown(0.8496, ".2f") == "0.8496"
    assert rule.shown(0.95, ".2f") == "0.95"
    assert Rule(">=", 0.995).text(".2f") == "≥ 0.995" and Rule("<=", 6000).text(",d") == "≤ 6,000"
    text = _claim(Rule(">=", 0.9)).evidence({0: 0.8996, 1: 0.95}).sentence()
    assert "median 0.92 (0.8996 to 0.95 over 2 seeds)" in text and text.startswith("**Partly reproduced.**")


def _table() -> tuple[Claim, ...]:
    def claim(name: str, section: str, **kw) -> Claim:
        return Claim(f"ch08.{name}", "08_x", "book", f"{name} holds", "a share", Rule(">=", 0.5), section=section, **kw)

    return (
        claim("a", "ch08-one", read=per_run(lambda r: r["a"])),
        claim("b", "ch08-two", read=per_run(lambda r: r.get("b"), rebuild=False), unmeasured="no b in these runs"),
        claim("c", "ch08-one", read=lambda runs: Measured(untested="not here")),
    )


def test_evidence_reads_each_claim_of_a_table_per_seed_and_on_the_release():
    ev = evidence(_table(), Runs({3: {"a": 0.9}, 5: {"a": 0.2}}, {"a": 0.7, "b": 0.6}))
    assert list(ev) == ["ch08.a", "ch08.b", "ch08.c"]
    assert dict(ev["ch08.a"].rebuild) == {3: 0.9, 5: 0.2} and ev["ch08.a"].release == 0.7
    assert ev["ch08.a"].verdict == "partly"
    assert ev["ch08.b"].rebuild == () and ev["ch08.b"].verdict == "reproduced"  # release only
    assert ev["ch08.c"].verdict == "untested" and "not here" in ev["ch08.c"].sentence()
    without = evidence(_table(), Runs({3: {"a": 0.9}}, None))
    assert without["ch08.b"].verdict == "untested" and "no b in these runs" in without["ch08.b"].sentence()


def test_evidence_refuses_a_claim_without_a_read_or_a_read_that_returns_a_bare_value():
    bare = Claim("ch08.x", "08_x", "book", "x", "x", Rule(">=", 0.5))
    with pytest.raises(ValueError, match=r"ch08\.x has no read"):
        evidence([bare], None)
    loose = Claim("ch08.x", "08_x", "book", "x", "x", Rule(">=", 0.5), read=lambda r: 0.7)
    with pytest.raises(TypeError, match="must return Measured"):
        evidence([loose], None)


def test_section_prose_lists_that_sections_sentences_in_table_order():
    ev = evidence(_table(), Runs({3: {"a": 0.9}}, {"a": 0.7, "b": 0.6}))
    assert section_prose(ev, "ch08-one").splitlines() == [
        f"- {ev['ch08.a'].sentence()}",
        f"- {ev['ch08.c'].sentence()}",
    ]
    with pytest.raises(KeyError, match="ch08-none"):
        section_prose(ev, "ch08-none")
    with pytest.raises(ValueError, match="declared twice"):
        by_id(_table() + _table()[:1])
