"""Chapter 2, "Leading terms": its profiles, the autograd check's summaries, charts and prose.

The chapter runs full-batch float64 SGD from zero twice through :mod:`mechbook.leading_terms.check`:
a check at small learning rates (every matrix against its closed form, in direction and size) and
a sweep at larger ones (how far in η·s the terms keep holding).
"""

from __future__ import annotations

from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd

from mechbook.leading_terms.check import CheckConfig, cached_autograd_check
from mechbook.leading_terms.corpus import CORPUS_PROFILES, CorpusConfig, load_corpus
from mechbook.leading_terms.leading import KINDS, coefficient, loglog_slope
from mechbook.leading_terms.stats import CorpusStats, cached_corpus_stats

TERMS = {"W_O": "W_O ∼ B", "V": "V ∼ (BΦ)ᵀ", "W": "W ∼ Q", "P": "P ∼ 𝒫"}
COSINE_FLOOR = 0.999
RATIO_TOLERANCE = 0.02
BREAK_COSINE = 0.99
WIDTH = 680


@dataclass(frozen=True)
class Chapter2Config:
    """Chapter 2: the corpus, how many of its sequences the full-batch runs use, the small learning
    rates of the step-by-step check and the larger ones of the validity sweep, and the layers."""

    corpus: CorpusConfig
    n_sequences: int
    check_lrs: tuple[float, ...]
    check_steps: int
    sweep_lrs: tuple[float, ...]
    sweep_steps: int
    n_layers: int = 3

    def __post_init__(self) -> None:
        if self.n_sequences < 1:
            raise ValueError(f"n_sequences must be >= 1, got {self.n_sequences}")
        if self.check_steps < 4:
            raise ValueError(f"check_steps must be >= 4 (W and P are zero until step 3), got {self.check_steps}")

    def check(self) -> CheckConfig:
        return CheckConfig(lrs=self.check_lrs, steps=self.check_steps, n_layers=self.n_layers)

    def sweep(self) -> CheckConfig:
        return CheckConfig(lrs=self.sweep_lrs, steps=self.sweep_steps, n_layers=self.n_layers)


#: The chapter's config per profile: its corpus, the check's and the sweep's learning rates and steps.
CONFIGS: dict[str, Chapter2Config] = {
    "smoke": Chapter2Config(
        CORPUS_PROFILES["smoke"],
        n_sequences=32,
        check_lrs=(0.03, 0.1),
        check_steps=12,
        sweep_lrs=(1.0, 2.0),
        sweep_steps=16,
    ),
    "cpu": Chapter2Config(
        CORPUS_PROFILES["cpu"],
        n_sequences=256,
        check_lrs=(0.01, 0.03, 0.1),
        check_steps=20,
        sweep_lrs=(0.25, 0.5, 1.0, 2.0),
        sweep_steps=40,
    ),
    "paper": Chapter2Config(
        CORPUS_PROFILES["paper"],
        n_sequences=512,
        check_lrs=(0.01, 0.03, 0.1),
        check_steps=20,
        sweep_lrs=(0.25, 0.5, 1.0, 2.0),
        sweep_steps=80,
    ),
}


@dataclass
class Chapter2Data:
    """The first ``n_sequences`` sequences of the corpus, their statistics and both runs."""

    tokens: np.ndarray
    vocab_size: int
    stats: CorpusStats
    check: pd.DataFrame
    sweep: pd.DataFrame


def compute(cfg: Chapter2Config) -> Chapter2Data:
    """Load the corpus, take its first ``n_sequences`` sequences, and run (or read from the cache)
    the check and the sweep."""
    tokenizer, sequences = load_corpus(cfg.corpus)
    tokens = sequences.tokens[: cfg.n_sequences]
    stats = cached_corpus_stats(tokens, tokenizer.vocab_size)
    check = cached_autograd_check(tokens, stats, tokenizer.vocab_size, cfg.check())
    sweep = cached_autograd_check(tokens, stats, tokenizer.vocab_size, cfg.sweep())
    return Chapter2Data(tokens, tokenizer.vocab_size, stats, check, sweep)


def setup_markdown(profile: str, cfg: Chapter2Config, data: Chapter2Data) -> str:
    """The setup sentence: the profile, how many sequences of how many predictions, the vocabulary size
    and the model's depth."""
    return (
        f"Profile **{profile}**: the first **{len(data.tokens)}** TinyStories sequences of T = {data.tokens.shape[1] - 1} "
        f"predictions, vocabulary |V| = {data.vocab_size}, a model of **{cfg.n_layers} layers** trained full-batch in float64."
    )


def shortcut_markdown(s_last: int) -> str:
    """How far the large-s shortcut η⁴s⁴/8 is from the exact coefficient at the check's last step."""
    ratio = coefficient("W", 1.0, s_last, exact=False) / coefficient("W", 1.0, s_last)
    return (
        f"At $s = {s_last}$ the shortcut $s^4/8$ is **{ratio:.2f}** times the exact $\\tfrac12\\sum_{{k<s}} k^2(k-1)$: "
        f"comparing magnitudes with it would look like a {abs(ratio - 1):.0%} error of the theory when it is only an "
        "error of the shortcut."
    )


def _compared(check: pd.DataFrame) -> pd.DataFrame:
    return check[check["predicted_norm"] > 0]


def check_summary(check: pd.DataFrame) -> tuple[float, float]:
    r"""(lowest cosine, largest :math:`|\mathrm{ratio} - 1|`) at the smallest learning rate, over every matrix and step
    with a non-zero prediction."""
    compared = _compared(check)
    small = compared[compared["lr"] == compared["lr"].min()]
    return float(small["cosine"].min()), float((small["ratio"] - 1).abs().max())


def check_table(check: pd.DataFrame, s_last: int) -> pd.DataFrame:
    """Cosine and ratio at a few steps of the smallest learning rate, per matrix."""
    compared = _compared(check)
    small = compared[compared["lr"] == compared["lr"].min()]
    rows = small[small["step"].isin(sorted({3, 5, 10, s_last}))]
    return rows.pivot_table(index=["kind", "matrix"], columns="step", values=["cosine", "ratio"]).round(5)


def check_markdown(check: pd.DataFrame, s_last: int) -> str:
    """The verdict of the check, from its summary."""
    min_cos, max_err = check_summary(check)
    smallest = float(check["lr"].min())
    confirmed = min_cos > COSINE_FLOOR and max_err < RATIO_TOLERANCE
    verdict = (
        "confirmed, including"
        if confirmed
        else "NOT confirmed (look at the table for the matrix that fails), in particular"
    )
    return (
        f"With $\\eta = {smallest:g}$ over $s = 1..{s_last}$, every matrix of every layer has cosine at least "
        f"**1 − {1 - min_cos:.1e}** with its closed form and a magnitude ratio within **{max_err:.2%}** of 1. "
        f"The derived coefficients are {verdict} the $\\tfrac{{\\eta^4}}{{2}}\\sum_{{k<s}}k^2(k-1)$ of $W$ and $P$."
    )


def layer0(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of W_O and of layer 0 (the other layers coincide to leading order), with term labels."""
    rows = frame[frame["layer"].isna() | (frame["layer"] == 0)].copy()
    rows["term"] = rows["kind"].map(TERMS)
    return rows


def norm_chart(check: pd.DataFrame, s_last: int) -> alt.LayerChart:
    """Norms of layer 0 against s on log axes: autograd points, closed forms dashed; a menu picks η."""
    data = layer0(_compared(check))
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
    return (points + lines).properties(
        width=WIDTH - 80,
        height=260,
        title="Norms grow as s, s², s⁴: the closed forms (dashed) sit on the autograd points",
    )


def slopes(check: pd.DataFrame, s_last: int) -> pd.DataFrame:
    """Per kind: the log-log slope of the norm in s over the second half of the runs (one fit over
    every learning rate's points, which share their steps), and in η at the last step."""
    data = layer0(_compared(check))
    small = data[data["step"] >= s_last // 2]
    final = data[data["step"] == s_last]
    table = pd.DataFrame(
        {
            "slope in s (second half of the run)": {
                k: loglog_slope(g["step"], g["norm"]) for k, g in small.groupby("kind")
            },
            f"slope in η (at s = {s_last})": {k: loglog_slope(g["lr"], g["norm"]) for k, g in final.groupby("kind")},
        }
    )
    return table.loc[list(KINDS)]


def sweep_chart(sweep: pd.DataFrame, vocab_size: int) -> alt.VConcatChart:
    """Cosine with the leading term against η·s for the sweep's learning rates (one panel per kind),
    above the training loss against η·s."""
    data = layer0(sweep.dropna(subset=["cosine"]))
    breaks = breakdown(sweep)
    lr_color = alt.Color(
        "lr:O", title="learning rate η", scale=alt.Scale(scheme="viridis"), legend=alt.Legend(orient="bottom")
    )
    x = alt.X("eta_s:Q", title="η·s")
    cosines = (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("cosine:Q", title="cosine with the leading term", scale=alt.Scale(domain=[-1, 1])),
            color=lr_color,
            tooltip=[
                "term",
                "lr",
                "step",
                alt.Tooltip("eta_s:Q", format=".2f", title="η·s"),
                alt.Tooltip("cosine:Q", format=".4f"),
            ],
        )
        .properties(width=WIDTH // 2 - 70, height=150)
        .facet(facet=alt.Facet("term:N", title=None, sort=list(TERMS.values())), columns=2)
    )
    cap = 1.2 * float(np.log(vocab_size))
    loss = (
        alt.Chart(data[data["kind"] == "W_O"])
        .mark_line(point=True, clip=True)
        .encode(
            x=x,
            y=alt.Y("loss:Q", title="training loss (nats, clipped)", scale=alt.Scale(domain=[0, cap])),
            color=lr_color,
            tooltip=["lr", "step", alt.Tooltip("loss:Q", format=".3f")],
        )
        .properties(width=WIDTH - 100, height=150)
    )
    first = (
        f"first below cosine {BREAK_COSINE} at η·s = {breaks['eta_s'].min():.3g}"
        if len(breaks)
        else f"never below cosine {BREAK_COSINE}"
    )
    return alt.vconcat(cosines, loss).properties(
        title=f"The leading terms hold while η·s is small ({first}), and give way as the loss starts to fall fast"
    )


def breakdown(sweep: pd.DataFrame) -> pd.DataFrame:
    """Per learning rate of the sweep: the first η·s at which some matrix of layer 0 (or W_O) falls
    below cosine 0.99, and the loss there. Learning rates that never fall below are left out."""
    data = layer0(sweep.dropna(subset=["cosine"]))
    below = data[data["cosine"] < BREAK_COSINE]
    first = below.groupby("lr")["eta_s"].min()
    losses = data[data["kind"] == "W_O"].set_index(["lr", "eta_s"])["loss"]
    return pd.DataFrame(
        {"lr": first.index, "eta_s": first.values, "loss": [losses[(lr, e)] for lr, e in first.items()]}
    )


def breakdown_markdown(sweep: pd.DataFrame, cfg: Chapter2Config, vocab_size: int) -> str:
    """Where the terms stop holding, per learning rate, and which rates diverged."""
    breaks = breakdown(sweep)
    diverged = [lr for lr, g in sweep.groupby("lr") if g["step"].max() < cfg.sweep_steps]
    if len(breaks):
        text = f"Earliest η·s at which some matrix falls below cosine {BREAK_COSINE}, per learning rate: " + ", ".join(
            f"η = {r.lr:g} at **{r.eta_s:.3g}** (loss {r.loss:.3f} nats)" for r in breaks.itertuples()
        )
    else:
        text = f"No matrix falls below cosine {BREAK_COSINE} up to η·s = {sweep['eta_s'].max():.3g}"
    text += f"; at s = 0 the loss is log|V| = {np.log(vocab_size):.3f} nats."
    if diverged:
        text += f" Learning rate(s) {', '.join(f'{lr:g}' for lr in diverged)} diverged before {cfg.sweep_steps} steps."
    return text


def headline_records(data: Chapter2Data, cfg: Chapter2Config) -> dict[str, float]:
    """The numbers ``book/thresholds/02_leading_terms.yml`` bounds: the check's lowest cosine and
    largest ratio error, the slopes in s and η per kind, and the first η·s below cosine 0.99 (the
    sweep's largest η·s when none falls below)."""
    min_cos, max_err = check_summary(data.check)
    table = slopes(data.check, cfg.check_steps)
    out = {"check_min_cosine": min_cos, "check_max_ratio_error": max_err}
    for kind in KINDS:
        out[f"slope_s_{kind}"] = float(table.iloc[:, 0][kind])
        out[f"slope_eta_{kind}"] = float(table.iloc[:, 1][kind])
    breaks = breakdown(data.sweep)
    out["breakdown_eta_s"] = float(breaks["eta_s"].min()) if len(breaks) else float(data.sweep["eta_s"].max())
    return out
