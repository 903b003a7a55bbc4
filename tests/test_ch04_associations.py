"""Chapter 4's module (mechbook.chapters.ch04_associations): the config, the trained maps against
a literal product, overlap tables and records, the sentences, the explorer layout, and the smoke
bounds against an untrained or scrambled model (on the smoke corpus, without training)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest
import torch

import mechbook
from mechbook.book.checks import check_thresholds, load_thresholds
from mechbook.chapters import ch04_associations as ch04
from mechbook.leading_terms.corpus import load_corpus
from mechbook.leading_terms.stats import cached_corpus_stats
from mechbook.leading_terms.train import Runs

SAMPLE = Path(
    os.environ.get(
        "MECHBOOK_TINYSTORIES",
        Path(__file__).resolve().parents[2] / "shared" / "data" / "tinystories" / "tinystories-sample.txt",
    )
)


@pytest.mark.parametrize(
    "knobs, message",
    [
        ({"k": 0}, "k must be a positive integer"),
        ({"explorer_k": -1}, "explorer_k must be a positive integer"),
        ({"table_words": 30}, "must not exceed n_words"),
    ],
)
def test_config_ranges(knobs, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(ch04.CONFIGS["smoke"], **knobs)


def test_seed_and_steps_knobs_reach_the_runs():
    cfg = mechbook.resolve_profile(ch04.CONFIGS, "smoke", runs__seed=3, runs__steps=7, k=5)
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
    maps = ch04.trained(state)
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
    cfg, runs = corpus
    theory = {"W_O": runs.stats.B, "V W_O": runs.stats.G, "W": runs.stats.Q}
    return ch04.Associations(cfg, runs, {lr: {n: make(m, lr) for n, m in theory.items()} for lr in cfg.runs.lrs})


def test_a_model_that_is_its_leading_terms_overlaps_fully_and_passes(corpus):
    a = _assoc(corpus, lambda m, lr: 3.0 * m)
    table = ch04.overlap_table(a)
    assert (table.to_numpy() == 1.0).all() and list(table.index) == list(a.lrs)
    numbers = ch04.headline(table)
    assert set(numbers) == {
        f"overlap_{t}_{n}_{r}" for t, n in (("B", "W_O"), ("G", "VW_O"), ("Q", "W")) for r in ("paper_lr", "large_lr")
    }
    assert check_thresholds(numbers, load_thresholds("04_associations")["smoke"]) == []


@pytest.mark.parametrize("broken", ["untrained", "scrambled"])
def test_smoke_bounds_reject_an_untrained_or_scrambled_model(corpus, broken):
    rng = np.random.default_rng(0)
    make = (lambda m, lr: np.zeros_like(m)) if broken == "untrained" else (lambda m, lr: rng.permutation(m, axis=1))
    numbers = ch04.headline(ch04.overlap_table(_assoc(corpus, make)))
    problems = check_thresholds(numbers, load_thresholds("04_associations")["smoke"])
    assert len(problems) == 6, problems


def test_sentences_and_tables_quote_the_overlaps(corpus):
    a = _assoc(
        corpus, lambda m, lr: m + (lr * 1e-3) * np.random.default_rng(1).standard_normal(m.shape) * np.abs(m).max()
    )
    table = ch04.overlap_table(a)
    paper_lr, large_lr = a.lrs
    assert f"**{table.loc[paper_lr, 'Q vs W']:.0%}** with $Q$" in ch04.overlap_prose(a, table)
    worst = table.loc[large_lr].idxmin()
    assert f"moves most is **{worst}**" in ch04.drift_prose(a, table)
    ranked = ch04.ranked_table(a)
    assert ranked.index.get_level_values(0).nunique() == 2 * len(ch04.TRAINED)
    assert set(ranked.index.get_level_values(1)) == set(a.words[: a.cfg.table_words])


def test_explorer_pairs_each_theory_with_its_trained_map(corpus):
    a = _assoc(corpus, lambda m, lr: m)
    panels = list(ch04.explorer_panels(a))
    assert panels[1::2][:3] == ["trained W_O", "trained V W_O", "trained W"]
    frame = ch04.word_panels(a, a.words[0], a.lrs[0])
    assert set(frame["panel"]) == set(panels)
    assert frame.groupby("panel")["relative"].apply(lambda r: r.abs().max()).eq(1.0).all()
    same = frame.set_index(["panel", "rank"])["token"]
    assert (same["trained W"] == same["Q (theory of W)"]).all()
