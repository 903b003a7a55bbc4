"""Chapter 2, "Leading terms" (book/part1/02_leading_terms.ipynb): its config, charts and prose, in
page order (its claims are :data:`mechbook.leading_terms.claims.CH02_CLAIMS`, its numbers
:func:`mechbook.leading_terms.readings.check_numbers`).

The chapter runs full-batch float64 SGD from zero twice through
:func:`mechbook.leading_terms.check.check_runs` (configs in :data:`mechbook.leading_terms.runs.CHECK_RUNS`):
a check at small learning rates (every matrix against its closed form, in direction and size) and
a sweep at larger ones (how far in η·s the terms keep holding, and which matrix leaves first). It
then checks the paper's theorem as stated, on two runs inside its conditions
(:func:`mechbook.leading_terms.theorem.theorem_runs`, configs in
:data:`mechbook.leading_terms.runs.THEOREM_RUNS`): from zero and from Theorem D.13's Gaussian start.
The notebook computes the readings and the verdicts once; the builders here present them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

import mechbook
from mechbook import claims
from mechbook.chapters import common
from mechbook.leading_terms.check import (
    CheckRuns,
    CheckRunsConfig,
    check_summary,
    compared,
    departure_steps,
    departures,
    first_departure,
    has_learned,
    layer0,
    loss_drop,
    lowest_over_layers,
    slopes,
)
from mechbook.leading_terms.leading import coefficient
from mechbook.leading_terms.readings import BREAK_COSINE, CheckReadings
from mechbook.leading_terms.runs import CHECK_RUNS, THEOREM_RUNS
from mechbook.leading_terms.theorem import TheoremRuns, TheoremRunsConfig, gaussian_lr, window_eta_s, window_steps
from mechbook.validation import check_fields

STEM = "02_leading_terms"
TERMS = {"W_O": "W_O ∼ B", "V": "V ∼ (BΦ)ᵀ", "W": "W ∼ Q", "P": "P ∼ 𝒫"}
WIDTH = 680


@dataclass(frozen=True)
class ChapterConfig:
    """Chapter 2: its two full-batch runs (:class:`~mechbook.leading_terms.check.CheckRunsConfig`:
    the corpus, how many sequences, the check's and the sweep's learning rates and steps) and its
    runs inside the theorem's conditions (:class:`~mechbook.leading_terms.theorem.TheoremRunsConfig`)."""

    runs: CheckRunsConfig
    theorem: TheoremRunsConfig

    def __post_init__(self) -> None:
        check_fields(self)


#: The chapter's config per profile (its runs live in :data:`mechbook.leading_terms.runs.CHECK_RUNS`).
CONFIGS: dict[str, ChapterConfig] = {
    profile: ChapterConfig(CHECK_RUNS[profile], THEOREM_RUNS[profile]) for profile in CHECK_RUNS
}


def resolve(
    profile: str,
    n_sequences: int | None = None,
    check_steps: int | None = None,
    sweep_steps: int | None = None,
) -> ChapterConfig:
    """The chapter's config for ``profile`` with the reader's knobs (None: from the profile)."""
    return mechbook.resolve_profile(
        CONFIGS,
        profile,
        runs__n_sequences=n_sequences,
        runs__check_steps=check_steps,
        runs__sweep_steps=sweep_steps,
    )


def setup_prose(profile: str, cfg: ChapterConfig, data: CheckRuns) -> str:
    """The setup sentence: the profile, how many sequences of how many predictions, the vocabulary size
    and the model's depth."""
    return (
        f"Profile **{profile}**: the first **{len(data.tokens)}** TinyStories sequences of T = {data.tokens.shape[1] - 1} "
        f"predictions, vocabulary |V| = {data.vocab_size}, a model of **{cfg.runs.n_layers} layers** trained "
        "full-batch in float64."
    )


def shortcut_prose(s_last: int) -> str:
    """How far the large-s shortcut η⁴s⁴/8 is from the exact coefficient at the check's last step."""
    ratio = coefficient("W", 1.0, s_last, exact=False) / coefficient("W", 1.0, s_last)
    return (
        f"At $s = {s_last}$ the shortcut $s^4/8$ is **{ratio:.2f}** times the exact $\\tfrac12\\sum_{{k<s}} k^2(k-1)$: "
        f"comparing magnitudes with it would look like a {abs(ratio - 1):.0%} error of the theory when it is only an "
        "error of the shortcut."
    )


def check_table(check: pd.DataFrame, s_last: int) -> pd.DataFrame:
    """Cosine and ratio at a few steps of the smallest learning rate, per matrix."""
    rows = compared(check)
    small = rows[rows["lr"] == rows["lr"].min()]
    rows = small[small["step"].isin(sorted({3, 5, 10, s_last}))]
    return rows.pivot_table(index=["kind", "matrix"], columns="step", values=["cosine", "ratio"]).round(5)


def learned_words(drop: float, log_vocab: float) -> str:
    """How far the loss has fallen from log :math:`|V|`, and, by :func:`~mechbook.leading_terms.check.has_learned`,
    whether the model had learned anything there."""
    text = f"the loss had fallen {claims.fmt(drop, '.3f')} nats below log |V| = {log_vocab:.3f}"
    if not has_learned(drop):
        text += " (the model had barely learned: a cosine near 1 there says only that it had barely moved)"
    return text


def check_prose(data: CheckRuns, cfg: ChapterConfig, ev: dict[str, claims.Evidence]) -> str:
    """The check's numbers, how much the model had learned by its last step, and its two verdicts."""
    min_cos, max_err = check_summary(data.check)
    rows = data.check[data.check["lr"] == data.check["lr"].min()]
    last = float(rows.loc[rows["step"] == rows["step"].max(), "loss"].iloc[0])
    s_last = cfg.runs.check_steps
    return (
        f"With $\\eta = {float(data.check['lr'].min()):g}$ over $s = 1..{s_last}$, every matrix of every layer has "
        f"cosine at least **1 − {1 - min_cos:.1e}** with its closed form and a magnitude ratio within "
        f"**{max_err:.2%}** of 1, the coefficients being the exact $\\tfrac{{\\eta^4}}{{2}}\\sum_{{k<s}}k^2(k-1)$ of $W$ "
        f"and $P$. At the last step {learned_words(loss_drop(last, data.vocab_size), float(np.log(data.vocab_size)))}: "
        "the check is of the first steps, where the leading terms are meant to hold.\n\n"
        f"{ev['ch02.closed_form_direction'].sentence()}\n\n{ev['ch02.closed_form_size'].sentence()}"
    )


def norm_chart(check: pd.DataFrame, s_last: int) -> alt.LayerChart:
    """Norms of layer 0 against s on log axes: autograd points, closed forms dashed; a menu picks η."""
    data = layer0(compared(check))
    data["term"] = data["kind"].map(TERMS)
    lrs = sorted(data["lr"].unique())
    pick = alt.selection_point(
        fields=["lr"], bind=alt.binding_select(options=lrs, name="learning rate η "), value=lrs[0]
    )
    base = alt.Chart(data).add_params(pick).transform_filter(pick)
    x = alt.X("step:Q", scale=alt.Scale(type="log", domain=[1, s_last]), title="SGD steps s (log)")
    color = alt.Color(
        "term:N", title="matrix and its term", sort=list(TERMS.values()), legend=alt.Legend(orient="bottom")
    )
    points = base.mark_point(filled=True, size=50).encode(
        x=x,
        y=alt.Y("norm:Q", scale=alt.Scale(type="log"), title="Frobenius norm ‖M‖_F (log)"),
        color=color,
        tooltip=["term", "step", alt.Tooltip("norm:Q", format=".3e"), alt.Tooltip("ratio:Q", format=".5f")],
    )
    lines = base.mark_line(strokeDash=[4, 3]).encode(x=x, y="predicted_norm:Q", color=color)
    _, max_err = check_summary(check)
    return (points + lines).properties(
        width=WIDTH - 80,
        height=260,
        title=f"Norms grow as s, s², s⁴: the closed forms (dashed) sit within {max_err:.2%} of the autograd points",
    )


def slope_table(check: pd.DataFrame, s_last: int) -> pd.DataFrame:
    """The fitted exponents in s and in η per kind (:func:`~mechbook.leading_terms.check.slopes`)."""
    return slopes(check, s_last).round(3)


def slopes_prose(ev: dict[str, claims.Evidence]) -> str:
    """The verdicts on the two readings of the slopes."""
    return f"{ev['ch02.s_slopes_above'].sentence()}\n\n{ev['ch02.eta_exponents'].sentence()}"


def _kinds(kinds: tuple[str, ...]) -> str:
    names = [TERMS[k].split(" ")[0] for k in kinds]
    return names[0] + " alone" if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def sweep_chart(sweep: pd.DataFrame, vocab_size: int) -> alt.VConcatChart:
    """Lowest cosine over the layers with the leading term against η·s for the sweep's learning
    rates (one panel per kind), above the training loss against η·s; the title says which matrix
    leaves first, where, and how far the loss had fallen there."""
    data = lowest_over_layers(sweep)
    data["term"] = data["kind"].map(TERMS)
    lr_color = alt.Color(
        "lr:O", title="learning rate η", scale=alt.Scale(scheme="viridis"), legend=alt.Legend(orient="bottom")
    )
    x = alt.X("eta_s:Q", title="η·s")
    cosines = (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("cosine:Q", title="lowest cosine over the layers", scale=alt.Scale(domain=[-1, 1])),
            color=lr_color,
            tooltip=[
                "term",
                "lr",
                "step",
                alt.Tooltip("eta_s:Q", format=".2f", title="η·s"),
                alt.Tooltip("cosine:Q", format=".4f"),
                alt.Tooltip("loss:Q", format=".3f", title="loss (nats)"),
            ],
        )
        .properties(width=WIDTH // 2 - 70, height=150)
        .facet(facet=alt.Facet("term:N", title=None, sort=list(TERMS.values())), columns=2)
    )
    log_vocab = float(np.log(vocab_size))
    loss = (
        alt.Chart(data[data["kind"] == "W_O"])
        .mark_line(point=True, clip=True)
        .encode(
            x=x,
            y=alt.Y("loss:Q", title="training loss (nats, clipped)", scale=alt.Scale(domain=[0, 1.2 * log_vocab])),
            color=lr_color,
            tooltip=["lr", "step", alt.Tooltip("loss:Q", format=".3f")],
        )
        .properties(width=WIDTH - 100, height=150)
    )
    first = first_departure(sweep, BREAK_COSINE)
    if first:
        drop = loss_drop(first.loss, vocab_size)
        title = (
            f"{_kinds(first.kinds)} first below cosine {BREAK_COSINE}, at η·s = {first.eta_s:.3g} (η = {first.lr:g}), "
            f"when the loss had fallen {drop:.3f} nats from log |V| = {log_vocab:.3f}"
        )
    else:
        title = f"No matrix falls below cosine {BREAK_COSINE} up to η·s = {sweep['eta_s'].max():.3g}"
    return alt.vconcat(cosines, loss).properties(title=title)


def order_prose(order: pd.DataFrame) -> str:
    """The order in which the terms leave at each learning rate where some term leaves: each term
    with the step it first falls below the line, earliest first ("never" for one that does not)."""
    parts = []
    for lr, row in order.dropna(how="all").iterrows():
        left = row.dropna().sort_values(kind="stable")
        terms = [f"{TERMS[k].split(' ')[0]} {int(v)}" for k, v in left.items()]
        terms += [f"{TERMS[k].split(' ')[0]} never" for k in row.index if k not in left.index]
        parts.append(f"η = {lr:g}: " + ", ".join(terms))
    return "The step at which each term leaves, per learning rate: " + "; ".join(parts) + "."


def departure_prose(data: CheckRuns, cfg: ChapterConfig, ev: dict[str, claims.Evidence]) -> str:
    """Which matrix leaves its leading form first and at what η·s, how much the loss had fallen by
    then, where each learning rate's terms stop holding, which rates diverged, and the verdict on
    the attention terms leaving first."""
    sweep, vocab = data.sweep, data.vocab_size
    log_vocab = float(np.log(vocab))
    first = first_departure(sweep, BREAK_COSINE)
    diverged = [lr for lr, g in sweep.groupby("lr") if g["step"].max() < cfg.runs.sweep_steps]
    if first:
        text = (
            f"The first matrix to leave its leading form (lowest cosine over the layers below {BREAK_COSINE}) is "
            f"**{_kinds(first.kinds)}**, at **η·s = {first.eta_s:.3g}** (η = {first.lr:g}, s = {first.step}); "
            f"{learned_words(loss_drop(first.loss, vocab), log_vocab)}. Per learning rate, the first η·s below "
            f"{BREAK_COSINE}: "
            + "; ".join(
                f"η = {d.lr:g} at **{d.eta_s:.3g}** ({_kinds(d.kinds)}, loss {d.loss:.3f} nats)"
                for d in departures(sweep, BREAK_COSINE)
            )
            + "."
        )
        text += " " + order_prose(departure_steps(sweep, BREAK_COSINE))
    else:
        text = f"No matrix falls below cosine {BREAK_COSINE} up to η·s = {sweep['eta_s'].max():.3g}."
    text += f" At s = 0 the loss is log |V| = {log_vocab:.3f} nats."
    if diverged:
        text += (
            f" Learning rate(s) {', '.join(f'{lr:g}' for lr in diverged)} diverged before {cfg.runs.sweep_steps} steps."
        )
    return text + "\n\n" + ev["ch02.attention_leaves_first"].sentence()


def theorem_prose(
    theorem: TheoremRuns, cfg: ChapterConfig, readings: CheckReadings, ev: dict[str, claims.Evidence]
) -> str:
    """The theorem's setting as run (and whether it meets the conditions), each start's window, the
    verdicts on its bounds, how loose the attention bounds are, where the Gaussian start's W and P
    point, and how far past the window the sweep's terms still held."""
    t, n = cfg.theorem, readings.numbers
    runs = (
        f"zero start at η = {t.zero_lr:g}: window s ≤ {window_steps(t.zero_lr, t.n_layers, theorem.context)}",
        f"D.13's Gaussian start at η = 1/T = {gaussian_lr(theorem.context):.4g}: window s ≤ "
        f"{window_steps(gaussian_lr(theorem.context), t.n_layers, theorem.context)}",
    )
    unmet = sorted({c for v in theorem.unmet.values() for c in v})
    setting = (
        "inside every condition of the theorem"
        if not unmet
        else f"**outside the theorem's conditions** ({', '.join(unmet)}), so its claims are left untested"
    )
    text = (
        f"Both runs: |V| = {theorem.vocab_size}, T = {theorem.context}, L = {theorem.n_layers}, a full batch of "
        f"{t.n_sequences} sequences in float64, {t.steps} steps; {setting}. The window is η·s ≤ "
        f"{window_eta_s(theorem.n_layers, theorem.context):.4f}: {runs[0]}; {runs[1]}.\n\n"
        f"{ev['ch02.theorem_bounds'].sentence()}\n\n{ev['ch02.theorem_bounds_gaussian'].sentence()}\n\n"
        f"{ev['ch02.attention_bounds_loose'].sentence()}"
    )
    if "theorem_gaussian_cos_W" not in n:
        text += "\n\nNo logged step of the Gaussian start is inside its window."
    else:
        cosines = {k: n[f"theorem_gaussian_cos_{k}"] for k in ("V", "W", "P")}
        along = [k for k, c in cosines.items() if c >= BREAK_COSINE]
        off = [k for k, c in cosines.items() if c < BREAK_COSINE]
        listed = "; ".join(f"{k} {c:.4f}" for k, c in cosines.items())
        text += f"\n\nFrom D.13's start, at the last step of its window (lowest cosines over the layers: {listed}), "
        if not off:
            text += "every matrix already points along its term."
        else:
            text += (
                f"{' and '.join(along)} already point{'s' if len(along) == 1 else ''} along {'its term' if len(along) == 1 else 'their terms'} and "
                if along
                else ""
            )
            text += f"{' and '.join(off)} do{'es' if len(off) == 1 else ''} not yet"
            size = n["theorem_gaussian_term_over_start"]
            if size < 1:
                text += (
                    f": the attention terms there are at most {size:.2g} of the norm their matrices started from, so the "
                    "start's noise still dominates them, which the theorem allows (it bounds the distance from the "
                    "terms, not the direction)."
                )
            else:
                text += f", although the attention terms there are already {size:.2g} times the norm of the start."
    ratio, context = n["breakdown_over_window"], cfg.runs.corpus.context
    where = f"{ratio:.3g} times the window's end" if ratio > 1 else "inside the window"
    return text + (
        f"\n\nOn this page's check corpus (T = {context}, L = {cfg.runs.n_layers}) the window ends at "
        f"η·s = {window_eta_s(cfg.runs.n_layers, context):.4f}, and the sweep's cosines first fall below "
        f"{BREAK_COSINE} at η·s = {n['breakdown_eta_s']:.3g}: {where}."
    )


def theorem_chart(theorem: TheoremRuns) -> alt.VConcatChart:
    """Distance from the term over the theorem's bound against s, per start (largest over the
    layers, log axis), with each start's window marked; below, the Gaussian start's cosines with
    the terms. The title gives the largest ratio inside each window."""
    frame = theorem.frame[theorem.frame["bound"] > 0]
    worst = frame.groupby(["init", "kind", "step"], as_index=False).agg(
        ratio=("ratio", "max"), cosine=("cosine", "min"), in_window=("in_window", "first")
    )
    worst["term"] = worst["kind"].map(TERMS)
    # a matrix exactly on its term (W_O after one step, W and P before three) has no place on a log axis
    ratios = worst[worst["ratio"] > 0]
    color = alt.Color(
        "term:N", title="matrix and its term", sort=list(TERMS.values()), legend=alt.Legend(orient="bottom")
    )
    x = alt.X("step:Q", title="gradient steps s", axis=alt.Axis(tickMinStep=1))
    panels = []
    for init, label in (("zero", "from zero (D.10)"), ("gaussian", "from D.13's Gaussian start")):
        data = ratios[ratios["init"] == init]
        last = int(worst.loc[(worst["init"] == init) & worst["in_window"], "step"].max())
        lines = (
            alt.Chart(data)
            .mark_line(point=True)
            .encode(
                x=x,
                y=alt.Y("ratio:Q", scale=alt.Scale(type="log"), title="‖M − term‖_F / bound (log)"),
                color=color,
                tooltip=["term:N", "step:Q", alt.Tooltip("ratio:Q", format=".3e")],
            )
        )
        window = alt.Chart(pd.DataFrame({"step": [last]})).mark_rule(strokeDash=[4, 3], color="gray").encode(x="step:Q")
        one = alt.Chart(pd.DataFrame({"ratio": [1.0]})).mark_rule(color="firebrick").encode(y="ratio:Q")
        panels.append(
            (lines + window + one).properties(width=WIDTH // 2 - 60, height=200, title=f"{label}: window s ≤ {last}")
        )
    gauss = worst[worst["init"] == "gaussian"]
    cosines = (
        alt.Chart(gauss)
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("cosine:Q", title="lowest cosine with the term", scale=alt.Scale(domain=[-1, 1])),
            color=color,
            tooltip=["term:N", "step:Q", alt.Tooltip("cosine:Q", format=".4f")],
        )
        .properties(width=WIDTH - 100, height=150, title="D.13's Gaussian start: cosine of each matrix with its term")
    )
    inside = theorem.frame[theorem.frame["in_window"]].groupby("init")["ratio"].max()
    held = "every matrix is within its bound" if inside.max() <= 1 else "some matrix is past its bound"
    return alt.vconcat(alt.hconcat(*panels), cosines).properties(
        title=alt.TitleParams(
            f"Inside the theorem's window {held}",
            subtitle=f"distance / bound at most {inside['zero']:.1e} from zero, {inside['gaussian']:.2g} from D.13's start",
        )
    )


def record_all(readings: CheckReadings, ev: dict[str, claims.Evidence]) -> dict[str, Any]:
    """Record the chapter's numbers (bounded by ``book/thresholds/02_leading_terms.yml``) and its
    claims' verdicts; return the records."""
    records = common.record_all(readings.numbers)
    records.update(claims.record_claims(ev.values()))
    return records
