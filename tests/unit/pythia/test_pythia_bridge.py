"""Chapter 6's analysis path on a tiny locally trained GPT-NeoX model through TransformerBridge:
hook names, W_Q/W_K orientation, checkpoints, controls and determinism."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
import torch
from conftest import ROOT

from mechbook.data import load_stories
from mechbook.pythia import analysis
from mechbook.pythia.features import compute_leading_features
from mechbook.pythia.miniature import MiniatureConfig, miniature_run, train_miniature
from mechbook.pythia.similarity import MEASURES
from mechbook.pythia.sources import (
    MiniatureSource,
    controls,
    similarity_over_checkpoints,
)

SAMPLE = ROOT.parent / "shared" / "data" / "tinystories" / "tinystories-sample.txt"
TINY = MiniatureConfig(
    bpe_vocab=300, context=16, d_model=32, n_layers=2, n_heads=4, d_mlp=64, steps=8, batch_size=8, n_linear=2, seed=3
)


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


def test_a_diverging_miniature_stops_with_one_line_and_caches_nothing(stories, tmp_path, monkeypatch):
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    with pytest.raises(FloatingPointError, match=r"the miniature diverged: its loss is (nan|inf) at step \d+"):
        miniature_run(stories, dataclasses.replace(TINY, lr=1e30))
    assert not list(tmp_path.rglob("*.pt"))


def test_bridge_hooks_match_the_hf_model(source):
    bridge = source.load(8)
    tokens = np.arange(5)
    reps = analysis.read_layers(bridge, tokens)
    hf = bridge.original_model
    with torch.no_grad():
        hidden = hf(torch.as_tensor(tokens).reshape(-1, 1), output_hidden_states=True).hidden_states
    for layer in range(TINY.n_layers - 1):  # the last hidden state has the final LayerNorm applied
        assert np.allclose(reps["embedding"][layer], hidden[layer + 1][:, 0].double().numpy(), atol=1e-5)
    assert reps["no_mlp"].shape == reps["attn_in"].shape == reps["resid_pre"].shape == (TINY.n_layers, 5, TINY.d_model)


def test_the_papers_scores_from_resid_pre_are_not_the_models(source):
    """The model's attention reads the LayerNorm output; scores from the un-normalised resid_pre
    (the paper's pipeline) differ, and LayerNorm is what maps one onto the other."""
    bridge = source.load(8)
    reps = analysis.read_layers(bridge, np.arange(6))
    ln = bridge.original_model.gpt_neox.layers[0].input_layernorm
    with torch.no_grad():
        normalised = ln(torch.as_tensor(reps["resid_pre"][0], dtype=torch.float32)).double().numpy()
    assert np.allclose(normalised, reps["attn_in"][0], atol=1e-5)
    paper, model = analysis.head_scores(bridge, reps["resid_pre"]), analysis.head_scores(bridge, reps["attn_in"])
    assert not np.allclose(paper, model, rtol=0.1)


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
    n_measures = len(MEASURES)
    layers = table[table["head"] == analysis.LAYER_LEVEL]
    assert len(layers) == n_measures * len(source.steps) * TINY.n_layers * len(analysis.MAPPINGS)
    assert len(table) - len(layers) == n_measures * len(source.steps) * TINY.n_layers * TINY.n_heads * len(
        analysis.SCORE_INPUTS
    )
    assert table["similarity"].between(-1, 1).all() and table["similarity"].std() > 0
    ctl = controls(source, feats)
    assert set(ctl["control"]) == {"random_init", "shuffled_tokens", "offset", "linear"}
    model_rows = ctl[ctl["control"] == "shuffled_tokens"].drop(columns="control").reset_index(drop=True)
    final = table[table["step"] == source.steps[-1]].drop(columns="step").reset_index(drop=True)
    assert final[["measure", "mapping", "layer", "head"]].equals(model_rows[["measure", "mapping", "layer", "head"]])
    assert not np.allclose(final["similarity"], model_rows["similarity"])
    synthetic = ctl[ctl["control"].isin(["offset", "linear"])]
    assert len(synthetic) == 2 * n_measures * len(analysis.MAPPINGS)
    summary = analysis.summarise(analysis.layer_mean(table))
    assert set(summary) == {(m, p) for m in MEASURES for p in analysis.MAPPINGS}
    assert all(s["peak"] >= max(s["final"], s["initial"]) and s["peak_step"] in source.steps for s in summary.values())
    assert similarity_over_checkpoints(source, feats).equals(table)  # served from the cache
