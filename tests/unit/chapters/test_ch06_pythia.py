"""Chapter 6's module (mechbook.chapters.ch06_pythia): profiles and knobs, offline source choice,
banner, the computed reading in each of its branches, the resid_pre note, the claims the page reads,
charts that fit the column, and smoke bounds that reject an untrained run (the library's tests:
pythia/test_pythia_*.py)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook import claims
from mechbook.chapters import ch06_pythia as ch06
from mechbook.chapters.ch06_pythia import (
    CONFIGS,
    WIDTH,
    banner_prose,
    controls_chart,
    corpus_prose,
    curves_frame,
    defect_prose,
    head_heatmap,
    layer_heatmaps,
    loss_chart,
    reading_prose,
    record_all,
    similarity_curves,
)
from mechbook.pythia.analysis import LAYER_LEVEL, MAPPINGS, layer_mean, summarise
from mechbook.pythia.checkpoints import pythia_steps, repo_id
from mechbook.pythia.claims import CH06, CH06_CLAIMS, TABLES, claim_id
from mechbook.pythia.miniature import MiniatureConfig
from mechbook.pythia.readings import read_pythia
from mechbook.pythia.similarity import MEASURES
from mechbook.pythia.study import StudyConfig, StudyResult, best_head, build_source

SAMPLE = ROOT.parent / "shared" / "data" / "tinystories" / "tinystories-sample.txt"
TINY = MiniatureConfig(
    bpe_vocab=300, context=16, d_model=32, n_layers=2, n_heads=4, d_mlp=64, steps=8, batch_size=8, n_linear=2
)
STEPS = [0, 1, 2, 4, 10, 20]
CONTROLS = ("random_init", "shuffled_tokens", "offset", "linear")


def test_profiles_are_consistent():
    assert set(CONFIGS) == {"smoke", "cpu", "paper"}
    smoke, cpu, paper = (CONFIGS[p].study for p in ("smoke", "cpu", "paper"))
    assert smoke.source == "miniature" and len(smoke.miniature.schedule) == 12
    assert len(cpu.miniature.schedule) >= 20 and len(cpu.pythia.steps) >= 20
    assert set(cpu.pythia.steps) <= set(pythia_steps())
    # the paper's setting: Pythia-1.4B at steps 1-512 (and 0), the first 100k texts of OpenWebText, then FineWeb
    assert paper.source == "pythia" and paper.pythia.size == "1.4b" and not paper.pythia.deduped
    assert paper.pythia.steps == (0, *(2**i for i in range(10))) and paper.pythia.n_texts == 100_000
    assert paper.pythia.texts == ("openwebtext", "fineweb") and cpu.pythia.texts == ("openwebtext-10k",)
    # the paper's Pythia-1.4B names no deduplicated variant: both real-model paths read the Pile-trained suite
    assert repo_id(paper.pythia.size, paper.pythia.deduped) == "EleutherAI/pythia-1.4b"
    assert repo_id(cpu.pythia.size, cpu.pythia.deduped) == "EleutherAI/pythia-70m"


def test_knobs_reach_nested_configs_and_the_seed_reaches_the_miniature():
    import mechbook

    cfg = mechbook.resolve_profile(CONFIGS, "cpu", study__pythia__n_texts=50, study__miniature__steps=600).study
    assert cfg.pythia.n_texts == 50 and cfg.miniature.steps == 600
    study = ch06.resolve("cpu", seed=7, source="miniature", top_k=9).study
    assert study.miniature_run.seed == 7 and (study.source, study.top_k) == ("miniature", 9)


def test_offline_auto_builds_the_miniature_and_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("MECHBOOK_OFFLINE", "1")
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    if not os.environ.get("MECHBOOK_TINYSTORIES"):
        monkeypatch.setenv("MECHBOOK_TINYSTORIES", str(SAMPLE))
    choice = build_source(StudyConfig(source="auto", top_k=8, n_stories=300, miniature=TINY, seed=3))
    assert choice.kind == "miniature" and "did not answer" in choice.reason
    assert choice.source.steps == TINY.schedule and choice.source.run.config.seed == 3
    html = banner_prose(SimpleNamespace(choice=choice))
    assert 'class="admonition warning"' in html and "Pythia in miniature" in html and choice.reason in html


def _fake(
    peak: dict[str, float], controls: dict[str, float], *, peak_at: int = 2, late: float = 0.5
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A similarity table whose layer means peak at ``peak_at`` with ``peak[mapping]`` and sit at
    ``late`` times that elsewhere; every control at ``controls[control]`` for every mapping."""
    rows = []
    for measure in MEASURES:
        for mapping in MAPPINGS:
            for step in STEPS:
                value = peak[mapping] if step == peak_at else late * peak[mapping]
                rows += [(step, measure, mapping, layer, LAYER_LEVEL, value) for layer in range(2)]
                if mapping.startswith("attention"):
                    rows += [
                        (step, measure, mapping, layer, head, value * (1 + head / 10))
                        for layer in range(2)
                        for head in range(3)
                    ]
    table = pd.DataFrame(rows, columns=["step", "measure", "mapping", "layer", "head", "similarity"])
    return table, _controls(controls)


def _controls(controls: dict[str, float]) -> pd.DataFrame:
    """Every control at ``controls[control]`` for every measure, mapping and both layers."""
    return pd.DataFrame(
        [
            (c, m, p, layer, LAYER_LEVEL, controls[c])
            for c in CONTROLS
            for m in MEASURES
            for p in MAPPINGS
            for layer in range(2)
        ],
        columns=["control", "measure", "mapping", "layer", "head", "similarity"],
    )


def _readings(result: StudyResult) -> tuple:
    """The notebook's cell: the study's readings and the evidence computed once from them."""
    readings = read_pythia(result)
    return readings, claims.evidence(CH06_CLAIMS, readings)


def _read(table: pd.DataFrame, ctl: pd.DataFrame) -> str:
    return reading_prose(*_readings(_result(table, ctl, [3.0, 2.0])))


PEAKS = {"embedding": 0.5, "no_mlp": 0.3, "attention": 0.1, "attention_resid_pre": 0.12}


def test_reading_a_feature_that_beats_the_controls_and_fades():
    table, ctl = _fake(PEAKS, {"random_init": 0.2, "shuffled_tokens": 0.15, "offset": 0.05, "linear": 0.9})
    text = _read(table, ctl)
    assert (
        text.count("above every negative control (by 0.300 over the random initialisation)") == 2
    )  # embedding, both measures
    assert "drifts down by 0.250 to 0.250" in text and "an early peak that fades" in text
    assert (
        "**not** above the random initialisation (0.200), although this measure does rate an exactly linear" in text
    )  # attention
    assert (
        text.count(
            "This measure supports: the token geometry carries (BΦ)ᵀ (embedding and no-MLP); the features are clearest early and fade."
        )
        == 2
    )
    assert "shared offset already scores" not in text


def test_reading_a_peak_at_the_end_is_not_an_early_peak():
    table, ctl = _fake(
        PEAKS, {"random_init": 0.02, "shuffled_tokens": 0.01, "offset": 0.0, "linear": 0.9}, peak_at=STEPS[-1]
    )
    text = _read(table, ctl)
    assert (
        "ends at 0.500 (step 20), so there is no early peak that fades" in text
        and "clearest early and fade." not in text
    )
    assert "the attention scores the model computes carry Q" in text


def test_reading_a_tiny_drift_is_not_fading():
    """A peak at the first checkpoint that loses under a tenth of its margin does not fade."""
    table, ctl = _fake(PEAKS, {"random_init": 0.0, "shuffled_tokens": 0.0, "offset": 0.0, "linear": 0.9}, late=0.95)
    text = _read(table, ctl)
    assert "clearest early and fade." not in text and "early-then-fading" not in text
    table, ctl = _fake(PEAKS, {"random_init": 0.0, "shuffled_tokens": 0.0, "offset": 0.0, "linear": 0.9}, late=0.85)
    assert "drifts down by 0.075 to 0.425" in _read(table, ctl)


def test_reading_a_measure_that_cannot_see_the_feature_and_is_fooled_by_an_offset():
    table, ctl = _fake(PEAKS, {"random_init": 0.2, "shuffled_tokens": 0.15, "offset": 0.9, "linear": 0.1})
    text = _read(table, ctl)
    assert (
        "**not** above the random + shared offset (0.900); but this measure rates even an exactly linear representation no higher (0.100), so here it cannot tell either way"
        in text
    )
    assert text.count("This measure supports none of the paper's claims on this run.") == 2
    # the offset caveat is the claim about the paper's measure: said once, under that measure
    assert text.count("A random representation with one shared offset already scores 0.900") == 1


def test_defect_prose_names_the_papers_variant_and_the_corrected_one():
    table, _ = _fake(PEAKS, dict.fromkeys(CONTROLS, 0.0))
    note = defect_prose(summarise(layer_mean(table)))
    assert "the paper's variant peaks at 0.120 and the corrected one at 0.100, 0.020 lower than the paper's" in note
    assert note.count("0.020 lower than the paper's") == 2 and "LayerNorm output" in note


@settings(max_examples=200, deadline=None)
@given(st.floats(-1, 1, allow_nan=False), st.floats(-1, 1, allow_nan=False))
def test_defect_prose_never_contradicts_its_numbers(paper, model):
    """The chapter-6 sign bug made impossible: the word after the corrected variant's peak says how
    it stands against the paper's, as both print."""
    summary = {
        (m, mapping): {"peak": value}
        for m in MEASURES
        for mapping, value in (("attention_resid_pre", paper), ("attention", model))
    }
    note = defect_prose(summary)
    p, c = float(f"{paper:.3f}"), float(f"{model:.3f}")
    gap = f"{abs(round(c - p, 3)):.3f}"
    if p == c:  # as printed; -0.000 and 0.000 are the same number
        assert "the same as the paper's" in note
    else:
        assert f"{gap} {'higher' if c > p else 'lower'} than the paper's" in note


def _width(spec: dict) -> int:
    """The widest row of a spec: panel width times columns for a facet chart."""
    inner = spec.get("spec", spec)
    width = inner.get("width", 0)
    if width == "container":
        return 0
    columns = spec.get("columns", 2 if "column" in spec.get("facet", {}) else 1)
    return int(width) * columns


def test_charts_build_and_fit_the_column():
    table, ctl = _fake(PEAKS, {"random_init": 0.2, "shuffled_tokens": 0.15, "offset": 0.05, "linear": 0.9})
    curve, means = layer_mean(table), layer_mean(ctl)
    summary = summarise(curve)
    charts = [
        layer_heatmaps(table, "t"),
        head_heatmap(table, "t"),
        similarity_curves(curve, means, "t"),
        controls_chart(summary, means, "t"),
        loss_chart([3.0, 2.0, 1.5, 1.2], [0, 1, 2, 4], "t"),
    ]
    for chart in charts:
        spec = chart.to_dict()
        assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
        assert _width(spec) <= WIDTH
    assert (best_head(table)[["layer", "head", "step"]] == [0, 2, 2]).all()
    params = {p["name"]: p.get("value") for p in head_heatmap(table, "t", layer=0).to_dict()["params"]}
    assert params["layer_pick"] == 0
    with pytest.raises(ValueError, match="not among the table's layers"):
        head_heatmap(table, "t", layer=5)


def test_curves_frame_draws_each_model_control_as_a_flat_line():
    table, ctl = _fake(PEAKS, {"random_init": 0.2, "shuffled_tokens": 0.15, "offset": 0.05, "linear": 0.9})
    frame = curves_frame(layer_mean(table), layer_mean(ctl))
    flat = frame[frame["line"] == "random initialisation"]
    assert len(flat) == len(STEPS) * len(MEASURES) * len(MAPPINGS) and np.allclose(flat["similarity"], 0.2)
    assert set(frame["line"]) == {"checkpoints", "random initialisation", "shuffled-token feature"}


def _records(result: StudyResult, monkeypatch) -> dict:
    import mechbook

    got: dict = {}
    monkeypatch.setattr(mechbook, "record", lambda name, value: got.__setitem__(name, value))
    record_all(*_readings(result))
    return got


def _result(table: pd.DataFrame, ctl: pd.DataFrame, losses: list[float], kind: str = "miniature") -> StudyResult:
    run = SimpleNamespace(losses=losses, config=SimpleNamespace(steps=20, n_linear=2))  # evenly spaced from step 10
    source = SimpleNamespace(steps=sorted(table["step"].unique()), run=run, label="fake")
    choice = SimpleNamespace(kind=kind, source=source, reason="the profile asks for the miniature")
    curve = layer_mean(table)
    return StudyResult(
        choice, SimpleNamespace(other_fraction=0.22), table, ctl, curve, summarise(curve), layer_mean(ctl)
    )


def test_smoke_bounds_reject_an_untrained_run(monkeypatch):
    """Every checkpoint equal to the random initialisation, at the loss of uniform guessing: the
    rises, the peak and the loss fall outside the smoke bounds."""
    from mechbook.book.checks import check_thresholds, load_thresholds

    bounds = load_thresholds("06_pythia")["smoke"]
    steps = list(range(12))
    controls = {"random_init": 0.14, "shuffled_tokens": 0.12, "offset": 0.18, "linear": 0.45}
    table, ctl = _fake(dict.fromkeys(MAPPINGS, 0.14), controls, late=1.0)
    table = pd.concat([table[table["step"] == 0].assign(step=s) for s in steps], ignore_index=True)
    problems = check_thresholds(_records(_result(table, ctl, [5.95] * 20), monkeypatch), bounds)
    failed = {p.split(" ")[0].rstrip(":") for p in problems}
    assert {
        "cka_embedding_rise",
        "cka_no_mlp_rise",
        "paper_embedding_rise",
        "miniature_final_loss",
        "cka_embedding_peak",
    } <= failed


def test_unknown_profile_is_explained():
    import mechbook

    with pytest.raises(ValueError, match="choose one of"):
        mechbook.resolve_profile(CONFIGS, "gpu")


def test_corpus_note_keeps_special_tokens_visible():
    vocab = {0: "<|endoftext|>", 1: " the", 2: "*"}
    src = SimpleNamespace(tokens=np.zeros((7, 9), dtype=np.int64), decode=vocab.__getitem__)
    feats = SimpleNamespace(token_ids=np.array([0, 1, 2]), k=3, other_fraction=0.25)
    note = corpus_prose(SimpleNamespace(choice=SimpleNamespace(source=src), features=feats))
    assert "7 sequences of 8 + 1 tokens; the top 3 tokens cover 75.0% of them, and the other 25.0% are dropped" in note
    assert "\\<\\|endoftext\\|\\>" in note and "\\*" in note and "<|" not in note


def test_claims_of_the_source_not_read_are_untested_and_say_why():
    table, ctl = _fake(PEAKS, {"random_init": 0.2, "shuffled_tokens": 0.15, "offset": 0.05, "linear": 0.9})
    evs = claims.evidence(CH06_CLAIMS, read_pythia(_result(table, ctl, [3.0, 2.0])))
    assert set(evs) == {c.id for c in CH06_CLAIMS}
    pythia = [e for i, e in evs.items() if i.startswith("ch06.pythia_")]
    assert pythia and all(e.verdict == "untested" and "needs the network" in e.sentence() for e in pythia)
    assert evs["ch06.miniature_embedding_cka"].verdict == "reproduced"
    assert evs["ch06.miniature_attention_cka"].verdict == "not reproduced"
    # no-MLP peaks 0.1 above its controls and drops 0.15: the largest share of the four mappings
    assert evs["ch06.miniature_fades_cka"].values == [pytest.approx(0.15 / 0.1)]
    assert list(evs) == [c.id for c in CH06_CLAIMS] and TABLES[ch06.STEM] is CH06_CLAIMS
    assert {c.chapter for c in CH06_CLAIMS} == {CH06} and evs[claim_id("miniature", "fades", "cka")].untested is None
    assert "this page read real Pythia, not the miniature" not in evs["ch06.pythia_fades_cka"].untested
    real = claims.evidence(CH06_CLAIMS, read_pythia(_result(table, ctl, [3.0, 2.0], kind="pythia")))
    assert real["ch06.pythia_embedding_paper"].verdict == "reproduced"
    assert real["ch06.miniature_embedding_paper"].verdict == "untested"
    assert real["ch06.miniature_fades_cka"].untested == "this page read real Pythia, not the miniature"


def test_chart_titles_state_the_findings():
    table, ctl = _fake(PEAKS, {"random_init": 0.2, "shuffled_tokens": 0.15, "offset": 0.05, "linear": 0.9})
    result = _result(table, ctl, [3.0, 2.0])
    assert (
        ch06.controls_title(*_readings(result))
        == "Mappings above every negative control: paper measure 2 of 4, CKA 2 of 4"
    )
    assert "0.50 (embedding (resid_post), step 2)" in ch06.layers_title(result)
    assert ch06.curves_title(result) == "Under CKA the embedding peaks at 0.50 (step 2), then falls to 0.25"
    assert "The 10 readings of the source this page did not read are untested here (needs the network" in (
        ch06.reading_prose(*_readings(result))
    )
    assert ch06.source_chart(result).to_dict()["title"] == (
        "The miniature's loss falls from 3.00 to 2.00 nats/token; dots are its 6 checkpoints"
    )


def _drifting(first_drop: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two layers over STEPS (window 1, 2, 4 when the spacing is 10): the embedding of layer 0
    peaks at 0.6 at step 2 and ends the window ``first_drop`` lower, layer 1 rises to 0.5 and
    stays; the no-MLP output equals the embedding but at layer 0 (0.2 lower); the attention scores
    sit at 0.1 (below the controls) at layer 0 and 0.4 at layer 1; the heads of layer 1 gain more."""
    emb = {0: [0.1, 0.3, 0.6, 0.6 - first_drop, 0.2, 0.2], 1: [0.1, 0.2, 0.4, 0.5, 0.5, 0.5]}
    rows = []
    for measure in MEASURES:
        for layer, values in emb.items():
            for step, v in zip(STEPS, values):
                rows += [
                    (step, measure, "embedding", layer, LAYER_LEVEL, v),
                    (step, measure, "no_mlp", layer, LAYER_LEVEL, v - (0.2 if layer == 0 else 0.0)),
                ]
                for mapping in ("attention", "attention_resid_pre"):
                    a = 0.1 if layer == 0 else 0.4 * (step > 0)
                    rows.append((step, measure, mapping, layer, LAYER_LEVEL, a))
                    rows += [(step, measure, mapping, layer, h, a * (1 + h / 10)) for h in range(3)]
    table = pd.DataFrame(rows, columns=["step", "measure", "mapping", "layer", "head", "similarity"])
    return table, _controls({"random_init": 0.15, "shuffled_tokens": 0.1, "offset": 0.2, "linear": 0.9})


def test_the_papers_findings_are_read_over_its_window_not_at_the_last_checkpoint():
    from mechbook.pythia.claims import FINDING_CLAIMS, finding_id

    table, ctl = _drifting(0.3)
    result = _result(table, ctl, [3.0, 2.0])
    evs = claims.evidence(CH06_CLAIMS, read_pythia(result))
    verdict = {cid: evs[cid].verdict for cid in (c.id for c in FINDING_CLAIMS)}
    for measure in MEASURES:
        assert verdict[finding_id("embedding_all_layers", measure)] == "reproduced"  # 0.6 and 0.5 beat 0.2
        assert verdict[finding_id("attention_but_first", measure)] == "reproduced"  # 0.1 below 0.2, 0.4 above
        assert evs[finding_id("earlier_drift_first", measure)].values == [pytest.approx(0.3)]
        assert evs[finding_id("features_kept", measure)].values == [pytest.approx(0.1 / 0.4)]  # layer 0: 0.3 - 0.2
        assert verdict[finding_id("features_kept", measure)] == "not reproduced"
        assert verdict[finding_id("no_mlp_but_first", measure)] == "reproduced"
        assert verdict[finding_id("earlier_heads_slower", measure)] == "reproduced"
        for untested in ("middle_heads_fastest", "fineweb_similar"):
            assert verdict[finding_id(untested, measure)] == "untested"
        assert (
            "has 2 layers, so it has no such middle layer" in evs[finding_id("middle_heads_fastest", measure)].untested
        )
        assert "the network" in evs[finding_id("fineweb_similar", measure)].untested
    # the book's fade reading reads the last checkpoint (step 20), the paper's findings only steps 1-4
    late = table.assign(similarity=np.where(table["step"] > 4, 0.0, table["similarity"]))
    again = claims.evidence(CH06_CLAIMS, read_pythia(_result(late, ctl, [3.0, 2.0])))
    assert all(again[c.id].values == evs[c.id].values for c in FINDING_CLAIMS)
    # a small drift keeps the features: 0.05 of a 0.4 margin lost
    kept = claims.evidence(CH06_CLAIMS, read_pythia(_result(_drifting(0.05)[0], ctl, [3.0, 2.0])))
    assert kept[finding_id("features_kept", "cka")].verdict == "reproduced"
    prose = ch06.window_prose(*_readings(result))
    assert "steps 1, 2, 4 of its 20 (20% of its training" in prose and "reads 6 of the paper's 8 findings" in prose
    assert "It cannot read 2: layer 13's heads" in prose
    assert ch06.findings_prose(_readings(result)[1]).count("\n- ") == len(FINDING_CLAIMS) - 1
