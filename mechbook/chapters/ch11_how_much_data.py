"""Chapter 11, "How much data": the two sweeps' configs, the threshold readings, charts and
computed prose. Each sweep point is a full training run
(:func:`mechbook.assign_add.sweeps.run_sweep`, the runs of a sweep trained as one stack).
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

import mechbook
from mechbook import viz
from mechbook.assign_add.runs import SWEEPS
from mechbook.assign_add.sweeps import PAPER_THRESHOLDS, SweepsConfig
from mechbook.assign_add.task import POOL_NAMES
from mechbook.assign_add.train import TrainConfig

SUMMARY_COLUMNS = ["knob", "value", "score", "train_loss", "0var_train", "0var_heldout", "1var_train", "2var_train"]
DIP = 0.02
"""A score lower than the previous point's by more than this counts as a dip."""


CONFIGS: dict[str, SweepsConfig] = SWEEPS
"""The sweeps per profile (their home and the reasons for each size:
:data:`mechbook.assign_add.runs.SWEEPS`)."""


def resolve(profile: str, steps: int | None = None, seed: int | None = None) -> SweepsConfig:
    """The chapter's config for ``profile`` with the reader's knobs (None: from the profile):
    ``steps`` and ``seed`` of every run of both sweeps."""
    return mechbook.resolve_profile(
        CONFIGS,
        profile,
        f_train__steps=steps,
        r_train__steps=steps,
        f_train__seed=seed,
        r_train__seed=seed,
        f_train__model__seed=seed,
        r_train__model__seed=seed,
    )


def describe_run(name: str, t: TrainConfig) -> str:
    """One sweep's run size in words."""
    return (
        f"{name}: {t.steps:,} steps of batch {t.batch_size}, d_model = {t.model.d_model}, "
        f"d_mlp = {t.model.d_mlp}, lr {t.lr:g}, seed {t.seed}"
    )


def setup_prose(cfg: SweepsConfig) -> str:
    """The two sweeps' sizes and how they train."""
    n = len(cfg.f_values) + len(cfg.r_values)
    return (
        describe_run("Each f point", cfg.f_train) + ";  \n" + describe_run("each r point", cfg.r_train) + ".  \n"
        f"{len(cfg.f_values)} values of f and {len(cfg.r_values)} of r: {n} training runs; the runs of one sweep "
        "differ only in their knob, so they train together as one stacked model (each run's own data, "
        "initialisation and optimiser state), each cached under its own entry."
    )


def threshold_or_none(star: float) -> float | None:
    """A threshold for the records: None when it was not reached (NaN)."""
    return None if np.isnan(star) else float(star)


def describe(name: str, star: float, runs: pd.DataFrame, level: float) -> str:
    """The threshold of one sweep in words: not reached, at or below the grid, or interpolated."""
    if np.isnan(star):
        best = runs.loc[runs["score"].idxmax()]
        return f"**{name}**: the score never reaches {level} on this grid (best {best['score']:.3f} at {name} = {best['value']:g})."
    if star == runs["value"].iloc[0]:
        return f"**{name}**: already at {level} at the smallest value tried, {star:g}: the threshold is at or below it."
    return f"**{name}**: the score first reaches {level} at {name} ≈ **{star:.3f}** (interpolated)."


def monotone_note(name: str, runs: pd.DataFrame) -> str:
    """A note on the largest dip of a sweep's scores (empty when they never drop by more than ``DIP``)."""
    pairs = list(zip(runs["value"], runs["score"]))
    drops = [(a, b, sa, sb) for (a, sa), (b, sb) in zip(pairs[:-1], pairs[1:]) if sb < sa - DIP]
    if not drops:
        return ""
    a, b, sa, sb = max(drops, key=lambda d: d[2] - d[3])
    return (
        f"  \nThe {name} scores are not monotone: the largest dip is from {sa:.2f} at {name} = {a:g} to {sb:.2f} at "
        f"{name} = {b:g}. Each point is a single run (one seed), so the book cannot tell such a dip from "
        "seed-to-seed variation; the threshold rule takes the first crossing."
    )


def thresholds_prose(f_runs: pd.DataFrame, r_runs: pd.DataFrame, stars: dict[str, float], level: float) -> str:
    """Both thresholds, the r sweep scored on 2-var held-out pairs alone, and any dips."""
    held = r_runs.assign(score=r_runs["2var_heldout"])
    return (
        describe("f", stars["f"], f_runs, level)
        + "  \n"
        + describe("r", stars["r"], r_runs, level)
        + "  \nScoring the r runs on 2-var held-out pairs alone (variables in their usual slots): "
        + describe("r", stars["r_heldout"], held, level)
        + monotone_note("f", f_runs)
        + monotone_note("r", r_runs)
    )


def finding(name: str, star: float, what: str, level: float) -> list[str]:
    """A sweep chart's two-line title."""
    return [
        f"{what} from {name} ≈ {star:.2f} on" if not np.isnan(star) else f"{what}: never {level} here",
        "(red: threshold; dashed: level)",
    ]


def sweep_chart(
    runs: pd.DataFrame, star: float, level: float, knob_title: str, score_title: str, title: list[str]
) -> alt.LayerChart:
    """Score against knob value, the level dashed and the threshold in red."""
    line = (
        alt.Chart(runs)
        .mark_line(point=True)
        .encode(
            x=alt.X("value:Q", title=knob_title, scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("score:Q", title=score_title, scale=alt.Scale(domain=[0, 1])),
            tooltip=[alt.Tooltip("value:Q", format=".3f"), alt.Tooltip("score:Q", format=".3f")],
        )
    )
    layers = [line, alt.Chart(pd.DataFrame({"y": [level]})).mark_rule(strokeDash=[4, 4], color="gray").encode(y="y:Q")]
    if not np.isnan(star):
        layers.append(alt.Chart(pd.DataFrame({"x": [star]})).mark_rule(color="firebrick").encode(x="x:Q"))
    return alt.layer(*layers).properties(
        width=250, height=240, title=alt.TitleParams(title, fontSize=12, anchor="start")
    )


def sweeps_chart(f_runs: pd.DataFrame, r_runs: pd.DataFrame, stars: dict[str, float], level: float) -> alt.HConcatChart:
    """The two sweeps side by side."""
    return sweep_chart(
        f_runs,
        stars["f"],
        level,
        "f (fraction of pairs in training)",
        "accuracy, held-out pairs (0-var)",
        finding("f", stars["f"], "Unseen pairs are summed", level),
    ) | sweep_chart(
        r_runs,
        stars["r"],
        level,
        "r (fraction of 2-var rows kept)",
        "accuracy, 2-var generalisation pools",
        finding("r", stars["r"], "2-var sequences generalise", level),
    )


def pools_chart(runs: pd.DataFrame) -> alt.TopLevelMixin:
    """Every pool's final accuracy along both sweeps, one panel per sweep."""
    pools = [c for c in POOL_NAMES if c in runs.columns]
    long = runs.melt(id_vars=["knob", "value"], value_vars=pools, var_name="pool", value_name="accuracy")
    long["sweep"] = "sweep over " + long["knob"]
    return viz.highlight_lines(
        long,
        x="value",
        y="accuracy",
        series="pool",
        series_title="evaluation pool",
        point=True,
        facet="sweep",
        y_domain=[0, 1],
        x_title="knob value (f or r)",
        y_title="final accuracy",
        title="Each pool's final accuracy along both sweeps",
    )


def last_run_verdict(history: pd.DataFrame, level: float, steps: int) -> str:
    """Whether every pool of a run ends at ``level`` or above, else which pool ends lowest."""
    curves = history[history["pool"] != "train"]
    last = curves[curves["step"] == curves["step"].max()]
    lowest = last.loc[last["accuracy"].idxmin()]
    if lowest.accuracy >= level:
        return f"every pool ends at {lowest.accuracy:.2f} or above: all three phases arrive within {steps:,} steps"
    return f"{lowest.pool} ends at {lowest.accuracy:.2f}, still below {level}"


def last_run_chart(history: pd.DataFrame, r: float, level: float, steps: int) -> alt.TopLevelMixin:
    """The training curves of one sweep run, titled with :func:`last_run_verdict`."""
    curves = history[history["pool"] != "train"]
    return viz.highlight_lines(
        curves,
        x="step",
        y="accuracy",
        series="pool",
        series_title="evaluation pool",
        y_domain=[0, 1],
        x_title="training step",
        y_title="accuracy",
        title=[f"The sweep run with r = {r:g}:", last_run_verdict(history, level, steps)],
    )


def shown(x: float) -> str:
    """A threshold for the table: three decimals, or 'not reached'."""
    return "not reached" if np.isnan(x) else f"{x:.3f}"


def thresholds_table(stars: dict[str, float]) -> pd.DataFrame:
    """This book's thresholds beside the paper's."""
    return pd.DataFrame(
        [
            {"sweep": "f (held-out pairs)", "this book": shown(stars["f"]), "paper (approx.)": PAPER_THRESHOLDS["f"]},
            {"sweep": "r (2-var union)", "this book": shown(stars["r"]), "paper (approx.)": PAPER_THRESHOLDS["r"]},
            {"sweep": "r (2-var held-out pairs only)", "this book": shown(stars["r_heldout"]), "paper (approx.)": "-"},
        ]
    )


def record_all(f_runs: pd.DataFrame, r_runs: pd.DataFrame, stars: dict[str, float]) -> dict[str, object]:
    """Record the chapter's headline numbers (``book/thresholds/11_how_much_data.yml``)."""
    runs = pd.concat([f_runs, r_runs], ignore_index=True)
    values = {
        "f_threshold": threshold_or_none(stars["f"]),
        "r_threshold": threshold_or_none(stars["r"]),
        "r_heldout_threshold": threshold_or_none(stars["r_heldout"]),
        "f_scores": [float(s) for s in f_runs["score"]],
        "r_scores": [float(s) for s in r_runs["score"]],
        "n_runs": len(runs),
        "max_final_train_loss": float(runs["train_loss"].max()),
    }
    return {name: mechbook.record(name, value) for name, value in values.items()}
