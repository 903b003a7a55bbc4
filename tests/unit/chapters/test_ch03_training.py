"""Chapter 3's module and its library (the CH03 claims tables, claim_cause, training_numbers): resolve and the seed reaching every run, each claim on both sides of its
rule (verdict and sentence), the cause the rule names in each branch, the prose branches, the
records and the smoke bounds rejecting an untrained or broken run, the charts' widths."""

import dataclasses
import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook import claims
from mechbook.book.checks import check_thresholds, load_thresholds
from mechbook.chapters import ch03_training as ch03
from mechbook.leading_terms.claim import ClaimConfig, ClaimReading, PaperTarget, SettingRun
from mechbook.leading_terms.claims import CH03_CLAIM, CH03_CLAIMS, CH03_SHARED, TABLES, claim_cause
from mechbook.leading_terms.model import ModelConfig
from mechbook.leading_terms.readings import TrainingReadings, training_numbers
from mechbook.leading_terms.train import Runs, TrainConfig, TrainResult

TARGET = PaperTarget(n_stories=5000, n_kept=270, n_sequences=114_000, epochs=100, batch_size=2048, steps=5566, lr=0.005)
TOKENIZERS = ("natural", "bpe_cased")


def fake_run(
    cosine: float, loss: float, lr: float, steps: int, vocab: int = 200, p_cosine: float | None = None
) -> TrainResult:
    """A run whose every matrix ends at ``cosine`` (P at ``p_cosine``) with batch loss ``loss`` (the
    first logged step is the all-zero model: loss log|V|)."""
    rows = []
    for step, cos, value in ((0, float("nan"), math.log(vocab)), (steps, cosine, loss)):
        rows.append({"step": step, "loss": value, "matrix": "W_O", "kind": "W_O", "layer": None, "cosine": cos})
        for layer in range(3):
            for kind in ("W", "V", "P"):
                c = cos if kind != "P" or p_cosine is None or step == 0 else p_cosine
                rows.append(
                    {
                        "step": step,
                        "loss": value,
                        "matrix": f"blocks.{layer}.attn.{kind}",
                        "kind": kind,
                        "layer": layer,
                        "cosine": c - 0.0001 * layer,
                    }
                )
    history = pd.DataFrame(rows).assign(lr=lr, eta_s=lambda d: lr * d["step"])
    return TrainResult(history, {}, ModelConfig(vocab, 8), TrainConfig(lr=lr, steps=steps))


def cosines(value: float) -> dict:
    return dict.fromkeys(("W_O", "V", "W", "P"), value)


def setting_run(batch, cos, no_unk, eta_s=27.915) -> SettingRun:
    return SettingRun(batch, 8, 5583, eta_s, cosines(cos), cosines(no_unk), 5.0, math.log(256))


def reading(
    claim=0.85, full=0.85, no_unk=0.86, small=0.8, reached=27.915, setting_eta_s=27.915, ch2=0.88, loss=4.5
) -> ClaimReading:
    """A reading with the claim runs at ``claim``, the full batch at ``full`` (``no_unk`` without
    ``<unk>``), the series' mini-batch at ``small``, chapter 2's smallest rate at ``ch2``."""
    chapter2 = pd.DataFrame(
        [
            {"lr": lr, "step": 28, "kind": k, "eta_s": 28.0, "loss": 4.0, "cosine": ch2 if lr == 1.0 else -0.5}
            for lr in (1.0, 2.0)
            for k in ("W_O", "V", "W", "P")
        ]
    )
    return ClaimReading(
        target=TARGET,
        reached=reached,
        cosines={n: cosines(claim) for n in TOKENIZERS},
        cosines_no_unk={n: cosines(claim + 0.01) for n in TOKENIZERS},
        losses=dict.fromkeys(TOKENIZERS, loss),
        log_vocab=dict.fromkeys(TOKENIZERS, math.log(256)),
        unk_shares={"natural": 0.17, "bpe_cased": 0.0},
        setting={
            n: [setting_run(2, small, small, setting_eta_s), setting_run(None, full, no_unk, setting_eta_s)]
            for n in TOKENIZERS
        },
        chapter2=chapter2 if ch2 is not None else chapter2.iloc[0:0],
    )


def shared(small_cos=0.9995, small_loss=5.28, large_cos=0.95, p_large=None) -> Runs:
    return Runs(
        None,
        None,
        None,
        {
            0.005: fake_run(small_cos, small_loss, 0.005, 100),
            0.1: fake_run(large_cos, 5.0, 0.1, 100, p_cosine=p_large),
        },
    )


def test_profiles_resolve_and_the_seed_reaches_every_run():
    for profile in ("smoke", "cpu", "paper"):
        cfg = ch03.CONFIGS[profile]
        assert cfg.claim.lr == 0.005 and cfg.claim.setting.lr == 0.005 and cfg.check == ch03.CHECK_RUNS[profile]
    assert ch03.resolve("cpu") == ch03.CONFIGS["cpu"]
    cfg = ch03.resolve("smoke", seed=3)
    assert cfg.shared_runs().seed == 3 and all(r.seed == 3 for r in cfg.claim_runs(TARGET).values())
    with pytest.raises(ValueError, match="bpe_cased"):
        ClaimConfig(cfg.claim.paper_corpus, cfg.runs.corpus, 16, 10, 5, (200,), cfg.claim.setting)


@pytest.mark.parametrize(
    ("cid", "holds", "fails"),
    [
        ("ch03.paper_lr_learned", shared(small_loss=5.0), shared(small_loss=5.29)),
        ("ch03.paper_lr_holds", shared(small_cos=0.995), shared(small_cos=0.98)),
        ("ch03.large_lr_drifts", shared(large_cos=0.95), shared(large_cos=0.995)),
        ("ch03.attention_most_fragile", shared(large_cos=0.95, p_large=0.5), shared(large_cos=0.995, p_large=0.999)),
    ],
)
def test_shared_claims_on_both_sides(cid, holds, fails):
    good, bad = (
        claims.evidence(CH03_SHARED, TrainingReadings(holds))[cid],
        claims.evidence(CH03_SHARED, TrainingReadings(fails))[cid],
    )
    assert good.verdict == "reproduced" and bad.verdict == "not reproduced"
    assert good.sentence().startswith("**Holds.**") and bad.sentence().startswith("**Does not hold.**")
    assert good.sentence() in ch03.shared_prose(holds)


@pytest.mark.parametrize(
    ("cid", "holds", "fails", "untested"),
    [
        ("ch03.cosine_100_epochs", reading(claim=0.995), reading(claim=0.9), reading(claim=0.995, reached=0.5)),
        ("ch03.chapter2_curves", reading(ch2=0.995), reading(ch2=0.9), reading(ch2=None)),
        ("ch03.full_batch_claim", reading(full=0.995), reading(full=0.9), reading(setting_eta_s=1.0)),
        ("ch03.without_unk", reading(no_unk=0.995), reading(no_unk=0.9), reading(setting_eta_s=1.0)),
    ],
)
def test_claim_claims_on_both_sides(cid, holds, fails, untested):
    good, bad, none = (claims.evidence(CH03_CLAIM, TrainingReadings(reading=r))[cid] for r in (holds, fails, untested))
    assert (good.verdict, bad.verdict, none.verdict) == ("reproduced", "not reproduced", "untested")
    assert "**Untested here.**" in none.sentence() and "0.9000" in bad.sentence()


def test_chapter2_curves_read_the_smallest_rate_that_reaches_the_paper():
    # the rate 2.0 ends at -0.5 but the smallest rate, 1.0, is the one closest to the paper's 0.005
    assert claims.evidence(CH03_CLAIM, TrainingReadings(reading=reading(ch2=0.995)))["ch03.chapter2_curves"].values == [
        0.995
    ]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"claim": 0.995}, "none"),
        ({"full": 0.995}, "noise"),
        ({"no_unk": 0.995}, "vocabulary"),
        ({}, "departure"),
        ({"ch2": 0.995}, "unsettled"),
        ({"reached": 0.5}, "untested"),
        ({"setting_eta_s": 1.0}, "untested"),
    ],
)
def test_cause_branches_and_their_words(kwargs, expected):
    r = reading(**kwargs)
    assert claim_cause(r) == expected
    text = ch03.setting_prose(r, 8, 8)
    assert text.endswith(ch03._CAUSE_WORDS[expected] + ch03.evidence_weight(r, 8, 8))
    assert ch03._CAUSE_WORDS[expected] in ch03.reading_prose(shared(), r)
    assert "natural (lowercased words) 17.0%" in text and "η = 1 at η·s = 28" in text


@pytest.mark.parametrize(("loss", "beyond"), [(0.8, True), (5.0, False)])
def test_the_cause_says_what_its_evidence_weighs(loss, beyond):
    """The subset's targets and how far its full-batch loss falls are printed beside the claim runs';
    a subset that falls further than the corpus runs makes the cause a reading of weak evidence; no
    cause, no weight."""
    r = reading(loss=4.5)  # the claim runs fall log 256 - 4.5 = 1.045 nats
    for runs in r.setting.values():
        runs[-1] = dataclasses.replace(runs[-1], loss=loss)
    text = ch03.evidence_weight(r, 8, 8)
    assert "fit 64 targets (8 sequences of 8 predictions)" in text
    assert (
        f"natural (lowercased words) {math.log(256) - loss:.3f}" in text
        and "fall natural (lowercased words) 1.045" in text
    )
    assert "only at η = 1, 2, not at the paper's 0.005" in text
    assert ("weak evidence, not a finding" in text) == beyond
    assert ch03.evidence_weight(reading(claim=0.995), 8, 8) == ""


def test_setting_prose_says_how_the_cosines_move_with_the_batch():
    assert "it rises" in ch03.setting_prose(reading(small=0.8, full=0.85), 8, 8)
    assert "it falls" in ch03.setting_prose(reading(small=0.9, full=0.85), 8, 8)
    assert "stays the same" in ch03.setting_prose(reading(small=0.85, full=0.85), 8, 8)
    assert "do not reach" in ch03.setting_prose(reading(ch2=None), 8, 8)


def test_claim_prose_labels_a_model_that_has_not_learned_and_the_batch():
    barely = ch03.claim_prose(reading(claim=0.999, loss=math.log(256) - 0.01), 16)
    assert "barely learned" in barely and "batches of 16 sequences where the paper took 2,048" in barely
    assert "128 times" in barely
    learned = ch03.claim_prose(reading(loss=4.0), 2048)
    assert "barely learned" not in learned and "batches of" not in learned
    assert "**Not reproduced.**" in learned


def test_target_runs_and_shared_prose():
    text = ch03.target_prose(TARGET)
    assert "**270**" in text and "⌊100 × 114,000 / 2,048⌋ = **5,566 steps**" in text and "η·s = 27.8" in text
    runs = shared(small_loss=5.29, large_cos=0.95, p_large=0.5)
    runs = Runs(
        type("T", (), {"vocab_size": 200})(), type("S", (), {"n_kept": 500, "context": 32})(), None, runs.results
    )
    cfg = ch03.CONFIGS["smoke"]
    text = ch03.runs_prose("smoke", cfg, runs)
    assert "at η = 0.005, the loss has fallen 0.008 nats below log |V| = 5.298 (the model has barely learned" in text
    assert "at η = 0.1, the loss has fallen 0.298 nats below log |V| = 5.298." in text
    assert "furthest from its leading term at the end is **P vs 𝒫** (lowest cosine 0.4998)" in ch03.shared_prose(runs)


def test_reading_prose_branches():
    text = ch03.reading_prose(shared(small_loss=5.29), reading(claim=0.995))
    assert text.startswith("At the paper's learning rate the shared run has barely learned, so its matrices point")
    assert "is reproduced on the claim runs" in text
    text = ch03.reading_prose(shared(small_loss=5.0, small_cos=0.9), reading())
    assert "has learned, and its matrices have already left" in text and "not reproduced" in text


def records(cos: float, loss: float, claim_cos: float | None = None) -> dict:
    runs = shared(cos, loss, cos)
    c = cos if claim_cos is None else claim_cos
    claim = {name: fake_run(c, loss, 0.005, 100) for name in TOKENIZERS}
    r = reading(claim=c, full=c, no_unk=c, small=c, reached=0.5, setting_eta_s=1.0, loss=loss)
    r = ClaimReading(
        r.target,
        r.reached,
        r.cosines,
        r.cosines_no_unk,
        r.losses,
        dict.fromkeys(TOKENIZERS, math.log(200)),
        r.unk_shares,
        r.setting,
        r.chapter2,
    )
    return training_numbers(runs, claim, r)


def test_records_of_a_trained_run_pass_and_of_untrained_or_broken_runs_fail_the_smoke_bounds():
    bounds = load_thresholds("03_training")["smoke"]
    good = records(0.9995, 5.28)
    assert set(bounds) <= set(good)
    assert not [
        p
        for p in check_thresholds(good, bounds)
        if not p.startswith(("final_loss_large_lr", "claim_eta_s", "setting_eta_s"))
    ]
    untrained = records(float("nan"), math.log(200))
    flagged = {p.split()[0] for p in check_thresholds(untrained, bounds)}
    assert {"min_cos_W_O_paper_lr", "min_cos_V_paper_lr", "final_loss_paper_lr", "claim_min_cos_W_natural"} <= flagged
    assert {"claim_final_loss_bpe_cased", "setting_cos_natural_full"} <= flagged
    broken = records(0.5, 5.28)
    flagged = {p.split()[0] for p in check_thresholds(broken, bounds)}
    assert {f"claim_min_cos_{k}_{t}" for k in ("W_O", "V", "W") for t in TOKENIZERS} <= flagged
    assert {"min_cos_W_O_paper_lr", "min_cos_V_paper_lr", "min_cos_W_paper_lr", "min_cos_P_paper_lr"} <= flagged


def _width(spec: dict) -> int:
    if "facet" in spec:
        return spec.get("columns", 1) * spec["spec"].get("width", 0)
    if "layer" in spec:
        return max([spec.get("width", 0)] + [_width(s) for s in spec["layer"]])
    return spec.get("width", 0)


def test_charts_fit_the_column_and_title_the_finding():
    runs = shared(0.9995, 5.28, 0.95)
    claim = {name: fake_run(0.999, 5.2, 0.005, 100) for name in TOKENIZERS}
    r = reading(reached=0.5)
    specs = [
        ch03.cosine_chart(runs).to_dict(),
        ch03.loss_chart(runs).to_dict(),
        ch03.claim_chart(r, claim).to_dict(),
        ch03.setting_chart(r).to_dict(),
    ]
    for spec in specs:
        assert 0 < _width(spec) <= ch03.WIDTH - 60
    assert "0.9993 at η = 0.005 (loss −0.018 nats, barely learned)" in str(specs[0]["title"])
    assert "0.9498 at η = 0.1 (loss −0.298 nats)" in str(specs[0]["title"])
    assert "stop at η·s = 0.5 of the paper's η·s = 27.8" in str(specs[2]["title"])
    assert "full batch: V and W end at natural 0.8500, cased BPE 0.8500" in str(specs[3]["title"])
    table = ch03.min_cosine_table(runs)
    assert table.loc[0.1, "W vs Q"] == pytest.approx(0.9498) and table.loc[0.005, "W_O vs B"] == pytest.approx(0.9995)


def test_bpe_prose_justifies_the_size_from_the_support_table():
    claim = ch03.CONFIGS["cpu"].claim
    support = pd.DataFrame(
        {
            "vocabulary": [256, 1000, 10_000],
            "tokens seen < 10 times": [22, 37, 6628],
            "share": [22 / 256, 37 / 1000, 0.6628],
        }
    )
    text = ch03.bpe_prose(claim, support, 256)
    assert "natural tokenizer's size" in text and "9% of its tokens" in text and "the paper's size" in text
    assert "66%" in text and "barely shows" in text
    assert "natural tokenizer's size" not in ch03.bpe_prose(claim, support, 300)
    assert "barely shows" not in ch03.bpe_prose(claim, support.assign(share=[0.09, 0.04, 0.07]), 256)


@given(st.floats(-1, 1), st.floats(-1, 1))
@settings(max_examples=200, deadline=None)
def test_series_sentence_never_contradicts_the_cosines_it_prints(small, full):
    text = ch03.setting_prose(reading(small=small, full=full), 8, 8)
    part = text.split("natural (lowercased words): batch 2 ")[1]
    a, b = float(part.split(",")[0]), float(part.split("full ")[1].split(" ")[0])
    verb = part.split("the full one it ")[1].split(")")[0]
    assert verb == ("rises" if b > a else "falls" if b < a else "stays the same")


def test_the_100_epoch_claim_reads_only_the_claim_runs_that_trained():
    """A claim run whose loss fell under TRAINED_NATS is named and left out, not folded into the minimum."""
    r = reading(claim=0.995)
    r.cosines["natural"] = cosines(0.9)
    r.losses["natural"] = math.log(256) - 0.04
    ev = claims.evidence(CH03_CLAIM, TrainingReadings(reading=r))["ch03.cosine_100_epochs"]
    assert ev.values == [pytest.approx(0.995)] and ev.verdict == "reproduced"
    assert "the natural run fell 0.040, under 0.5, and is left out" in ev.sentence()
    assert "the cased BPE run (its loss fell 1.05 nats)" in ev.sentence()
    r.losses["bpe_cased"] = math.log(256) - 0.01
    none = claims.evidence(CH03_CLAIM, TrainingReadings(reading=r))["ch03.cosine_100_epochs"]
    assert none.verdict == "untested" and "no claim run has trained" in none.sentence()


def test_the_unk_part_of_each_cosine_is_read_from_its_digits():
    r = reading()
    r.cosines["natural"] = {**r.cosines["natural"], "V": 0.8862, "W": 0.8558}
    r.cosines_no_unk["natural"] = {**r.cosines_no_unk["natural"], "V": 0.8798, "W": 0.9}
    text = ch03.unk_part_prose(r)
    assert "V's cosine falls from 0.8862 to 0.8798 and W's cosine rises from 0.8558 to 0.9000" in text
    assert "17.0% of the natural (lowercased words) corpus" in text and "sat in the one row" in text
    assert "cased BPE" not in text, "a corpus without <unk> has nothing to say"
    r.cosines_no_unk["natural"] = {**r.cosines_no_unk["natural"], "V": 0.9, "W": 0.8558}
    text = ch03.unk_part_prose(r)
    assert "sat in the one row" not in text and "W's cosine stays at 0.8558" in text


def test_the_table_is_the_shared_then_the_claim_runs_claims_and_all_are_recorded():
    assert TABLES[ch03.STEM] is CH03_CLAIMS and CH03_CLAIMS == CH03_SHARED + CH03_CLAIM
    assert {c.section for c in CH03_SHARED} == {"ch03-cosines"} and {c.chapter for c in CH03_CLAIMS} == {ch03.STEM}
    ev = claims.evidence(CH03_CLAIMS, TrainingReadings(shared(), reading(claim=0.995)))
    assert list(ev) == [c.id for c in CH03_CLAIMS]
    assert ev["ch03.cosine_100_epochs"].run.startswith("the natural run (its loss fell")
    assert all(e.run is None for cid, e in ev.items() if cid != "ch03.cosine_100_epochs")
