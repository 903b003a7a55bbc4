"""Chapter 9's module: the shared runs and knobs, the verdict table and summary, prose whose
comparison words never contradict the printed numbers, charts, tables, records and the smoke
bounds (each claim read from the right reading: assign_add/test_aa_claims.py; the frequency
restriction: assign_add/test_aa_readings.py)."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook import claims
from mechbook.assign_add import fourier, release
from mechbook.assign_add.circuit_readings import (
    POOL_SEED,
    output_norms,
    read_circuits,
)
from mechbook.assign_add.claims import CH09_CLAIMS
from mechbook.assign_add.model import AssignAddModel
from mechbook.assign_add.readings import Circuits, Restriction
from mechbook.assign_add.runs import SEED_RUNS
from mechbook.assign_add.task import Task, TaskConfig
from mechbook.book.checks import check_spread, check_thresholds, load_spread, load_thresholds
from mechbook.chapters import ch09_circuits as ch09
from mechbook.claims import Runs, evidence

TC = TaskConfig()
SMOKE_MODEL = SEED_RUNS["smoke"].train.model


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return AssignAddModel(SMOKE_MODEL).eval()


def test_chapter_9_opens_chapter_8s_seed_stack():
    for profile, cfg in ch09.CONFIGS.items():
        assert cfg.runs is SEED_RUNS[profile]


def test_knobs_reach_the_nested_configs():
    cfg = ch09.resolve("smoke", seed=5, probe_steps=17, n_patch=9)
    assert (cfg.runs.pick, cfg.probe.steps, cfg.n_patch) == (5, 17, 9)
    assert cfg.runs.train is SEED_RUNS["smoke"].train
    with pytest.raises(ValueError, match="n_patch"):
        ch09.resolve("smoke", n_patch=0)


def _cos_map(k: int, alpha: float, beta: float, n_mod: int = 59) -> np.ndarray:
    n = np.arange(n_mod)
    return np.cos(2 * math.pi * k * n / n_mod + alpha)[:, None] + np.cos(2 * math.pi * k * n / n_mod + beta)[None, :]


def _circle_model(k: int | None) -> AssignAddModel:
    """A model whose 59 number embeddings lie on the circle (cos, sin)(2 pi k n / 59) (k None: random)."""
    torch.manual_seed(1)
    m = AssignAddModel(SMOKE_MODEL).eval()
    if k is not None:
        angle = 2 * math.pi * k * torch.arange(59, dtype=torch.float64) / 59
        with torch.no_grad():
            m.embed.W_E[:59] = 0.0
            m.embed.W_E[:59, 0], m.embed.W_E[:59, 1] = torch.cos(angle), torch.sin(angle)
    return m


CIRCLE_PCA = fourier.embedding_pca(_circle_model(3), 59)


RESTRICTION = Restriction(
    keys=(5, 11),
    full=0.999,
    full_loss=0.01,
    kept=0.995,
    kept_loss=0.02,
    random=(0.6, 0.3),
    random_sets=((5, 7), (1, 2)),
    nonkey=(0.05,),
)


def readings(scale: float = 1.0, **changes) -> Circuits:
    """A synthetic reading; ``scale`` multiplies a few numbers so two runs differ."""
    maps = np.stack([_cos_map(11, 0.3, 1.0), _cos_map(11, 1.0, 0.0), _cos_map(5, 0.0, 0.0)])
    probes = pd.DataFrame(
        [
            {"target": t, "site": "s", "where": w, "accuracy": a * scale, "chance": 0.1, "n": 5}
            for t, a in (("variable identity", 0.5), ("operand's value", 0.05), ("answer", 0.45))
            for w in ("after layer 1", "after layer 2")
        ]
    )
    split = {"token": 1.0, "positional": 2.0 * scale, "token_to_position": 0.5, "position_to_token": 0.5}
    split["total"] = sum(split.values())
    split["positional_share"] = split["positional"] / split["total"]
    base = dict(
        roles={"value_to_variable": 0.7 * scale, "eq_to_operands": 0.9, "eq_to_needed": 0.6},
        needed_top2=0.8,
        prev_share=0.25,
        qk1_split=split,
        diag={"ratio": 5.0 * scale, "rows_diag_max": 1.0, "margin": 0.3},
        comp=pd.DataFrame({"matched": [0.9, 1.0], "mismatched": [0.1, 0.2]}),
        ov2=pd.DataFrame({"matched": [0.8], "shuffled": [0.5], "other_pair": [0.1]}),
        adder=0.99,
        adder_residual=0.95,
        fourier=fourier.fourier_neurons(maps),
        ablation=fourier.Ablation(0.1, 2, 0.05 * scale, 5.0, (2.0, 3.0), ((5, 7), (1, 11)), (4.0,), (5, 11)),
        pca=CIRCLE_PCA,
        embedding=fourier.embedding_summary(CIRCLE_PCA),
        probes=probes,
        effect={
            "clean_accuracy": 1.0,
            "patched_to_source": 0.9,
            "patched_as_source_run": 0.8,
            "control_unchanged": 1.0,
        },
        answer_accuracy=0.5,
        output_norms=pd.DataFrame({"k": [0, 5, 11], "norm": [0.1, 2.0, 1.0]}),
        restriction=dataclasses.replace(RESTRICTION, kept=min(1.0, 0.995 * scale)),
        positional_chance=0.2,
    )
    return Circuits(**{**base, **changes})


# ------------------------------------------------------------------------------ the claims


def test_the_ablation_prose_draws_the_random_sets_conclusion():
    def prose(kept: float, random_best: float) -> str:
        r = dataclasses.replace(RESTRICTION, kept=kept, random=(random_best, 0.1))
        return ch09.ablation_prose(readings(restriction=r), "The released model", 59)

    assert "Only the key frequencies keep the model at 99%" in prose(0.997, 0.614)
    assert "A random set also keeps the model at 99%" in prose(0.997, 0.995)
    assert "Even the key frequencies alone leave the model below 99%" in prose(0.9, 0.5)
    assert "answers 61.4% at best over 2 sets (that set holds 1 of the key frequencies)" in prose(0.997, 0.614)


def test_summary_and_verdict_table_follow_the_evidence():
    ev = evidence(CH09_CLAIMS, Runs({0: readings()}, readings()))
    table = ch09.verdict_table(ev).set_index("claim")
    for claim in CH09_CLAIMS:
        assert table.loc[claim.statement, "verdict"] == ev[claim.id].verdict
    text = ch09.summary_prose(ev)
    for verdict, n in table.verdict.value_counts().items():
        assert f"{n} {verdict}" in text
    missed = [c.statement for c in CH09_CLAIMS if ev[c.id].verdict != "reproduced"]
    assert all(f"“{m}”" in text for m in missed) and len(missed) > 0


# ---------------------------------------------------------------------------------- prose
@settings(max_examples=200, deadline=None)
@given(*[st.integers(-100_000, 100_000).map(lambda i: i / 100_000)] * 4)
def test_composition_prose_never_contradicts_its_numbers(m, mm, o, sh):
    r = readings(
        comp=pd.DataFrame({"matched": [m], "mismatched": [mm]}),
        ov2=pd.DataFrame({"matched": [o], "shuffled": [sh], "other_pair": [0.0]}),
    )
    text = ch09.composition_prose(r)
    # as printed; -0.000 and 0.000 are the same number
    word = "higher than" if float(f"{m:.3f}") != float(f"{mm:.3f}") and m > mm else None
    if float(f"{m:.3f}") == float(f"{mm:.3f}"):
        assert f"**{m:.3f}**, the same as mismatched" in text
    else:
        assert f"**{m:.3f}**, {word or 'lower than'} mismatched" in text
    gap = float(f"{o:.3f}") - float(f"{sh:.3f}")
    if gap == 0:
        assert "no different than the paper's" in text
    else:
        assert f"{abs(gap):.3f} {'higher' if gap > 0 else 'lower'} than the paper's" in text


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 1), st.floats(0, 1), st.floats(0, 20))
def test_ablation_prose_never_contradicts_its_numbers(kept, random_best, excluded):
    ab = fourier.Ablation(0.01, 2, 1e-11, excluded, (0.5, 1.0), ((1, 2), (3, 4)), (3.5,), (5, 11))
    restriction = dataclasses.replace(RESTRICTION, kept=kept, random=(random_best, 0.0))
    text = ch09.ablation_prose(readings(ablation=ab, restriction=restriction), "The rebuild", 59)
    assert f"the model answers {kept:.1%} of the 3,481 pairs" in text
    assert f"it answers {random_best:.1%} at best over 2 sets" in text
    rules = {c.id: c.rule for c in CH09_CLAIMS}
    singled = rules["ch09.key_frequencies_suffice"].holds(kept) and rules["ch09.random_frequencies_fail"].holds(
        random_best
    )
    assert ("they single out the adder's frequencies" in text) == singled
    ex_word = claims.compare(excluded, math.log(59), ".2f")
    assert f"{excluded:.3g} nats, {ex_word} the 4.08 of a uniform guess" in text


def test_averaged_prose_explains_a_loss_below_the_models_own():
    low = readings(ablation=fourier.Ablation(0.023, 2, 1.2e-12, 13.2, (0.127, 5.0), ((1, 2), (3, 4)), (5.2,), (5, 11)))
    text = ch09.averaged_prose(low, low, 59)
    assert "the other 58 pairs of the same sum" in text
    assert "the rebuild 1.2e-12 nats on the key frequencies, lower than its 0.023 in full, and 0.127" in text
    assert "the averaging at work" in text
    high = readings(ablation=fourier.Ablation(0.01, 2, 0.5, 13.2, (0.7, 5.0), ((1, 2), (3, 4)), (5.2,), (5, 11)))
    assert "averaging at work" not in ch09.averaged_prose(high, high, 59)


def test_positional_verdict_prose_says_where_the_paper_fails():
    released = readings(prev_share=0.18, positional_chance=0.191)
    seeds = {
        0: readings(prev_share=0.09, positional_chance=0.191),
        1: readings(prev_share=0.91, positional_chance=0.191),
    }
    text = ch09.positional_verdict_prose(evidence(CH09_CLAIMS, Runs(seeds, released)))
    assert text.startswith("The paper's purely positional claim fails on the authors' own released model")
    assert "no more often than chance" in text and "every one of the rebuild's 2 seeds too" in text
    assert "positions alone beat chance on 1 of the 2" in text
    holding = readings(qk1_split={**readings().qk1_split, "positional_share": 0.95})
    assert ch09.positional_verdict_prose(evidence(CH09_CLAIMS, Runs({0: holding}, holding))) == ""


def test_seeds_table_has_a_row_per_bound_seed_and_the_release():
    table = ch09.seeds_table({42: readings(), 2: readings(2.0)}, readings(), opened=2)
    assert table["run"].tolist() == ["seed 42", "seed 2 (opened)", "released run"]
    assert table["most common key frequency"].tolist() == ["11"] * 3
    assert table["positions pick the previous key (chance)"].iloc[0] == "25% (20%)"


def test_split_prose_names_the_largest_part():
    text = ch09.split_prose(readings(), "The rebuild", 12)
    assert text.startswith("The rebuild: the previous key out-scores the other keys by 4 on average")
    assert "(50% of the four parts' sizes)" in text and "the largest part is the position-position P QK₁ Pᵀ" in text
    assert "in 25.0% of the context query positions 1-11, above the 20.0% of chance" in text
    at = readings(prev_share=0.2)
    assert "at the 20.0% of chance" in ch09.split_prose(at, "x", 12)
    tok = readings(qk1_split={**readings().qk1_split, "token": 9.0})
    assert "largest part is the token-token" in ch09.split_prose(tok, "x", 12)


def test_fourier_prose_and_frequency_chart():
    found = readings().fourier
    text = ch09.fourier_prose(found)
    assert "3 of 3 neurons are active" in text and "**3** of them" in text and "frequencies: 11, 5." in text
    assert ch09.frequency_chart(found).to_dict()["title"].startswith("3 of 3 live neurons")


def test_output_prose_counts_the_shared_frequencies(model):
    norms = fourier.output_fourier_norms(model.blocks[1].mlp.W_out.detach().numpy(), model.unembed.W_U.detach().numpy())
    largest = norms[norms.k > 0].sort_values("norm", ascending=False).k.head(5).tolist()
    text = ch09.output_prose(readings(output_norms=output_norms(model)))
    assert text.startswith(f"The 5 largest output frequencies are {', '.join(map(str, largest))};")
    assert f"; {len({5, 11} & set(largest))} of them" in text


def test_neuron_maps_fit_a_pure_neuron_exactly():
    maps = np.stack([_cos_map(11, 0.3, 1.0), _cos_map(4, 0.0, 2.0)])
    found = fourier.fourier_neurons(maps)
    frame = ch09.neuron_maps(maps, found.table, 1)
    assert (frame.k == 4).all() and len(frame) == 59 * 59
    np.testing.assert_allclose(frame.fit, frame.activation, atol=2e-3)


def test_short_prose():
    assert (
        ch09.adder_prose(0.999, 0.95, 59)
        == "The adder alone answers **99.9%** of the 3,481 pairs correctly (95.0% with the residual kept)."
    )
    assert "'=' top two keys on the needed positions (layer 2): **0.800**" in ch09.roles_prose(readings())


def test_model_prose_names_the_seeds_the_claims_read():
    final = pd.DataFrame({"1var_train": [1.0], "2var_heldout": [0.98]})
    run = SimpleNamespace(accuracy=lambda: final, config=SimpleNamespace(steps=20_000, seed=4))
    text = ch09.model_prose(run, [42, 0, 1, 3, 4], [42, 1, 4])
    assert "the final models of the 3 of 5 seed runs that bound" in text
    assert "Seeds 0 and 3 had not bound by step 20,000 (chapter 8 counts them against the phase claims)" in text
    assert "had not bound" not in ch09.model_prose(run, [42, 4], [42, 4])
    assert "released final model alone" in ch09.model_prose(run, [42, 4], [])


# --------------------------------------------------------------------------- charts, tables
def test_pattern_chart_boxes_the_roles(model):
    from mechbook.assign_add.circuits import pattern_frame

    task = Task()
    spec = ch09.pattern_chart(pattern_frame(model, task.eval_pools(1, seed=0)["2var_train"][0][0], task)).to_dict()
    assert spec["facet"]["field"] == "layer" and spec["spec"]["layer"][1]["encoding"]["stroke"]["field"] == "role"


def test_cosine_histogram_counts_every_pair():
    comp = pd.DataFrame({"matched": np.linspace(0.5, 0.99, 101), "mismatched": np.linspace(-0.99, 0.99, 101)})
    hist = ch09.cosine_histogram(comp)
    assert hist.groupby("comparison").pairs.sum().to_dict() == {"matched": 101, "mismatched": 101}
    assert hist[(hist.comparison == "matched") & (hist.cosine < 0.5)].pairs.sum() == 0
    assert "mean cosine 0.74 matched" in ch09.cosine_chart(comp).to_dict()["title"]


def test_positional_frame_and_chart_title():
    scores = np.arange(16.0).reshape(4, 4)
    frame = ch09.positional_frame(scores)
    assert len(frame) == 10 and (frame["key"] <= frame["query"]).all()
    assert frame.set_index(["query", "key"]).loc[(3, 1), "score"] == 13.0
    title = ch09.positional_chart(scores, 0.09, 0.191).to_dict()["title"]["text"][1]
    assert title.startswith("the previous position tops 9% of context rows (chance 19%")


def test_output_norms_chart_reads_the_models_weights(model):
    spec = ch09.output_norms_chart(readings(output_norms=output_norms(model))).to_dict()
    values = next(iter(spec["datasets"].values()))
    expected = fourier.output_fourier_norms(
        model.blocks[1].mlp.W_out.detach().numpy(), model.unembed.W_U.detach().numpy()
    )
    assert [round(v["norm"], 6) for v in values] == [round(v, 6) for v in expected["norm"]]


def test_block_chart_is_a_signed_heatmap_of_the_block():
    spec = ch09.block_chart(np.array([[2.0, -1.0], [0.5, 3.0]]), ("a", "b"), 1.0).to_dict()
    assert spec["encoding"]["color"]["scale"]["domain"] == [-3.0, 3.0]
    assert "row maximum in 100% of rows" in str(spec["title"])


def test_tables_put_each_run_in_its_column():
    table = ch09.comparison_table(readings(), readings(scale=2.0)).set_index("reading")
    row = table.loc[ch09.COMPARED["qk2_block_ratio"]]
    assert (row["paper's run, as released"], row["this rebuild"]) == ("10", "5")
    assert table.loc[ch09.COMPARED["top_frequencies"], "this rebuild"] == "11, 5"
    split = ch09.split_table(readings(), readings(scale=2.0)).set_index("part of the previous key's score margin")
    assert split.loc[ch09.SPLIT_LABELS["positional"]].tolist() == ["4", "2"]
    ab = ch09.ablation_table(readings(), readings(ablation=fourier.Ablation(4.1, 0), restriction=None)).set_index(
        "on all N² queries n m ="
    )
    assert ab.loc["key frequencies (count)"].tolist() == ["0", "2"]
    assert ab.loc[ch09.RESTRICTION_ROWS[1]].tolist() == ["none", "99.5%"]
    assert ab.loc[ch09.RESTRICTION_ROWS[2]].tolist() == ["none", "30.0% to 60.0%"]
    assert ab.loc[ch09.RESTRICTION_ROWS[6]].tolist() == ["none", "5"]


def test_embedding_chart_title_follows_the_one_circle_verdict():
    scattered = fourier.embedding_pca(_circle_model(None), 59)
    flat = readings(pca=scattered, embedding=fourier.embedding_summary(scattered))
    spec = ch09.embedding_chart(flat, readings(), "partly").to_dict()
    assert spec["title"]["text"][0] == "The number embeddings' variance by frequency of n"
    assert "100% of the variance released" in spec["title"]["text"][1]
    assert ch09.embedding_chart(flat, flat, "not reproduced").to_dict()["title"]["text"][0].endswith("not one circle")
    text = ch09.embedding_prose(flat, readings(), 59)
    assert text.startswith(
        "In the released run: the top two principal components of the 59 number embeddings hold 100.0%"
    )
    assert "at k = 3, scores 1.00 of 1" in text


def test_probe_pivot_keeps_model_order():
    assert list(ch09.probe_pivot(readings().probes).columns) == ["after layer 1", "after layer 2"]


# --------------------------------------------------------------------------------- records
def test_record_all_records_numbers_and_claims(monkeypatch):
    seen = {}
    monkeypatch.setattr("mechbook.record", lambda name, value: seen.setdefault(name, value))
    released = readings(2.0)
    records = ch09.record_all(readings(), released, evidence(CH09_CLAIMS, Runs({0: readings()}, released)))
    assert records["matched_cosine"] == pytest.approx(0.95) and records["release_qk2_block_ratio"] == 10.0
    assert {f"claim.{c.id}" for c in CH09_CLAIMS} <= set(records) and seen.keys() == records.keys()
    bounds = yaml.safe_load((ROOT / "book" / "thresholds" / "09_circuits.yml").read_text())
    for profile in ("smoke", "cpu"):
        assert set(bounds[profile]) <= set(records)


SMOKE_BOUNDS = load_thresholds("09_circuits")["smoke"]
needs_release = pytest.mark.skipif(
    not release.available_steps(), reason=f"no local copy of the authors' release (set {release.ENV_VAR})"
)


def smoke_numbers(model: torch.nn.Module, prefix: str = "") -> dict[str, object]:
    """The smoke records the notebook takes of ``model`` (:func:`read_circuits` on its pools)."""
    cfg = ch09.CONFIGS["smoke"]
    task = Task(cfg.runs.train.task)
    r = read_circuits(model, task, task.eval_pools(cfg.per_pool, seed=POOL_SEED), cfg.probe, cfg.n_patch)
    return {prefix + k: v for k, v in r.numbers().items()}


def flagged(records: dict[str, object], release_bounds: bool) -> set[str]:
    bounds = {n: b for n, b in SMOKE_BOUNDS.items() if n.startswith("release_") == release_bounds}
    return {p.split()[0] for p in check_thresholds(records, bounds)}


def test_the_measured_seed_spread_passes_the_smoke_bounds():
    assert check_spread(SMOKE_BOUNDS, load_spread("09_circuits")["smoke"]) == []


def test_smoke_bounds_reject_an_untrained_model():
    """At initialisation every residual at '=' looks alike (matched and mismatched cosines both
    ~0.9), OV₂ does not map onto the unembedding, and '=' does not look at the needed numbers."""
    found = flagged(smoke_numbers(AssignAddModel(SMOKE_MODEL).eval()), release_bounds=False)
    assert {"mismatched_cosine", "ov2_matched_cosine", "eq_to_needed_attention"} <= found, found


@needs_release
def test_release_bounds_reject_the_wrong_released_checkpoint():
    """The released run's first checkpoint (step 1) read in place of its final model: no bound on
    the circuit it has not yet learned lets it through, except the matched cosine, which an
    untrained model also meets (its residuals at '=' all point alike)."""
    found = flagged(smoke_numbers(release.load_release(1), prefix="release_"), release_bounds=True)
    assert found == {n for n in SMOKE_BOUNDS if n.startswith("release_")} - {"release_matched_cosine"}, found


def test_config_rejects_bad_sizes():
    with pytest.raises(ValueError, match="gallery"):
        dataclasses.replace(ch09.CONFIGS["smoke"], gallery=0)
