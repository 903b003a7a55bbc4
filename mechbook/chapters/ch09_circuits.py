"""Chapter 9, "The circuits": the chapter's config, its claims, and the charts and computed prose
of each section in page order. The readings themselves are computed by the library
(:func:`mechbook.assign_add.circuit_readings.read_circuits`), on the rule-picked run of chapter 8's
seed stack (:data:`mechbook.assign_add.runs.SEED_RUNS`, the same cached runs), on every seed of
that stack, and on the authors' released final model.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd

import mechbook
from mechbook import claims, viz
from mechbook.assign_add import circuits, fourier
from mechbook.assign_add.circuit_readings import CircuitReadings
from mechbook.assign_add.config import TrainResult
from mechbook.assign_add.probes import ProbeConfig
from mechbook.assign_add.readings import FrequencyControls, frequency_controls
from mechbook.assign_add.runs import SEED_RUNS
from mechbook.assign_add.seeds import SeedRuns
from mechbook.chapters import common
from mechbook.claims import Evidence
from mechbook.validation import POSITIVE, between, check_fields

SIGNED = alt.Scale(scheme="redblue", domainMid=0, reverse=True)
STEM = "09_circuits"


@dataclass(frozen=True)
class ChapterConfig:
    """Chapter 9: the seed runs whose dissected model it opens (chapter 8's, so the cached stack is
    shared), sequences per evaluation pool for attention statistics and probes, the probes'
    training, clean/source pairs for patching, and neurons shown in the Fourier gallery."""

    runs: SeedRuns
    per_pool: int
    probe: ProbeConfig
    n_patch: int
    gallery: int

    def __post_init__(self) -> None:
        cells = self.runs.train.task.modulus**2
        gallery = between(1, viz.MAX_ROWS // cells, f"each neuron's map is {cells} rows of one chart")
        check_fields(self, per_pool=POSITIVE, n_patch=POSITIVE, gallery=gallery)


CONFIGS: dict[str, ChapterConfig] = {
    "smoke": ChapterConfig(SEED_RUNS["smoke"], per_pool=80, probe=ProbeConfig(steps=100), n_patch=200, gallery=4),
    "cpu": ChapterConfig(SEED_RUNS["cpu"], per_pool=300, probe=ProbeConfig(steps=300), n_patch=1000, gallery=6),
    "paper": ChapterConfig(SEED_RUNS["paper"], per_pool=1000, probe=ProbeConfig(steps=500), n_patch=2000, gallery=6),
}


def resolve(
    profile: str,
    seed: int | None = None,
    per_pool: int | None = None,
    probe_steps: int | None = None,
    n_patch: int | None = None,
) -> ChapterConfig:
    """The chapter's config for ``profile`` with the reader's knobs (None: from the profile);
    ``seed`` opens that seed's run of chapter 8 instead of the rule's pick."""
    return mechbook.resolve_profile(
        CONFIGS, profile, runs__pick=seed, per_pool=per_pool, probe__steps=probe_steps, n_patch=n_patch
    )


# ---------------------------------------------------------------------------- the opened run
def model_prose(result: TrainResult, seeds: Sequence[int], bound: Sequence[int]) -> str:
    """Which run is opened, how well it ended, and over which seeds' final models the claims are
    read: the ``bound`` ones of the stack's ``seeds`` (:func:`~mechbook.assign_add.seeds.of_bound_seeds`)."""
    final = result.accuracy().iloc[-1]
    unbound = [s for s in seeds if s not in set(bound)]
    if not bound:
        over = (
            f"{'The one seed' if len(seeds) == 1 else f'None of the {len(seeds)} seeds'} of the stack has bound by step "
            f"{result.config.steps:,}, so there is no "
            "binding circuit to read on the rebuild: each claim below is read on the authors' released final "
            "model alone (the rebuild's numbers are shown, not judged)."
        )
    else:
        left = (
            f" {common.not_bound(unbound, f'by step {result.config.steps:,}')} (chapter 8 counts "
            f"{'them' if len(unbound) > 1 else 'it'} against the phase claims): no binding circuit to read, so not "
            "counted here."
            if unbound
            else ""
        )
        over = (
            f"Each claim below is read on the final models of the {len(bound)} of {len(seeds)} seed runs that bound, "
            f"and on the authors' released final model.{left}"
        )
    return (
        f"The model of chapter 8's run: {result.config.steps:,} steps, seed {result.config.seed}. "
        f"Final accuracy on 1-var training pairs {final['1var_train']:.3f}, on 2-var held-out pairs "
        f"{final['2var_heldout']:.3f}. {over}"
    )


# ------------------------------------------------------------------------------ attention
def pattern_chart(frame: pd.DataFrame) -> alt.FacetChart:
    """Both layers' attention for one sequence side by side, the circuit's roles boxed."""
    order = list(dict.fromkeys(frame.sort_values("query").query_token))
    return viz.attention_heatmap(
        frame.assign(layer="layer " + frame.layer.astype(str)),
        order=order,
        highlight="role",
        facet="layer",
        title="Both layers' attention on one sequence (boxed: where the circuit says each head looks)",
    )


def roles_prose(r: CircuitReadings) -> str:
    """The mean attention on each circuit role and the layer-2 top-2 share, in one line."""
    roles = " · ".join(f"{name.replace('_', ' ')}: **{value:.3f}**" for name, value in r.roles.items())
    return f"{roles} · '=' top two keys on the needed positions (layer 2): **{r.needed_top2:.3f}**"


# ----------------------------------------------------------------------- layer 1 query-key
def positional_frame(scores: np.ndarray) -> pd.DataFrame:
    """The causal part (key <= query) of a positions x positions score matrix, tidy."""
    n = len(scores)
    return pd.DataFrame([{"query": q, "key": k, "score": float(scores[q, k])} for q in range(n) for k in range(q + 1)])


def positional_chart(scores: np.ndarray, share: float) -> alt.Chart:
    """Heatmap of layer 1's scores from position embeddings alone; the title states the share of
    context queries whose top positional score is the previous position."""
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
                ["Layer-1 scores from positions alone:", f"the previous position tops {share:.0%} of context rows"],
                anchor="start",
            ),
        )
    )


SPLIT_LABELS = {
    "token": "token-token E QK₁ Eᵀ",
    "positional": "position-position P QK₁ Pᵀ",
    "token_to_position": "query token on key position",
    "position_to_token": "query position on key token",
    "total": "total (the real score margin)",
}


def split_table(rebuild: CircuitReadings, released: CircuitReadings) -> pd.DataFrame:
    """The previous key's score margin split into its four parts, both runs (score units)."""
    return pd.DataFrame(
        {
            "part of the previous key's score margin": list(SPLIT_LABELS.values()),
            "paper's run, as released": [f"{released.qk1_split[k]:.3g}" for k in SPLIT_LABELS],
            "this rebuild": [f"{rebuild.qk1_split[k]:.3g}" for k in SPLIT_LABELS],
        }
    )


def both_prose(prose: Callable[..., str], rebuild: CircuitReadings, released: CircuitReadings, *args: object) -> str:
    """``prose(readings, who, *args)`` of the released run, then of the rebuild, as two paragraphs
    (the layer-1 split and the frequency ablation)."""
    return "\n\n".join(prose(r, who, *args) for who, r in (("The released run", released), ("The rebuild", rebuild)))


def split_prose(r: CircuitReadings, who: str, context_len: int) -> str:
    """Which part of layer 1's form carries the previous-token head on one run, from its numbers."""
    s = r.qk1_split
    parts = {k: s[k] for k in ("token", "positional", "token_to_position", "position_to_token")}
    largest = max(parts, key=lambda k: parts[k])
    return (
        f"{who}: the previous key out-scores the other keys by {s['total']:.3g} on average; the position-position "
        f"part gives {s['positional']:.3g} ({s['positional_share']:.0%} of the four parts' sizes) and the token-token part "
        f"{s['token']:.3g}; the largest part is the {SPLIT_LABELS[largest]}. From positions alone, the previous "
        f"position has the highest score in {r.prev_share:.0%} of the context query positions 1-{context_len - 1}."
    )


# ----------------------------------------------------------------------- layer 2 query-key
def block_chart(block: np.ndarray, letters: tuple[str, ...], rows_diag_max: float) -> alt.TopLevelMixin:
    """The learned variable block U QK₂ Uᵀ as a signed heatmap."""
    return viz.signed_heatmap(
        block,
        rows=letters,
        cols=letters,
        row_title="query variable",
        col_title="key variable",
        value_title="U QK₂ Uᵀ",
        title=f"Layer-2 QK on the variable subspace: the diagonal is the row maximum in {rows_diag_max:.0%} of rows",
    )


def block_prose(diag: dict[str, float]) -> str:
    """The identity-likeness of the learned block in one sentence."""
    return (
        f"Diagonal mean / mean |off-diagonal| = **{diag['ratio']:.2f}**; mean margin {diag['margin']:.2f}; "
        f"rows whose maximum is on the diagonal: {diag['rows_diag_max']:.0%}."
    )


# ------------------------------------------------------------------------------ one adder
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
    """Histogram of the matched and mismatched cosines at '=' before MLP₂, means in the title."""
    return (
        alt.Chart(cosine_histogram(comp))
        .mark_bar(opacity=0.7, width=5)
        .encode(
            x=alt.X("cosine:Q", title="cosine of residual streams at '=' before MLP₂", scale=alt.Scale(domain=[-1, 1])),
            y=alt.Y("pairs:Q", stack=None, title="pairs (n, m)"),
            color=alt.Color("comparison:N", title=None, legend=alt.Legend(orient="bottom")),
            tooltip=["comparison:N", alt.Tooltip("cosine:Q", format=".3f"), "pairs:Q"],
        )
        .properties(
            width=600,
            title=f"Same sum, two routes: mean cosine {comp['matched'].mean():.2f} matched, "
            f"{comp['mismatched'].mean():.2f} mismatched",
        )
    )


def composition_prose(r: CircuitReadings) -> str:
    """Mean matched / mismatched cosines and the OV₂ comparison with both controls, the words
    derived from the printed numbers."""
    m, mm = r.comp["matched"].mean(), r.comp["mismatched"].mean()
    o, sh, other = r.ov2["matched"].mean(), r.ov2["shuffled"].mean(), r.ov2["other_pair"].mean()
    return (
        f"Mean cosine, matched: **{m:.3f}**, {claims.compare(m, mm, '.3f')} mismatched: **{mm:.3f}**. "
        f"Layer-2 attention output against $\\mathrm{{OV}}_2(e_n)+\\mathrm{{OV}}_2(e_m)$: **{o:.3f}**, "
        f"{claims.difference(o, sh, '.3f')} than the paper's shuffled control $\\mathrm{{OV}}_2(e_n)+"
        f"\\mathrm{{OV}}_2(e_{{m'}})$ ({sh:.3f}; the left operand kept, so half the vector still matches) "
        f"and against another pair's vector altogether {other:.3f}."
    )


def adder_prose(adder: float, with_residual: float, modulus: int) -> str:
    """The adder alone (the paper's measure) and the variant keeping the residual."""
    return (
        f"The adder alone answers **{adder:.1%}** of the {modulus**2:,} pairs correctly "
        f"({with_residual:.1%} with the residual kept)."
    )


# -------------------------------------------------------------------------------- Fourier
def fourier_prose(found: fourier.FourierNeurons) -> str:
    """How many live neurons, how many Fourier neurons, the best FVE, the key frequencies."""
    top = ", ".join(str(int(k)) for k in found.frequencies["k"].head(5)) or "none"
    best = "none" if found.best_fve is None else f"{found.best_fve:.3f}"
    return (
        f"{len(found.live)} of {len(found.table)} neurons are active on these inputs; **{len(found.good)}** of them "
        f"have one frequency explaining at least {fourier.MIN_FVE:.0%} of their variance (best: {best}). "
        f"Most common key frequencies: {top}."
    )


def frequency_chart(found: fourier.FourierNeurons) -> alt.Chart:
    """Neurons per best frequency, split by FVE >= ``MIN_FVE``."""
    return (
        alt.Chart(found.live)
        .mark_bar()
        .encode(
            x=alt.X("k:O", title="best frequency k"),
            y=alt.Y("count():Q", title="neurons"),
            color=alt.Color("good:N", title=f"FVE ≥ {fourier.MIN_FVE}", legend=alt.Legend(orient="bottom")),
            tooltip=["k:O", "count():Q"],
        )
        .transform_calculate(good=f"datum.fve >= {fourier.MIN_FVE} ? 'yes' : 'no'")
        .properties(
            width=600,
            title=f"{len(found.good)} of {len(found.live)} live neurons have one frequency explaining "
            f"≥ {fourier.MIN_FVE:.0%} of their variance",
        )
    )


def output_norms_chart(r: CircuitReadings) -> alt.Chart:
    """Fourier norm of W_out W_U (layer-2 MLP to logits) per frequency over the residues."""
    return (
        alt.Chart(r.output_norms)
        .mark_bar()
        .encode(
            x=alt.X("k:O", title="frequency k over the residues"),
            y=alt.Y("norm:Q", title="Fourier norm of W_out W_U"),
            tooltip=["k:O", alt.Tooltip("norm:Q", format=".2f")],
        )
        .properties(width=600, title="What the MLP writes: the Fourier norm of W_out W_U at each frequency")
    )


def output_prose(r: CircuitReadings, top: int = 5) -> str:
    """Whether what the MLP writes matches its neurons: the ``top`` largest Fourier norms of
    W_out W_U (k >= 1) and how many of them are key frequencies."""
    norms, found = r.output_norms, r.fourier
    largest = [int(k) for k in norms[norms.k > 0].sort_values("norm", ascending=False).k.head(top)]
    shared = [k for k in largest if k in found.keys]
    return (
        f"The {top} largest output frequencies are {', '.join(map(str, largest))}; {len(shared)} of them "
        f"({', '.join(map(str, shared)) or 'none'}) are key frequencies of the neurons above."
    )


def neuron_maps(maps: np.ndarray, table: pd.DataFrame, neuron: int) -> pd.DataFrame:
    """One neuron's map over all (n, m) and its two-cosine fit at its best frequency, tidy."""
    k = int(table.loc[neuron, "k"])
    fit = fourier.two_cosine_fit(maps[neuron], k)
    n, m = circuits.all_pairs(maps.shape[1])
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


def gallery(maps: np.ndarray, found: fourier.FourierNeurons, n: int):
    """An explorer over the ``n`` best-fitting live neurons (map beside fit). Each map has N²
    cells and the static explorer holds every neuron on offer (within :data:`mechbook.viz.MAX_ROWS`)."""
    best = found.live.sort_values("fve", ascending=False).head(n)
    return viz.explore(
        functools.partial(neuron_maps, maps, found.table),
        neuron_chart,
        {"neuron": [int(i) for i in best["neuron"]]},
        title="A Fourier neuron and its two-cosine fit",
    )


def _nats(value: float | None) -> str:
    return "none" if value is None else f"{value:.3g}"


def ablation_table(rebuild: CircuitReadings, released: CircuitReadings) -> pd.DataFrame:
    """Full, restricted, excluded and random-frequency restricted loss of both runs (nats, three
    significant digits; "none" without key frequencies), and how many key frequencies."""

    def column(r: CircuitReadings) -> list[str]:
        ab = r.ablation
        spread = (
            f"{min(ab.random_restricted):.3g} to {max(ab.random_restricted):.3g}" if ab.random_restricted else "none"
        )
        nonkey = (
            f"{min(ab.nonkey_restricted):.3g} to {max(ab.nonkey_restricted):.3g}" if ab.nonkey_restricted else "none"
        )
        return [_nats(ab.full), _nats(ab.restricted), spread, nonkey, _nats(ab.excluded), str(ab.n_frequencies)]

    return pd.DataFrame(
        {
            "loss on all N² queries n m = (nats)": [
                "full logits",
                "key frequencies only (restricted)",
                "as many random frequencies only (control, lowest to highest draw)",
                "as many random non-key frequencies only (control, lowest to highest draw)",
                "key frequencies removed (excluded)",
                "key frequencies (count)",
            ],
            "paper's run, as released": column(released),
            "this rebuild": column(rebuild),
        }
    )


def ablation_prose(r: CircuitReadings, who: str, modulus: int) -> str:
    """The restricted loss against the full one and the random-frequency control, the excluded
    loss against a uniform guess (log N nats): the words from the printed numbers."""
    ab = r.ablation
    if ab.n_frequencies == 0:
        return f"{who}: no neuron has a key frequency, so there is nothing to restrict to."
    uniform = float(np.log(modulus))
    nonkey = (
        f"; {len(ab.nonkey_restricted)} random sets of non-key frequencies give {ab.nonkey_lowest:.3g} at best"
        if ab.nonkey_restricted
        else "; no frequency is left outside the key ones"
    )
    return (
        f"{who}: keeping only its {ab.n_frequencies} key frequencies the loss is {ab.restricted:.3g} nats, "
        f"{claims.compare(ab.restricted, ab.full)} the {ab.full:.3g} in full. Keeping {ab.n_frequencies} random "
        f"frequencies instead it is {ab.random_lowest:.3g} at best over {len(ab.random_restricted)} draws (that draw "
        f"holds {ab.random_lowest_overlap} of the key frequencies){nonkey}. {_random_reading(ab, frequency_controls(ab))} Removing the key "
        f"frequencies it is {ab.excluded:.3g} nats, {claims.compare(ab.excluded, uniform, '.2f')} the {uniform:.2f} "
        "of a uniform guess."
    )


def _random_reading(ab: fourier.Ablation, fail: FrequencyControls) -> str:
    """What the random sets say about the key ones, by the two claims' rules as the library reads
    them on this run (:func:`~mechbook.assign_add.readings.frequency_controls`): whether a random
    set also leaves a low loss, and whether one without key frequencies does."""
    if fail.random:
        return "No random set comes near the key frequencies: the low restricted loss singles them out."
    said = (
        f"So a random set that holds {ab.random_lowest_overlap} of the key frequencies also leaves a low loss: "
        "the low restricted loss alone does not single out these key frequencies"
    )
    if fail.nonkey is None:
        return said + "."
    if fail.nonkey:
        return (
            said + f"; no set without key frequencies does ({ab.nonkey_lowest:.3g} at best), so the loss needs some of "
            "the key frequencies, not all of them together."
        )
    return said + "; nor does leaving them out, since sets without any of them leave a low loss too."


# ----------------------------------------------------------------------------- embeddings
def embedding_frame(pca: dict[str, pd.DataFrame], run: str, top: int = 12) -> pd.DataFrame:
    """The ``top`` largest frequency shares of the number embeddings ``W_E`` of one run."""
    freq = pca["frequency"]
    return freq[freq.space == "W_E"].head(top).assign(run=run)


def embedding_chart(rebuild: CircuitReadings, released: CircuitReadings, verdict: str) -> alt.FacetChart:
    """Share of the number embeddings' variance at each frequency of n, largest first, per run;
    the title follows the one-circle claim's ``verdict``."""
    frame = pd.concat(
        [embedding_frame(released.pca, "paper's run, as released"), embedding_frame(rebuild.pca, "this rebuild")]
    )
    headline = {
        "reproduced": "The number embeddings sit on one circle",
        "not reproduced": "The number embeddings spread over several frequencies, not one circle",
    }.get(verdict, "The number embeddings' variance by frequency of n")
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
                    headline,
                    f"(top two principal components: {released.embedding.top2:.0%} of the variance released, "
                    f"{rebuild.embedding.top2:.0%} rebuild)",
                ],
                anchor="start",
            )
        )
    )


def embedding_prose(rebuild: CircuitReadings, released: CircuitReadings, modulus: int) -> str:
    """The top-two-PC share, the ten largest frequencies' share and the best circular order, both runs."""

    def one(t: fourier.EmbeddingSummary, who: str) -> str:
        return (
            f"{who}: the top two principal components of the {modulus} number embeddings hold {t.top2:.1%} of "
            f"their variance and the ten largest frequencies of n {t.top10_frequencies:.1%} (the best circular "
            f"order in the top two components, at k = {t.circle_k}, scores {t.circle_score:.2f} of 1)"
        )

    return one(released.embedding, "In the released run") + "; " + one(rebuild.embedding, "in the rebuild") + "."


# --------------------------------------------------------------------------------- probes
def probe_pivot(probes: pd.DataFrame) -> pd.DataFrame:
    """Probe accuracies as a (target, site) x depth table, depths in model order."""
    return probes.pivot(index=["target", "site"], columns="where", values="accuracy")[list(probes["where"].unique())]


def probe_chart(r: CircuitReadings) -> alt.Chart:
    """Probe accuracy along the depth of the model, one line per probed quantity."""
    order = list(r.probes["where"].unique())
    n = r.numbers()
    return (
        alt.Chart(r.probes)
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
            width=600,
            title=[
                f"Variable identity after layer 1: {n['probe_variable_identity_after_layer1']:.2f}; the operand's "
                f"value at the operand after layer 2: {n['probe_operand_value_after_layer2']:.2f}",
                f"The answer at '=' after layer 2: {n['probe_answer_at_eq']:.3f} (the model's own unembedding: "
                f"{n['model_answer_at_eq']:.3f})",
            ],
        )
    )


# ------------------------------------------------------------------------------- patching
def patching_prose(effect: dict[str, float], n_patch: int) -> str:
    """What patching the queried value position and a distractor's did."""
    return (
        f"Unpatched accuracy {effect['clean_accuracy']:.1%}. Patching the queried value position makes the "
        f"model answer the twin's sum in **{effect['patched_to_source']:.1%}** of {n_patch} sequences "
        f"(and answer what the twin itself answers in {effect['patched_as_source_run']:.1%}); "
        f"patching a distractor's value position leaves the answer unchanged in **{effect['control_unchanged']:.1%}**."
    )


# ---------------------------------------------------------------------- side by side, ledger
COMPARED = {
    "value_to_variable_attention": "layer 1: value → its variable (attention)",
    "qk1_prev_positional_share": "layer 1: positional share of the previous key's margin",
    "positional_prev_token_share": "layer 1: rows whose top positional score is the previous position",
    "eq_to_needed_top2": "layer 2: '=' top two keys on the needed positions",
    "qk2_block_ratio": "layer 2: U QK₂ Uᵀ diag / |off-diag|",
    "matched_cosine": "residual at '=': matched cosine",
    "mismatched_cosine": "residual at '=': mismatched cosine",
    "ov2_matched_cosine": "attention output vs OV₂ sum",
    "ov2_shuffled_cosine": "attention output vs the paper's shuffled control",
    "adder_alone_accuracy": "adder alone, MLP₂(h) W_U (the paper's)",
    "adder_with_residual_accuracy": "adder with residual, (h + MLP₂(h)) W_U",
    "neurons_fve_ge_0.9": "Fourier neurons (FVE ≥ 0.9)",
    "top_frequencies": "most common key frequencies",
    "adder_loss_restricted": "loss, key frequencies only (nats)",
    "adder_loss_random_restricted_lowest": "loss, as many random frequencies only (nats, best draw)",
    "adder_loss_nonkey_restricted_lowest": "loss, as many random non-key frequencies only (nats, best draw)",
    "adder_loss_excluded": "loss, key frequencies removed (nats)",
    "embedding_top2_pc_fraction": "number embeddings: variance in the top 2 PCs",
    "embedding_top10_frequency_fraction": "number embeddings: variance in the 10 largest frequencies",
    "probe_variable_identity_after_layer1": "probe: variable identity after layer 1",
    "probe_answer_at_eq": "probe: answer at '='",
    "model_answer_at_eq": "the model's own answer at '=' (its unembedding)",
    "patching_to_source": "patching the value moves the answer",
}


def _shown(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return f"{value:,}" if isinstance(value, int) else f"{value:.3g}"


def comparison_table(rebuild: CircuitReadings, released: CircuitReadings) -> pd.DataFrame:
    """The released final model's headline readings beside the rebuild's."""
    a, b = released.numbers(), rebuild.numbers()
    return pd.DataFrame(
        [
            {"reading": label, "paper's run, as released": _shown(a[name]), "this rebuild": _shown(b[name])}
            for name, label in COMPARED.items()
        ]
    )


def verdict_table(ev: dict[str, Evidence]) -> pd.DataFrame:
    """Every claim of the chapter: the paper's number, the rebuild over seeds, the released run,
    the rule and the verdict (one row each, from its evidence)."""
    rows = []
    for e in ev.values():
        claim = e.claim
        rows.append(
            {
                "claim": claim.statement,
                "paper": claim.paper or "(the book's reading)",
                "this rebuild": e.summary(),
                "released run": "none" if e.release is None else claims.fmt(e.release, claim.spec),
                "rule": claim.rule.text(claim.spec),
                "verdict": e.verdict,
            }
        )
    return pd.DataFrame(rows)


def summary_prose(ev: dict[str, Evidence]) -> str:
    """How many of the chapter's claims held, by verdict, and which did not."""
    counts = {v: [e.claim for e in ev.values() if e.verdict == v] for v in claims.VERDICTS}
    missed = counts["not reproduced"] + counts["partly"]
    text = (
        f"Of the chapter's {len(ev)} claims, {len(counts['reproduced'])} hold on every seed and on the released "
        f"run, {len(counts['partly'])} hold in part, {len(counts['not reproduced'])} do not hold and "
        f"{len(counts['untested'])} are untested here."
    )
    if missed:
        text += " Not holding everywhere: " + "; ".join(f"“{c.statement}” ({ev[c.id].verdict})" for c in missed) + "."
    return text


def record_all(rebuild: CircuitReadings, released: CircuitReadings, ev: dict[str, Evidence]) -> dict[str, object]:
    """Record the chapter's headline numbers (``book/thresholds/09_circuits.yml``), the released
    run's as ``release_*``, and every claim's evidence (``claim.*``, the notebook's ``ev`` over the
    seeds that bound and the released run); returns the records."""
    numbers = {**rebuild.numbers(), **{f"release_{n}": v for n, v in released.numbers().items()}}
    return {**common.record_all(numbers), **claims.record_claims(ev.values())}
