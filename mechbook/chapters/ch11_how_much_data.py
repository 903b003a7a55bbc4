"""Chapter 11, "How much data": the sweeps' config, the claims, and the threshold readings' charts
and computed prose, in the order the page shows them.

The runs and their readings come from :mod:`mechbook.assign_add.sweeps` (each sweep point a full
training run, the runs of a sweep trained as one stack; :func:`~mechbook.assign_add.sweeps.run_sweeps`
reads thresholds per seed, chance, the constant-answer control, convergence and dips).
"""

from __future__ import annotations

import math
import statistics

import altair as alt
import pandas as pd

import mechbook
from mechbook import viz
from mechbook.assign_add.claims import LEVEL, TWO_VAR_FIT, fits
from mechbook.assign_add.config import TrainConfig
from mechbook.assign_add.model import ModelConfig
from mechbook.assign_add.readings import last_run_reading, sweep_numbers
from mechbook.assign_add.runs import SWEEPS
from mechbook.assign_add.sweeps import (
    AUTHORS_SWEEP_STEPS,
    CHANCE_MARGIN,
    LOSS_BOUND,
    PAPER_THRESHOLDS,
    Budget,
    SweepReading,
    Sweeps,
    SweepsConfig,
    lowest_final_pool,
)
from mechbook.assign_add.task import POOL_NAMES
from mechbook.chapters.common import record_all as record_numbers
from mechbook.claims import Evidence, Words, compare, fmt, record_claims

STEM = "11_how_much_data"
SUMMARY_COLUMNS = ["knob", "value", "seed", "score", "control", "train_loss", "2var_train", "fits", "0var_heldout"]

ChapterConfig = SweepsConfig
"""The chapter's config is the two sweeps' config (:class:`~mechbook.assign_add.sweeps.SweepsConfig`)."""

CONFIGS: dict[str, ChapterConfig] = SWEEPS
"""The sweeps per profile (their home and the reasons for each size:
:data:`mechbook.assign_add.runs.SWEEPS`)."""


def resolve(profile: str, steps: int | None = None, seed: int | None = None) -> ChapterConfig:
    """The chapter's config for ``profile`` with the reader's knobs (None: from the profile):
    ``steps`` of every run of both sweeps; ``seed`` the seed of every run, or, where the profile
    trains several seeds a point, the first of as many consecutive seeds."""
    seeds = None
    base = CONFIGS.get(profile)
    if isinstance(seed, int) and not isinstance(seed, bool) and base is not None and base.seeds is not None:
        seeds = tuple(seed + i for i in range(len(base.seeds)))
    return mechbook.resolve_profile(
        CONFIGS,
        profile,
        f_train__steps=steps,
        r_train__steps=steps,
        f_train__seed=seed,
        r_train__seed=seed,
        f_train__model__seed=seed,
        r_train__model__seed=seed,
        seeds=seeds,
    )


def summary_frame(sw: Sweeps) -> pd.DataFrame:
    """Every run of both sweeps, one row each (:data:`SUMMARY_COLUMNS`), with whether it fit its
    training data (:func:`~mechbook.assign_add.claims.fits`)."""
    runs = sw.runs
    return runs.assign(fits=fits(runs))[SUMMARY_COLUMNS]


def _run_prose(name: str, t: TrainConfig) -> str:
    """One sweep's run size and length in words."""
    length = (
        f"{t.steps:,} steps"
        if t.stop_loss is None
        else f"trained until its training loss is at most {t.stop_loss:g} nats (at most {t.steps:,} steps)"
    )
    return f"{name}: batch {t.batch_size}, d_model = {t.model.d_model}, d_mlp = {t.model.d_mlp}, lr {t.lr:g}, {length}"


def setup_prose(cfg: ChapterConfig) -> str:
    """The two sweeps' sizes, their seeds, how they train, and where they differ from the authors'
    sweep script (30,000 steps a run, one seed, exactly enumerated pools)."""
    n_points = len(cfg.f_values) + len(cfg.r_values)
    seeds = (
        f"one seed a point (seed {cfg.f_train.seed})"
        if cfg.seeds is None
        else f"{cfg.n_seeds} seeds a point ({', '.join(str(s) for s in cfg.seeds)})"
    )
    length = " and ".join(
        f"the {name} runs stop where they fit their training data (at most {t.steps:,} steps)"
        if t.stop_loss is not None
        else f"the {name} runs take {t.steps:,} steps"
        for name, t in (("f", cfg.f_train), ("r", cfg.r_train))
    )
    return (
        _run_prose("Each f point", cfg.f_train) + ";  \n" + _run_prose("each r point", cfg.r_train) + ".  \n"
        f"{len(cfg.f_values)} values of f and {len(cfg.r_values)} of r, {seeds}: {n_points * cfg.n_seeds} training "
        "runs; the runs of one sweep differ only in their knob and seed, so they train together as one stacked "
        "model (each run's own data, initialisation and optimiser state), each cached under its own entry.  \n"
        f"The authors' sweep script trains every point for {AUTHORS_SWEEP_STEPS:,} steps with one seed (42); "
        f"{length}. Each score reads a run's last evaluation, "
        f"{cfg.f_train.eval_per_pool:,} sampled sequences a pool (the union's parts weighted by their enumerated "
        "sizes), where that script scores the exactly enumerated pools: every held-out pair for f, the whole "
        "union for r (chapter 7)." + _size_prose(cfg)
    )


def _size_prose(cfg: ChapterConfig) -> str:
    """What the sweeps' model size leaves confounded, when it is not the paper's (empty when it is)."""
    paper, model = ModelConfig(), cfg.f_train.model
    if (
        (model.d_model, model.d_mlp)
        == (paper.d_model, paper.d_mlp)
        == (cfg.r_train.model.d_model, cfg.r_train.model.d_mlp)
    ):
        return ""
    return (
        f"  \nThe sweeps' model is d_model = {model.d_model} against the paper's {paper.d_model} (chapter 8 trains the "
        "paper's): where a threshold lies, its distance from the paper's and whether it moves with training length "
        "may be the smaller model's and not the data's; the paper profile's full-size sweeps test the paper's "
        "thresholds at the paper's size."
    )


def _crossing_prose(reading: SweepReading, name: str) -> str:
    """Where one sweep's mean score crosses the level, with chance and the control beside it."""
    best = max(range(len(reading.values)), key=reading.scores.__getitem__)
    low, high = fmt(min(reading.controls), ".3f"), fmt(max(reading.controls), ".3f")
    baselines = (
        f"chance {fmt(reading.chance, '.3f')}; best constant answer {low if low == high else f'{low} to {high}'}"
    )
    star, n = reading.threshold, len(reading.thresholds)
    best_text = f"best mean {fmt(reading.scores[best], '.3f')} at {name} = {reading.values[best]:g}; {baselines}"
    if not reading.reached:
        return f"**{name}**: the score never reaches {reading.level} on this grid ({best_text})."
    if len(reading.reached) < n:
        return f"**{name}**: only {len(reading.reached)} of {n} seeds reach {reading.level} on this grid ({best_text})."
    if star == reading.values[0]:
        return (
            f"**{name}**: already at {reading.level} at the smallest value tried, {star:g}: the threshold is at or "
            f"below it ({baselines})."
        )
    if n == 1:
        return f"**{name}**: the score first reaches {reading.level} at {name} ≈ **{fmt(star, '.3f')}** (interpolated; {baselines})."
    lo, hi = reading.spread
    return (
        f"**{name}**: each seed's score first reaches {reading.level} between {name} ≈ {fmt(lo, '.3f')} and "
        f"{fmt(hi, '.3f')}, median **{fmt(star, '.3f')}** over {n} seeds (interpolated; {baselines})."
    )


def _convergence_prose(reading: SweepReading, runs: pd.DataFrame, name: str) -> str:
    """Where the runs of a sweep (``runs``, its runs frame) stopped, and which did not fit their
    training data (:func:`~mechbook.assign_add.claims.fits`: the loss bound, and for r also the 2-var
    training accuracy)."""
    ends = sorted(reading.ends)
    where = (
        f"The {name} runs were read at step {ends[0]:,}"
        if ends[0] == ends[-1]
        else f"The {name} runs were read at steps {ends[0]:,} to {ends[-1]:,} (median {statistics.median(ends):,g})"
    )
    rule = f"a training loss ≤ {LOSS_BOUND}" + (f" and 2-var training accuracy ≥ {TWO_VAR_FIT}" if name == "r" else "")
    unfit = runs[~fits(runs)]
    if not len(unfit):
        return f"{where}; every {name} run ends at {rule}."
    listed = ", ".join(
        f"{name} = {v:g} (seed {s}: loss {fmt(loss, '.2f')}"
        + (f", 2-var training {fmt(two, '.2f')})" if name == "r" else ")")
        for v, s, loss, two in zip(unfit["value"], unfit["seed"], unfit["train_loss"], unfit["2var_train"])
    )
    return (
        f"{where}. {len(unfit)} of {len(runs)} {name} runs do not end at {rule}, so they had not fit their training "
        f"data and their scores are not the fitted model's: {listed}."
    )


def _dips_prose(reading: SweepReading, name: str) -> str:
    """The near-chance points and the largest dip of a sweep, computed against chance."""
    out = ""
    near = reading.near_chance_values
    if near:
        out += (
            f" At {name} = {', '.join(f'{v:g}' for v in near)} the mean score is within {CHANCE_MARGIN} of chance "
            f"(1/{round(1 / reading.chance)} = {fmt(reading.chance, '.3f')}): those runs do not answer the scored "
            "pools, and the differences between them are not read."
        )
    dip = reading.dip
    if dip is not None:
        over = "single runs (one seed)" if len(reading.seeds) == 1 else f"means over {len(reading.seeds)} seeds"
        out += (
            f" The {name} scores are not monotone: the largest dip is from {fmt(dip.score_from, '.2f')} at {name} = "
            f"{dip.value_from:g} to {fmt(dip.score_to, '.2f')} at {name} = {dip.value_to:g}; the points are {over}, "
            "and the threshold rule takes the first crossing."
        )
    return out


def versus_prose(heldout: float, union: float) -> str:
    """The r threshold on 2-var held-out pairs alone against the union's, the word derived from the
    printed values (empty when either was not reached)."""
    if math.isnan(heldout) or math.isnan(union):
        return ""
    word = compare(heldout, union, ".3f", Words())
    return f" The held-out-pair threshold ({fmt(heldout, '.3f')}) is {word} the union's ({fmt(union, '.3f')})."


def thresholds_prose(sw: Sweeps, ev: dict[str, Evidence]) -> str:
    """Both thresholds with their claims, convergence, the r sweep on 2-var held-out pairs alone
    against the union, and the near-chance points and dips."""
    return (
        _crossing_prose(sw.f, "f")
        + "  \n"
        + ev["ch11.f_threshold"].sentence()
        + "  \n"
        + _crossing_prose(sw.r, "r")
        + "  \n"
        + ev["ch11.r_threshold"].sentence()
        + "  \nScoring the r runs on 2-var held-out pairs alone (variables in their usual slots): "
        + _crossing_prose(sw.r_heldout, "r")
        + versus_prose(sw.r_heldout.threshold, sw.r.threshold)
        + "\n\n"
        + _convergence_prose(sw.f, sw.f_runs, "f")
        + " "
        + _convergence_prose(sw.r, sw.r_runs, "r")
        + " "
        + ev["ch11.sweeps_converged"].sentence()
        + " "
        + ev["ch11.r_runs_fit"].sentence()
        + _dips_prose(sw.f, "f")
        + _dips_prose(sw.r, "r")
    )


def _lines(reading: SweepReading) -> pd.DataFrame:
    n = round(1 / reading.chance)
    rows = []
    for v, s, c in zip(reading.values, reading.scores, reading.controls):
        rows += [
            {"value": v, "accuracy": s, "line": "score (mean over seeds)"},
            {"value": v, "accuracy": c, "line": "best constant answer"},
            {"value": v, "accuracy": reading.chance, "line": f"chance (1/{n})"},
        ]
    return pd.DataFrame(rows)


def finding(reading: SweepReading, what: str) -> list[str]:
    """A sweep chart's two-line title, from its per-seed thresholds: the median where every seed
    reaches the level, how many seeds do (and where) otherwise."""
    n, reached = len(reading.thresholds), reading.reached
    if len(reached) == n:
        first = f"{what} from {reading.knob} ≈ {reading.threshold:.2f} on" + (
            f" (median of {n} seeds)" if n > 1 else ""
        )
    elif reached:
        at = ", ".join(f"{t:.2f}" for t in reached)
        first = f"{what}: {len(reached)} of {n} seeds reach {reading.level} (at {reading.knob} ≈ {at})"
    else:
        first = f"{what}: no seed reaches {reading.level} here"
    return [first, f"(red: threshold; dashed: level {reading.level}; crosses: runs that did not fit)"]


def sweep_chart(
    runs: pd.DataFrame, reading: SweepReading, knob_title: str, score_title: str, title: list[str]
) -> alt.LayerChart:
    """Score against knob value: the mean over seeds, each run as a point (a cross where the run did
    not fit its training data, :func:`~mechbook.assign_add.claims.fits`), chance and the best
    constant answer, the level dashed and the threshold in red."""
    lines = (
        alt.Chart(_lines(reading))
        .mark_line(point=False)
        .encode(
            x=alt.X("value:Q", title=knob_title, scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("accuracy:Q", title=score_title, scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("line:N", title=None, legend=alt.Legend(orient="bottom", columns=1)),
            strokeDash=alt.condition("datum.line == 'score (mean over seeds)'", alt.value([1, 0]), alt.value([2, 2])),
            tooltip=["line:N", alt.Tooltip("value:Q", format=".3f"), alt.Tooltip("accuracy:Q", format=".3f")],
        )
    )
    points_frame = runs.assign(
        run=fits(runs).map({True: "fit its data", False: "did not fit"}),
        accuracy=runs[reading.column],
    )[["value", "seed", "accuracy", "run", "train_loss"]]
    points = (
        alt.Chart(points_frame)
        .mark_point(filled=True, size=40)
        .encode(
            x="value:Q",
            y="accuracy:Q",
            shape=alt.Shape(
                "run:N",
                title=None,
                scale=alt.Scale(domain=["fit its data", "did not fit"], range=["circle", "cross"]),
                legend=alt.Legend(orient="bottom"),
            ),
            tooltip=[
                "seed:Q",
                alt.Tooltip("value:Q", format=".3f"),
                alt.Tooltip("accuracy:Q", format=".3f"),
                alt.Tooltip("train_loss:Q", format=".3f"),
            ],
        )
    )
    layers = [
        lines,
        points,
        alt.Chart(pd.DataFrame({"y": [reading.level]})).mark_rule(strokeDash=[4, 4], color="gray").encode(y="y:Q"),
    ]
    if not math.isnan(reading.threshold):
        layers.append(alt.Chart(pd.DataFrame({"x": [reading.threshold]})).mark_rule(color="firebrick").encode(x="x:Q"))
    return alt.layer(*layers).properties(
        width=250, height=240, title=alt.TitleParams(title, fontSize=12, anchor="start")
    )


def sweeps_chart(sw: Sweeps) -> alt.HConcatChart:
    """The two sweeps side by side."""
    return sweep_chart(
        sw.f_runs,
        sw.f,
        "f (fraction of pairs in training)",
        "accuracy, held-out pairs (0-var)",
        finding(sw.f, "Unseen pairs are summed"),
    ) | sweep_chart(
        sw.r_runs,
        sw.r,
        "r (fraction of 2-var rows kept)",
        "accuracy, 2-var generalisation union",
        finding(sw.r, "2-var sequences generalise"),
    )


def pools_chart(runs: pd.DataFrame) -> alt.TopLevelMixin:
    """Every pool's final accuracy along both sweeps (mean over seeds), one panel per sweep, with
    chance as its own line."""
    pools = [c for c in POOL_NAMES if c in runs.columns]
    mean = runs.groupby(["knob", "value"], sort=False)[[*pools, "chance"]].mean().reset_index()
    n = round(1 / float(mean["chance"].iloc[0]))
    mean = mean.rename(columns={"chance": f"chance (1/{n})"})
    long = mean.melt(
        id_vars=["knob", "value"], value_vars=[*pools, f"chance (1/{n})"], var_name="pool", value_name="accuracy"
    )
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
        y_title="final accuracy (mean over seeds)",
        title="Each pool's final accuracy along both sweeps, against chance",
    )


def _threshold_text(reading: SweepReading) -> str:
    """A reading's threshold as printed: the median over seeds, or how many seeds reached the level."""
    if math.isnan(reading.threshold):
        return f"not reached by {len(reading.thresholds) - len(reading.reached)} of {len(reading.thresholds)} seeds"
    return fmt(reading.threshold, ".2f")


def budgets_prose(sw: Sweeps, ev: dict[str, Evidence]) -> str:
    """Each sweep's threshold at every step budget, the claims on whether it moves, and what that
    says about the distance from the paper's thresholds."""
    parts = []
    for budgets in (sw.f_budgets, sw.r_budgets):
        knob = budgets[-1].knob
        steps = "; ".join(f"{b.steps:,} steps: {_threshold_text(b.reading)}" for b in budgets)
        n = len(budgets[-1].reading.thresholds)
        over = "one seed" if n == 1 else f"median over {n} seeds"
        e = ev[f"ch11.{knob}_threshold_moves"]
        parts.append(f"**{knob}** ({over}) at {steps}. {e.sentence()}")
        if e.verdict == "reproduced":
            parts.append(
                f"So on these runs the {knob} threshold is still a property of the step budget as much as of the "
                f"data, and its distance from the paper's {PAPER_THRESHOLDS[knob]} (the authors' sweep trains each "
                f"point {AUTHORS_SWEEP_STEPS:,} steps at full size) may be the budget's."
            )
        elif e.verdict == "not reproduced":
            parts.append(
                f"So between these budgets the {knob} threshold has settled: on runs of this size more of the same "
                f"training moves it little, and its distance from the paper's {PAPER_THRESHOLDS[knob]} is not "
                "explained by these runs stopping early (a longer or full-size run could still differ)."
            )
    return "\n\n".join(parts)


def budgets_chart(sw: Sweeps) -> alt.HConcatChart:
    """Each sweep's mean score against its knob at every step budget, the level dashed."""

    def panel(budgets: tuple[Budget, ...], x_title: str, y_title: str) -> alt.LayerChart:
        rows = [
            {"value": v, "accuracy": a, "steps": f"{b.steps:,} steps"}
            for b in budgets
            for v, a in zip(b.reading.values, b.reading.scores)
        ]
        knob = budgets[-1].knob
        title = [
            f"{knob} threshold: " + " → ".join(f"{_threshold_text(b.reading)} at {b.steps:,}" for b in budgets),
            f"(mean over seeds; dashed: level {LEVEL})",
        ]
        order = [f"{b.steps:,} steps" for b in budgets]
        lines = (
            alt.Chart(pd.DataFrame(rows))
            .mark_line(point=True)
            .encode(
                x=alt.X("value:Q", title=x_title, scale=alt.Scale(domain=[0, 1])),
                y=alt.Y("accuracy:Q", title=y_title, scale=alt.Scale(domain=[0, 1])),
                color=alt.Color("steps:N", title="read at", sort=order, legend=alt.Legend(orient="bottom")),
                tooltip=["steps:N", alt.Tooltip("value:Q", format=".3f"), alt.Tooltip("accuracy:Q", format=".3f")],
            )
        )
        level = alt.Chart(pd.DataFrame({"y": [LEVEL]})).mark_rule(strokeDash=[4, 4], color="gray").encode(y="y:Q")
        return alt.layer(lines, level).properties(
            width=250, height=220, title=alt.TitleParams(title, fontSize=12, anchor="start")
        )

    return panel(sw.f_budgets, "f (fraction of pairs in training)", "accuracy, held-out pairs (0-var)") | panel(
        sw.r_budgets, "r (fraction of 2-var rows kept)", "accuracy, 2-var generalisation union"
    )


def last_run_prose(sw: Sweeps, ev: dict[str, Evidence]) -> str:
    """Per seed, the lowest pool of the largest-r run, then the claim."""
    parts = []
    for seed, history in sw.r_last:
        pool, acc = lowest_final_pool(history)
        parts.append(f"seed {seed}: lowest pool `{pool}` at {fmt(acc, '.2f')}")
    return "; ".join(parts) + ". " + ev["ch11.largest_r_all_pools"].sentence()


def last_run_chart(history: pd.DataFrame, r: float, seed: int, chance_level: float) -> alt.TopLevelMixin:
    """The training curves of one largest-r run with chance as a labelled level, titled with the
    largest-r claim's reading of this run."""
    curves = history[history["pool"].isin(POOL_NAMES)][["step", "pool", "accuracy"]]
    chance = pd.DataFrame(
        [{"baseline": f"chance (1/{round(1 / chance_level)})", "level": chance_level, "colour": "#777"}]
    )
    last = last_run_reading(history)
    verdict = (
        f"every pool ends at {fmt(last.accuracy, '.2f')} or above"
        if last.holds
        else f"{last.pool} ends at {fmt(last.accuracy, '.2f')}, below {last.threshold}"
    )
    lines = viz.highlight_lines(
        curves,
        x="step",
        y="accuracy",
        series="pool",
        series_title="evaluation pool",
        y_domain=[0, 1],
        x_title="training step",
        y_title="accuracy",
    )
    return viz.training_curves(lines, title=[f"The sweep run with r = {r:g} (seed {seed}):", verdict], levels=chance)


def thresholds_table(sw: Sweeps, ev: dict[str, Evidence]) -> pd.DataFrame:
    """This book's thresholds (median and range over seeds) beside the paper's, with the verdicts."""

    def shown(reading: SweepReading) -> str:
        if not reading.reached:
            return "not reached"
        text = fmt(statistics.median(reading.reached), ".3f")
        if len(reading.thresholds) > 1:
            lo, hi = reading.spread
            text += f" ({fmt(lo, '.3f')} to {fmt(hi, '.3f')}; reached by {len(reading.reached)} of {len(reading.thresholds)} seeds)"
        return text

    return pd.DataFrame(
        [
            {
                "sweep": "f (held-out pairs)",
                "this book": shown(sw.f),
                "paper (approx.)": f"{PAPER_THRESHOLDS['f']:g}",
                "verdict": ev["ch11.f_threshold"].verdict,
            },
            {
                "sweep": "r (2-var union)",
                "this book": shown(sw.r),
                "paper (approx.)": f"{PAPER_THRESHOLDS['r']:g}",
                "verdict": ev["ch11.r_threshold"].verdict,
            },
            {
                "sweep": "r (2-var held-out pairs only)",
                "this book": shown(sw.r_heldout),
                "paper (approx.)": "-",
                "verdict": "-",
            },
        ]
    )


def record_all(sw: Sweeps, ev: dict[str, Evidence]) -> dict[str, object]:
    """Record the chapter's headline numbers (:func:`~mechbook.assign_add.readings.sweep_numbers`,
    bounded by ``book/thresholds/11_how_much_data.yml``) and its claims (``claim.<id>``, the
    notebook's ``ev``), and return the records."""
    return {**record_numbers(sweep_numbers(sw)), **record_claims(ev.values())}
