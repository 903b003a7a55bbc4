"""Chapter 6's analysis path on a tiny locally trained GPT-NeoX model through TransformerBridge:
hook names, W_Q/W_K orientation, checkpoints, controls and determinism."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from conftest import ROOT
from mechbook.data import load_stories
from mechbook.pythia import analysis
from mechbook.pythia.features import compute_leading_features
from mechbook.pythia.miniature import MiniatureConfig, train_miniature
from mechbook.pythia.sources import MiniatureSource, controls, similarity_over_checkpoints

SAMPLE = ROOT.parent / "shared" / "data" / "tinystories" / "tinystories-sample.txt"
TINY = MiniatureConfig(bpe_vocab=300, context=16, d_model=32, n_layers=2, n_heads=4, d_mlp=64, steps=8, batch_size=8, n_linear=2, seed=3)


@pytest.fixture(scope="module")
def stories():
    path = os.environ.get("MECHBOOK_TINYSTORIES") or SAMPLE
    return load_stories(path=path, max_stories=300)


@pytest.fixture(scope="module")
def source(stories):
    return MiniatureSource(train_miniature(stories, TINY))


def test_training_keeps_the_schedule_and_is_deterministic(source, stories):
    run = source.run
    assert source.steps == TINY.schedule == [0, 1, 2, 4, 8]
    assert len(run.losses) == TINY.steps and all(np.isfinite(run.losses))
    again = train_miniature(stories, TINY)
    assert again.losses == run.losses
    first = next(iter(run.checkpoints[8]))
    assert torch.equal(again.checkpoints[8][first], run.checkpoints[8][first])
    assert not torch.equal(run.checkpoints[0][first], run.checkpoints[8][first])


def test_bridge_hooks_match_the_hf_model(source):
    bridge = source.load(8)
    tokens = np.arange(5)
    reps = analysis.read_layers(bridge, tokens)
    hf = bridge.original_model
    with torch.no_grad():
        hidden = hf(torch.as_tensor(tokens).reshape(-1, 1), output_hidden_states=True).hidden_states
    for layer in range(TINY.n_layers - 1):  # the last hidden state has the final LayerNorm applied
        assert np.allclose(reps["embedding"][layer], hidden[layer + 1][:, 0].double().numpy(), atol=1e-5)
    assert reps["no_mlp"].shape == reps["attn_in"].shape == (TINY.n_layers, 5, TINY.d_model)


def test_head_scores_are_the_attention_scores_without_biases(source):
    bridge = source.load(4)
    tokens = np.arange(6)
    reps = analysis.read_layers(bridge, tokens)
    scores = analysis.head_scores(bridge, reps["attn_in"])
    with torch.no_grad():
        _, cache = bridge.run_with_cache(torch.as_tensor(tokens).reshape(-1, 1))
    W_Q, W_K = bridge.W_Q.detach().double().numpy(), bridge.W_K.detach().double().numpy()
    b_Q, b_K = bridge.b_Q.detach().double().numpy(), bridge.b_K.detach().double().numpy()
    d_head = TINY.d_model // TINY.n_heads
    for layer in range(TINY.n_layers):
        E = reps["attn_in"][layer]
        for head in range(TINY.n_heads):
            q, k = E @ W_Q[layer, head], E @ W_K[layer, head]
            assert np.allclose(scores[layer, head], q @ k.T)
            with_bias = ((q + b_Q[layer, head]) * (k + b_K[layer, head])).sum(1) / np.sqrt(d_head)
            hooked = cache[f"blocks.{layer}.attn.hook_attn_scores"][:, head, 0, 0].double().numpy()
            assert np.allclose(with_bias, hooked, atol=1e-5)


def test_similarity_tables_and_controls(source, tmp_path, monkeypatch):
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    feats = compute_leading_features(source.tokens, source.vocab_size, 12)
    table = similarity_over_checkpoints(source, feats)
    layers = table[table["head"] == analysis.LAYER_LEVEL]
    assert len(layers) == len(source.steps) * TINY.n_layers * len(analysis.MAPPINGS)
    assert len(table) - len(layers) == len(source.steps) * TINY.n_layers * TINY.n_heads
    assert table["similarity"].between(-1, 1).all() and table["similarity"].std() > 0
    ctl = controls(source, feats)
    assert set(ctl["control"]) == {"random_init", "shuffled_tokens"}
    final = table[table["step"] == source.steps[-1]].drop(columns="step").reset_index(drop=True)
    shuffled = ctl[ctl["control"] == "shuffled_tokens"].drop(columns="control").reset_index(drop=True)
    assert not np.allclose(final["similarity"], shuffled["similarity"])
    summary = analysis.summarise(analysis.layer_mean(table))
    assert set(summary) == set(analysis.MAPPINGS)
    assert all(s["peak"] >= s["final"] and s["peak_step"] in source.steps for s in summary.values())
    assert similarity_over_checkpoints(source, feats).equals(table)  # served from the cache
