"""Chapter 3's module: the claim's step arithmetic, the verdict's branches, the records and the
smoke bounds rejecting an untrained or broken run, the charts' widths."""

import math

import pandas as pd
import pytest

import mechbook
from mechbook.book.checks import check_thresholds, load_thresholds
from mechbook.chapters import ch03_training as ch
from mechbook.leading_terms.model import ModelConfig
from mechbook.leading_terms.runs import ClaimConfig
from mechbook.leading_terms.train import Runs, TrainConfig, TrainResult

TARGET = ch.PaperTarget(
    n_stories=5000, n_kept=270, n_sequences=114_000, epochs=100, batch_size=2048, steps=5566, lr=0.005
)


def fake_run(cosine: float, loss: float, lr: float, steps: int, vocab: int = 200) -> TrainResult:
    """A run whose every matrix ends at ``cosine`` with batch loss ``loss`` (the first logged step is
    the all-zero model: loss log|V|)."""
    rows = []
    for step, cos, value in ((0, float("nan"), math.log(vocab)), (steps, cosine, loss)):
        rows.append({"step": step, "loss": value, "matrix": "W_O", "kind": "W_O", "layer": None, "cosine": cos})
        for layer in range(3):
            for kind in ("W", "V", "P"):
                rows.append(
                    {
                        "step": step,
                        "loss": value,
                        "matrix": f"blocks.{layer}.attn.{kind}",
                        "kind": kind,
                        "layer": layer,
                        "cosine": cos - 0.0001 * layer,
                    }
                )
    history = pd.DataFrame(rows).assign(lr=lr, eta_s=lambda d: lr * d["step"])
    return TrainResult(history, {}, ModelConfig(vocab, 8), TrainConfig(lr=lr, steps=steps))


def records(cosine: float, loss: float, claim_cosine: float | None = None) -> dict:
    runs = Runs(None, None, None, {0.005: fake_run(cosine, loss, 0.005, 100), 0.1: fake_run(cosine, loss, 0.1, 100)})
    c = cosine if claim_cosine is None else claim_cosine
    claim = {name: fake_run(c, loss, 0.005, 100) for name in ("natural", "bpe_cased")}
    target = ch.PaperTarget(5042, 272, 114_352, 100, 2048, 5583, 0.005)
    return ch.headline_records(runs, claim, target)


def test_profiles_hold_the_nested_configs_and_the_seed_reaches_every_run():
    for profile in ("smoke", "cpu", "paper"):
        cfg = ch.CONFIGS[profile]
        assert isinstance(cfg.runs.corpus, mechbook.leading_terms.corpus.CorpusConfig) and cfg.claim.lr == 0.005
    assert (
        ch.CONFIGS["paper"].runs.corpus.split == "train" and ch.CONFIGS["paper"].claim.bpe_corpus.vocab_size == 10_000
    )
    cfg = mechbook.resolve_profile(ch.CONFIGS, "smoke", seed=3)
    assert cfg.shared_runs().seed == 3 and all(r.seed == 3 for r in ch.claim_run_configs(cfg, TARGET).values())
    with pytest.raises(ValueError, match="bpe_cased"):
        ClaimConfig(cfg.claim.paper_corpus, cfg.runs.corpus, 16, 10, 5, (200,))


def test_claim_steps_reach_the_paper_eta_s_or_stop_at_the_cap():
    claim = ch.CONFIGS["smoke"].claim
    uncapped = ClaimConfig(claim.paper_corpus, claim.bpe_corpus, 16, None, 5, (200,))
    assert ch.claim_steps(uncapped, TARGET) == TARGET.steps
    assert ch.claim_steps(claim, TARGET) == claim.max_steps < TARGET.steps
    assert TARGET.eta_s == pytest.approx(0.005 * 5566)


def test_claim_reading_branches():
    good = {
        "natural": dict.fromkeys(("W_O", "V", "W", "P"), 0.995),
        "bpe_cased": dict.fromkeys(("W_O", "V", "W", "P"), 0.999),
    }
    assert "The claim holds here" in ch.claim_reading(TARGET, TARGET.eta_s, good)
    short = ch.claim_reading(TARGET, TARGET.eta_s / 2, good)
    assert "supported only that far" in short and "50%" in short
    bad = {"natural": {**good["natural"], "W": 0.97}, "bpe_cased": good["bpe_cased"]}
    assert "before the paper's step count is reached" in ch.claim_reading(TARGET, TARGET.eta_s / 2, bad)
    at = ch.claim_reading(TARGET, TARGET.eta_s, bad)
    assert "does not hold" in at and "W vs Q (natural" in at and "cased BPE)" not in at.split("does not hold")[1]
    assert "batches of" not in at and "batches of" not in ch.claim_reading(TARGET, TARGET.eta_s, bad, TARGET.batch_size)
    small = ch.claim_reading(TARGET, TARGET.eta_s, bad, 16)
    assert (
        small.startswith(at) and "batches of 16 sequences where the paper took 2,048" in small and "128 times" in small
    )


def test_records_of_a_trained_run_pass_and_of_untrained_or_broken_runs_fail_the_smoke_bounds():
    bounds = load_thresholds("03_training")["smoke"]
    good = records(0.9995, 5.28)
    assert set(good) == set(bounds) | {"min_cos_P_large_lr", "claim_min_cos_P_natural", "claim_min_cos_P_bpe_cased"}
    assert not [p for p in check_thresholds(good, bounds) if not p.startswith(("final_loss_large_lr", "claim_eta_s"))]
    untrained = records(float("nan"), math.log(200))  # zero weights: no direction, loss of the zero model
    flagged = {p.split()[0] for p in check_thresholds(untrained, bounds)}
    assert {
        "min_cos_W_O_paper_lr",
        "min_cos_V_paper_lr",
        "final_loss_paper_lr",
        "claim_min_cos_W_natural",
        "claim_final_loss_bpe_cased",
    } <= flagged
    broken = records(0.5, 5.28)  # trained, but not along the leading terms
    flagged = {p.split()[0] for p in check_thresholds(broken, bounds)}
    assert {f"claim_min_cos_{k}_{t}" for k in ("W_O", "V", "W") for t in ("natural", "bpe_cased")} <= flagged
    assert {"min_cos_W_O_paper_lr", "min_cos_V_paper_lr", "min_cos_W_paper_lr", "min_cos_P_paper_lr"} <= flagged


def _width(spec: dict) -> int:
    if "facet" in spec:
        return spec.get("columns", 1) * spec["spec"].get("width", 0)
    if "layer" in spec:
        return max([spec.get("width", 0)] + [_width(s) for s in spec["layer"]])
    return spec.get("width", 0)


def test_charts_fit_the_column_and_title_the_finding():
    runs = Runs(None, None, None, {0.005: fake_run(0.9995, 5.28, 0.005, 100), 0.1: fake_run(0.95, 5.0, 0.1, 100)})
    claim = {name: fake_run(0.999, 5.2, 0.005, 100) for name in ("natural", "bpe_cased")}
    specs = [ch.cosine_chart(runs).to_dict(), ch.loss_chart(runs).to_dict(), ch.claim_chart(claim, TARGET).to_dict()]
    for spec in specs:
        assert 0 < _width(spec) <= ch.WIDTH - 60
    assert "0.9993 at η = 0.005" in str(specs[0]["title"]) and "0.9498 at η = 0.1" in str(specs[0]["title"])
    assert "stops at η·s = 0.5 of the paper's η·s = 27.8" in str(specs[2]["title"])
    table = ch.min_cosine_table(runs)
    assert table.loc[0.1, "W vs Q"] == pytest.approx(0.9498) and table.loc[0.005, "W_O vs B"] == pytest.approx(0.9995)


def test_bpe_markdown_justifies_the_size_from_the_support_table():
    claim = ch.CONFIGS["cpu"].claim
    support = pd.DataFrame(
        {
            "vocabulary": [256, 1000, 10_000],
            "tokens seen < 10 times": [22, 37, 6628],
            "share": [22 / 256, 37 / 1000, 0.6628],
        }
    )
    text = ch.bpe_markdown(claim, support, 256)
    assert (
        "natural tokenizer's size" in text
        and "9% of its tokens" in text
        and "the paper's size" in text
        and "66%" in text
    )
    assert "natural tokenizer's size" not in ch.bpe_markdown(claim, support, 300)
    small = support.assign(share=[0.09, 0.04, 0.07])
    assert "barely shows" in text and "barely shows" not in ch.bpe_markdown(claim, small, 256)
