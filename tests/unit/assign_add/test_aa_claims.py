"""Part II's claims tables (mechbook.assign_add.claims): what each claim of chapters 8 to 11 reads, and its rule."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ch08_training_dynamics import fake_dynamics
from test_ch09_circuits import readings
from test_ch10_why_it_composes import reading
from test_ch11_how_much_data import make_sweeps, runs

from mechbook.assign_add import circuits, fourier, sweeps
from mechbook.assign_add import claims as aa_claims
from mechbook.assign_add.claims import CH08_CLAIMS, CH09_CLAIMS, CH10_CLAIMS, CH11_CLAIMS, GradientRuns
from mechbook.assign_add.phases import Phases
from mechbook.assign_add.sweeps import read_sweep
from mechbook.claims import Evidence, Runs, by_id, evidence


def test_evidence_reads_every_seed_and_the_released_run():
    d = fake_dynamics()
    ev = evidence(CH08_CLAIMS, d)
    assert set(ev) == {c.id for c in CH08_CLAIMS}
    # the smoke run is not the paper's configuration: the released run alone dates the phases
    assert ev["ch08.phase2_window"].values == [] and ev["ch08.phase2_window"].release == 5300 - 400
    assert ev["ch08.phase2_window"].verdict == "not reproduced"
    # seed 2 learns addition and never binds: binding, if it comes, comes after its last step
    assert ev["ch08.addition_first"].values == [True, True, True, True]
    # seed 2 never jumps: it has no jump reading, and no lead of the probe
    assert [s for s, _ in ev["ch08.l1_top2_after"].rebuild] == [0, 1, 3]
    assert ev["ch08.readable_before_jump"].values == [200, 200, 200] and ev["ch08.readable_before_jump"].release == 200
    assert ev["ch08.plateau_one_slot"].values == [] and ev["ch08.three_phases_most_seeds"].values == [0.0]
    # seed 2 never jumps: no top of a jump, which counts against the claim
    assert dict(ev["ch08.binding_jump_completes"].rebuild)[2] is None
    assert ev["ch08.final_heldout"].release == pytest.approx(1.0)
    exact = evidence(CH08_CLAIMS, fake_dynamics(release_exact={"0var_heldout_all": 0.994, "2var_union_paper": 0.981}))
    assert exact["ch08.final_heldout"].release == 0.994 and exact["ch08.final_union"].release == 0.981


def test_a_phase_not_reached_is_dated_at_the_last_step():
    assert aa_claims.dated(None, 20_000) == 20_000 and aa_claims.dated(3200, 20_000) == 3200
    never_added = Phases(None, None, None, None, "absent", None, None)
    added_only = Phases(500, None, None, None, "absent", None, None)
    bound_first = Phases(900, 600, 0.3, None, "absent", None, None)
    assert [aa_claims._before_after(p, 20_000) for p in (never_added, added_only, bound_first)] == [False, True, False]


def test_outside_the_window():
    assert [aa_claims.outside(s, (5300, 5400)) for s in (5000, 5300, 5350, 5401, None)] == [300, 0, 0, 1, None]


def test_ch09_evidence_reads_each_claim_from_its_reading():
    ev = evidence(CH09_CLAIMS, Runs({0: readings(), 7: readings(2.0)}, readings(3.0)))
    assert dict(ev["ch09.value_reads_variable"].rebuild) == {0: pytest.approx(0.7), 7: pytest.approx(1.4)}
    assert ev["ch09.one_adder_residual"].values == [pytest.approx(0.95)] * 2
    assert ev["ch09.one_adder_specific"].values == [pytest.approx(0.15)] * 2
    assert ev["ch09.key_frequencies_suffice"].values == [pytest.approx(0.995), 1.0]
    assert ev["ch09.probe_answer"].values == [pytest.approx(0.45 - 0.5), pytest.approx(0.9 - 0.5)]
    assert ev["ch09.fourier_neurons"].values == [0.0, 0.0]  # three neurons: no tenth best
    assert ev["ch09.ov2_attention_output"].release == pytest.approx(0.3)
    assert ev["ch09.previous_token_positional"].release == pytest.approx(6.0 / 8.0)
    assert ev["ch09.random_frequencies_fail"].release == 0.6 and ev["ch09.nonkey_frequencies_fail"].release == 0.05
    assert ev["ch09.positions_pick_previous"].release == pytest.approx(0.25 - 0.2)
    assert ev["ch09.operand_value_not_moved"].values == [pytest.approx(0.05), pytest.approx(0.1)]
    assert dict(ev["ch09.most_common_frequency"].rebuild) == {0: True, 7: True}  # both sides are read
    assert ev["ch09.most_common_frequency"].release is True
    assert ev["ch09.eq_reads_needed"].verdict == "not reproduced"  # 0.8 on every run: the paper's 0.9 is the rule


def test_most_common_frequency_is_a_strict_lead():
    def found(counts: dict[int, int]) -> fourier.FourierNeurons:
        frame = pd.DataFrame({"k": list(counts), "neurons": list(counts.values())})
        return fourier.FourierNeurons(frame, frame, frame, frame)

    assert aa_claims.leads(found({11: 10, 2: 8}), 11) is True
    assert aa_claims.leads(found({11: 8, 2: 8}), 11) is False  # a tie is not a lead
    assert aa_claims.leads(found({2: 12, 11: 3}), 11) is False
    assert aa_claims.leads(found({}), 11) is None


def test_claims_without_key_frequencies_are_untested():
    none = readings(ablation=fourier.Ablation(4.1, 0), restriction=None)
    ev = evidence(CH09_CLAIMS, Runs({0: none}, None))
    assert ev["ch09.key_frequencies_suffice"].verdict == "untested"
    assert "nothing to restrict to" in ev["ch09.random_frequencies_fail"].sentence()


def test_ch10_evidence_reads_each_claim_from_its_reading():
    ev = evidence(
        CH10_CLAIMS, GradientRuns({0: reading(form=0.86), 4: reading(form=-0.2)}, reading(form=0.95, ratio=6.0))
    )
    assert ev["ch10.gradient_form"].values == [0.86, -0.2] and ev["ch10.gradient_form"].verdict == "released run only"
    assert ev["ch10.gradient_identity"].release == 6.0
    assert ev["ch10.directions_distinct_late"].values == [pytest.approx(0.4)] * 2
    assert ev["ch10.query_keys_push_down"].verdict == "reproduced"
    assert ev["ch10.context_identity"].values == [6.0, 6.0]
    zero = circuits.block_diagonality(np.ones((3, 3)))["ratio"]
    assert ev["ch10.zero_var_weaker"].release == pytest.approx(6.0 - zero)


def test_the_seeds_that_never_bound_are_read_by_their_own_claim():
    seeds = {42: reading(), 0: reading(ratio=-2.3), 3: reading(ratio=-1.86)}
    runs = GradientRuns.of(seeds, {42: seeds[42]}, reading())
    assert dict(runs.unbound) == {0: seeds[0], 3: seeds[3]}
    ev = evidence(CH10_CLAIMS, runs)["ch10.unbound_against_identity"]
    assert ev.values == [-2.3, -1.86] and ev.verdict == "reproduced" and ev.release is None
    assert (
        evidence(CH10_CLAIMS, GradientRuns.of({0: reading(ratio=0.4)}, {}, None))[
            "ch10.unbound_against_identity"
        ].verdict
        == "not reproduced"
    )
    assert evidence(CH10_CLAIMS, GradientRuns({42: reading()}))["ch10.unbound_against_identity"].verdict == "untested"


@pytest.mark.parametrize(
    "distance, verdict, word",
    [
        (0.05, "reproduced", "Reproduced"),
        (0.2, "not reproduced", "Not reproduced"),  # the paper's rule alone: no looser band
        (0.4, "not reproduced", "Not reproduced"),
    ],
)
@pytest.mark.parametrize("knob", ["f", "r"])
def test_threshold_claims_on_each_side_of_their_rule(knob, distance, verdict, word):
    claim = by_id(CH11_CLAIMS)[f"ch11.{knob}_threshold"]
    ev = claim.evidence({0: distance})
    assert ev.verdict == verdict
    assert ev.sentence().startswith(f"**{word}.** The paper ({knob} ≥ ~{sweeps.PAPER_THRESHOLDS[knob]})")
    assert f"{distance:.2f}" in ev.sentence()


def threshold_evidence(frame: pd.DataFrame) -> Evidence:
    """The threshold claim of the sweep of runs ``frame``, read as the chapter reads it."""
    knob = str(frame["knob"].iloc[0])
    claim = by_id(CH11_CLAIMS)[f"ch11.{knob}_threshold"]
    readings = SimpleNamespace(**{knob: read_sweep(frame, 0.9), f"{knob}_runs": frame})
    return evidence([claim], readings)[claim.id]


def test_threshold_evidence_measures_the_distance_or_says_why_not():
    ev = threshold_evidence(runs("f", [0.1, 0.5], [0.5, 1.0]))
    assert ev.values == [pytest.approx(abs(0.42 - 0.25))] and ev.verdict == "not reproduced"
    assert threshold_evidence(runs("f", [0.1, 0.5], [0.3, 0.6])).values == [pytest.approx(0.5 - 0.25)]
    untrained = threshold_evidence(runs("r", [0.1, 0.5], [0.3, 0.6], losses=[4.1, 4.0]))
    assert untrained.verdict == "confounded" and untrained.values == [pytest.approx(0.5 - 0.2)]
    assert "2 of the 2 runs the thresholds rest on did not fit" in untrained.sentence()
    assert "r = 0.1 (seed 0), r = 0.5 (seed 0)" in untrained.sentence()


def test_an_r_threshold_rests_on_runs_that_learned_their_two_var_rows():
    """A low training loss is not enough for an r run: its 2-var training accuracy must reach
    TWO_VAR_FIT at every value up to the crossing; a run past the crossing does not matter."""
    frame = runs("r", [0.1, 0.5, 0.9], [0.5, 1.0, 1.0])
    frame["2var_train"] = [1.0, 1.0, 0.5]  # the run past the crossing has not learned its 2-var rows
    assert threshold_evidence(frame).verdict == "not reproduced"
    frame["2var_train"] = [aa_claims.TWO_VAR_FIT - 0.01, 1.0, 1.0]
    ev = threshold_evidence(frame)
    assert (
        ev.verdict == "confounded"
        and "1 of the 2 runs" in ev.sentence()
        and "2-var training accuracy ≥ 0.99" in (ev.sentence())
    )
    assert aa_claims.fits(frame).tolist() == [False, True, True]
    assert aa_claims.fits(frame.assign(knob="f")).tolist() == [True, True, True]  # f runs: the loss alone


def test_the_r_fit_claim_reads_the_lowest_two_var_training_accuracy():
    r = runs("r", [0.1, 0.5], [0.5, 1.0], seeds=(0, 1))
    r["2var_train"] = [0.78, 0.995, 0.999, 1.0]
    found = evidence(CH11_CLAIMS, make_sweeps(runs("f", [0.1, 0.5], [0.5, 1.0]), r))["ch11.r_runs_fit"]
    assert dict(found.rebuild) == {0: 0.78, 1: 0.995} and found.verdict == "partly"


def test_a_seed_without_a_threshold_at_the_end_gives_no_shift():
    end = runs("f", [0.1, 0.5], [0.3, 0.6])
    early = runs("f", [0.1, 0.5], [0.3, 0.5])
    assert aa_claims.shift(read_sweep(early, 0.9), read_sweep(end, 0.9)) == {0: None}
    found = evidence(CH11_CLAIMS, make_sweeps(end, runs("r", [0.1, 0.5], [0.5, 1.0]), f_early=early))
    assert found["ch11.f_threshold_moves"].verdict == "untested"


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=3, max_size=3), st.lists(st.floats(0, 1), min_size=3, max_size=3))
def test_a_shift_is_early_minus_end_or_its_lower_bound(early_scores, end_scores):
    values = [0.1, 0.5, 0.9]
    early = read_sweep(runs("f", values, early_scores), 0.9)
    end = read_sweep(runs("f", values, end_scores), 0.9)
    (moved,) = aa_claims.shift(early, end).values()
    if math.isnan(end.threshold):
        assert moved is None
    elif math.isnan(early.threshold):
        assert moved == pytest.approx(values[-1] - end.threshold)
    else:
        assert moved == pytest.approx(early.threshold - end.threshold)
