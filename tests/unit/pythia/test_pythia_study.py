"""The study's configs, sources and control readings (mechbook.pythia.study)."""

from __future__ import annotations

import os

import pytest
from test_ch06_pythia import PEAKS, SAMPLE, TINY, _fake

from mechbook.pythia.analysis import layer_mean, summarise
from mechbook.pythia.study import PythiaConfig, StudyConfig, build_source, control_reading


def test_bad_configs_say_what_to_do():
    with pytest.raises(ValueError, match="no checkpoints at steps \\[3\\]"):
        PythiaConfig(steps=(0, 3))
    with pytest.raises(ValueError, match="one of '14m'"):
        PythiaConfig(size="70b")
    with pytest.raises(ValueError, match="texts must be distinct names among openwebtext"):
        PythiaConfig(texts=("openwebtext", "pile"))
    with pytest.raises(ValueError, match="texts must be distinct"):
        PythiaConfig(texts=())
    with pytest.raises(ValueError, match="top_k must be at least 2"):
        StudyConfig(source="miniature", top_k=1, n_stories=10, miniature=TINY)


def test_verdict_picks_the_strongest_negative_control():
    table, ctl = _fake(PEAKS, {"random_init": 0.2, "shuffled_tokens": 0.35, "offset": 0.05, "linear": 0.99})
    s = summarise(layer_mean(table))
    r = control_reading(s["cka", "embedding"], layer_mean(ctl), "cka", "embedding")
    assert r.strongest == "shuffled_tokens" and r.margin == pytest.approx(0.15) and r.controls["linear"] > r.baseline


def test_a_failing_pythia_download_falls_back_or_raises(monkeypatch, tmp_path):
    from mechbook.pythia import hub

    def no_text(*args, **kwargs):
        raise OSError("simulated download failure")

    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    if not os.environ.get("MECHBOOK_TINYSTORIES"):
        monkeypatch.setenv("MECHBOOK_TINYSTORIES", str(SAMPLE))
    monkeypatch.setattr(hub, "hub_available", lambda deadline: True)
    monkeypatch.setattr(hub, "web_texts", no_text)
    monkeypatch.setattr(hub, "pythia_tokenizer", lambda size, deduped: None)
    choice = build_source(StudyConfig(source="auto", top_k=8, n_stories=300, miniature=TINY))
    assert choice.kind == "miniature" and "simulated download failure" in choice.reason
    with pytest.raises(OSError, match="simulated"):
        build_source(StudyConfig(source="pythia", top_k=8, n_stories=300, miniature=TINY))
