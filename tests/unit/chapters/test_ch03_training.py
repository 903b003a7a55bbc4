"""Chapter 3's module and its library (CH03_CLAIMS, training_readings, training_numbers): every
profile trains the paper's regime, the tables the claims read, the records and the smoke bounds
rejecting an untrained or broken run, the charts' widths and titles, the prose (each claim on both
sides of its rule: leading_terms/test_lt_claims.py)."""

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from mechbook import claims
from mechbook.book.checks import check_thresholds, load_thresholds
from mechbook.chapters import ch03_training as ch03
from mechbook.leading_terms.claims import CH03_CLAIMS, TABLES
from mechbook.leading_terms.model import ModelConfig
from mechbook.leading_terms.readings import TrainingReadings, training_numbers
from mechbook.leading_terms.runs import PAPER_BATCH_RATIO, PAPER_LRS, differences_from_paper
from mechbook.leading_terms.train import Runs, TrainConfig, TrainResult

VOCAB, PER_EPOCH = 200, 32


def fake_run(cosine, loss, lr, epochs=100, first=None, p_cosine=None, late=None):
    """A run logged at every epoch's end whose every matrix sits at ``cosine`` (``first`` with the
    first batch's terms; P at ``p_cosine``; from epoch 31 on at ``late``), batch loss ``loss``."""
    rows = []
    for epoch in range(epochs + 1):
        for kind, layer in (("W_O", None), *((k, l) for l in range(3) for k in ("W", "V", "P"))):
            cos = cosine if late is None or epoch <= 30 else late
            if kind == "P" and p_cosine is not None:
                cos = p_cosine
            whole = float("nan") if epoch == 0 else cos - 0.0001 * (layer or 0)
            rows.append(
                {
                    "step": epoch * PER_EPOCH,
                    "loss": math.log(VOCAB) if epoch == 0 else loss,
                    "matrix": kind if layer is None else f"blocks.{layer}.attn.{kind}",
                    "kind": kind,
                    "layer": layer,
                    "cosine": whole,
                    "cosine_first": whole if first is None else first,
                }
            )
    history = pd.DataFrame(rows).assign(lr=lr, eta_s=lambda d: lr * d["step"])
    steps = epochs * PER_EPOCH
    return TrainResult(history, {}, ModelConfig(VOCAB, 8), TrainConfig(lr=lr, steps=steps, batch_size=2, log_every=32))


def readings(
    small=0.999,
    large=0.95,
    small_loss=5.0,
    large_loss=3.5,
    bpe=0.999,
    first=None,
    p_large=None,
    late=None,
    ceiling=0.97,
):
    runs = Runs(
        SimpleNamespace(vocab_size=VOCAB),
        SimpleNamespace(n_kept=64, context=8, unk_fraction=0.1),
        None,
        {
            0.005: fake_run(small, small_loss, 0.005, first=first),
            0.05: fake_run(large, large_loss, 0.05, p_cosine=p_large, late=late),
        },
    )
    ceilings = dict.fromkeys(("W_O", "V", "W", "P"), ceiling)
    return TrainingReadings(runs, PER_EPOCH, fake_run(bpe, 5.0, 0.005, epochs=10), PER_EPOCH, ceilings)


def test_every_profile_trains_the_papers_two_rates_for_3200_steps_at_its_batch_ratio():
    for profile, cfg in ch03.CONFIGS.items():
        runs, bpe = cfg.shared_runs(), cfg.bpe_run()
        assert runs.lrs == PAPER_LRS and runs.epochs == 100 and bpe.epochs == 10 and bpe.lr == 0.005
        for run in (runs.run(runs.lrs[0]), bpe):
            assert run.corpus.n_sequences == PAPER_BATCH_RATIO * run.batch_size, profile
            assert run.train_cfg(run.corpus.n_sequences).steps == run.epochs * PAPER_BATCH_RATIO
            assert PER_EPOCH % run.log_every == 0
    cfg = ch03.resolve("smoke", seed=3)
    assert cfg.shared_runs().seed == 3 and cfg.bpe_run().seed == 3
    assert differences_from_paper("paper").empty
    cpu = differences_from_paper("cpu").set_index(["run", "setting"])
    assert cpu.loc[("shared runs", "vocab_size"), "this profile"] == "512"
    assert not {"lr", "lrs", "epochs", "n_layers", "tokenizer"} & set(cpu.index.get_level_values("setting"))
    assert (cpu["what it can change"] != "").all()


def test_the_tables_read_the_first_batchs_terms_and_name_the_papers_numbers():
    r = readings(small=0.9999, first=0.97)
    ev = claims.evidence(CH03_CLAIMS, r)
    assert ev["ch03.table1_value"].values == [0.97] and r.table1("cosine")["V"] == pytest.approx(0.9997)
    assert "0.999169" in ev["ch03.table1_value"].claim.paper and "0.9988" in ev["ch03.table2_value"].claim.paper
    paper = [c for c in CH03_CLAIMS if c.source == "paper"]
    assert len(paper) == 9 and all(c.setting is None for c in paper)
    assert TABLES[ch03.STEM] is CH03_CLAIMS and {c.chapter for c in CH03_CLAIMS} == {ch03.STEM}


def records(**kw):
    return training_numbers(readings(**kw))


def test_records_of_a_trained_run_pass_and_of_untrained_or_broken_runs_fail_the_smoke_bounds():
    bounds = load_thresholds("03_training")["smoke"]
    good = records(small=0.9995, large=0.9, small_loss=4.4, large_loss=2.0, bpe=0.999)
    assert set(bounds) <= set(good)
    assert not check_thresholds(good, bounds)
    untrained = records(small=float("nan"), large=float("nan"), small_loss=math.log(VOCAB), large_loss=math.log(VOCAB))
    flagged = {p.split()[0] for p in check_thresholds(untrained, bounds)}
    assert {"final_loss_paper_lr", "final_loss_large_lr", "table1_W_O_whole"} <= flagged
    broken = records(small=0.1, large=0.1, bpe=0.1, small_loss=4.4, large_loss=2.0)
    flagged = {p.split()[0] for p in check_thresholds(broken, bounds)}
    assert {"table1_W_whole", "table1_V_whole", "table1_W_O_whole", "table2_W_O_whole"} <= flagged


def _width(spec: dict) -> int:
    if "facet" in spec:
        return spec.get("columns", 1) * spec["spec"].get("width", 0)
    if "layer" in spec:
        return max([spec.get("width", 0)] + [_width(s) for s in spec["layer"]])
    return spec.get("width", 0)


def test_charts_fit_the_column_and_title_the_finding():
    r = readings(small=0.9995, large=0.95, late=0.75, small_loss=5.0, large_loss=3.5)
    cosine, loss = ch03.cosine_chart(r).to_dict(), ch03.loss_chart(r).to_dict()
    for spec in (cosine, loss):
        assert 0 < _width(spec) <= ch03.WIDTH - 60
    assert "cosine ≥ 0.9993 for 100 epochs" in str(cosine["title"]) and "end at ≥ 0.750" in str(cosine["title"])
    assert "3.500 nats at η = 0.05 (66% of log |V|)" in str(loss["title"])


def test_prose_says_what_the_runs_learned_and_which_terms_fit_closer():
    text = ch03.runs_prose("smoke", readings(small_loss=math.log(VOCAB) - 0.01))
    assert "**3,200 steps**" in text and "η·s = 16 and 160" in text and "barely learned" in text
    closer = ch03.terms_prose(readings(small=0.9999, first=0.97, ceiling=0.9712))
    assert "2 sequences of 8 (16 tokens)" in closer and "V vs (BΦ)ᵀ 0.9712" in closer
    assert "the whole set's terms fit W vs Q, V vs (BΦ)ᵀ, W_O vs B more closely" in closer
    assert "both sets of terms fit every matrix alike" in ch03.terms_prose(readings())


def test_plans_cost_every_run_before_it_trains():
    text = ch03.plans_prose(ch03.CONFIGS["smoke"])
    assert "64 kept sequences" in text and "**3,200 steps**" in text and "**320 steps**" in text
    assert text.count("On one GPU: about") == 2
