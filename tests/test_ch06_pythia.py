"""Chapter 6's profiles, offline source choice, banner, generated reading and charts."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT
from mechbook.pythia.analysis import LAYER_LEVEL, MAPPINGS
from mechbook.pythia.chapter import (
    CONFIGS,
    Chapter6Config,
    banner_html,
    build_source,
    control_table,
    curves_with_controls,
    head_heatmap,
    layer_heatmaps,
    reading,
)
from mechbook.pythia.checkpoints import pythia_steps
from mechbook.pythia.miniature import MiniatureConfig

SAMPLE = ROOT.parent / "shared" / "data" / "tinystories" / "tinystories-sample.txt"
TINY = MiniatureConfig(bpe_vocab=300, context=16, d_model=32, n_layers=2, n_heads=4, d_mlp=64, steps=8, batch_size=8, n_linear=2)


def test_profiles_are_consistent():
    assert set(CONFIGS) == {"smoke", "cpu", "paper"}
    assert CONFIGS["smoke"].source == "miniature" and len(CONFIGS["smoke"].miniature.schedule) == 12
    assert len(CONFIGS["cpu"].miniature.schedule) >= 20 and len(CONFIGS["cpu"].pythia_steps) >= 20
    assert set(CONFIGS["cpu"].pythia_steps) <= set(pythia_steps())
    assert CONFIGS["paper"].pythia_size == "1.4b" and CONFIGS["paper"].deduped and not CONFIGS["paper"].pythia_steps


def test_offline_auto_builds_the_miniature_and_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("MECHBOOK_OFFLINE", "1")
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    if not os.environ.get("MECHBOOK_TINYSTORIES"):
        monkeypatch.setenv("MECHBOOK_TINYSTORIES", str(SAMPLE))
    choice = build_source(Chapter6Config(source="auto", top_k=8, n_stories=300, miniature=TINY))
    assert choice.kind == "miniature" and "did not answer" in choice.reason
    assert choice.source.steps == TINY.schedule
    html = banner_html(choice)
    assert 'class="admonition warning"' in html and "Pythia in miniature" in html and choice.reason in html


def _fake_tables(peaks: dict[str, float]) -> tuple[pd.DataFrame, pd.DataFrame]:
    steps = [0, 1, 2, 4, 10, 20]
    rows = []
    for mapping, peak in peaks.items():
        for step in steps:
            value = peak if step == 2 else peak / 2
            rows += [(step, mapping, layer, LAYER_LEVEL, value) for layer in range(2)]
            if mapping == "attention":
                rows += [(step, mapping, layer, head, value) for layer in range(2) for head in range(3)]
    table = pd.DataFrame(rows, columns=["step", "mapping", "layer", "head", "similarity"])
    ctl = pd.DataFrame(
        [(c, m, layer, LAYER_LEVEL, 0.2) for c in ("random_init", "shuffled_tokens") for m in MAPPINGS for layer in range(2)],
        columns=["control", "mapping", "layer", "head", "similarity"],
    )
    return table, ctl


def test_reading_states_what_the_numbers_show():
    from mechbook.pythia.analysis import layer_mean, summarise

    table, ctl = _fake_tables({"embedding": 0.5, "no_mlp": 0.3, "attention": 0.1})
    text = reading(summarise(layer_mean(table)), control_table(ctl))
    lines = text.splitlines()
    assert len(lines) == 3
    assert "peaks at step 2 with 0.500, above both controls (by 0.300" in lines[0]
    assert "drifts down by 0.250 to 0.250" in lines[0]
    assert "**not** above" in lines[2]


def test_charts_build_valid_specs():
    table, ctl = _fake_tables({"embedding": 0.5, "no_mlp": 0.3, "attention": 0.1})
    from mechbook.pythia.analysis import layer_mean

    for chart in (layer_heatmaps(table, "t"), head_heatmap(table, "t"), curves_with_controls(layer_mean(table), control_table(ctl), "t")):
        spec = chart.to_dict()
        assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
    assert np.isclose(control_table(ctl)["similarity"], 0.2).all()


def test_unknown_profile_is_explained():
    import mechbook

    with pytest.raises(ValueError, match="choose one of"):
        mechbook.resolve_profile(CONFIGS, "gpu")


def test_a_failing_pythia_download_falls_back_or_raises(monkeypatch, tmp_path):
    from mechbook.pythia import hub

    def no_text(*args, **kwargs):
        raise OSError("simulated download failure")

    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    if not os.environ.get("MECHBOOK_TINYSTORIES"):
        monkeypatch.setenv("MECHBOOK_TINYSTORIES", str(SAMPLE))
    monkeypatch.setattr(hub, "hub_available", lambda deadline: True)
    monkeypatch.setattr(hub, "openwebtext_texts", no_text)
    monkeypatch.setattr(hub, "pythia_tokenizer", lambda size, deduped: None)
    choice = build_source(Chapter6Config(source="auto", top_k=8, n_stories=300, miniature=TINY))
    assert choice.kind == "miniature" and "simulated download failure" in choice.reason
    with pytest.raises(OSError, match="simulated"):
        build_source(Chapter6Config(source="pythia", top_k=8, n_stories=300, miniature=TINY))


def test_hf_sequences_keeps_the_first_tokens_of_long_texts():
    from mechbook.pythia.hub import hf_sequences

    class Words:
        def __call__(self, text, add_special_tokens):
            return {"input_ids": [len(w) for w in text.split()]}

    got = hf_sequences(["a bb ccc dddd", "a b", "aaaaa bb c"], Words(), 2)
    assert got.tolist() == [[1, 2, 3], [5, 2, 1]] and got.dtype == np.int64
    with pytest.raises(ValueError, match="shorter context"):
        hf_sequences(["a b"], Words(), 5)
