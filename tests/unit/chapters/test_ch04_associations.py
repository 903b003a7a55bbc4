"""Chapter 4's module (mechbook.chapters.ch04_associations) and its library (the CH04_CLAIMS table,
association_numbers): the config, the trained maps against a literal product, overlap tables and
records, the sentences, the explorer layout, and the smoke bounds against an untrained or
scrambled model (on the smoke corpus, without training; each claim on both sides of its rule:
leading_terms/test_lt_claims.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from conftest import SAMPLE

import mechbook
from mechbook import claims
from mechbook.book.checks import check_thresholds, load_thresholds
from mechbook.chapters import ch04_associations as ch04
from mechbook.leading_terms.associations import RunMaps, overlap_readings, trained_maps
from mechbook.leading_terms.claims import CH04_CLAIM_OF, CH04_CLAIMS, TABLES
from mechbook.leading_terms.corpus import load_corpus
from mechbook.leading_terms.readings import AssociationReadings, association_numbers, read_associations
from mechbook.leading_terms.stats import cached_corpus_stats
from mechbook.leading_terms.train import Runs


@pytest.mark.parametrize(
    "knobs, message",
    [
        ({"k": 0}, r"ChapterConfig\.k must be at least 1, got 0"),
        ({"explorer_k": -1}, "explorer_k must be at least 1, got -1"),
        ({"table_words": 30}, "must not exceed n_words"),
    ],
)
def test_config_ranges(knobs, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(ch04.CONFIGS["smoke"], **knobs)


def test_seed_and_steps_knobs_reach_the_runs():
    cfg = ch04.resolve("smoke", seed=3, steps=7, k=5)
    assert (cfg.runs.seed, cfg.runs.steps, cfg.k) == (3, 7, 5)
    with pytest.raises(ValueError, match="exactly two distinct learning rates"):
        mechbook.resolve_profile(ch04.CONFIGS, "smoke", runs__lrs=(0.005,))


def test_trained_maps_match_a_literal_product():
    gen = torch.Generator().manual_seed(0)
    state = {
        "W_O": torch.randn(6, 6, generator=gen),
        "blocks.0.attn.V": torch.randn(6, 6, generator=gen),
        "blocks.0.attn.W": torch.randn(6, 6, generator=gen),
        "blocks.1.attn.V": torch.randn(6, 6, generator=gen),
    }
    maps = trained_maps(state)
    V, W_O = state["blocks.0.attn.V"].double().numpy(), state["W_O"].double().numpy()
    literal = np.array([[sum(V[a, j] * W_O[j, c] for j in range(6)) for c in range(6)] for a in range(6)])
    assert np.allclose(maps["V W_O"], literal, atol=1e-5)
    assert maps["W"].dtype == np.float64 and np.array_equal(maps["W"], state["blocks.0.attn.W"].double().numpy())
    assert list(maps) == list(ch04.TRAINED)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    if not SAMPLE.exists():
        pytest.skip("needs the TinyStories sample")
    mp = pytest.MonkeyPatch()
    mp.setenv("MECHBOOK_TINYSTORIES", str(SAMPLE))
    mp.setenv("MECHBOOK_CACHE", str(tmp_path_factory.mktemp("cache")))
    cfg = ch04.CONFIGS["smoke"]
    tok, seqs = load_corpus(cfg.runs.corpus)
    yield cfg, Runs(tok, seqs, cached_corpus_stats(seqs.tokens, tok.vocab_size), {})
    mp.undo()


def _assoc(corpus, make):
    """RunMaps whose trained maps are ``make(term, lr)`` of each leading term."""
    from mechbook.leading_terms.associations import content_words, readable_exclusions

    cfg, runs = corpus
    theory = {"W_O": runs.stats.B, "V W_O": runs.stats.G, "W": runs.stats.Q}
    maps = {lr: {n: make(m, lr) for n, m in theory.items()} for lr in cfg.runs.lrs}
    tok = runs.tokenizer
    return RunMaps(runs, maps, tuple(readable_exclusions(tok)), tuple(content_words(tok, cfg.n_words)))


def test_a_model_that_is_its_leading_terms_overlaps_fully_and_passes(corpus):
    cfg, _ = corpus
    # a power of two scales every entry, row mean and centred entry exactly, so near-ties in the
    # maps (many on the smoke corpus's 64 sequences) rank alike on every kernel path
    a = _assoc(corpus, lambda m, lr: 2.0 * m)
    readings = overlap_readings(a, cfg.k)
    table = ch04.overlap_table(AssociationReadings(readings, {}))
    assert (table["overlap"] == 1.0).all() and (table["row-centred"] == 1.0).all()
    assert list(table.index.get_level_values(0).unique()) == list(a.lrs)
    numbers = association_numbers(readings)
    assert set(numbers) == {
        f"{what}_{t}_{n}_{r}"
        for what in ("overlap", "mismatched", "excess", "centred_excess")
        for t, n in (("B", "W_O"), ("G", "VW_O"), ("Q", "W"))
        for r in ("paper_lr", "large_lr")
    }
    assert check_thresholds(numbers, load_thresholds("04_associations")["smoke"]) == []


@pytest.mark.parametrize("broken", ["untrained", "scrambled"])
def test_smoke_bounds_reject_an_untrained_or_scrambled_model(corpus, broken):
    rng = np.random.default_rng(0)
    make = (lambda m, lr: np.zeros_like(m)) if broken == "untrained" else (lambda m, lr: rng.permutation(m, axis=1))
    numbers = association_numbers(overlap_readings(_assoc(corpus, make), corpus[0].k))
    problems = check_thresholds(numbers, load_thresholds("04_associations")["smoke"])
    bounded = {f"overlap_{t}_{n}_paper_lr" for t, n in (("B", "W_O"), ("G", "VW_O"), ("Q", "W"))} | {
        "overlap_B_W_O_large_lr"
    }
    assert {p.split(":")[0].split()[0] for p in problems} >= bounded, problems


def test_sentences_and_tables_quote_the_overlaps(corpus):
    a = _assoc(
        corpus, lambda m, lr: m + (lr * 1e-3) * np.random.default_rng(1).standard_normal(m.shape) * np.abs(m).max()
    )
    cfg, _ = corpus
    readings = overlap_readings(a, cfg.k)
    paper_lr, large_lr = a.lrs
    q = readings[paper_lr]["W"]
    r = AssociationReadings(readings, {paper_lr: 0.05, large_lr: 2.0})
    prose = ch04.overlap_prose(r, claims.evidence(CH04_CLAIMS, r), cfg.k)
    assert f"overlap@{cfg.k} {q.matched:.2f}, against {q.chance:.2f} for a random ranking" in prose
    assert f"At $\\eta = {large_lr}$ the loss fell **2.000** nats below $\\log |V|$: the claims are decided" in prose
    assert f"Decided on the η = {large_lr:g} run (its loss fell 2.00 nats below log |V|)." in prose
    assert "its overlaps restate that closeness" in prose, "the paper-rate run, which fell 0.05 nats"
    assert (
        prose.count("**Reproduced.**") + prose.count("**Partly reproduced.**") + prose.count("**Not reproduced.**") == 3
    )
    large = {n: r.matched for n, r in readings[large_lr].items()}
    worst = min(large, key=large.get)
    assert f"the lowest is **{ch04.TERM[worst]} vs {worst}**" in ch04.drift_prose(r, cfg.k)
    ranked = ch04.ranked_table(cfg, a, r)
    assert ranked.index.get_level_values(0).nunique() == 2 * len(ch04.TRAINED)
    assert set(ranked.index.get_level_values(1)) == set(a.words[: cfg.table_words])


def test_the_readings_hold_the_overlaps_and_the_runs_drops(corpus):
    """read_associations is the notebook's one reading: the overlaps of overlap_readings and the
    drops of run_drops (none here: the fixture's runs hold no trained result)."""
    cfg, _ = corpus
    a = _assoc(corpus, lambda m, lr: 2.0 * m)
    r = read_associations(a, cfg.k)
    assert r.overlaps == overlap_readings(a, cfg.k) and r.drops == {}


def test_explorer_pairs_each_theory_with_its_trained_map(corpus):
    a = _assoc(corpus, lambda m, lr: m)
    panels = list(ch04.explorer_panels(a))
    assert panels[1::2][:3] == ["trained W_O", "trained V W_O", "trained W"]
    frame = ch04.word_panels(corpus[0], a, a.words[0], a.lrs[0])
    assert set(frame["panel"]) == set(panels)
    assert frame.groupby("panel")["relative"].apply(lambda r: r.abs().max()).eq(1.0).all()
    same = frame.set_index(["panel", "rank"])["token"]
    assert (same["trained W"] == same["Q (theory of W)"]).all()


def test_a_shared_profile_is_not_a_reading(corpus):
    """Trained maps that are one shared row (the term's mean row) for every word overlap with G as
    raw rankings, but no more than another word's row does: the claims fail on the excess."""
    cfg, _ = corpus
    a = _assoc(corpus, lambda m, lr: np.broadcast_to(m.mean(axis=0), m.shape).copy())
    ev = claims.evidence(CH04_CLAIMS, AssociationReadings(overlap_readings(a, cfg.k), {a.lrs[0]: 0.05, a.lrs[1]: 2.0}))
    assert ev["ch04.vw_o_ranks_g"].values[0] == pytest.approx(0.0, abs=1e-12)
    assert ev["ch04.vw_o_ranks_g"].verdict == "not reproduced"
    assert ev["ch04.vw_o_ranks_g_centred"].verdict == "not reproduced"


def test_the_claims_are_decided_on_the_run_that_trained_or_untested(corpus):
    """The run that fell furthest decides, if it fell TRAINED_NATS or more; otherwise every claim is
    untested with both drops (a run whose matrices are still their leading terms restates chapter 3)."""
    cfg, _ = corpus
    a = _assoc(corpus, lambda m, lr: m * (1 + lr))
    readings = overlap_readings(a, cfg.k)
    paper_lr, large_lr = a.lrs
    on_large = claims.evidence(CH04_CLAIMS, AssociationReadings(readings, {paper_lr: 0.05, large_lr: 2.0}))
    on_paper = claims.evidence(CH04_CLAIMS, AssociationReadings(readings, {paper_lr: 0.9, large_lr: 0.6}))
    for cid, (raw, _) in zip(CH04_CLAIM_OF, CH04_CLAIM_OF.values()):
        assert on_large[raw].values == [readings[large_lr][cid].excess] and f"η = {large_lr:g}" in on_large[raw].run
        assert on_paper[raw].values == [readings[paper_lr][cid].excess]
    neither = claims.evidence(CH04_CLAIMS, AssociationReadings(readings, {paper_lr: 0.05, large_lr: 0.3}))
    assert {e.verdict for e in neither.values()} == {"untested"}
    assert "0.050 and 0.300 nats, under 0.5" in neither["ch04.w_ranks_q"].sentence()
    untested = ch04.overlap_prose(AssociationReadings(readings, {paper_lr: 0.05, large_lr: 0.3}), neither, cfg.k)
    # each map's raw claim, then its row-centred one, in the order of the chapter's tables
    said = [neither[cid].sentence() for pair in CH04_CLAIM_OF.values() for cid in pair]
    assert untested.endswith("\n\n".join(said)) and "**Untested here.**" in untested
    assert TABLES[ch04.STEM] is CH04_CLAIMS and list(neither) == [c.id for c in CH04_CLAIMS]


def test_the_shared_profile_counts_each_maps_recurring_cells():
    """Per map of the ranked table: the cells holding a word of two rows or more, against a literal count."""
    import pandas as pd

    rows = {
        ("Q (theory)", "big"): ["sorry", "now", "end"],
        ("Q (theory)", "day"): ["sorry", "now", "hug"],
        ("W (trained)", "big"): ["bird", "soon", ""],
        ("W (trained)", "day"): ["once", "upon", "time"],
    }
    table = pd.DataFrame(rows.values(), index=pd.MultiIndex.from_tuples(rows), columns=["1", "2", "3"])
    text = ch04.shared_profile_prose(table)
    assert "Q (theory) 4 of 6 (*sorry*, *now*)" in text
    assert "; W (trained) 0 of 5. A row of $Q$" in text
