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
from mechbook.assign_add.claims import CH09_CLAIMS, FOURIER_TOP
from mechbook.assign_add.config import TrainResult
from mechbook.assign_add.probes import ProbeConfig
from mechbook.assign_add.readings import Circuits, Restriction
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


def positional_chart(scores: np.ndarray, share: float, chance: float) -> alt.Chart:
    """Heatmap of layer 1's scores from position embeddings alone; the title states the share of
    context queries whose top positional score is the previous position, against ``chance``."""
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
                    "Layer-1 scores from positions alone:",
                    f"the previous position tops {share:.0%} of context rows (chance {chance:.0%}: a query at p has "
                    "p + 1 keys)",
                ],
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


def both_prose(prose: Callable[..., str], rebuild: Circuits, released: Circuits, *args: object) -> str:
    """``prose(readings, who, *args)`` of the released run, then of the rebuild, as two paragraphs
    (the layer-1 split and the frequency ablation)."""
    return "\n\n".join(prose(r, who, *args) for who, r in (("The released run", released), ("The rebuild", rebuild)))


def split_prose(r: Circuits, who: str, context_len: int) -> str:
    """Which part of layer 1's form carries the previous-token head on one run, from its numbers."""
    s = r.qk1_split
    parts = {k: s[k] for k in ("token", "positional", "token_to_position", "position_to_token")}
    largest = max(parts, key=lambda k: parts[k])
    return (
        f"{who}: the previous key out-scores the other keys by {s['total']:.3g} on average; the position-position "
        f"part gives {s['positional']:.3g} ({s['positional_share']:.0%} of the four parts' sizes) and the token-token part "
        f"{s['token']:.3g}; the largest part is the {SPLIT_LABELS[largest]}. From positions alone, the previous "
        f"position has the highest score in {r.prev_share:.1%} of the context query positions 1-{context_len - 1}, "
        f"{claims.compare(r.prev_share, r.positional_chance, '.1%', claims.Words('above', 'below', 'at'))} the "
        f"{r.positional_chance:.1%} of chance (a query at position p has p + 1 keys)."
    )


def positional_verdict_prose(ev: dict[str, Evidence]) -> str:
    """Where the paper's purely positional claim fails, said plainly from the two claims' values: on
    the authors' released model, on the rebuild's seeds, the positional share beside the rule and
    positions alone against chance (empty where the claim holds everywhere)."""
    share, chance = ev["ch09.previous_token_positional"], ev["ch09.positions_pick_previous"]
    rule, spec = share.claim.rule, share.claim.spec
    out = []
    if share.release is not None and not rule.holds(share.release):
        above = chance.release is not None and chance.claim.rule.holds(chance.release)
        out.append(
            "The paper's purely positional claim fails on the authors' own released model: the position-position "
            f"part carries {rule.shown(share.release, spec)} of the previous key's margin (rule "
            f"{rule.text(spec)}), and positions alone rank the previous key first "
            + ("more often than chance." if above else "no more often than chance.")
        )
    failed = [s for s, v in share.rebuild if not rule.holds(v)]
    if failed:
        beat = sum(bool(chance.claim.rule.holds(v)) for _, v in chance.rebuild)
        where = (
            f"every one of the rebuild's {len(failed)} seeds"
            if len(failed) == len(share.rebuild)
            else f"{len(failed)} of the rebuild's {len(share.rebuild)} seeds"
        )
        out.append(
            f"It fails on {where}{' too' if out else ''}; positions alone beat chance on {beat} of the "
            f"{len(chance.rebuild)}."
        )
    return " ".join(out)


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


def _share(values: tuple[float, ...]) -> str:
    """Lowest to highest of some accuracies, in percent ("none" without any)."""
    return f"{min(values):.1%} to {max(values):.1%}" if values else "none"


RESTRICTION_ROWS = (
    "accuracy, full logits",
    "accuracy, key frequencies kept (each pair keeps its own part)",
    "accuracy, as many random frequencies kept (lowest to highest set)",
    "accuracy, as many random non-key frequencies kept (lowest to highest set)",
    "loss, full logits (nats)",
    "loss, key frequencies kept (nats)",
    "loss, key frequencies removed (nats)",
    "loss, Nanda et al.'s restriction to the key frequencies (nats; pairs of one sum averaged)",
    "loss, the same restriction to as many random frequencies (nats; lowest set)",
    "key frequencies (count)",
)


def ablation_table(rebuild: Circuits, released: Circuits) -> pd.DataFrame:
    """Both runs' frequency restriction (accuracies and losses on the N² direct queries), the excluded
    loss and Nanda et al.'s averaged restriction beside it ("none" without key frequencies)."""

    def column(r: Circuits) -> list[str]:
        ab, kept = r.ablation, r.restriction
        if kept is None:
            return ["none"] * (len(RESTRICTION_ROWS) - 1) + ["0"]
        return [
            f"{kept.full:.1%}",
            f"{kept.kept:.1%}",
            _share(kept.random),
            _share(kept.nonkey),
            f"{kept.full_loss:.3g}",
            f"{kept.kept_loss:.3g}",
            f"{ab.excluded:.3g}",
            f"{ab.restricted:.3g}",
            f"{ab.random_lowest:.3g}",
            str(len(kept.keys)),
        ]

    return pd.DataFrame(
        {
            "on all N² queries n m =": list(RESTRICTION_ROWS),
            "paper's run, as released": column(released),
            "this rebuild": column(rebuild),
        }
    )


def ablation_prose(r: Circuits, who: str, modulus: int) -> str:
    """What keeping the key frequencies (each pair its own part) and as many random ones leaves of
    the model's accuracy, what the two control claims' rules say about it on this run, and the
    excluded loss against a uniform guess (log N nats): the words from the printed numbers."""
    kept, ab = r.restriction, r.ablation
    if kept is None:
        return f"{who}: no neuron has a key frequency, so there is nothing to restrict to."
    n = len(kept.keys)
    uniform = float(np.log(modulus))
    nonkey = (
        f"; {len(kept.nonkey)} sets of non-key frequencies, {kept.nonkey_best:.1%} at best"
        if kept.nonkey_best is not None
        else "; no frequency is left outside the key ones"
    )
    return (
        f"{who}: keeping only its {n} key frequencies of n + m, the model answers {kept.kept:.1%} of the "
        f"{modulus**2:,} pairs ({kept.full:.1%} in full; loss {kept.kept_loss:.3g} nats against {kept.full_loss:.3g}). "
        f"Keeping {n} random frequencies instead it answers {kept.random_best:.1%} at best over {len(kept.random)} "
        f"sets (that set holds {kept.random_best_overlap} of the key frequencies){nonkey}. {_singled_out(kept)} "
        f"Removing the key frequencies the loss is {ab.excluded:.3g} nats, "
        f"{claims.compare(ab.excluded, uniform, '.2f')} the {uniform:.2f} of a uniform guess."
    )


def _singled_out(kept: Restriction) -> str:
    """Whether the key frequencies alone keep the model adding, by the rules of the three claims
    that read the restriction, on one run's values."""
    rules = {c.id: c.rule for c in CH09_CLAIMS}
    adds = rules["ch09.key_frequencies_suffice"].holds(kept.kept)
    random_fail = rules["ch09.random_frequencies_fail"].holds(kept.random_best)
    nonkey_fail = kept.nonkey_best is None or rules["ch09.nonkey_frequencies_fail"].holds(kept.nonkey_best)
    threshold = rules["ch09.key_frequencies_suffice"].threshold
    if adds and random_fail and nonkey_fail:
        return f"Only the key frequencies keep the model at {threshold:.0%}: they single out the adder's frequencies."
    if not adds:
        return f"Even the key frequencies alone leave the model below {threshold:.0%}: they do not carry the sum alone."
    return f"A random set also keeps the model at {threshold:.0%}: the key frequencies are not singled out."


def averaged_prose(rebuild: Circuits, released: Circuits, modulus: int) -> str:
    """Why the book does not read Nanda et al.'s restricted loss here: it projects each logit on
    functions of n + m, which averages each pair's logits with those of the other pairs of the same
    sum; its values on both runs against their full loss, the words from the printed numbers."""

    def one(r: Circuits, who: str) -> str:
        ab = r.ablation
        return (
            f"{who} {ab.restricted:.3g} nats on the key frequencies, {claims.compare(ab.restricted, ab.full)} its "
            f"{ab.full:.3g} in full, and {ab.random_lowest:.3g} on the best random set"
        )

    runs = [(r, who) for r, who in ((released, "the released run"), (rebuild, "the rebuild")) if r.ablation.restricted]
    if not runs:
        return ""
    below = any(r.ablation.restricted < r.ablation.full for r, _ in runs)
    why = (
        " A restricted loss below the model's own is the averaging at work: it removes each pair's own errors, so such a "
        "loss says nothing about which frequencies the model needs."
        if below
        else ""
    )
    return (
        "Nanda et al.'s restricted loss projects each residue's logits on functions of n + m, which averages each "
        f"pair's logits with those of the other {modulus - 1} pairs of the same sum: "
        + "; ".join(one(r, who) for r, who in runs)
        + "."
        + why
    )


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
    "positional_chance": "layer 1: the same by chance (a query at p has p + 1 keys)",
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
    "kept_key_frequencies_accuracy": "accuracy, key frequencies kept",
    "kept_random_frequencies_accuracy_best": "accuracy, as many random frequencies kept (best set)",
    "kept_nonkey_frequencies_accuracy_best": "accuracy, as many random non-key frequencies kept (best set)",
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


def comparison_table(rebuild: Circuits, released: Circuits) -> pd.DataFrame:
    """The released final model's headline readings beside the rebuild's."""
    a, b = released.numbers(), rebuild.numbers()
    return pd.DataFrame(
        [
            {"reading": label, "paper's run, as released": _shown(a[name]), "this rebuild": _shown(b[name])}
            for name, label in COMPARED.items()
        ]
    )


SEED_COLUMNS: dict[str, Callable[[Circuits], object]] = {
    "value → variable": lambda r: f"{r.roles['value_to_variable']:.3f}",
    "positional share of the margin": lambda r: f"{r.qk1_split['positional_share']:.2f}",
    "positions pick the previous key (chance)": lambda r: f"{r.prev_share:.0%} ({r.positional_chance:.0%})",
    "U QK₂ Uᵀ rows with diagonal max": lambda r: f"{r.diag['rows_diag_max']:.0%}",
    "matched / mismatched cosine": lambda r: f"{r.comp['matched'].mean():.2f} / {r.comp['mismatched'].mean():.2f}",
    "adder alone": lambda r: f"{r.adder:.1%}",
    "10th best neuron's FVE": lambda r: f"{r.fourier.ranked_fve(FOURIER_TOP):.3f}",
    "most common key frequency": lambda r: ", ".join(str(int(k)) for k in _most_common(r.fourier)) or "none",
    "key / best random frequencies kept": lambda r: (
        "none" if r.restriction is None else f"{r.restriction.kept:.1%} / {r.restriction.random_best:.1%}"
    ),
    "patching moves the answer": lambda r: f"{r.effect['patched_to_source']:.1%}",
}
"""The per-seed table's columns: each a key reading of one run, as the page prints it."""


def _most_common(found: fourier.FourierNeurons) -> list[int]:
    """The best frequencies shared by the most Fourier neurons (several on a tie)."""
    freq = found.frequencies
    return [int(k) for k in freq.loc[freq["neurons"] == freq["neurons"].max(), "k"]] if len(freq) else []


def seeds_table(bound: dict[int, Circuits], released: Circuits, opened: int) -> pd.DataFrame:
    """One row per seed that bound (the opened one marked) and one for the released run: each run's
    key readings (:data:`SEED_COLUMNS`), the claims' values beside the opened run's charts."""
    runs = [(f"seed {s}" + (" (opened)" if s == opened else ""), r) for s, r in bound.items()]
    runs.append(("released run", released))
    return pd.DataFrame([{"run": name, **{c: f(r) for c, f in SEED_COLUMNS.items()}} for name, r in runs])


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
    """How many of the chapter's claims have each verdict, and which do not hold everywhere."""
    counts = {v: [e.claim for e in ev.values() if e.verdict == v] for v in claims.VERDICTS}
    missed = [c for v in claims.VERDICTS if v != "reproduced" for c in counts[v]]
    shown = ", ".join(f"{len(counts[v])} {v}" for v in claims.VERDICTS if counts[v])
    text = f"Of the chapter's {len(ev)} claims: {shown} (reproduced: on every seed that bound and on the released run)."
    if missed:
        text += " Not holding everywhere: " + "; ".join(f"“{c.statement}” ({ev[c.id].verdict})" for c in missed) + "."
    return text


def record_all(rebuild: Circuits, released: Circuits, ev: dict[str, Evidence]) -> dict[str, object]:
    """Record the chapter's headline numbers (``book/thresholds/09_circuits.yml``), the released
    run's as ``release_*``, and every claim's evidence (``claim.*``, the notebook's ``ev`` over the
    seeds that bound and the released run); returns the records."""
    numbers = {**rebuild.numbers(), **{f"release_{n}": v for n, v in released.numbers().items()}}
    return {**common.record_all(numbers), **claims.record_claims(ev.values())}
