"""Chapter 8, "Training dynamics: nine curves, three phases": config, claims, charts and computed
prose, in the order the page reads.

The analyses live in the Part II library: the seed stack and the rule that picks the opened run
(:mod:`mechbook.assign_add.seeds`), the released run (:mod:`mechbook.assign_add.released`), the
phases (:mod:`mechbook.assign_add.phases`), the jump readings and probe curves
(:mod:`mechbook.assign_add.binding_jump`), the plateau's cases (:mod:`mechbook.assign_add.plateau`),
the baselines (:mod:`mechbook.assign_add.baselines`), all gathered by
:func:`mechbook.assign_add.dynamics.read_dynamics`; the claims and what each reads are chapter 8's
table of :mod:`mechbook.assign_add.claims`. This module presents.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import altair as alt
import pandas as pd

import mechbook
from mechbook import claims, viz
from mechbook.assign_add import circuits
from mechbook.assign_add.baselines import PoolBaselines
from mechbook.assign_add.binding_jump import (
    BOUND_LEVEL,
    PROBE_LEVEL,
    ProbeCurve,
    adder_first_step,
    final_measures,
    measure_at,
    window_steps,
)
from mechbook.assign_add.claims import release_union
from mechbook.assign_add.config import TrainConfig, TrainResult, load_model
from mechbook.assign_add.dynamics import Dynamics, ReadSettings, RunReadings
from mechbook.assign_add.measures import MEASURES, MeasureConfig
from mechbook.assign_add.phases import PhaseRules, Phases
from mechbook.assign_add.plateau import PLATEAU_LAG, Plateau
from mechbook.assign_add.probes import ProbeConfig
from mechbook.assign_add.released import PAPER_PHASES, check_release_steps
from mechbook.assign_add.runs import SEED_RUNS, TRAIN_PROFILES, differences_from_paper, on_the_papers_dates
from mechbook.assign_add.seeds import Dissected, SeedRuns
from mechbook.assign_add.task import POOL_NAMES, Task, union_accuracy
from mechbook.chapters import common
from mechbook.claims import Evidence
from mechbook.validation import POSITIVE, at_least, check_fields

STEM = "08_training_dynamics"
RUNS = ("paper's run, as released", "this rebuild")
"""The two runs' names in the side-by-side tables, charts and sentences."""


@dataclass(frozen=True)
class ChapterConfig:
    """Chapter 8's settings."""

    runs: SeedRuns  # the seed stack (config, seeds, phase rules), the very object chapters 9-10 open
    measures: MeasureConfig  # the progress measures' batch
    window: int  # steps either side of the binding jump the attention slider shows
    release_per_pool: int = 512  # sequences per pool when scoring the released checkpoints
    release_steps: tuple[int, ...] | None = None  # released checkpoints read (None: all present locally)
    release_exact: bool = True  # score the released final model on the exactly enumerated pools
    case_sequences: int = 256  # sequences per misplaced case, at every checkpoint of both runs
    probe_sequences: int = 512  # training sequences the variable-identity probe reads
    probe: ProbeConfig = field(default_factory=ProbeConfig)  # how the probe is trained

    def __post_init__(self) -> None:
        check_fields(
            self,
            window=at_least(1, "steps"),
            release_per_pool=POSITIVE,
            case_sequences=POSITIVE,
            probe_sequences=POSITIVE,
        )
        check_release_steps(self.release_steps)

    @property
    def train(self) -> TrainConfig:
        """The seed runs' shared config (each seed sets ``seed`` and ``model.seed``)."""
        return self.runs.train

    @property
    def rules(self) -> PhaseRules:
        """The phase rules."""
        return self.runs.rules

    @property
    def settings(self) -> ReadSettings:
        """How :func:`mechbook.assign_add.dynamics.read_dynamics` reads both runs."""
        return ReadSettings(
            rules=self.rules,
            measures=self.measures,
            case_sequences=self.case_sequences,
            probe_sequences=self.probe_sequences,
            probe=self.probe,
            release_steps=self.release_steps,
            release_exact=self.release_exact,
        )


SMOKE_RELEASE_STEPS = (
    1,
    501,
    1401,
    3001,
    5001,
    5301,
    5401,
    5501,
    7001,
    10001,
    13001,
    14501,
    15001,
    16001,
    20001,
    39901,
)
"""The released checkpoints smoke reads: enough around each of the paper's phases to find them."""

CONFIGS: dict[str, ChapterConfig] = {
    "smoke": ChapterConfig(
        SEED_RUNS["smoke"],
        MeasureConfig(n_sequences=128),
        window=150,
        release_per_pool=128,
        release_steps=SMOKE_RELEASE_STEPS,
        release_exact=False,
        case_sequences=64,
        probe_sequences=128,
        probe=ProbeConfig(steps=100),
    ),
    "cpu": ChapterConfig(SEED_RUNS["cpu"], MeasureConfig(n_sequences=512), window=1000),
    "paper": ChapterConfig(SEED_RUNS["paper"], MeasureConfig(n_sequences=1024), window=1000),
}
"""Per profile (the runs themselves: :data:`mechbook.assign_add.runs.SEED_RUNS`): ``cpu`` six seeds
of the cpu run size, ``paper`` four seeds of the paper's configuration, ``smoke`` four seeds of a
few hundred steps and 16 of the released checkpoints."""


def resolve(
    profile: str, steps: int | None = None, seed: int | None = None, measure_sequences: int | None = None
) -> ChapterConfig:
    """The chapter's config for ``profile`` with the reader's knobs (None: from the profile):
    ``steps`` of every seed run, ``seed`` of the run to dissect instead of the rule's pick,
    sequences of the progress measures."""
    return mechbook.resolve_profile(
        CONFIGS, profile, runs__train__steps=steps, runs__pick=seed, measures__n_sequences=measure_sequences
    )


def both(d: Dynamics, part: str | None = None) -> dict[str, object]:
    """The released run's and the rebuild's readings (or their ``part``, e.g. ``"plateau"``), by
    the names the page gives them."""
    runs = {RUNS[0]: d.release, RUNS[1]: d.rebuild}
    return runs if part is None else {who: getattr(r, part) for who, r in runs.items()}


# ---------------------------------------------------------------- setup


def setup_prose(train: TrainConfig) -> str:
    """The model's sizes and the training settings, as a paragraph."""
    m = train.model
    return (
        f"Model: $d_{{model}}$ = {m.d_model}, $d_{{head}}$ = {m.d_head}, MLP width {m.d_mlp}, {m.n_ctx} positions, "
        f"init std {m.init_std:.4f} ($0.8/\\sqrt{{d_{{model}}}}$), {train.model.n_parameters:,} parameters. "
        f"Training: AdamW, lr {train.lr}, betas {train.betas}, weight decay {train.weight_decay}, "
        f"batch {train.batch_size}, {train.steps:,} steps, seed {train.seed}; the nine pools scored every "
        f"{train.eval_every} steps on {train.eval_per_pool} sequences each."
    )


# ---------------------------------------------------------------- training


def training_prose(result: TrainResult) -> str:
    """How many evaluations and checkpoints the run kept, and how long it took."""
    acc = result.accuracy()
    return (
        f"{len(acc)} evaluations over {int(acc.index.max()):,} steps of batch {result.config.batch_size}; "
        f"{len(result.checkpoints)} checkpoints kept; this run's share of its stack's training time was "
        f"{result.train_seconds / 60:.1f} minutes (a stack trains its runs together, so its wall time is its runs' "
        "shares added up; a cached run loads in seconds)."
    )


# ---------------------------------------------------------------- nine accuracy curves

POOL_TYPE = {
    "train": "train",
    "heldout": "held-out pairs",
    "misplaced": "misplaced",
    "misplaced_one": "misplaced (one)",
    "misplaced_both": "misplaced (both)",
}
"""Pool-name suffix -> what is new about the question (the curves' line style)."""
VARIABLE_COLOURS = {"0-var": "#2e86ab", "1-var": "#f18f01", "2-var": "#c73e1d"}


def curves_frame(history: pd.DataFrame) -> pd.DataFrame:
    """The nine pools' curves with ``variables`` (0/1/2-var) and ``question`` (what is new)."""
    curves = history[history.pool != "train"].copy()
    curves["variables"] = curves.pool.str[0] + "-var"
    curves["question"] = curves.pool.str.split("_", n=1).str[1].map(POOL_TYPE)
    return curves


def baseline_frame(baselines: PoolBaselines, modulus: int) -> pd.DataFrame:
    """The accuracy baselines the curves are drawn against: chance and, for the 1-var and 2-var
    training pools, exact addition with any context value (``level``, ``baseline``, ``colour``)."""
    rows = [{"baseline": f"chance (1/{modulus})", "level": baselines.chance, "colour": "#777"}]
    for pool, group in (("1var_train", "1-var"), ("2var_train", "2-var")):
        rows.append(
            {
                "baseline": f"{group}: adds any context value",
                "level": baselines.any_value[pool],
                "colour": VARIABLE_COLOURS[group],
            }
        )
    return pd.DataFrame(rows)


def curves_title(phases: Phases, acc: pd.DataFrame, modulus: int) -> list[str]:
    """The curves chart's title, one or two lines: the detected phases (then phase 3, or the
    plateau the run ends on), or what the run reached without them."""
    if phases.phase1 is not None and phases.phase2 is not None:
        order = claims.order(phases.phase1, phases.phase2)
        first = (
            f"Addition (phase 1, step {phases.phase1:,}) {order} binding in a jump (phase 2, step {phases.phase2:,})"
        )
        if phases.phase3 is not None:
            return [first, f"then refinement (phase 3, step {phases.phase3:,})"]
        if phases.phase3_status == "plateau, not refined":
            return [first, f"then the misplaced pools stay on their plateau ({phases.plateau[2]:.2f}) to the end"]
        return [first]
    last = acc.iloc[-1]
    return [
        f"After {int(acc.index.max()):,} steps: 0-var train {last['0var_train']:.0%}, "
        f"1-var train {last['1var_train']:.0%} (chance {1 / modulus:.1%})"
    ]


def curves_chart(result: TrainResult, phases: Phases, baselines: PoolBaselines) -> alt.LayerChart:
    """The nine accuracy curves (colour: variables; dash: what is new; click the legend to bring
    a group forward) with the phase rules and the baselines (chance, and exact addition with any
    context value for the 1-var and 2-var pools), under a title stating the finding."""
    lines = viz.highlight_lines(
        curves_frame(result.history),
        x="step",
        y="accuracy",
        series="variables",
        series_title="variables",
        stroke_dash="question",
        dash_title="question",
        detail="pool",
        colors=VARIABLE_COLOURS,
        y_domain=[0, 1],
        x_title="training step",
        y_title="accuracy at '=' (fraction of pool)",
        height=340,
    )
    modulus = result.config.task.modulus
    title = curves_title(phases, result.accuracy(), modulus)
    return viz.training_curves(lines, title=title, marks=phases.marks(), levels=baseline_frame(baselines, modulus))


# ---------------------------------------------------------------- detecting the phases


def rules_table(rules: PhaseRules) -> pd.DataFrame:
    """The three detection rules with their thresholds, as the code applies them."""
    return pd.DataFrame(
        [
            {"rule": "phase 1", "setting": f"{rules.phase1_pool} reaches {rules.phase1_level}"},
            {
                "rule": "phase 2",
                "setting": f"largest rise of {rules.phase2_pool} within {rules.jump_window} steps "
                f"(at least {rules.min_jump}, ending at {rules.phase2_end} or above: past the any-value control), "
                "dated by its steepest interval",
            },
            {
                "rule": "phase 3",
                "setting": f"a misplaced pool's plateau (band ±{rules.plateau_tol} for ≥ {rules.plateau_len} steps below "
                f"{rules.refined}, rolling mean of {rules.smooth} evaluations), then its lift to {rules.refined} or "
                "above, dated where it gets there",
            },
        ]
    )


def phases_prose(phases: Phases, rules: PhaseRules) -> str:
    """One bullet per phase saying what the rules found (or that they did not fire)."""
    lines = [
        f"- **phase 1** (addition): step {phases.phase1:,}"
        if phases.phase1 is not None
        else "- **phase 1**: not reached in this run",
        f"- **phase 2** (binding): step {phases.phase2:,}; `{rules.phase2_pool}` accuracy rises by "
        f"{phases.phase2_jump:.2f} within {rules.jump_window} steps"
        if phases.phase2 is not None
        else "- **phase 2**: not found",
    ]
    if phases.phase3_status == "refined":
        start, end, level = phases.plateau
        lines.append(
            f"- **phase 3** (refinement): step {phases.phase3:,}; `{phases.phase3_pool}` sat at {level:.2f} "
            f"from step {start:,} to {end:,}, then was lifted to {rules.refined} or above"
        )
    elif phases.phase3_status == "plateau, not refined":
        start, end, level = phases.plateau
        lines.append(
            f"- **phase 3**: not reached. `{phases.phase3_pool}` sits on its plateau at {level:.2f} from step "
            f"{start:,} to {end:,}, and no misplaced pool is lifted to {rules.refined} by the run's last step: "
            "a plateau, not refined"
        )
    elif phases.phase2 is None:
        lines.append("- **phase 3**: not looked for (it is defined after phase 2)")
    else:
        lines.append(
            f"- **phase 3**: absent (no misplaced-variable pool plateaued below {rules.refined} after phase 2)"
        )
    return "\n".join(lines)


def _last_before(acc: pd.Series, step: int) -> tuple[int, float] | None:
    earlier = acc[acc.index < step]
    return None if earlier.empty else (int(earlier.index[-1]), float(earlier.iloc[-1]))


def control_prose(runs: dict[str, RunReadings], baselines: PoolBaselines) -> str:
    """Where 1-var training accuracy stands just before each run's binding jump against what exact
    addition with any context value earns (and chance), the word derived from the printed numbers."""
    control, lines = baselines.any_value["1var_train"], []
    for who, r in runs.items():
        acc = r.run.accuracy()["1var_train"]
        last = None if r.phases.phase2 is None else _last_before(acc, r.phases.phase2)
        if last is None:
            lines.append(
                f"- **{who}**: no evaluation before a binding jump; 1-var training accuracy ends at "
                f"{float(acc.iloc[-1]):.2f}, {claims.compare(float(acc.iloc[-1]), control, '.2f')} that control."
            )
            continue
        step, value = last
        lines.append(
            f"- **{who}**: at step {step:,}, the last evaluation before the jump, 1-var training accuracy is "
            f"{value:.2f}, {claims.compare(value, control, '.2f')} that control."
        )
    head = (
        f"A model that adds exactly but takes any value assigned in the context for a variable operand "
        f"would score {control:.2f} on the 1-var training pool ({baselines.any_value['2var_train']:.2f} on the "
        f"2-var one; chance is {baselines.chance:.3f}): what addition earns on variable questions without binding."
    )
    return head + "\n\n" + "\n".join(lines)


# ---------------------------------------------------------------- final accuracies


def final_table(acc: pd.DataFrame, baselines: PoolBaselines) -> pd.DataFrame:
    """The nine pools' final accuracies beside their baselines: chance, the best constant answer,
    and exact addition with any context value (pools with a variable)."""
    final = acc.iloc[-1]
    return pd.DataFrame(
        {
            "pool": POOL_NAMES,
            "final accuracy": [float(final[p]) for p in POOL_NAMES],
            "chance": [baselines.chance] * len(POOL_NAMES),
            "best constant": [baselines.best_constant[p] for p in POOL_NAMES],
            "adds any context value": [baselines.any_value.get(p, float("nan")) for p in POOL_NAMES],
        }
    )


def final_union(acc: pd.DataFrame, task: Task, weighting: str = "paper") -> float:
    """The last evaluation's 2-var generalisation union (:func:`mechbook.assign_add.task.union_accuracy`:
    ``"paper"`` weights its parts by their sizes, as the paper scores it; ``"equal"`` 1/3 each)."""
    return union_accuracy(acc.iloc[-1].to_dict(), task, weighting)


def union_prose(acc: pd.DataFrame, task: Task, baselines: PoolBaselines) -> str:
    """The union's sentence, both weightings, next to chance and to the harder control (exact
    addition with any context value, weighted as the paper weights the union)."""
    n = task.cfg.modulus
    control = union_accuracy(dict(baselines.any_value), task, "paper")
    return (
        f"2-var generalisation union: **{final_union(acc, task):.3f}** with its parts weighted by their sizes (the "
        f"paper's score), {final_union(acc, task, 'equal'):.3f} with the three parts weighted equally; chance is 1/{n} = {1 / n:.3f}, "
        f"and a model that adds any two context values would score {control:.3f}."
    )


# ---------------------------------------------------------------- the paper's own run, side by side


def _step(step: int | None) -> str:
    return f"{step:,}" if step is not None else "not found"


def _phase3(phases: Phases) -> str:
    return _step(phases.phase3) if phases.phase3 is not None else phases.phase3_status


def side_by_side(
    rebuild: TrainResult,
    rebuild_phases: Phases,
    released: TrainResult,
    release_phases: Phases,
    baselines: PoolBaselines,
) -> pd.DataFrame:
    """The phases and the last evaluation's accuracies of both runs, one row each, with the
    paper's dates of the phases and, for each pool, its hardest baseline."""
    rows = [
        {
            "": "phase 1 (addition)",
            RUNS[0]: _step(release_phases.phase1),
            RUNS[1]: _step(rebuild_phases.phase1),
            "the paper says": PAPER_PHASES["phase 1"],
        },
        {
            "": "phase 2 (binding)",
            RUNS[0]: _step(release_phases.phase2),
            RUNS[1]: _step(rebuild_phases.phase2),
            "the paper says": PAPER_PHASES["phase 2"],
        },
        {
            "": "phase 3 (refinement)",
            RUNS[0]: _phase3(release_phases),
            RUNS[1]: _phase3(rebuild_phases),
            "the paper says": PAPER_PHASES["phase 3"],
        },
    ]
    a, b = released.accuracy().iloc[-1], rebuild.accuracy().iloc[-1]
    steps = (int(released.accuracy().index.max()), int(rebuild.accuracy().index.max()))
    for pool in POOL_NAMES:
        rows.append(
            {
                "": f"{pool} at the last evaluation (baseline {baselines.control(pool):.3f})",
                RUNS[0]: f"{a[pool]:.3f}",
                RUNS[1]: f"{b[pool]:.3f}",
                "the paper says": "",
            }
        )
    rows.append(
        {"": "last evaluation (step)", RUNS[0]: f"{steps[0]:,}", RUNS[1]: f"{steps[1]:,}", "the paper says": "40,000"}
    )
    return pd.DataFrame(rows)


def release_prose(release: RunReadings, exact: dict[str, float] | None, n_heldout: int, modulus: int) -> str:
    """The released run's phases as the rules find them, and its final model's exact scores
    (or, without them, its last sampled evaluation), next to chance."""
    phases, released = release.phases, release.run
    three = (
        f"phase 3 at step {phases.phase3:,} (`{phases.phase3_pool}` plateaued at {phases.plateau[2]:.2f})"
        if phases.phase3 is not None
        else f"phase 3 {phases.phase3_status}"
    )
    text = (
        f"On the authors' own checkpoints the same rules find phase 1 at step {_step(phases.phase1)}, phase 2 at "
        f"step {_step(phases.phase2)} and {three}. "
    )
    if exact is None:
        acc = released.accuracy()
        return text + (
            f"At its last checkpoint read here (step {int(acc.index.max()):,}) it is right on "
            f"{acc.iloc[-1]['0var_heldout']:.1%} of the sampled held-out pairs (chance {1 / modulus:.1%}); this "
            "profile skips the exactly enumerated pools."
        )
    return text + (
        f"Its final model is right on **{exact['0var_heldout_all']:.1%}** of all {n_heldout:,} held-out pairs "
        f"and on **{exact['2var_union_paper']:.1%}** of the enumerated 2-var union (weighted by its parts' "
        f"sizes, as the paper scores it; {exact['2var_union_equal']:.1%} with the three parts weighted equally); "
        f"chance is {1 / modulus:.1%}."
    )


def timing_prose(train: TrainConfig) -> str:
    """Why the rebuild's steps are or are not held to the paper's dates (:func:`on_the_papers_dates`)."""
    paper_steps = TRAIN_PROFILES["paper"].steps
    if differences_from_paper(train).empty:
        return "This rebuild trains the paper's configuration, so its seeds are held to the paper's dates too."
    if on_the_papers_dates(train):
        return (
            f"This rebuild trains the paper's configuration for {train.steps:,} of its {paper_steps:,} steps. "
            "Its learning rate has no schedule, so these steps are the first steps of the paper's run for each "
            "seed: the seeds are held to the paper's dates too, and a phase still to come at the last step "
            "counts as missed."
        )
    return (
        "This rebuild trains another configuration (the settings above), so its steps are not held to the "
        "paper's dates: the released run alone decides those three claims."
    )


# ---------------------------------------------------------------- progress measures


def measures_shown(measures: pd.DataFrame) -> pd.DataFrame:
    """The headline progress measures with their chart labels."""
    return measures[measures.measure.isin(list(MEASURES))].assign(label=lambda d: d.measure.map(MEASURES))


def measures_chart(measures: pd.DataFrame, phases: Phases, modulus: int) -> alt.LayerChart:
    """The progress measures over the checkpoints (click the legend to highlight one), with the
    phase rules and the adder's chance level; the title states where the adder and layer 2 end."""
    end = final_measures(measures)
    lines = viz.highlight_lines(
        measures_shown(measures),
        x="step",
        y="value",
        series="label",
        series_title="progress measure",
        point=True,
        y_domain=[0, 1],
        x_title="training step",
        y_title="measure (fraction)",
        height=340,
    )
    chance = pd.DataFrame([{"baseline": f"adder's chance (1/{modulus})", "level": 1 / modulus, "colour": "#777"}])
    title = (
        f"At the end the adder alone is right on {end['adder']:.0%} of pairs (chance {1 / modulus:.1%}) and layer 2's "
        f"top-2 keys are the needed numbers in {end['l2_needed_top2']:.0%} of sequences"
    )
    return viz.training_curves(lines, title=title, marks=phases.marks(), levels=chance)


def jumps_prose(d: Dynamics) -> str:
    """:func:`jump_prose` for both runs, one paragraph each."""
    modulus = d.rebuild.run.config.task.modulus
    return "\n\n".join(jump_prose(who, r, modulus) for who, r in both(d).items())


def jump_prose(who: str, r: RunReadings, modulus: int) -> str:
    """What the progress measures do across one run's binding jump: from the last checkpoint before
    phase 2 to the first where 1-var training accuracy is at least 0.95 (or, when the run never
    gets there, to its last checkpoint, said as such); every up/down word derived from the numbers."""
    j = r.jump
    if j is None:
        end = measure_at(r.measures, "adder", int(r.measures.step.max()))
        return (
            f"**{who}**: no binding jump was detected, so there is no before and after to compare; at the end "
            f"the adder alone is right on {end:.0%} of pairs (chance {1 / modulus:.1%})."
        )
    if j.reached:
        until = f"step {j.after:,} (the first checkpoint where `1var_train` accuracy is at least {BOUND_LEVEL})"
    else:
        until = (
            f"step {j.after:,}, the last checkpoint (`1var_train` accuracy never reaches {BOUND_LEVEL} in this run: "
            f"it ends at {j.final_1var:.2f})"
        )

    def move(measure: str, spec: str = ".2f", pct: bool = False) -> str:
        a, b = j.at_before[measure], j.at_after[measure]
        word = claims.change(a, b, ".0%" if pct else spec, "rises", "falls", "stays")
        shown = (f"{a:.0%}", f"{b:.0%}") if pct else (format(a, spec), format(b, spec))
        return f"stays at {shown[0]}" if word == "stays" else f"{word} from {shown[0]} to {shown[1]}"

    return (
        f"**{who}**: across the jump at step {j.jump:,}, from step {j.before:,} (the last checkpoint before it) to "
        f"{until}, the share of sequences whose two most-attended layer-1 keys from `=` are the operand positions "
        f"{move('l1_operands_top2')} (the attention mass on them {move('l1_operands_mass')}); layer 2's top-2 keys "
        f"land on the needed numbers in a share that {move('l2_needed_top2', pct=True)}; value → variable attention "
        f"in layer 1 {move('prev_token')}. The adder alone was already right on {j.at_before['adder']:.0%} of all "
        f"pairs (chance {1 / modulus:.1%})."
    )


# ---------------------------------------------------------------- the plateau, case by case


def cases_prose(runs: dict[str, Plateau], baselines: PoolBaselines) -> str:
    """Which cases each run's plateau is made of (or that it has none), one bullet per run, with
    chance and the misplaced pools' any-value control."""
    controls = ", ".join(f"`{p}` {baselines.any_value[p]:.2f}" for p in ("1var_misplaced", "2var_misplaced_one"))
    lines = [f"Baselines: chance {baselines.chance:.3f}; exact addition with any context value: {controls}."]
    for who, run in runs.items():
        if run.lag is None:
            lines.append(f"- **{who}**: the rules found no phase-3 plateau, so there is no lagging case to trace.")
            continue
        start, end, level = run.phases.plateau
        lagging, others = run.lag[run.lag.lags], run.lag[~run.lag.lags]
        named = "; ".join(f"`{r.pool}` {r.case} ({r.accuracy:.2f})" for r in lagging.itertuples()) or "none"
        rest = f"every other case averages at least {others.accuracy.min():.2f}" if len(others) else "no case is above"
        slots = run.lagging_slots
        slot = (
            f"one variable in one never-seen slot: {slots[0]}"
            if len(slots) == 1
            else f"{len(slots)} (variable, slot) cases: {', '.join(slots)}"
            if slots
            else "no single misplaced variable"
        )
        lines.append(
            f"- **{who}**: over the plateau (steps {start:,}-{end:,}, `{run.phases.phase3_pool}` at {level:.2f}) the "
            f"cases below {PLATEAU_LAG} are {named}; {rest}. The lag is {slot}."
        )
    return "\n".join(lines)


def cases_chart(runs: dict[str, Plateau], baselines: PoolBaselines, ev: Evidence) -> alt.TopLevelMixin:
    """Each misplaced case's accuracy over training, one panel per run and pool, each on its run's
    own steps (click a case to bring it forward), under a title naming the released run's lagging
    slot and the plateau claim's verdict over the runs (chance, in the subtitle, is every panel's floor)."""
    frames = []
    for who, run in runs.items():
        h = run.history
        frames.append(h.assign(panel=[f"{who}: {p}" for p in h.pool]))
    frame = pd.concat(frames, ignore_index=True)
    slots = runs[RUNS[0]].lagging_slots
    title = (
        f"In the released run's plateau one variable in one never-seen slot lags: {slots[0]}"
        if slots is not None and len(slots) == 1
        else f"In the released run's plateau {len(slots)} (variable, slot) cases lag"
        if slots is not None
        else "The misplaced cases over training (the released run has no plateau here)"
    )
    return panels(
        frame,
        "case",
        "misplaced",
        [
            title,
            "One slot lags in {} of the {} runs with a plateau ({}); chance {:.3f}".format(
                *held(ev), ev.word(), baselines.chance
            ),
        ],
        height=180,
    ).resolve_scale(x="independent")


def panels(frame: pd.DataFrame, series: str, series_title: str, title: list[str], height: int) -> alt.TopLevelMixin:
    """Accuracy over training steps, one line per ``series``, one panel per ``frame.panel``, three
    to a row (click a line's legend entry to bring it forward)."""
    return viz.highlight_lines(
        frame,
        x="step",
        y="accuracy",
        series=series,
        series_title=series_title,
        facet="panel",
        columns=3,
        y_domain=[0, 1],
        x_title="training step",
        y_title="accuracy",
        height=height,
        title=title,
        keyboard=False,
    )


# ---------------------------------------------------------------- when can the variable be read?


def probe_chart(runs: dict[str, ProbeCurve], ev: Evidence) -> alt.FacetChart:
    """The probe's accuracy over training, one panel per run, the binding jump as a dashed rule and
    chance (1 / the number of variables) as a dotted one; the title is the readable-before-jump
    claim's verdict."""
    frame = pd.concat(
        [
            c.frame.assign(run=who, jump=float("nan") if c.phases.phase2 is None else c.phases.phase2)
            for who, c in runs.items()
        ],
        ignore_index=True,
    )
    line = (
        alt.Chart()
        .mark_line(point=True)
        .encode(
            x=alt.X("step:Q", title="training step"),
            y=alt.Y("accuracy:Q", title="probe accuracy (held-out examples)", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("where:N", title="read from", legend=alt.Legend(orient="bottom")),
            tooltip=["run:N", "where:N", "step:Q", alt.Tooltip("accuracy:Q", format=".3f")],
        )
    )
    rule = alt.Chart().mark_rule(color="#555", strokeDash=[3, 3]).encode(x="mean(jump):Q")
    chance = alt.Chart().mark_rule(color="#777", strokeDash=[1, 3]).encode(y="mean(chance):Q")
    words = {
        "reproduced": "In every run read the variable can be read after layer 1 before the binding jump (dashed)",
        "partly": "In some runs the variable can be read after layer 1 before the binding jump (dashed), not in all",
        "released run only": "Only in the released run can the variable be read after layer 1 before the binding "
        "jump (dashed)",
        "not reproduced": "In no run read can the variable be read after layer 1 before the binding jump (dashed)",
        "untested": "When the variable can be read after layer 1, against the binding jump (dashed)",
    }
    words["confounded"] = words["untested"]
    return (
        alt.layer(line, rule, chance, data=frame)
        .properties(width=300, height=200)
        .facet(column=alt.Column("run:N", title=None))
        .resolve_scale(x="independent")
        .properties(title=words[ev.verdict])
    )


def probe_prose(runs: dict[str, ProbeCurve], level: float = PROBE_LEVEL) -> str:
    """When the probe first reads the variable after layer 1, against the binding jump, per run,
    with chance and the embedding-only control at that step."""
    lines = []
    for who, c in runs.items():
        first, jump = c.first, c.phases.phase2
        chance = float(c.frame.chance.mean())
        if first is None:
            text = f"the probe never reads the variable after layer 1 with {level:.0%} accuracy (chance {chance:.2f})"
        else:
            emb = c.frame[(c.frame["where"] == "embedding") & (c.frame.step == first)].accuracy
            control = f"; from the embedding alone it reads {float(emb.iloc[0]):.2f} there" if len(emb) else ""
            where = (
                "; the rules found no binding jump"
                if jump is None
                else f", {claims.order(first, jump)} the binding jump at step {jump:,}"
            )
            text = (
                f"the probe reads the variable after layer 1 with {level:.0%} accuracy from step {first:,}{where} "
                f"(chance {chance:.2f}{control})"
            )
        lines.append(f"- **{who}**: {text}.")
    return "\n".join(lines)


# ---------------------------------------------------------------- over seeds


def seed_frame(summary: pd.DataFrame) -> pd.DataFrame:
    """The phase steps of every seed, tidy (``seed``, ``phase``, ``step``), detected phases only."""
    long = summary.melt(id_vars="seed", value_vars=["phase1", "phase2", "phase3"], var_name="phase", value_name="step")
    long["phase"] = long["phase"].map(
        {"phase1": "phase 1: addition", "phase2": "phase 2: binding", "phase3": "phase 3: refinement"}
    )
    return long.dropna(subset=["step"]).astype({"step": int})


def seeds_chart(summary: pd.DataFrame, release_phases: Phases) -> alt.LayerChart:
    """Each seed's phase steps as dots, one row per phase, the released run's as black ticks."""
    dots = (
        alt.Chart(seed_frame(summary))
        .mark_circle(size=90, opacity=0.8)
        .encode(
            x=alt.X("step:Q", title="training step"),
            y=alt.Y("phase:N", title=None),
            color=alt.Color("seed:N", title="seed", legend=alt.Legend(orient="bottom")),
            tooltip=["seed:N", "phase:N", "step:Q"],
        )
    )
    marks = release_phases.marks()
    layers = [dots]
    if not marks.empty:
        layers.append(
            alt.Chart(marks)
            .mark_tick(color="black", thickness=3, size=26)
            .encode(x="step:Q", y=alt.Y("phase:N"), tooltip=["phase:N", "step:Q"])
        )
    n, bound = len(summary), int(summary["phase2"].notna().sum())
    return alt.layer(*layers).properties(
        height=150,
        title=alt.TitleParams(
            [f"Binding jump detected in {bound} of {n} seeds; black ticks: the authors' released run"], anchor="start"
        ),
    )


SEED_POOLS: tuple[str, ...] = ("1var_train", "1var_misplaced", "2var_misplaced_one", "2var_misplaced_both")
"""The pools each seed's panel shows: binding (1-var training) and the three misplaced pools."""


def seed_panel(row: pd.Series) -> str:
    """A seed's panel label: the seed and its phases as the rules read them."""
    if pd.isna(row.phase2):
        return f"seed {row.seed}: never binds"
    third = f"refined at {int(row.phase3):,}" if row.phase3_status == "refined" else str(row.phase3_status)
    return f"seed {row.seed}: binds at {int(row.phase2):,}, {third}"


def seed_curves_chart(dissected: Dissected) -> alt.TopLevelMixin:
    """Every seed's binding and misplaced-pool curves, one panel per seed labelled with its phases
    (click a pool to bring it forward), under a title counting the seeds that bind and refine."""
    summary = dissected.summary.set_index("seed", drop=False)
    frames = []
    for r in dissected.results:
        h = r.history[r.history.pool.isin(SEED_POOLS)]
        frames.append(h.assign(panel=seed_panel(summary.loc[r.config.seed])))
    frame = pd.concat(frames, ignore_index=True)
    n = len(summary)
    bound = int(summary["phase2"].notna().sum())
    refined = int((summary["phase3_status"] == "refined").sum())
    stuck = int((summary["phase3_status"] == "plateau, not refined").sum())
    return panels(
        frame,
        "pool",
        "pool",
        [
            f"{bound} of {n} seeds bind; {refined} are lifted off the misplaced plateau to near 1"
            + (f", {stuck} {'sits' if stuck == 1 else 'sit'} on it to the end" if stuck else ""),
            "Each panel is one seed of the stack, its phases in its label",
        ],
        height=170,
    )


def seeds_prose(dissected: Dissected) -> str:
    """How the phases spread over seeds, which seed the rule picks (the median binding jump, or
    the median final 1-var training accuracy when no seed binds), and which run the chapters open."""
    summary, example = dissected.summary, dissected.example
    n = len(summary)
    jumps = summary["phase2"].dropna().astype(int).sort_values()
    three = int(summary["three_phases"].sum())
    if len(jumps):
        spread = f"the binding jump came at steps {', '.join(f'{s:,}' for s in jumps)}"
        rule = "the median binding jump; it reads only the phase-2 steps, never the final scores"
    else:
        spread = "no seed reached the binding jump"
        rule = "no seed bound, so the median final 1-var training accuracy"
    if dissected.picked_by_rule:
        relation = "the run that this chapter and chapters 9 and 10 open"
    else:
        relation = f"this page opens seed {dissected.run.config.seed} instead, as the reader asked"
    return (
        f"Over {n} seeds of {dissected.run.config.steps:,} steps, {spread}; {three} of {n} show all three phases. "
        f"Final 2-var union (paper-weighted) from {summary['final_2var_union'].min():.3f} to "
        f"{summary['final_2var_union'].max():.3f}. The rule ({rule}) picks seed {example}: {relation}."
    )


def _over(values: pd.Series, spec: str = ".2f") -> str:
    """``median m (lo-hi)`` of ``values``."""
    return f"median {values.median():{spec}} ({values.min():{spec}}-{values.max():{spec}})"


def seed_outcomes_prose(d: Dynamics) -> str:
    """What every seed of the stack ends with, against the released run's last checkpoint: the
    2-var union (paper-weighted), the three misplaced pools, and the (variable, slot) cases that lag
    on each seed's phase-3 plateau (the paper's: b as the right operand, on its run)."""
    summary = d.dissected.summary
    n, steps = len(summary), d.dissected.run.config.steps
    last = d.release.run.accuracy().iloc[-1]
    pools = ("1var_misplaced", "2var_misplaced_one", "2var_misplaced_both")
    misplaced = "; ".join(
        f"`{pool}` {_over(summary[f'final_{pool}'])} (released run {float(last[pool]):.2f})" for pool in pools
    )
    slots = {s: p.lagging_slots for s, p in d.seed_plateaus.items()}
    named = "; ".join(f"seed {s}: {', '.join(v) or 'none'}" for s, v in sorted(slots.items()))
    rel = d.release.plateau.lagging_slots
    plateau = (
        f"A phase-3 plateau is found in {len(slots)} of {n} seeds; the (variable, slot) cases that lag on it: {named}. "
        if slots
        else f"No phase-3 plateau is found in any of the {n} seeds. "
    ) + (
        f"On the released run: {', '.join(rel) or 'none'}."
        if rel is not None
        else "The released run has no plateau here."
    )
    return (
        f"At step {steps:,}, over the {n} seeds: the 2-var union (paper-weighted) "
        f"{_over(summary['final_2var_union'])}, the released run {release_union(d):.2f} at step "
        f"{int(d.release.run.accuracy().index.max()):,}. The misplaced pools: {misplaced}. {plateau}"
    )


# ---------------------------------------------------------------- one example across the jump


def pattern_slider_chart(patterns: pd.DataFrame, steps: list[int], start: int, title: str) -> alt.FacetChart:
    """Both layers' attention for one sequence (``patterns``: rows of
    :func:`~mechbook.assign_add.circuits.pattern_frame` with ``step`` and ``layer`` labels) at each
    of ``steps``, a slider choosing the checkpoint (starting at ``steps[start]``); the cells
    where the circuit says attention should go are outlined."""
    slider = alt.param(
        name="checkpoint",
        value=start,
        bind=alt.binding_range(min=0, max=len(steps) - 1, step=1, name="checkpoint (index) "),
    )
    position = {s: i for i, s in enumerate(steps)}
    frame = patterns.assign(index=patterns.step.map(position))
    order = list(dict.fromkeys(frame.sort_values("query").query_token))
    base = alt.Chart(frame).transform_filter(alt.datum.index == slider)
    return viz.attention_heatmap(
        base,
        order=order,
        highlight="role",
        facet="layer",
        title=title,
        tooltip=[alt.Tooltip("step:Q", title="checkpoint step")],
    ).add_params(slider)


def attention_slider(result: TrainResult, phases: Phases, cfg: ChapterConfig) -> tuple[alt.FacetChart, int]:
    """The slider chart of both layers' attention on one 2-var training sequence at the kept
    checkpoints within ``cfg.window`` steps of phase 2 (of the last checkpoint when no jump was
    found), starting at the last one before it; and how many checkpoints it shows."""
    task = Task(result.config.task)
    example = task.eval_pools(4, seed=result.config.eval_seed)["2var_train"][0][0]
    centre = phases.phase2 if phases.phase2 is not None else max(result.checkpoints)
    steps = window_steps(list(result.checkpoints), centre, cfg.window)
    patterns = pd.concat(
        [circuits.pattern_frame(load_model(result, s), example, task).assign(step=s) for s in steps], ignore_index=True
    )
    patterns["layer"] = "layer " + patterns.layer.astype(str)
    start = max([i for i, s in enumerate(steps) if s < centre], default=0)
    title = f"{task.render(example)}: attention around the binding jump"
    return pattern_slider_chart(patterns, steps, start, title), len(steps)


# ---------------------------------------------------------------- what to take away


def _runs_word(ev: Evidence, all_: str, some: str, none: str) -> str:
    """``all_``, ``some`` or ``none`` by the claim's verdict (``some`` where only the released run
    holds); "untested here" where it decides nothing."""
    return {
        "reproduced": all_,
        "partly": some,
        "released run only": some,
        "not reproduced": none,
        "untested": "untested here",
        "confounded": "untested here",
    }[ev.verdict]


def held(ev: Evidence) -> tuple[int, int]:
    """How many of a claim's values (the rebuild's seeds and the released run) meet its rule, of how many."""
    values = ev.values + ([] if ev.release is None else [ev.release])
    return sum(bool(ev.claim.rule.holds(v)) for v in values), len(values)


def _in_runs(ev: Evidence, what: str) -> str:
    k, n = held(ev)
    return f"{what} in {k} of the {n} runs with a binding jump"


RUN_NAMES = {RUNS[0]: "the released run", RUNS[1]: "this rebuild"}
"""How a sentence names each run."""


def takeaway_prose(d: Dynamics, ev: dict[str, Evidence]) -> str:
    """The chapter's take-aways, each computed from the claims' evidence and the runs' numbers."""
    first, follows = ev["ch08.addition_first"], ev["ch08.heldout_follows"]
    released = {True: ", and in the released run", False: ", but not in the released run", None: ""}[first.release]
    rule = _runs_word(
        follows,
        "what is learned is a rule, not a table",
        "on some runs held-out pairs trail the training pairs, so the rule is not learned everywhere",
        "held-out pairs trail the training pairs: part of what is learned is a table",
    )
    unbound = sum(s.phases.phase2 is None for s in d.seeds)
    pending = f" (in {unbound} of them binding has not come by the last step)" if unbound and first.values else ""
    bullets = [
        f"Addition on constants comes before binding in {sum(bool(v) for v in first.values)} of "
        f"{len(first.values)} seeds{pending}{released}. At the end, 0-var training accuracy minus held-out accuracy is "
        f"{follows.summary()} on the rebuild"
        + ("" if follows.release is None else f" and {follows.release:.3f} on the released run")
        + f": {rule}."
    ]
    runs = []
    for who, r in both(d).items():
        if r.jump is None or r.probe.first is None:
            continue
        runs.append(
            f"on {RUN_NAMES[who]} the probe reads the variable after layer 1 from step {r.probe.first:,}, "
            f"{claims.order(r.probe.first, r.jump.jump)} the jump at step {r.jump.jump:,}, and value → variable "
            f"attention is {r.jump.at_before['prev_token']:.2f} at step {r.jump.before:,}"
        )
    line = (
        _in_runs(ev["ch08.prev_token_before_jump"], "Layer 1's previous-token head is in place before the binding jump")
        + "; "
        + _in_runs(ev["ch08.readable_before_jump"], "the variable is readable after layer 1 before the jump")
        + (f" ({'; '.join(runs)})." if runs else ".")
    )
    before, after = ev["ch08.l1_top2_before"], ev["ch08.l1_top2_after"]
    if d.release.jump is not None:
        j = d.release.jump
        a, b = j.at_before["l1_operands_top2"], j.at_after["l1_operands_top2"]
        line += (
            f" Across the jump on the released run, the share of sequences whose top-2 layer-1 keys from `=` are "
            f"the operand positions {claims.change(a, b, '.2f')} from {a:.2f} to {b:.2f}, the paper's 0.12 → 0.95"
            + (
                f"; on the rebuild's seeds it is {before.summary()} before and {after.summary()} after: the claim "
                f'before the jump reads "{before.word()}", the claim after it "{after.word()}".'
                + (
                    " On the rebuild, layer 1 already attends to the operand positions before the jump: the "
                    "attention forms before binding, not with it, a qualitative difference from the paper's run."
                    if before.values and not any(before.claim.rule.holds(v) for v in before.values if v is not None)
                    else ""
                )
                if before.values
                else "."
            )
        )
    bullets.append(line)
    adder = ev["ch08.adder_before_jump"]
    measured = [f"{adder.summary()} on the seeds of the rebuild that bound"] if adder.values else []
    measured += [] if adder.release is None else [f"{adder.release:.3f} on the released run"]
    bullets.append(
        "Just before the jump, the share of pairs the adder alone gets right is "
        + (" and ".join(measured) or "not measured (no run bound)")
        + ": "
        + _runs_word(
            adder,
            "it is there before binding and serves the looked-up numbers unchanged",
            "it is there before binding on some runs, not all",
            "it is not complete before binding",
        )
        + "."
    )
    summary = d.dissected.summary
    plateau = ev["ch08.plateau_one_slot"]
    refined = int(summary["three_phases"].sum())
    stuck = [int(s) for s, status in zip(summary["seed"], summary["phase3_status"]) if status == "plateau, not refined"]
    rel = d.release.plateau.lagging_slots
    bullets.append(
        f"Phase 3 (a misplaced pool lifted from its plateau to near 1) comes in {refined} of {len(summary)} seeds"
        + (
            f"; {'seed' if len(stuck) == 1 else 'seeds'} {', '.join(map(str, stuck))} "
            f"{'sits' if len(stuck) == 1 else 'sit'} on the plateau to the last step"
            if stuck
            else ""
        )
        + (f". On the released run the plateau's lagging case is {', '.join(rel)}" if rel else "")
        + f" (one variable in one never-seen slot, over the runs with a plateau: {plateau.word()})."
    )
    return "\n".join(f"* {b}" for b in bullets)


# ---------------------------------------------------------------- records


def record_all(d: Dynamics, ev: dict[str, Evidence], pattern_checkpoints: int) -> dict[str, object]:
    """Record the chapter's headline numbers (``book/thresholds/08_training_dynamics.yml``): the
    opened rebuild's, the released run's (``release_*``), the stack's (``seeds_*``), the plateau and
    probe readings, and every claim (``claim.ch08.*``); returns the records."""
    result, phases, measures = d.rebuild.run, d.rebuild.phases, d.rebuild.measures
    acc = result.accuracy()
    final = acc.iloc[-1]
    released, rphases = d.release.run, d.release.phases
    rfinal = released.accuracy().iloc[-1]
    summary = d.dissected.summary
    rel_plateau, plateau = d.release.plateau, d.rebuild.plateau
    values: dict[str, object] = {
        "n_parameters": result.config.model.n_parameters,
        "steps": int(acc.index.max()),
        "phase1_step": phases.phase1,
        "phase2_step": phases.phase2,
        "phase2_jump": phases.phase2_jump,
        "phase3_step": phases.phase3 if phases.phase3 is not None else phases.phase3_status,
        "phase3_status": phases.phase3_status,
        "phase1_before_phase2": bool(
            phases.phase1 is not None and phases.phase2 is not None and phases.phase1 < phases.phase2
        ),
        **{f"final_{pool}": float(final[pool]) for pool in POOL_NAMES},
        "final_2var_union": final_union(acc, Task(result.config.task), "equal"),
        "final_2var_union_paper": final_union(acc, Task(result.config.task)),
        **{f"measure_{name}": float(value) for name, value in final_measures(measures).items()},
        "adder_reaches_0.9_step": adder_first_step(measures),
        "pattern_checkpoints": pattern_checkpoints,
        "chance": d.baselines.chance,
        "control_1var_train": d.baselines.any_value["1var_train"],
        "release_phase1_step": rphases.phase1,
        "release_phase2_step": rphases.phase2,
        "release_phase3_step": rphases.phase3 if rphases.phase3 is not None else rphases.phase3_status,
        "release_checkpoints": int(released.accuracy().index.nunique()),
        **{f"release_last_{pool}": float(rfinal[pool]) for pool in POOL_NAMES},
        **{f"release_final_{name}": float(value) for name, value in (d.release_exact or {}).items()},
        "seeds_n": len(summary),
        "seeds_bound": int(summary["phase2"].notna().sum()),
        "seeds_three_phases": int(summary["three_phases"].sum()),
        "seeds_phase2_steps": [int(s) for s in summary["phase2"].dropna()],
        "seeds_min_final_2var_union": float(summary["final_2var_union"].min()),
        "example_seed": d.dissected.example,
        "dissected_seed": result.config.seed,
        "release_plateau_lagging": rel_plateau.lagging or [],
        "release_plateau_slots": rel_plateau.lagging_slots or [],
        "plateau_lagging": plateau.lagging,
        "release_identity_probe_step": d.release.probe.first,
        "identity_probe_step": d.rebuild.probe.first,
    }
    records = common.record_all(values)
    records.update(claims.record_claims(ev.values()))
    return records
