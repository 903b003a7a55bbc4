"""Chapter 5's module (mechbook.chapters.ch05_cooperation) and its library (the CH05 claims tables,
read_cooperation, cooperation_numbers): the config, path averages against the weights read
literally, distinct ablation labels, records, sentences and chart, and the smoke bounds against an
untrained model (on the smoke corpus, with weights set by hand, no training; each claim on both
sides of its rule: leading_terms/test_lt_claims.py)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import SAMPLE
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook import claims
from mechbook.book.checks import check_thresholds, load_thresholds
from mechbook.chapters import ch05_cooperation as ch05
from mechbook.leading_terms.ablation import EvalRuns, OutputSplit
from mechbook.leading_terms.claims import CH05_ABLATIONS, CH05_CLAIMS, CH05_PATHS, CH05_TABLE3, TABLES
from mechbook.leading_terms.corpus import load_corpus
from mechbook.leading_terms.logit_paths import mean_paths
from mechbook.leading_terms.model import AttentionModel, ModelConfig, parameter_names
from mechbook.leading_terms.readings import FULL, CooperationReadings, cooperation_numbers, read_cooperation
from mechbook.leading_terms.stats import cached_corpus_stats
from mechbook.leading_terms.tables import table3_ablation
from mechbook.leading_terms.train import Runs, TrainResult


@pytest.mark.parametrize(
    "knobs, message",
    [({"n_eval": 0}, "n_eval must be at least 1, got 0"), ({"n_sentences": 300}, "must not exceed n_eval")],
)
def test_config_ranges(knobs, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(ch05.CONFIGS["smoke"], **knobs)


def test_seed_knob_reaches_the_runs():
    assert ch05.resolve("smoke", seed=4).runs.seed == 4
    with pytest.raises(TypeError, match="n_eval"):
        ch05.resolve("smoke", n_eval="10")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    if not SAMPLE.exists():
        pytest.skip("needs the TinyStories sample")
    mp = pytest.MonkeyPatch()
    mp.setenv("MECHBOOK_TINYSTORIES", str(SAMPLE))
    mp.setenv("MECHBOOK_CACHE", str(tmp_path_factory.mktemp("cache")))
    cfg = dataclasses.replace(ch05.CONFIGS["smoke"], n_eval=24, n_sentences=2)
    tok, seqs = load_corpus(cfg.runs.corpus)
    yield cfg, tok, seqs, cached_corpus_stats(seqs.tokens, tok.vocab_size)
    mp.undo()


def _coop(corpus, weights):
    """A Cooperation whose run at lr has the weights ``weights(name, lr, zero_tensor)`` (and a history
    whose one logged loss is log |V|: no run has trained)."""
    cfg, tok, seqs, stats = corpus
    model_cfg = ModelConfig(d_vocab=tok.vocab_size, n_ctx=seqs.context, n_layers=cfg.runs.n_layers)
    history = pd.DataFrame({"step": [0], "loss": [math.log(tok.vocab_size)]})
    results, models = {}, {}
    for lr in cfg.runs.lrs:
        model = AttentionModel(model_cfg, device="cpu")
        state = {k: weights(k, lr, torch.zeros_like(v)) for k, v in model.state_dict().items()}
        results[lr] = TrainResult(history, state, model_cfg, cfg.runs.run(lr).train_cfg(len(seqs.tokens)))
        models[lr] = results[lr].model(device="cpu")
    return EvalRuns(Runs(tok, seqs, stats, results), models, seqs.tokens[: cfg.n_eval])


def _leading(corpus):
    """Weights equal to their leading terms after s = 100 steps at lr (W and P left at zero)."""
    stats, s = corpus[3], 100

    def weights(name, lr, zero):
        if name == "W_O":
            return torch.as_tensor(lr * s * stats.B, dtype=zero.dtype)
        if name.endswith(".V"):
            return torch.as_tensor(lr**2 * s * (s - 1) / 2 * stats.BPhi_T, dtype=zero.dtype)
        return zero

    return weights


def test_path_means_against_the_weights_read_literally(corpus):
    c = _coop(corpus, _leading(corpus))
    means = mean_paths(c.models, c.evaluation)
    inputs, targets = c.evaluation[:, :-1], c.evaluation[:, 1:]
    for lr in c.lrs:
        W_O = c.runs.results[lr].state["W_O"].double().numpy()
        residual = W_O[inputs, targets] - W_O[inputs].mean(-1)
        assert means.loc[lr, "residual"] == pytest.approx(residual.mean(), rel=1e-5)
        with torch.no_grad():
            logits = c.models[lr](torch.as_tensor(inputs)).double().numpy()
        centred = np.take_along_axis(logits, targets[..., None], -1)[..., 0] - logits.mean(-1)
        assert means.loc[lr, "attention"] == pytest.approx(centred.mean() - residual.mean(), rel=1e-4, abs=1e-9)
    share = means["attention"] / (means["attention"].abs() + means["residual"].abs())
    assert np.allclose(means["attention share"], share)


def test_ablation_labels_are_distinct_and_use_the_notation(corpus):
    c = _coop(corpus, _leading(corpus))
    table = ch05.ablation(CooperationReadings({}, exps=c.experiments()))
    for lr in c.lrs:
        labels = table.loc[table["lr"] == lr, "label"]
        assert labels.is_unique and len(labels) == len(parameter_names(c.models[lr].cfg)) + 3
    assert {"W_O − its B part", "V⁽²⁾ − its (BΦ)ᵀ part", "W⁽⁰⁾ − its Q part", "P⁽¹⁾ − its P-term part"} <= set(
        table["label"]
    )
    spec = ch05.ablation_chart(table).to_dict()
    assert spec["spec"]["encoding"]["x"]["field"] == "delta_loss"
    assert "over the full model" in spec["spec"]["encoding"]["x"]["title"]
    assert spec["title"].startswith("Costliest single removal: the leading term of W_O")
    assert ch05.ablation_summary(table).shape == (len(table) // 2, 4)


def test_records_and_sentences_of_a_leading_term_model(corpus):
    c = _coop(corpus, _leading(corpus))
    exps, means = c.experiments(), mean_paths(c.models, c.evaluation)
    r = CooperationReadings({c.lrs[0]: 0.05, c.lrs[1]: 2.0}, means, exps)
    ev = claims.evidence(CH05_PATHS + CH05_ABLATIONS, r)  # Table 3's claims read a table3 this test leaves out
    table = ch05.ablation(r)
    numbers = cooperation_numbers(exps, means)
    bounds = load_thresholds("05_cooperation")
    assert set(bounds["smoke"]) <= set(numbers) and set(bounds["cpu"]) <= set(numbers)
    assert numbers["loss_zero"] == pytest.approx(math.log(c.runs.tokenizer.vocab_size), abs=1e-5)
    assert numbers["worst_single_large_lr"] == "W_O"  # the bigram term carries the most
    assert numbers["loss_full_large_lr"] < numbers["loss_no_leading_large_lr"]
    assert f"{c.runs.results[c.lrs[0]].train_cfg.steps:,} steps" in ch05.profile_prose(c)
    text = ch05.ablation_prose(table, r, ev)
    assert f"reaches **{numbers['loss_full_paper_lr']:.4f}**" in text and "leading term of W_O" in text
    assert f"**{means.loc[c.lrs[1], 'residual']:.3g}**" in ch05.path_prose(r, ev)
    frame = ch05.sentence_paths(c, 1, c.lrs[1])
    assert len(frame) == corpus[0].runs.corpus.context * (1 + c.models[c.lrs[1]].cfg.n_layers)
    assert frame["label"].str.match(r"^\d\d ").all()


def test_smoke_bounds_reject_an_untrained_model(corpus):
    c = _coop(corpus, lambda name, lr, zero: zero)
    numbers = cooperation_numbers(c.experiments(), mean_paths(c.models, c.evaluation))
    problems = check_thresholds(numbers, load_thresholds("05_cooperation")["smoke"])
    for name in ("loss_full_paper_lr", "loss_full_large_lr", "mean_residual_paper_lr", "mean_residual_large_lr"):
        assert any(p.startswith(name) for p in problems), problems


def test_every_section_reads_its_experiments_and_records_every_claim(corpus):
    c = _coop(corpus, _leading(corpus))
    read = read_cooperation(c)  # the notebook's one reading, every part at once
    assert read.drops == {lr: pytest.approx(0.0, abs=1e-12) for lr in c.lrs}, "the history's loss is log |V|"
    assert read.means.equals(mean_paths(c.models, c.evaluation)) and list(read.exps) == list(c.lrs)
    assert read.table3.equals(table3_ablation(c))
    exps, means, table3 = read.exps, read.means, read.table3
    drops = {c.lrs[0]: 2.0, c.lrs[1]: 0.3}  # the paper-rate run trained, the other not: it decides
    r = dataclasses.replace(read, drops=drops)
    ev = claims.evidence(CH05_CLAIMS, r)
    evs = list(ev.values())
    records = ch05.record_all(r, ev)
    assert [r["verdict"] for n, r in records.items() if n.startswith("claim.")] == [e.verdict for e in evs]
    table3_ids = {cl.id for cl in CH05_TABLE3}
    assert all(
        e.run == f"the η = {c.lrs[0]:g} run (its loss fell 2.00 nats below log |V|)"
        for e in evs
        if e.claim.id not in table3_ids
    )
    assert {e.verdict for e in evs if e.claim.id in table3_ids} == {"untested"}, "the η = 0.05 run has not trained"
    assert [e.claim.id for e in evs] == [cl.id for cl in CH05_CLAIMS]
    assert TABLES[ch05.STEM] is CH05_CLAIMS and CH05_CLAIMS == CH05_PATHS + CH05_TABLE3 + CH05_ABLATIONS
    assert {f"table3_loss_{n}" for n in ("W_O", "blocks.2.attn.V", "blocks.0.attn.P")} <= set(records)
    trained = claims.evidence(CH05_TABLE3, CooperationReadings({c.lrs[0]: 2.0, c.lrs[1]: 1.0}, table3=table3))
    assert trained["ch05.table3_output_most"].values == ["W_O"] and trained["ch05.table3_output_most"].run.startswith(
        "the η = 0.05 run"
    )
    assert trained["ch05.table3_attention_small"].values == [0.0], "W is zero in this model: its removal costs nothing"
    assert "5.349" in ch05.table3(r, 5.3).to_string() and "Reproduced" in ch05.table3_prose(trained)
    # a leading-term model at s = 100 has W = 0: the W := 0 control changes nothing
    assert {e.claim.id: e.verdict for e in evs}["ch05.w_zero_idle"] == "reproduced"
    assert {e.claim.id: e.values for e in evs}["ch05.w_o_costliest"] == ["W_O"]
    paths = ch05.path_table(r)
    assert paths.shape == (3 + c.models[c.lrs[0]].cfg.n_layers, 4)
    text = ch05.path_ablation_prose(r, ev)
    assert text.count("At $\\eta = ") == 2 and ("Holds" in text or "Does not hold" in text)
    split = ch05.split_prose(r, ev)
    assert "its remainder alone" in split and split.count("**") >= 4
    assert ch05.split_table(r).shape == (9, 2)
    assert "W := 0 gives" in ch05.w_zero_prose(r, ev)
    untrained = list(
        claims.evidence(CH05_CLAIMS, CooperationReadings({c.lrs[0]: 0.05, c.lrs[1]: 0.3}, means, exps)).values()
    )
    assert {e.verdict for e in untrained} == {"untested"}
    assert "fell 0.050 and 0.300 nats, under 0.5" in untrained[0].sentence()


def _split(**changes):
    base = dict(
        loss_full=5.0,
        loss_b_part=5.1,
        loss_remainder=8.5,
        loss_zero=5.5,
        logit_cosine=-0.6,
        right_b_part=0.4,
        right_remainder=-0.3,
        rms_full=1.0,
        rms_b_part=1.2,
        rms_remainder=0.9,
        top_b_part=1.5,
        hit_b_part=0.2,
    )
    return OutputSplit(**{**base, **changes})


class _Exp:
    """Stands in for a Cooperation where only the split is read."""

    def __init__(self, split):
        self.split = split


@pytest.mark.parametrize(
    "split, word, verdicts",
    [
        (_split(), "worse than the zero model", ("Holds", "Holds")),
        (_split(loss_remainder=5.2, right_remainder=0.1, logit_cosine=0.3), "better than", ("Does not hold",) * 2),
        (_split(loss_remainder=5.5), "as good as", ("Holds", "Holds")),
    ],
)
def test_split_prose_branches_follow_the_numbers(split, word, verdicts):
    r = CooperationReadings({0.005: 0.05, 0.1: 2.0}, exps={0.005: _Exp(_split()), 0.1: _Exp(split)})
    remainder = [c for c in CH05_ABLATIONS if c.section == "ch05-remainder"]  # they read the split alone
    text = ch05.split_prose(r, claims.evidence(remainder, r))
    assert word in text
    lines = [line for line in text.splitlines() if line.startswith("- ")]
    assert [line[4:].split(".")[0] for line in lines] == list(verdicts)


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 10, allow_nan=False), st.floats(0, 10, allow_nan=False), st.sampled_from([".4f", ".4g", ".2f"]))
def test_against_sum_never_contradicts_the_printed_numbers(joint, total, spec):
    from mechbook.claims import fmt

    text = ch05.against_sum(joint, total, spec)
    a, b = float(fmt(joint, spec)), float(fmt(total, spec))
    if a == b:
        assert text == "equal to their sum"
    else:
        assert text.endswith("more than their sum" if a > b else "less than their sum")


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        (
            {"top_b_part": 9.0, "right_b_part": 2.0, "loss_b_part": 9.5},
            ["7 above the right token's 2", "costs more than the zero model, which spreads"],
        ),
        ({"top_b_part": 2.0, "right_b_part": 2.0, "loss_b_part": 5.5}, ["level with", "Alone it costs as much as"]),
        ({"top_b_part": 1.0, "right_b_part": 0.5, "loss_b_part": 5.0}, ["0.5 above", "Alone it costs less than"]),
    ],
)
def test_the_b_part_alone_prose_reads_its_numbers(changes, words):
    text = ch05.b_part_alone_prose(_split(**changes))
    for word in words:
        assert word in text
    assert f"**{_split(**changes).hit_b_part:.1%}**" in text


@pytest.mark.parametrize(
    ("w_zero", "words"),
    [
        (3.55, ["**30 times**", "carry little of it"]),
        (6.0, ["**0.6 times**", "worth more than what the paths carry"]),
        (3.5, ["W := 0 costs nothing"]),
    ],
)
def test_w_against_the_attention_paths_reads_the_ratio(w_zero, words):
    """On the run that has trained: the loss of dropping every attention path over that of W := 0."""
    from mechbook.leading_terms.ablation import Cooperation

    matrices = pd.DataFrame({"ablation": [FULL], "loss": [3.5], "matrix": [None], "delta_loss": [0.0]})
    paths = pd.DataFrame({"removal": ["without every attention path"], "delta_loss": [1.5]})
    exps = {0.005: None, 0.1: Cooperation(matrices, paths, _split(), w_zero)}
    text = ch05.w_against_paths(CooperationReadings({0.005: 0.05, 0.1: 2.0}, exps=exps))
    assert "the η = 0.1 run (its loss fell 2.00 nats below log |V|)" in text
    for word in words:
        assert word in text
    assert ch05.w_against_paths(CooperationReadings({0.005: 0.05, 0.1: 0.2}, exps=exps)) == "", "no run has trained"
