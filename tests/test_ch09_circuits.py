"""Chapter 9's module: shared run, knobs, the Fourier-neuron extraction through the hook (against
a per-sequence reading), the FVE filter on known maps, tables and records."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import ROOT

from mechbook.assign_add import fourier, release
from mechbook.assign_add.model import AssignAddModel
from mechbook.assign_add.task import Task, TaskConfig
from mechbook.book.checks import check_spread, check_thresholds, load_spread, load_thresholds
from mechbook.chapters import ch08_training_dynamics as ch08
from mechbook.chapters import ch09_circuits as ch09

TC = TaskConfig()


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return AssignAddModel(ch08.CONFIGS["smoke"].train.model).eval()


def test_chapter_9_opens_chapter_8s_run():
    for profile, cfg in ch09.CONFIGS.items():
        assert cfg.runs is ch08.CONFIGS[profile].runs


def test_knobs_reach_the_nested_configs():
    cfg = ch09.resolve("smoke", seed=5, probe_steps=17, n_patch=9)
    assert (cfg.runs.pick, cfg.probe.steps, cfg.n_patch) == (5, 17, 9)
    assert cfg.runs.train is ch08.CONFIGS["smoke"].train
    with pytest.raises(ValueError, match="n_patch"):
        ch09.resolve("smoke", n_patch=0)


def _cos_map(k: int, alpha: float, beta: float, n_mod: int = 59) -> np.ndarray:
    n = np.arange(n_mod)
    return np.cos(2 * math.pi * k * n / n_mod + alpha)[:, None] + np.cos(2 * math.pi * k * n / n_mod + beta)[None, :]


def test_fourier_filter_on_known_maps():
    rng = np.random.default_rng(0)
    maps = np.stack(
        [
            _cos_map(11, 0.3, 1.0),
            _cos_map(11, -2.0, 0.5),
            _cos_map(5, 0.0, 0.0),
            _cos_map(7, 0.1, 0.2) + 0.9 * rng.standard_normal((59, 59)),  # noisy: below 0.9
            np.zeros((59, 59)),  # dead
        ]
    )
    found = ch09.fourier_neurons(maps)
    assert list(found.live["neuron"]) == [0, 1, 2, 3]
    assert list(found.good["neuron"]) == [0, 1, 2]
    assert found.good["fve"].min() > 0.999
    assert list(found.frequencies["k"]) == [11, 5] and list(found.frequencies["neurons"]) == [2, 1]
    text = ch09.fourier_prose(found)
    assert "4 of 5 neurons are active" in text and "**3** of them" in text and "frequencies: 11, 5." in text


def test_neuron_maps_fit_a_pure_neuron_exactly():
    maps = np.stack([_cos_map(11, 0.3, 1.0), _cos_map(4, 0.0, 2.0)])
    found = ch09.fourier_neurons(maps)
    frame = ch09.neuron_maps(maps, found.table, 1)
    assert (frame.k == 4).all() and len(frame) == 59 * 59
    np.testing.assert_allclose(frame.fit, frame.activation, atol=2e-3)


def test_pattern_chart_boxes_the_roles(model):
    from mechbook.assign_add.circuits import pattern_frame
    from mechbook.assign_add.task import Task

    task = Task()
    frame = pattern_frame(model, task.eval_pools(1, seed=0)["2var_train"][0][0], task)
    spec = ch09.pattern_chart(frame, "title").to_dict()
    assert spec["facet"]["field"] == "layer" and spec["spec"]["layer"][1]["encoding"]["stroke"]["field"] == "role"


def test_cosine_histogram_counts_every_pair():
    comp = pd.DataFrame({"matched": np.linspace(0.5, 0.99, 101), "mismatched": np.linspace(-0.99, 0.99, 101)})
    hist = ch09.cosine_histogram(comp)
    assert hist.groupby("comparison").pairs.sum().to_dict() == {"matched": 101, "mismatched": 101}
    assert hist[(hist.comparison == "matched") & (hist.cosine < 0.5)].pairs.sum() == 0


def test_positional_frame_keeps_the_causal_part():
    scores = np.arange(16.0).reshape(4, 4)
    frame = ch09.positional_frame(scores)
    assert len(frame) == 10 and (frame["key"] <= frame["query"]).all()
    assert frame.set_index(["query", "key"]).loc[(3, 1), "score"] == 13.0


def test_probe_accuracy_and_pivot():
    probes = pd.DataFrame(
        [
            {"target": t, "site": "s", "where": w, "accuracy": i / 10, "chance": 0.1, "n": 5}
            for i, (t, w) in enumerate(
                [(t, w) for t in ("answer", "variable identity") for w in ("embedding", "after layer 1")]
            )
        ]
    )
    assert ch09.probe_accuracy(probes, "variable identity", "after layer 1") == pytest.approx(0.3)
    with pytest.raises(KeyError, match="no probe"):
        ch09.probe_accuracy(probes, "operand's value", "after layer 1")
    assert list(ch09.probe_pivot(probes).columns) == ["embedding", "after layer 1"]


def _circle_model(k: int | None) -> AssignAddModel:
    """A model whose 59 number embeddings lie on the circle (cos, sin)(2 pi k n / 59) (k None: random)."""
    torch.manual_seed(1)
    m = AssignAddModel(ch08.CONFIGS["smoke"].train.model).eval()
    if k is not None:
        angle = 2 * math.pi * k * torch.arange(59, dtype=torch.float64) / 59
        with torch.no_grad():
            m.embed.W_E[:59] = 0.0
            m.embed.W_E[:59, 0], m.embed.W_E[:59, 1] = torch.cos(angle), torch.sin(angle)
    return m


CIRCLE_PCA = fourier.embedding_pca(_circle_model(3), 59)


def _readings(scale: float = 1.0) -> dict[str, object]:
    maps = np.stack([_cos_map(11, 0.3, 1.0), _cos_map(5, 0.0, 0.0)])
    probes = pd.DataFrame(
        [
            {"target": t, "site": "s", "where": w, "accuracy": 0.5 * scale, "chance": 0.1, "n": 5}
            for t in ("variable identity", "operand's value", "answer")
            for w in ("after layer 1", "after layer 2")
        ]
    )
    return dict(
        roles={"value_to_variable": 0.7 * scale, "eq_to_needed": 0.6},
        prev_share=1.0,
        diag={"ratio": 5.0 * scale, "rows_diag_max": 1.0},
        comp=pd.DataFrame({"matched": [0.9, 1.0], "mismatched": [0.1, 0.2]}),
        ov2=pd.DataFrame({"matched": [0.8], "shuffled": [0.3]}),
        adder=0.99,
        adder_residual=0.95,
        fourier=ch09.fourier_neurons(maps),
        ablation={"full": 0.1, "restricted": 0.05 * scale, "excluded": 5.0, "n_frequencies": 2},
        pca=CIRCLE_PCA,
        probes=probes,
        effect={"patched_to_source": 0.9, "patched_as_source_run": 0.8, "control_unchanged": 1.0},
    )


def test_record_all_covers_the_thresholds(monkeypatch):
    seen = {}
    monkeypatch.setattr(ch09.mechbook, "record", lambda name, value: seen.setdefault(name, value))
    values = ch09.record_all(_readings())
    released = ch09.record_all(_readings(), prefix="release_")
    assert {k: v for k, v in seen.items() if not k.startswith("release_")} == values
    assert values["matched_cosine"] == pytest.approx(0.95) and released["release_matched_cosine"] == pytest.approx(0.95)
    assert values["neurons_fve_ge_0.9"] == 2 and values["top_frequencies"] == [5, 11]
    assert values["adder_with_residual_accuracy"] == 0.95
    bounds = yaml.safe_load((ROOT / "book" / "thresholds" / "09_circuits.yml").read_text())
    for profile in ("smoke", "cpu"):
        assert set(bounds[profile]) <= set(values) | set(released)


def test_comparison_table_puts_each_run_in_its_column():
    table = ch09.comparison_table(_readings(), _readings(scale=2.0)).set_index("reading")
    row = table.loc[ch09.COMPARED["qk2_block_ratio"]]
    assert (row["paper's run, as released"], row["this rebuild"]) == ("10.000", "5.000")
    assert table.loc[ch09.COMPARED["top_frequencies"], "this rebuild"] == "5, 11"
    assert table.loc[ch09.COMPARED["neurons_fve_ge_0.9"], "this rebuild"] == "2"


def test_short_prose():
    assert ch09.positional_prose(0.5, 12).startswith("In 50% of the context query positions 1-11")
    assert (
        ch09.adder_prose(0.999, 0.95, 59)
        == "The adder alone answers **99.9%** of the 3,481 pairs correctly (95.0% with the residual kept)."
    )


def test_output_norms_chart_reads_the_models_weights(model):
    from mechbook.assign_add import fourier

    spec = ch09.output_norms_chart(model).to_dict()
    values = next(iter(spec["datasets"].values()))
    expected = fourier.output_fourier_norms(
        model.blocks[1].mlp.W_out.detach().numpy(), model.unembed.W_U.detach().numpy()
    )
    assert [round(v["norm"], 6) for v in values] == [round(v, 6) for v in expected["norm"]]


def test_block_chart_is_a_signed_heatmap_of_the_block():
    block = np.array([[2.0, -1.0], [0.5, 3.0]])
    spec = ch09.block_chart(block, ("a", "b")).to_dict()
    assert spec["encoding"]["color"]["scale"]["domain"] == [-3.0, 3.0]


SMOKE_BOUNDS = load_thresholds("09_circuits")["smoke"]
needs_release = pytest.mark.skipif(
    not release.available_steps(), reason=f"no local copy of the authors' release (set {release.ENV_VAR})"
)


def smoke_headline(model: torch.nn.Module, prefix: str = "") -> dict[str, object]:
    """The smoke records the notebook takes of ``model`` (:func:`ch09.readings` on its pools)."""
    cfg = ch09.CONFIGS["smoke"]
    task = Task(cfg.runs.train.task)
    return ch09.record_all(ch09.readings(model, task, cfg, task.eval_pools(cfg.per_pool, seed=ch09.POOL_SEED)), prefix)


def flagged(records: dict[str, object], release_bounds: bool) -> set[str]:
    bounds = {n: b for n, b in SMOKE_BOUNDS.items() if n.startswith("release_") == release_bounds}
    return {p.split()[0] for p in check_thresholds(records, bounds)}


def test_the_measured_seed_spread_passes_the_smoke_bounds():
    assert check_spread(SMOKE_BOUNDS, load_spread("09_circuits")["smoke"]) == []


def test_smoke_bounds_reject_an_untrained_model():
    """At initialisation every residual at '=' looks alike (matched and mismatched cosines both
    ~0.9), OV₂ does not map onto the unembedding, and '=' does not look at the needed numbers."""
    found = flagged(smoke_headline(AssignAddModel(ch08.CONFIGS["smoke"].train.model).eval()), release_bounds=False)
    assert {"mismatched_cosine", "ov2_matched_cosine", "eq_to_needed_attention"} <= found, found


@needs_release
def test_release_bounds_reject_the_wrong_released_checkpoint():
    """The released run's first checkpoint (step 1) read in place of its final model: no bound on
    the circuit it has not yet learned lets it through, except the matched cosine, which an
    untrained model also meets (its residuals at '=' all point alike)."""
    found = flagged(smoke_headline(release.load_release(1), prefix="release_"), release_bounds=True)
    assert found == {n for n in SMOKE_BOUNDS if n.startswith("release_")} - {"release_matched_cosine"}, found


def test_embedding_readings_tell_one_circle_from_none():
    circle = ch09.embedding_top({"pca": CIRCLE_PCA})
    assert circle["top2"] == pytest.approx(1.0) and circle["circle_k"] == 3
    assert circle["circle_score"] == pytest.approx(1.0) and circle["top10_frequencies"] == pytest.approx(1.0)
    scattered = {"pca": fourier.embedding_pca(_circle_model(None), 59)}
    assert ch09.embedding_top(scattered)["top2"] < 0.5
    text = ch09.embedding_prose(scattered, {"pca": CIRCLE_PCA}, 59)
    assert text.startswith(
        "In the released run: the top two principal components of the 59 number embeddings hold 100.0%"
    )
    assert "one circle (the best circular order in the top two components, at k = 3, scores 1.00" in text
    assert "in the rebuild" in text and "not one circle" in text.split(";")[1]
    spec = ch09.embedding_chart(_readings(), {"pca": CIRCLE_PCA}).to_dict()
    assert "(top two principal components: 100% of the variance released" in spec["title"]["text"][1]
    assert spec["title"]["text"][0] == "The number embeddings' variance by frequency of n"
    scattered_spec = ch09.embedding_chart(scattered, scattered).to_dict()
    assert scattered_spec["title"]["text"][0].endswith("not one circle")


def test_fourier_ablation_reports_nothing_to_restrict_without_key_frequencies(model):
    found = ch09.fourier_neurons(np.zeros((3, 59, 59)))
    assert ch09.key_frequencies(found) == []
    ablation = ch09.fourier_ablation(model, Task(TC), found)
    assert ablation["n_frequencies"] == 0 and ablation["restricted"] is None and ablation["full"] > 0
    assert "nothing to restrict to" in ch09.ablation_prose(ablation, "The rebuild", 59)


def test_ablation_prose_and_table():
    good = {"full": 0.014, "restricted": 1.5e-11, "excluded": 10.7, "n_frequencies": 9}
    text = ch09.ablation_prose(good, "The released run", 59)
    assert "9 key frequencies the loss is 1.5e-11 nats against 0.014 in full (as good or better" in text
    assert "10.7 nats, against 4.08 for a uniform guess" in text
    assert "worse" in ch09.ablation_prose({**good, "restricted": 2.0}, "x", 59)
    table = ch09.ablation_table(_readings(), _readings(scale=2.0)).set_index("loss on all N² queries n m = (nats)")
    row = table.loc["key frequencies only (restricted)"]
    assert (row["paper's run, as released"], row["this rebuild"]) == ("0.1", "0.05")
    none = {"pca": CIRCLE_PCA, "ablation": {"full": 4.1, "restricted": None, "excluded": None, "n_frequencies": 0}}
    table = ch09.ablation_table(none, _readings()).set_index("loss on all N² queries n m = (nats)")
    assert table.loc["key frequencies removed (excluded)", "this rebuild"] == "none"
    assert table.loc["key frequencies (count)", "this rebuild"] == "0"
