"""Chapter 9, "The circuits": configs, the readings it computes from a trained model, its charts
and computed prose. The model is chapter 8's (``CONFIGS[profile].runs`` is the same object as in
:data:`mechbook.chapters.ch08_training_dynamics.CONFIGS`), so the cached run is reused.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd
import torch

import mechbook
from mechbook import viz
from mechbook.assign_add import circuits, fourier, patching
from mechbook.assign_add.probes import ProbeConfig, cached_probe_table
from mechbook.assign_add.seeds import SeedRuns
from mechbook.assign_add.task import Task
from mechbook.assign_add.train import TrainResult
from mechbook.chapters import ch08_training_dynamics as ch08

LIVE_STD = 1e-3
"""A neuron is live when its map's spread exceeds this fraction of the largest neuron's."""
MIN_FVE = 0.9
"""Variance one frequency must explain for a neuron to count as a Fourier neuron."""
SIGNED = alt.Scale(scheme="redblue", domainMid=0, reverse=True)
POOL_SEED, PATCH_SEED = 2, 3
"""Seeds of the chapter's evaluation pools and of its patching pairs."""


@dataclass(frozen=True)
class CircuitsChapterConfig:
    """Chapter 9: the seed runs whose dissected model it opens (chapter 8's), sequences per evaluation
    pool for attention statistics and probes, the probes' training, clean/source pairs for
    patching, and neurons shown in the Fourier gallery."""

    runs: SeedRuns
    per_pool: int
    probe: ProbeConfig
    n_patch: int
    gallery: int

    def __post_init__(self) -> None:
        for name in ("per_pool", "n_patch", "gallery"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")


CONFIGS: dict[str, CircuitsChapterConfig] = {
    "smoke": CircuitsChapterConfig(
        ch08.CONFIGS["smoke"].runs, per_pool=80, probe=ProbeConfig(steps=100), n_patch=200, gallery=4
    ),
    "cpu": CircuitsChapterConfig(
        ch08.CONFIGS["cpu"].runs, per_pool=300, probe=ProbeConfig(steps=300), n_patch=1000, gallery=6
    ),
    "paper": CircuitsChapterConfig(
        ch08.CONFIGS["paper"].runs, per_pool=1000, probe=ProbeConfig(steps=500), n_patch=2000, gallery=6
    ),
}


def resolve(
    profile: str,
    seed: int | None = None,
    per_pool: int | None = None,
    probe_steps: int | None = None,
    n_patch: int | None = None,
) -> CircuitsChapterConfig:
    """The chapter's config for ``profile`` with the reader's knobs (None: from the profile);
    ``seed`` opens that seed's run of chapter 8 instead of the rule's pick."""
    return mechbook.resolve_profile(
        CONFIGS,
        profile,
        runs__pick=seed,
        per_pool=per_pool,
        probe__steps=probe_steps,
        n_patch=n_patch,
    )


def model_prose(result: TrainResult) -> str:
    """Which run is opened and how well it ended."""
    final = result.accuracy().iloc[-1]
    return (
        f"The model of chapter 8's run: {result.config.steps:,} steps, seed {result.config.seed}. "
        f"Final accuracy on 1-var training pairs {final['1var_train']:.3f}, on 2-var held-out pairs "
        f"{final['2var_heldout']:.3f}."
    )


def pattern_chart(frame: pd.DataFrame, title: str) -> alt.FacetChart:
    """Both layers' attention for one sequence side by side, the circuit's roles boxed."""
    order = list(dict.fromkeys(frame.sort_values("query").query_token))
    return viz.attention_heatmap(
        frame.assign(layer="layer " + frame.layer.astype(str)),
        order=order,
        highlight="role",
        facet="layer",
        title=title,
    )


def positional_frame(scores: np.ndarray) -> pd.DataFrame:
    """The causal part (key <= query) of a positions x positions score matrix, tidy."""
    n = len(scores)
    return pd.DataFrame([{"query": q, "key": k, "score": float(scores[q, k])} for q in range(n) for k in range(q + 1)])


def positional_chart(scores: np.ndarray) -> alt.Chart:
    """Heatmap of layer 1's scores from position embeddings alone."""
    return (
        alt.Chart(positional_frame(scores))
        .mark_rect()
        .encode(
            x=alt.X("key:O", title="key position"),
            y=alt.Y("query:O", title="query position"),
            color=alt.Color("score:Q", scale=SIGNED, title="P QK₁ Pᵀ"),
            tooltip=["query:O", "key:O", alt.Tooltip("score:Q", format=".2f")],
        )
        .properties(
            width=320,
            height=320,
            title=alt.TitleParams(
                [
                    "Layer-1 scores from positions alone: a purely positional",
                    "previous-token head lights up the sub-diagonal",
                ],
                anchor="start",
            ),
        )
    )


def positional_prose(share: float, context_len: int) -> str:
    """The share of context query positions whose top positional score is the previous one."""
    return (
        f"In {share:.0%} of the context query positions 1-{context_len - 1}, the highest positional score goes "
        "to the previous position."
    )


def adder_prose(adder: float, with_residual: float, modulus: int) -> str:
    """The adder alone (the paper's measure) and the variant keeping the residual."""
    return (
        f"The adder alone answers **{adder:.1%}** of the {modulus**2:,} pairs correctly "
        f"({with_residual:.1%} with the residual kept)."
    )


def block_chart(block: np.ndarray, letters: tuple[str, ...]) -> alt.TopLevelMixin:
    """The learned variable block U QK₂ Uᵀ as a signed heatmap."""
    return viz.signed_heatmap(
        block,
        rows=letters,
        cols=letters,
        row_title="query variable",
        col_title="key variable",
        value_title="U QK₂ Uᵀ",
        title="Layer-2 QK on the variable subspace: '=' asking for v scores v's value highest",
    )


def block_prose(diag: dict[str, float]) -> str:
    """The identity-likeness of the learned block in one sentence."""
    return (
        f"Diagonal mean / mean |off-diagonal| = **{diag['ratio']:.2f}**; mean margin {diag['margin']:.2f}; "
        f"rows whose maximum is on the diagonal: {diag['rows_diag_max']:.0%}."
    )


def cosine_histogram(comp: pd.DataFrame, bins: int = 80) -> pd.DataFrame:
    """Pairs per cosine bin on [-1, 1] for the ``matched`` and ``mismatched`` columns."""
    edges = np.linspace(-1, 1, bins + 1)
    return pd.concat(
        [
            pd.DataFrame(
                {
                    "cosine": (edges[:-1] + edges[1:]) / 2,
                    "pairs": np.histogram(comp[col], bins=edges)[0],
                    "comparison": col,
                }
            )
            for col in ("matched", "mismatched")
        ],
        ignore_index=True,
    )


def cosine_chart(comp: pd.DataFrame) -> alt.Chart:
    """Histogram of the matched and mismatched cosines at '=' before MLP₂."""
    return (
        alt.Chart(cosine_histogram(comp))
        .mark_bar(opacity=0.7, width=5)
        .encode(
            x=alt.X("cosine:Q", title="cosine of residual streams at '=' before MLP₂", scale=alt.Scale(domain=[-1, 1])),
            y=alt.Y("pairs:Q", stack=None, title="pairs (n, m)"),
            color=alt.Color("comparison:N", title=None, legend=alt.Legend(orient="bottom")),
            tooltip=["comparison:N", alt.Tooltip("cosine:Q", format=".3f"), "pairs:Q"],
        )
        .properties(width=600, title="Same sum, two routes, one residual vector: matched pairs sit far to the right")
    )


def composition_prose(comp: pd.DataFrame, ov2: pd.DataFrame) -> str:
    """Mean matched / mismatched cosines and the OV₂ comparison."""
    return (
        f"Mean cosine, matched: **{comp['matched'].mean():.3f}**; mismatched: **{comp['mismatched'].mean():.3f}**. "
        f"Layer-2 attention output against $\\mathrm{{OV}}_2(e_n)+\\mathrm{{OV}}_2(e_m)$: {ov2['matched'].mean():.3f} "
        f"(against another pair's: {ov2['shuffled'].mean():.3f})."
    )


@dataclass(frozen=True)
class FourierNeurons:
    """The frequency table of all neurons, the live ones, those with FVE >= ``MIN_FVE`` and the
    key frequencies among them (most common first)."""

    table: pd.DataFrame
    live: pd.DataFrame
    good: pd.DataFrame
    frequencies: pd.DataFrame


def fourier_neurons(maps: np.ndarray) -> FourierNeurons:
    """Each neuron's best frequency and its FVE; live = spread above ``LIVE_STD`` of the largest."""
    table = fourier.neuron_frequency_table(maps)
    live = table[table["std"] > LIVE_STD * table["std"].max()]
    good = live[live["fve"] >= MIN_FVE]
    return FourierNeurons(table, live, good, fourier.key_frequencies(live, min_fve=MIN_FVE))


def fourier_prose(found: FourierNeurons) -> str:
    """How many live neurons, how many Fourier neurons, the best FVE, the key frequencies."""
    top = ", ".join(str(int(k)) for k in found.frequencies["k"].head(5)) or "none"
    best = f"{found.live['fve'].max():.3f}" if len(found.live) else "none"
    return (
        f"{len(found.live)} of {len(found.table)} neurons are active on these inputs; **{len(found.good)}** of them "
        f"have one frequency explaining at least {MIN_FVE:.0%} of their variance (best: {best}). "
        f"Most common key frequencies: {top}."
    )


def frequency_chart(live: pd.DataFrame) -> alt.Chart:
    """Neurons per best frequency, split by FVE >= ``MIN_FVE``."""
    return (
        alt.Chart(live)
        .mark_bar()
        .encode(
            x=alt.X("k:O", title="best frequency k"),
            y=alt.Y("count():Q", title="neurons"),
            color=alt.Color("good:N", title=f"FVE ≥ {MIN_FVE}", legend=alt.Legend(orient="bottom")),
            tooltip=["k:O", "count():Q"],
        )
        .transform_calculate(good=f"datum.fve >= {MIN_FVE} ? 'yes' : 'no'")
        .properties(width=600, title="A few key frequencies carry the adder's neurons")
    )


def output_norms_chart(model: torch.nn.Module) -> alt.Chart:
    """Fourier norm of W_out W_U (layer-2 MLP to logits) per frequency over the residues."""
    norms = fourier.output_fourier_norms(model.blocks[1].mlp.W_out.detach().numpy(), model.unembed.W_U.detach().numpy())
    return (
        alt.Chart(norms)
        .mark_bar()
        .encode(
            x=alt.X("k:O", title="frequency k over the residues"),
            y=alt.Y("norm:Q", title="Fourier norm of W_out W_U"),
            tooltip=["k:O", alt.Tooltip("norm:Q", format=".2f")],
        )
        .properties(width=600, title="The output map is concentrated on a few frequencies")
    )


def neuron_maps(maps: np.ndarray, table: pd.DataFrame, neuron: int) -> pd.DataFrame:
    """One neuron's map over all (n, m) and its two-cosine fit at its best frequency, tidy."""
    n_mod = maps.shape[1]
    k = int(table.loc[neuron, "k"])
    fit = fourier.two_cosine_fit(maps[neuron], k)
    n, m = circuits.all_pairs(n_mod)
    return pd.DataFrame(
        {"n": n, "m": m, "activation": maps[neuron].ravel().round(3), "fit": fit.ravel().round(3), "k": k}
    )


def neuron_chart(base: alt.Chart) -> alt.HConcatChart:
    """A neuron's pre-activation map beside its two-cosine fit (for the gallery explorer)."""
    ticks = dict(axis=alt.Axis(labelExpr="datum.value % 10 === 0 ? datum.label : ''", ticks=False))
    axes = dict(x=alt.X("m:O", title="m (right operand)", **ticks), y=alt.Y("n:O", title="n (left operand)", **ticks))
    actual = base.mark_rect().encode(
        **axes,
        color=alt.Color("activation:Q", scale=SIGNED, title="activation"),
        tooltip=["n:O", "m:O", "activation:Q", "k:O"],
    )
    fitted = base.mark_rect().encode(
        **axes, color=alt.Color("fit:Q", scale=SIGNED, title="two-cosine fit"), tooltip=["n:O", "m:O", "fit:Q", "k:O"]
    )
    return alt.hconcat(
        actual.properties(width=230, height=230, title="pre-activation at '='"),
        fitted.properties(width=230, height=230, title="its two-cosine fit"),
    ).resolve_scale(color="independent")


def gallery(maps: np.ndarray, found: FourierNeurons, n: int):
    """An explorer over the ``n`` best-fitting live neurons (map beside fit). Each map has N²
    cells and the static explorer holds every neuron on offer, more rows than Altair's default
    limit of 5,000, so the limit is lifted for this chart's data."""
    alt.data_transformers.disable_max_rows()
    best = found.live.sort_values("fve", ascending=False).head(n)
    return viz.explore(
        functools.partial(neuron_maps, maps, found.table),
        neuron_chart,
        {"neuron": [int(i) for i in best["neuron"]]},
        title="A Fourier neuron and its two-cosine fit",
    )


def roles_prose(roles: dict[str, float]) -> str:
    """The mean attention on each circuit role, in one line."""
    return " · ".join(f"{name.replace('_', ' ')}: **{value:.3f}**" for name, value in roles.items())


def probe_pivot(probes: pd.DataFrame) -> pd.DataFrame:
    """Probe accuracies as a (target, site) x depth table, depths in model order."""
    return probes.pivot(index=["target", "site"], columns="where", values="accuracy")[list(probes["where"].unique())]


def probe_accuracy(probes: pd.DataFrame, target: str, where: str) -> float:
    """Held-out accuracy of the probe for ``target`` at ``where``."""
    hit = probes[(probes["target"] == target) & (probes["where"] == where)]
    if hit.empty:
        raise KeyError(f"no probe for {target!r} at {where!r}; targets {sorted(probes['target'].unique())}")
    return float(hit["accuracy"].iloc[0])


def probe_chart(probes: pd.DataFrame) -> alt.Chart:
    """Probe accuracy along the depth of the model, one line per probed quantity."""
    order = list(probes["where"].unique())
    return (
        alt.Chart(probes)
        .mark_line(point=True)
        .encode(
            x=alt.X(
                "where:N", sort=order, title="where the probe reads the residual stream", axis=alt.Axis(labelAngle=0)
            ),
            y=alt.Y("accuracy:Q", title="held-out probe accuracy", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("target:N", title="probed quantity", legend=alt.Legend(orient="bottom")),
            tooltip=[
                "target:N",
                "where:N",
                alt.Tooltip("accuracy:Q", format=".3f"),
                alt.Tooltip("chance:Q", format=".3f"),
            ],
        )
        .properties(
            width=600, title="Variable identity appears after layer 1; the operand's value never sits at the operand"
        )
    )


def patching_prose(effect: dict[str, float], n_patch: int) -> str:
    """What patching the queried value position and a distractor's did."""
    return (
        f"Unpatched accuracy {effect['clean_accuracy']:.1%}. Patching the queried value position makes the "
        f"model answer the twin's sum in **{effect['patched_to_source']:.1%}** of {n_patch} sequences "
        f"(and answer what the twin itself answers in {effect['patched_as_source_run']:.1%}); "
        f"patching a distractor's value position leaves the answer unchanged in **{effect['control_unchanged']:.1%}**."
    )


PROBE_POOLS = ("0var_train", "1var_train", "2var_train")
"""The pools whose sequences train and score the linear probes."""


def probe_table(
    model: torch.nn.Module, task: Task, cfg: CircuitsChapterConfig, pools: dict[str, tuple[np.ndarray, np.ndarray]]
) -> pd.DataFrame:
    """The probes (:func:`~mechbook.assign_add.probes.cached_probe_table`) on the probe pools."""
    return cached_probe_table(
        model,
        task.cfg,
        np.concatenate([pools[p][0] for p in PROBE_POOLS]),
        np.concatenate([pools[p][1] for p in PROBE_POOLS]),
        cfg.probe,
    )


def key_frequencies(found: FourierNeurons) -> list[int]:
    """The key frequencies: every frequency some Fourier neuron (FVE >= ``MIN_FVE``) has."""
    return sorted(int(k) for k in found.frequencies["k"])


def fourier_ablation(model: torch.nn.Module, task: Task, found: FourierNeurons) -> dict[str, float | None]:
    """The model's loss on every direct query ``n m =`` in full, restricted to the key
    frequencies of (n + m) and with them excluded (:func:`mechbook.assign_add.fourier.model_fourier_ablation`,
    as in Nanda et al.'s progress measures); no restricted and excluded losses (None) when no
    neuron has a key frequency."""
    ks = key_frequencies(found)
    if not ks:
        full = fourier.model_fourier_ablation(model, task.cfg, [1])["full"]
        return {"full": full, "restricted": None, "excluded": None, "n_frequencies": 0}
    return {**fourier.model_fourier_ablation(model, task.cfg, ks), "n_frequencies": len(ks)}


def _nats(value: float | None) -> str:
    return "none" if value is None else f"{value:.3g}"


def ablation_table(rebuild: dict[str, object], released: dict[str, object]) -> pd.DataFrame:
    """Full, restricted and excluded loss of both runs (nats, three significant digits; "none"
    without key frequencies), and how many key frequencies."""
    rows = [
        {
            "loss on all N² queries n m = (nats)": label,
            "paper's run, as released": _nats(released["ablation"][name]),
            "this rebuild": _nats(rebuild["ablation"][name]),
        }
        for name, label in (
            ("full", "full logits"),
            ("restricted", "key frequencies only (restricted)"),
            ("excluded", "key frequencies removed (excluded)"),
        )
    ]
    rows.append(
        {
            "loss on all N² queries n m = (nats)": "key frequencies (count)",
            "paper's run, as released": str(released["ablation"]["n_frequencies"]),
            "this rebuild": str(rebuild["ablation"]["n_frequencies"]),
        }
    )
    return pd.DataFrame(rows)


def ablation_prose(ablation: dict[str, float], who: str, modulus: int) -> str:
    """Whether the adder runs on its key frequencies: the restricted loss against the full one,
    the excluded loss against a uniform guess (log N nats)."""
    if ablation["n_frequencies"] == 0:
        return f"{who}: no neuron has a key frequency, so there is nothing to restrict to."
    keeps = ablation["restricted"] <= 1.5 * ablation["full"] + 1e-3
    verdict = "as good or better: the adder lives in those frequencies" if keeps else "worse: it uses more than those"
    return (
        f"{who}: keeping only its {ablation['n_frequencies']} key frequencies the loss is "
        f"{ablation['restricted']:.3g} nats against {ablation['full']:.3g} in full ({verdict}); removing them it "
        f"is {ablation['excluded']:.3g} nats, against {np.log(modulus):.2f} for a uniform guess."
    )


def embedding_top(r: dict[str, object]) -> dict[str, float]:
    """Of the number embeddings ``W_E``: the variance share of the top two principal components,
    of the ten largest frequencies, and the best circular-order score of the top two PCs."""
    pca = r["pca"]
    var, freq, circle = (pca[k][pca[k].space == "W_E"] for k in ("variance", "frequency", "circle"))
    best = circle.sort_values("score", ascending=False).iloc[0]
    return {
        "top2": float(var[var.pc <= 2].fraction.sum()),
        "top10_frequencies": float(freq.fraction.head(10).sum()),
        "circle_score": float(best.score),
        "circle_k": int(best.k),
    }


def one_circle(top: dict[str, float]) -> bool:
    """One circle: the top two principal components hold half the variance or more, and the
    numbers go round them in steps of one frequency (circular order score >= 0.9)."""
    return top["top2"] >= 0.5 and top["circle_score"] >= 0.9


def embedding_frame(pca: dict[str, pd.DataFrame], run: str, top: int = 12) -> pd.DataFrame:
    """The ``top`` largest frequency shares of the number embeddings ``W_E`` of one run."""
    freq = pca["frequency"]
    return freq[freq.space == "W_E"].head(top).assign(run=run)


def embedding_chart(rebuild: dict[str, object], released: dict[str, object]) -> alt.FacetChart:
    """Share of the number embeddings' variance at each frequency of n, largest first, per run:
    a few large bars mean the numbers sit on a few circles."""
    frame = pd.concat(
        [embedding_frame(released["pca"], "paper's run, as released"), embedding_frame(rebuild["pca"], "this rebuild")]
    )
    a, b = embedding_top(released)["top2"], embedding_top(rebuild)["top2"]
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("k:O", title="frequency k of n (largest share first)", sort=None),
            y=alt.Y("fraction:Q", title="share of the variance", axis=alt.Axis(format="%")),
            tooltip=["run:N", "k:O", alt.Tooltip("fraction:Q", format=".1%")],
        )
        .properties(width=300, height=180)
        .facet(column=alt.Column("run:N", title=None))
        .resolve_scale(x="independent")
        .properties(
            title=alt.TitleParams(
                [
                    "The number embeddings spread over several frequencies, not one circle"
                    if not any(one_circle(embedding_top(r)) for r in (released, rebuild))
                    else "The number embeddings' variance by frequency of n",
                    f"(top two principal components: {a:.0%} of the variance released, {b:.0%} rebuild)",
                ],
                anchor="start",
            )
        )
    )


def embedding_prose(rebuild: dict[str, object], released: dict[str, object], modulus: int) -> str:
    """Is there one circle? The top-two-PC share and the ten largest frequencies' share, both runs."""

    def one(t: dict[str, float], who: str) -> str:
        circle = "one circle" if one_circle(t) else "not one circle"
        return (
            f"{who}: the top two principal components of the {modulus} number embeddings hold {t['top2']:.1%} of "
            f"their variance and the ten largest frequencies of n {t['top10_frequencies']:.1%}, {circle} (the best "
            f"circular order in the top two components, at k = {t['circle_k']}, scores {t['circle_score']:.2f} of 1)"
        )

    return (
        one(embedding_top(released), "In the released run") + "; " + one(embedding_top(rebuild), "in the rebuild") + "."
    )


def readings(
    model: torch.nn.Module, task: Task, cfg: CircuitsChapterConfig, pools: dict[str, tuple[np.ndarray, np.ndarray]]
) -> dict[str, object]:
    """Every reading the chapter takes of one model, by the functions the notebook shows
    (chapter 9 applies it to the released final model beside the rebuild's)."""
    eval_tokens = np.concatenate([pools[p][0] for p in ("0var_train", "1var_train", "2var_train", "2var_heldout")])
    n = task.cfg.modulus
    found = fourier_neurons(fourier.mlp2_maps(model, task.cfg))
    return dict(
        roles=circuits.role_attention(model, eval_tokens, task.cfg),
        prev_share=circuits.previous_token_share(circuits.positional_qk(model, 0), range(1, task.cfg.context_len)),
        diag=circuits.block_diagonality(circuits.variable_qk_block(model, task.cfg)),
        comp=circuits.composition_cosines(model, task, "2var"),
        ov2=circuits.ov2_cosines(model, task, "2var"),
        adder=circuits.adder_alone_accuracy(model, n),
        adder_residual=circuits.adder_with_residual_accuracy(model, n),
        fourier=found,
        ablation=fourier_ablation(model, task, found),
        pca=fourier.embedding_pca(model, n),
        probes=probe_table(model, task, cfg, pools),
        effect=patching.value_patching_effect(model, patching.one_var_patch_pairs(task, cfg.n_patch, seed=PATCH_SEED)),
    )


COMPARED = {
    "value_to_variable_attention": "layer 1: value → its variable (attention)",
    "positional_prev_token_share": "layer 1: positional previous-token share",
    "qk2_block_ratio": "layer 2: U QK₂ Uᵀ diag / |off-diag|",
    "matched_cosine": "residual at '=': matched cosine",
    "mismatched_cosine": "residual at '=': mismatched cosine",
    "adder_alone_accuracy": "adder alone, MLP₂(h) W_U (the paper's)",
    "adder_with_residual_accuracy": "adder with residual, (h + MLP₂(h)) W_U",
    "neurons_fve_ge_0.9": "Fourier neurons (FVE ≥ 0.9)",
    "top_frequencies": "most common key frequencies",
    "adder_loss_restricted": "loss, key frequencies only (nats)",
    "adder_loss_excluded": "loss, key frequencies removed (nats)",
    "embedding_top2_pc_fraction": "number embeddings: variance in the top 2 PCs",
    "embedding_top10_frequency_fraction": "number embeddings: variance in the 10 largest frequencies",
    "probe_variable_identity_after_layer1": "probe: variable identity after layer 1",
    "probe_answer_at_eq": "probe: answer at '='",
    "patching_to_source": "patching the value moves the answer",
}


def headline(r: dict[str, object]) -> dict[str, object]:
    """The chapter's headline numbers from :func:`readings`."""
    found: FourierNeurons = r["fourier"]
    probes: pd.DataFrame = r["probes"]
    return {
        "value_to_variable_attention": r["roles"]["value_to_variable"],
        "eq_to_needed_attention": r["roles"]["eq_to_needed"],
        "positional_prev_token_share": r["prev_share"],
        "qk2_block_ratio": r["diag"]["ratio"],
        "qk2_block_rows_diag_max": r["diag"]["rows_diag_max"],
        "matched_cosine": float(r["comp"]["matched"].mean()),
        "mismatched_cosine": float(r["comp"]["mismatched"].mean()),
        "ov2_matched_cosine": float(r["ov2"]["matched"].mean()),
        "ov2_shuffled_cosine": float(r["ov2"]["shuffled"].mean()),
        "adder_alone_accuracy": r["adder"],
        "adder_with_residual_accuracy": r["adder_residual"],
        "neurons_fve_ge_0.9": int(len(found.good)),
        "best_neuron_fve": float(found.live["fve"].max()),
        "top_frequencies": [int(k) for k in found.frequencies["k"].head(5)],
        "key_frequencies_n": r["ablation"]["n_frequencies"],
        "adder_loss_full": r["ablation"]["full"],
        "adder_loss_restricted": r["ablation"]["restricted"],
        "adder_loss_excluded": r["ablation"]["excluded"],
        "embedding_top2_pc_fraction": embedding_top(r)["top2"],
        "embedding_top10_frequency_fraction": embedding_top(r)["top10_frequencies"],
        "embedding_circle_score": embedding_top(r)["circle_score"],
        "probe_variable_identity_after_layer1": probe_accuracy(probes, "variable identity", "after layer 1"),
        "probe_operand_value_after_layer2": probe_accuracy(probes, "operand's value", "after layer 2"),
        "probe_answer_at_eq": probe_accuracy(probes, "answer", "after layer 2"),
        "patching_to_source": r["effect"]["patched_to_source"],
        "patching_as_source_run": r["effect"]["patched_as_source_run"],
        "patching_control_unchanged": r["effect"]["control_unchanged"],
    }


def _shown(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return f"{value:,}" if isinstance(value, int) else f"{value:.3f}"


def comparison_table(rebuild: dict[str, object], released: dict[str, object]) -> pd.DataFrame:
    """The released final model's headline readings beside the rebuild's."""
    a, b = headline(released), headline(rebuild)
    return pd.DataFrame(
        [
            {"reading": label, "paper's run, as released": _shown(a[name]), "this rebuild": _shown(b[name])}
            for name, label in COMPARED.items()
        ]
    )


def record_all(readings_: dict[str, object], prefix: str = "") -> dict[str, object]:
    """Record the chapter's headline numbers (``book/thresholds/09_circuits.yml``), the released
    run's with ``prefix="release_"``."""
    return {prefix + name: mechbook.record(prefix + name, value) for name, value in headline(readings_).items()}
