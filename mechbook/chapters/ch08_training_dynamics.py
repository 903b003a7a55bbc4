"""Chapter 8, "Training dynamics: nine curves, three phases": configs, charts and computed prose.

The seed runs of each profile (``CONFIGS[profile].runs``, a
:class:`~mechbook.assign_add.seeds.SeedRuns`) are the very object chapters 9 and 10 hold, so all
three open the same cached run: the seed that the stated rule picks
(:func:`mechbook.assign_add.seeds.dissect`). Phases come from
:func:`mechbook.assign_add.phases.detect_phases`, progress measures from
:func:`mechbook.assign_add.measures.measures_over_training`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import altair as alt
import numpy as np
import pandas as pd

import mechbook
from mechbook import viz
from mechbook.assign_add import cases, circuits, probes, release, scores
from mechbook.assign_add.measures import MEASURES, MeasureConfig
from mechbook.assign_add.model import AssignAddModel
from mechbook.assign_add.phases import PhaseRules, Phases
from mechbook.assign_add.probes import ProbeConfig
from mechbook.assign_add.runs import SEED_RUNS, TRAIN_PROFILES
from mechbook.assign_add.seeds import Dissected, SeedRuns
from mechbook.assign_add.task import GENERALISATION_UNION, POOL_NAMES, Task, TaskConfig, union_accuracy
from mechbook.assign_add.train import TrainConfig, TrainResult, load_model
from mechbook.cache import cached

POOL_TYPE = {
    "train": "train",
    "heldout": "held-out pairs",
    "misplaced": "misplaced",
    "misplaced_one": "misplaced (one)",
    "misplaced_both": "misplaced (both)",
}
"""Pool-name suffix -> what is new about the question (the curves' line style)."""
VARIABLE_COLOURS = {"0-var": "#2e86ab", "1-var": "#f18f01", "2-var": "#c73e1d"}
BOUND_LEVEL = 0.95
"""1-var training accuracy that marks the binding jump as complete in the prose."""


@dataclass(frozen=True)
class DynamicsChapterConfig:
    """Chapter 8: the seed runs (shared with chapters 9-10; their config, seeds and phase rules),
    the progress measures' batch, the steps shown either side of phase 2 in the attention slider,
    and how the authors' released run is read: sequences per pool, which checkpoints (None: all
    present locally), and whether its final model is scored on the exactly enumerated pools; the
    sequences per misplaced case, and the sequences and training of the variable-identity probe,
    at every checkpoint of both runs."""

    runs: SeedRuns
    measures: MeasureConfig
    window: int
    release_per_pool: int = 512
    release_steps: tuple[int, ...] | None = None
    release_exact: bool = True
    case_sequences: int = 256
    probe_sequences: int = 512
    probe: ProbeConfig = field(default_factory=ProbeConfig)

    def __post_init__(self) -> None:
        if not isinstance(self.runs, SeedRuns) or not isinstance(self.measures, MeasureConfig):
            raise TypeError("runs must be a SeedRuns and measures a MeasureConfig")
        if self.case_sequences < 1 or self.probe_sequences < 1:
            raise ValueError("case_sequences and probe_sequences must be at least 1")
        if self.window < 1:
            raise ValueError(f"window must be a positive number of steps, got {self.window}")
        if self.release_per_pool < 1:
            raise ValueError(f"release_per_pool must be at least 1, got {self.release_per_pool}")
        bad = sorted(set(self.release_steps or ()) - set(release.RELEASE_STEPS))
        if bad:
            raise ValueError(f"release_steps {bad} are not released checkpoints (1, 101, ..., 39901)")

    @property
    def train(self) -> TrainConfig:
        """The seed runs' shared config (each seed sets ``seed`` and ``model.seed``)."""
        return self.runs.train

    @property
    def rules(self) -> PhaseRules:
        """The phase rules."""
        return self.runs.rules


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

CONFIGS: dict[str, DynamicsChapterConfig] = {
    "smoke": DynamicsChapterConfig(
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
    "cpu": DynamicsChapterConfig(SEED_RUNS["cpu"], MeasureConfig(n_sequences=512), window=1000),
    "paper": DynamicsChapterConfig(SEED_RUNS["paper"], MeasureConfig(n_sequences=1024), window=1000),
}
"""Per profile: ``cpu`` trains six seeds of chapter 11's cpu run size (d_model 64, batch 256,
lr 3e-3, 8,000 steps; README: what the pilot seeds showed) as two stacks of three, one per core;
``paper`` four seeds of the paper's configuration; ``smoke`` four seeds of a few hundred steps.
The seeds include 0 to 3 (smoke) or 0 to 4 (cpu), so the seed spread
(``python -m mechbook spread``, seeds 0 to 4) reads the stack's own runs."""


def resolve(
    profile: str, steps: int | None = None, seed: int | None = None, measure_sequences: int | None = None
) -> DynamicsChapterConfig:
    """The chapter's config for ``profile`` with the reader's knobs (None: from the profile):
    ``steps`` of every seed run, ``seed`` of the run to dissect instead of the rule's pick,
    sequences of the progress measures."""
    return mechbook.resolve_profile(
        CONFIGS, profile, runs__train__steps=steps, runs__pick=seed, measures__n_sequences=measure_sequences
    )


def n_parameters(train: TrainConfig) -> int:
    """Trainable parameters of the model of ``train``."""
    return sum(p.numel() for p in AssignAddModel(train.model).parameters())


def _flat(obj: object, prefix: str = "") -> dict[str, object]:
    """A config's fields by dotted name, nested configs opened (the task is compared whole)."""
    out: dict[str, object] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value) and f.name != "task":
            out.update(_flat(value, f"{prefix}{f.name}."))
        else:
            out[prefix + f.name] = value
    return out


def differences_from_paper(train: TrainConfig) -> pd.DataFrame:
    """Every setting of ``train`` that differs from the paper's run (``TRAIN_PROFILES["paper"]``,
    the released run's configuration), the seeds left out: ``setting``, ``the paper``,
    ``this run``; empty when the run is the paper's."""
    paper, ours = _flat(TRAIN_PROFILES["paper"]), _flat(train)
    rows = [
        {"setting": name, "the paper": str(paper[name]), "this run": str(ours[name])}
        for name in paper
        if paper[name] != ours[name] and not name.endswith("seed")
    ]
    return pd.DataFrame(rows, columns=["setting", "the paper", "this run"])


def setup_prose(train: TrainConfig) -> str:
    """The model's sizes and the training settings, as a paragraph."""
    m = train.model
    return (
        f"Model: $d_{{model}}$ = {m.d_model}, $d_{{head}}$ = {m.d_head}, MLP width {m.d_mlp}, {m.n_ctx} positions, "
        f"init std {m.init_std:.4f} ($0.8/\\sqrt{{d_{{model}}}}$), {n_parameters(train):,} parameters. "
        f"Training: AdamW, lr {train.lr}, betas {train.betas}, weight decay {train.weight_decay}, "
        f"batch {train.batch_size}, {train.steps:,} steps, seed {train.seed}; the nine pools scored every "
        f"{train.eval_every} steps on {train.eval_per_pool} sequences each."
    )


def training_prose(result: TrainResult) -> str:
    """How many evaluations and checkpoints the run kept, and how long it took."""
    acc = result.accuracy()
    return (
        f"{len(acc)} evaluations over {int(acc.index.max()):,} steps of batch {result.config.batch_size}; "
        f"{len(result.checkpoints)} checkpoints kept; training took {result.train_seconds / 60:.1f} minutes "
        "(when it ran; a cached run loads in seconds)."
    )


def curves_frame(history: pd.DataFrame) -> pd.DataFrame:
    """The nine pools' curves with ``variables`` (0/1/2-var) and ``question`` (what is new)."""
    curves = history[history.pool != "train"].copy()
    curves["variables"] = curves.pool.str[0] + "-var"
    curves["question"] = curves.pool.str.split("_", n=1).str[1].map(POOL_TYPE)
    return curves


def phase_rules(marks: pd.DataFrame) -> list[alt.Chart]:
    """Vertical rules with staggered labels at the detected phase steps (none when no phase was
    detected: an empty frame has no type for Altair to infer)."""
    if marks.empty:
        return []
    rule = alt.Chart(marks).mark_rule(color="#555", strokeDash=[3, 3]).encode(x="step:Q", tooltip=["phase:N", "step:Q"])
    staggered = marks.assign(row=8 + 16 * np.arange(len(marks)))
    label = (
        alt.Chart(staggered)
        .mark_text(align="left", dx=4, fontSize=12, color="#333")
        .encode(x="step:Q", y=alt.Y("row:Q", scale=None, axis=None), text="phase:N")
    )
    return [rule, label]


def curves_title(phases: Phases, acc: pd.DataFrame, modulus: int) -> str:
    """The curves chart's title: the detected phases, or what the run reached without them."""
    if phases.phase1 is not None and phases.phase2 is not None:
        return (
            f"Addition first (phase 1 at step {phases.phase1:,}), binding in a jump (phase 2 at step {phases.phase2:,})"
        )
    last = acc.iloc[-1]
    return (
        f"After {int(acc.index.max()):,} steps: 0-var train {last['0var_train']:.0%}, "
        f"1-var train {last['1var_train']:.0%} (chance {1 / modulus:.0%})"
    )


def curves_chart(result: TrainResult, phases: Phases) -> alt.LayerChart:
    """The nine accuracy curves (colour: variables; dash: what is new; click the legend to bring
    a group forward) with the phase rules, under a title stating the finding."""
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
    title = curves_title(phases, result.accuracy(), result.config.task.modulus)
    return alt.layer(lines, *phase_rules(phases.marks())).properties(title=title)


def rules_table(rules: PhaseRules) -> pd.DataFrame:
    """The three detection rules with their thresholds, as the code applies them."""
    return pd.DataFrame(
        [
            {"rule": "phase 1", "setting": f"{rules.phase1_pool} reaches {rules.phase1_level}"},
            {
                "rule": "phase 2",
                "setting": f"largest rise of {rules.phase2_pool} within {rules.jump_window} steps "
                f"(at least {rules.min_jump}), dated by its steepest interval",
            },
            {
                "rule": "phase 3",
                "setting": f"plateau: band ±{rules.plateau_tol} for ≥ {rules.plateau_len} steps below "
                f"{rules.plateau_max} (rolling mean of {rules.smooth} evaluations); rise > {rules.rise}",
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
    if phases.phase3_status == "detected":
        start, end, level = phases.plateau
        lines.append(
            f"- **phase 3** (refinement): step {phases.phase3:,}; `{phases.phase3_pool}` sat at {level:.2f} "
            f"from step {start:,} to {end:,}, then rose past {level + rules.rise:.2f}"
        )
    elif phases.phase3_status == "plateau without rise":
        start, _, level = phases.plateau
        lines.append(
            f"- **phase 3**: `{phases.phase3_pool}` plateaus at {level:.2f} from step {start:,}, "
            "but does not rise within this run"
        )
    elif phases.phase2 is None:
        lines.append("- **phase 3**: not looked for (it is defined after phase 2)")
    else:
        lines.append("- **phase 3**: absent (no misplaced-variable pool plateaued after phase 2)")
    return "\n".join(lines)


def final_table(acc: pd.DataFrame) -> pd.DataFrame:
    """The nine pools' final accuracies."""
    final = acc.iloc[-1]
    return pd.DataFrame({"pool": POOL_NAMES, "final accuracy": [float(final[p]) for p in POOL_NAMES]})


def union_score(acc: pd.DataFrame) -> float:
    """The final 2-var generalisation union: the mean of its three pools' final accuracies."""
    return float(np.mean([acc.iloc[-1][p] for p in GENERALISATION_UNION]))


def union_paper(acc: pd.DataFrame, task: Task) -> float:
    """The final 2-var union with its parts weighted by their sizes in the enumerated union, as
    the paper scores it (:func:`mechbook.assign_add.task.union_accuracy`)."""
    return union_accuracy(acc.iloc[-1].to_dict(), task, "paper")


def union_prose(acc: pd.DataFrame, task: Task) -> str:
    """The union's sentence, both weightings, next to chance."""
    n = task.cfg.modulus
    return (
        f"2-var generalisation union: **{union_paper(acc, task):.3f}** with its parts weighted by their sizes (the "
        f"paper's score), {union_score(acc):.3f} with the three parts weighted equally; chance is 1/{n} = {1 / n:.3f}."
    )


def measures_shown(measures: pd.DataFrame) -> pd.DataFrame:
    """The headline progress measures with their chart labels."""
    return measures[measures.measure.isin(list(MEASURES))].assign(label=lambda d: d.measure.map(MEASURES))


def final_measures(measures: pd.DataFrame) -> pd.Series:
    """Each measure's value at the last checkpoint."""
    return measures[measures.step == measures.step.max()].set_index("measure").value


def adder_first_step(measures: pd.DataFrame, level: float = 0.9) -> int | None:
    """The first checkpoint where the adder alone is right on at least ``level`` of the pairs."""
    hits = measures[(measures.measure == "adder") & (measures.value >= level)].step
    return None if hits.empty else int(hits.min())


def measures_chart(measures: pd.DataFrame, phases: Phases) -> alt.LayerChart:
    """The progress measures over the checkpoints (click the legend to highlight one), with the
    phase rules; the title states where the adder and layer 2 end."""
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
    title = (
        f"At the end the adder alone is right on {end['adder']:.0%} of pairs and layer 2's top-2 keys "
        f"are the needed numbers in {end['l2_needed_top2']:.0%} of sequences"
    )
    return alt.layer(lines, *phase_rules(phases.marks())).properties(title=title)


def measure_at(measures: pd.DataFrame, measure: str, step: int) -> float:
    """``measure`` at the last checkpoint at or before ``step`` (NaN if none)."""
    rows = measures[(measures.measure == measure) & (measures.step <= step)]
    return float(rows.sort_values("step").value.iloc[-1]) if len(rows) else float("nan")


def jump_prose(result: TrainResult, phases: Phases, measures: pd.DataFrame) -> str:
    """What the progress measures do across the binding jump: from the last checkpoint before
    phase 2 to the first where 1-var training accuracy is at least 0.95, or, when the run never
    gets there, to its last checkpoint, said as such."""
    if phases.phase2 is None:
        return (
            "No binding jump was detected in this run, so there is no before and after to compare; "
            f"at the end the adder alone is right on {measure_at(measures, 'adder', result.config.steps):.0%} of pairs."
        )
    steps = sorted(result.checkpoints)
    acc = result.accuracy()["1var_train"]
    before = max([s for s in steps if s < phases.phase2], default=steps[0])
    reached = acc[(acc.index >= phases.phase2) & (acc >= BOUND_LEVEL)]
    if len(reached):
        after = min([s for s in steps if s >= int(reached.index[0])], default=steps[-1])
        until = f"step {after:,} (the first checkpoint where `1var_train` accuracy is at least {BOUND_LEVEL})"
    else:
        after = steps[-1]
        until = (
            f"step {after:,}, the last checkpoint (`1var_train` accuracy never reaches {BOUND_LEVEL} in this run: "
            f"it ends at {float(acc.iloc[-1]):.2f})"
        )
    return (
        f"Across the phase-2 jump, from step {before:,} (the last checkpoint before it) to {until}, layer-1 "
        f"attention from `=` onto the operand positions goes from {measure_at(measures, 'l1_operands_mass', before):.2f} "
        f"to {measure_at(measures, 'l1_operands_mass', after):.2f}, and layer 2's top-2 keys land on the needed numbers "
        f"in {measure_at(measures, 'l2_needed_top2', before):.0%} → {measure_at(measures, 'l2_needed_top2', after):.0%} "
        f"of sequences. The adder alone was already right on {measure_at(measures, 'adder', before):.0%} of all pairs."
    )


def window_steps(checkpoints: list[int], centre: int, window: int) -> list[int]:
    """Kept checkpoints within ``window`` steps of ``centre`` (all of them if none is)."""
    near = sorted(s for s in checkpoints if abs(s - centre) <= window)
    return near or sorted(checkpoints)


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


def attention_slider(result: TrainResult, phases: Phases, cfg: DynamicsChapterConfig) -> tuple[alt.FacetChart, int]:
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
    title = f"{task.render(example)}: attention before and after the binding jump"
    return pattern_slider_chart(patterns, steps, start, title), len(steps)


PAPER_PHASES = {"phase 1": "~500", "phase 2": "5,300-5,400", "phase 3": "14,500-16,000"}
"""When the paper dates its three phases (steps of its released run)."""


def release_run(cfg: DynamicsChapterConfig) -> TrainResult:
    """The authors' released run as a :class:`TrainResult`: the nine sampled pools (the rebuild's
    own pools) at the released checkpoints of ``cfg.release_steps`` (None: every one present
    locally), those checkpoints' weights, the final weights and the paper's training config, so
    the chapter's functions read it exactly as they read the rebuild."""
    history = scores.release_history(cfg.release_steps, n_per_pool=cfg.release_per_pool)
    steps = sorted(history.step.unique().tolist())
    return TrainResult(
        history=history,
        checkpoints={s: release.release_state(s) for s in steps},
        final_state=release.release_state(release.FINAL),
        config=TrainConfig(),
        train_seconds=0.0,
    )


def _step(step: int | None) -> str:
    return f"{step:,}" if step is not None else "not found"


def side_by_side(
    rebuild: TrainResult, rebuild_phases: Phases, released: TrainResult, release_phases: Phases
) -> pd.DataFrame:
    """The phases and the last evaluation's accuracies of both runs, one row each, with the
    paper's dates of the phases."""
    rows = [
        {
            "": "phase 1 (addition)",
            "paper's run, as released": _step(release_phases.phase1),
            "this rebuild": _step(rebuild_phases.phase1),
            "the paper says": PAPER_PHASES["phase 1"],
        },
        {
            "": "phase 2 (binding)",
            "paper's run, as released": _step(release_phases.phase2),
            "this rebuild": _step(rebuild_phases.phase2),
            "the paper says": PAPER_PHASES["phase 2"],
        },
        {
            "": "phase 3 (refinement)",
            "paper's run, as released": _step(release_phases.phase3)
            if release_phases.phase3
            else release_phases.phase3_status,
            "this rebuild": _step(rebuild_phases.phase3) if rebuild_phases.phase3 else rebuild_phases.phase3_status,
            "the paper says": PAPER_PHASES["phase 3"],
        },
    ]
    a, b = released.accuracy().iloc[-1], rebuild.accuracy().iloc[-1]
    steps = (int(released.accuracy().index.max()), int(rebuild.accuracy().index.max()))
    for pool in POOL_NAMES:
        rows.append(
            {
                "": f"{pool} at the last evaluation",
                "paper's run, as released": f"{a[pool]:.3f}",
                "this rebuild": f"{b[pool]:.3f}",
                "the paper says": "",
            }
        )
    rows.append(
        {
            "": "last evaluation (step)",
            "paper's run, as released": f"{steps[0]:,}",
            "this rebuild": f"{steps[1]:,}",
            "the paper says": "40,000",
        }
    )
    return pd.DataFrame(rows)


def release_exact_scores(cfg: DynamicsChapterConfig) -> dict[str, float] | None:
    """The released final model's scores on the exactly enumerated pools
    (:func:`mechbook.assign_add.scores.exact_scores`, cached), or None when ``cfg`` skips them."""
    if not cfg.release_exact:
        return None
    key = {"commit": release.RELEASE_COMMIT, "task": TaskConfig()}
    return cached(
        "chapters/ch08_release_exact", key, lambda: scores.exact_scores(release.load_release(), Task(TaskConfig()))
    )


def release_prose(phases: Phases, released: TrainResult, exact: dict[str, float] | None, n_heldout: int) -> str:
    """The released run's phases as the rules find them, and its final model's exact scores
    (or, without them, its last sampled evaluation)."""
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
            f"{acc.iloc[-1]['0var_heldout']:.1%} of the sampled held-out pairs; this profile skips the exactly "
            "enumerated pools."
        )
    return text + (
        f"Its final model is right on **{exact['0var_heldout_all']:.1%}** of all {n_heldout:,} held-out pairs "
        f"and on **{exact['2var_union_paper']:.1%}** of the enumerated 2-var union (weighted by its parts' "
        f"sizes, as the paper scores it; {exact['2var_union_equal']:.1%} with the three parts weighted equally)."
    )


def record_release(released: TrainResult, phases: Phases, exact: dict[str, float] | None) -> dict[str, object]:
    """Record the released run's numbers as ``release_*``."""
    final = released.accuracy().iloc[-1]
    values = {
        "release_phase1_step": phases.phase1,
        "release_phase2_step": phases.phase2,
        "release_phase3_step": phases.phase3 if phases.phase3 is not None else phases.phase3_status,
        "release_checkpoints": int(released.accuracy().index.nunique()),
        **{f"release_last_{pool}": float(final[pool]) for pool in POOL_NAMES},
        **{f"release_final_{name}": float(value) for name, value in (exact or {}).items()},
    }
    return {name: mechbook.record(name, value) for name, value in values.items()}


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


def seeds_prose(dissected: Dissected) -> str:
    """How the phases spread over seeds, which seed the rule picks (the median binding jump, or
    the median final 1-var training accuracy when no seed binds), and which run the chapters open."""
    summary, example = dissected.summary, dissected.example
    n = len(summary)
    jumps = summary["phase2"].dropna().astype(int).sort_values()
    three = int(summary["three_phases"].sum())
    if len(jumps):
        spread, rule = f"the binding jump came at steps {', '.join(f'{s:,}' for s in jumps)}", "the median binding jump"
    else:
        spread, rule = "no seed reached the binding jump", "no seed bound, so the median final 1-var training accuracy"
    if dissected.picked_by_rule:
        relation = "the run that this chapter and chapters 9 and 10 open"
    else:
        relation = f"this page opens seed {dissected.run.config.seed} instead, as the reader asked"
    return (
        f"Over {n} seeds of {dissected.run.config.steps:,} steps, {spread}; {three} of {n} show all three phases. "
        f"Final 2-var union (paper-weighted) from {summary['final_2var_union'].min():.3f} to "
        f"{summary['final_2var_union'].max():.3f}. The rule ({rule}) picks seed {example}: {relation}."
    )


def record_seeds(dissected: Dissected) -> dict[str, object]:
    """Record the multi-seed numbers."""
    summary = dissected.summary
    values = {
        "seeds_n": len(summary),
        "seeds_bound": int(summary["phase2"].notna().sum()),
        "seeds_three_phases": int(summary["three_phases"].sum()),
        "seeds_phase2_steps": [int(s) for s in summary["phase2"].dropna()],
        "seeds_min_final_2var_union": float(summary["final_2var_union"].min()),
        "example_seed": dissected.example,
        "dissected_seed": dissected.run.config.seed,
    }
    return {name: mechbook.record(name, value) for name, value in values.items()}


PLATEAU_LAG = 0.5
"""A misplaced case lags in the plateau when its mean accuracy there is below this."""
RUNS = ("paper's run, as released", "this rebuild")
"""The two runs' names in the side-by-side tables and charts."""


@dataclass
class Plateau:
    """One run's misplaced cases over training (``history``: ``step``, ``pool``, ``case``,
    ``accuracy``), its phases, and each case's mean over the phase-3 plateau (``lag``, lowest
    first, ``lags`` below :data:`PLATEAU_LAG`; None without a plateau)."""

    history: pd.DataFrame
    phases: Phases
    lag: pd.DataFrame | None


def plateau_cases(history: pd.DataFrame, phases: Phases) -> pd.DataFrame | None:
    """Every case's mean accuracy over the phase-3 plateau, lowest first, with ``lags`` (below
    :data:`PLATEAU_LAG`); None when the rules found no plateau."""
    if phases.plateau is None:
        return None
    start, end, _ = phases.plateau
    lag = cases.lagging_cases(history, start, end)
    return lag.assign(lags=lag.accuracy < PLATEAU_LAG)


def plateaus(
    cfg: DynamicsChapterConfig, rebuild: TrainResult, phases: Phases, released: TrainResult, release_phases: Phases
) -> dict[str, Plateau]:
    """The misplaced cases (:mod:`mechbook.assign_add.cases`) of both runs: the released run at
    ``cfg.release_steps`` (cached), the rebuild at every kept checkpoint."""
    task = Task(rebuild.config.task)
    release_history = cases.release_case_history(cfg.release_steps, n_per_case=cfg.case_sequences)
    rebuild_history = cases.case_history(
        lambda s: load_model(rebuild, s), sorted(rebuild.checkpoints), task, cfg.case_sequences
    )
    return {
        RUNS[0]: Plateau(release_history, release_phases, plateau_cases(release_history, release_phases)),
        RUNS[1]: Plateau(rebuild_history, phases, plateau_cases(rebuild_history, phases)),
    }


def _named(lag: pd.DataFrame) -> list[str]:
    return [f"{r.pool}: {r.case}" for r in lag.itertuples()]


def b_right_only(lag: pd.DataFrame | None) -> bool | None:
    """Whether the lagging cases are exactly those with ``b`` as the right operand (the paper's
    account of the plateau); None without a plateau."""
    if lag is None:
        return None
    lagging = set(_named(lag[lag.lags]))
    return bool(lagging) and lagging == {n for n in _named(lag) if "b right" in n}


def cases_prose(runs: dict[str, Plateau]) -> str:
    """Which cases each run's plateau is made of (or that it has none), one bullet per run."""
    lines = []
    for who, run in runs.items():
        if run.lag is None:
            lines.append(f"- **{who}**: the rules found no phase-3 plateau, so there is no lagging case to trace.")
            continue
        start, end, level = run.phases.plateau
        lagging, others = run.lag[run.lag.lags], run.lag[~run.lag.lags]
        named = "; ".join(f"`{r.pool}` {r.case} ({r.accuracy:.2f})" for r in lagging.itertuples()) or "none"
        rest = f"every other case averages at least {others.accuracy.min():.2f}" if len(others) else "no case is above"
        lines.append(
            f"- **{who}**: over the plateau (steps {start:,}-{end:,}, `{run.phases.phase3_pool}` at {level:.2f}) the "
            f"cases below {PLATEAU_LAG} are {named}; {rest}."
        )
    return "\n".join(lines)


def cases_chart(runs: dict[str, Plateau]) -> alt.TopLevelMixin:
    """Each misplaced case's accuracy over training, one panel per run and pool, each on its run's
    own steps (click a case to bring it forward), under a title saying whether the released run's
    plateau is the b-right case."""
    frame = pd.concat(
        [run.history.assign(panel=[f"{who}: {p}" for p in run.history.pool]) for who, run in runs.items()],
        ignore_index=True,
    )
    verdict = b_right_only(runs[RUNS[0]].lag)
    title = {
        True: "In the released run's plateau only the cases with b as the right operand lag",
        False: "In the released run's plateau other cases lag besides b as the right operand",
        None: "The misplaced cases over training (the released run has no plateau here)",
    }[verdict]
    return viz.highlight_lines(
        frame,
        x="step",
        y="accuracy",
        series="case",
        series_title="misplaced",
        facet="panel",
        columns=3,
        y_domain=[0, 1],
        x_title="training step",
        y_title="accuracy",
        height=180,
        title=title,
        keyboard=False,
    ).resolve_scale(x="independent")


def probe_curves(
    cfg: DynamicsChapterConfig, rebuild: TrainResult, phases: Phases, released: TrainResult, release_phases: Phases
) -> dict[str, tuple[pd.DataFrame, Phases]]:
    """The variable-identity probe (embedding and after layer 1) over training, both runs: the
    released run at ``cfg.release_steps`` (cached), the rebuild at every kept checkpoint, each on
    ``cfg.probe_sequences`` training sequences; with each run's phases."""
    task = Task(rebuild.config.task)
    tokens, _ = task.sample(cfg.probe_sequences, np.random.default_rng([0, 19]))
    rebuild_frame = probes.variable_identity_over_training(
        lambda s: load_model(rebuild, s), sorted(rebuild.checkpoints), task.cfg, tokens, cfg=cfg.probe
    )
    release_frame = probes.release_probe_history(cfg.release_steps, n_sequences=cfg.probe_sequences, cfg=cfg.probe)
    return {RUNS[0]: (release_frame, release_phases), RUNS[1]: (rebuild_frame, phases)}


def identity_step(frame: pd.DataFrame, level: float = 0.95, where: str = "after layer 1") -> int | None:
    """The first checkpoint where the probe reads the variable with at least ``level`` accuracy."""
    part = frame[(frame["where"] == where) & (frame.accuracy >= level)]
    return int(part.step.min()) if len(part) else None


def _before_jump(frame: pd.DataFrame, phases: Phases) -> bool:
    first = identity_step(frame)
    return first is not None and phases.phase2 is not None and first < phases.phase2


def probe_chart(runs: dict[str, tuple[pd.DataFrame, Phases]]) -> alt.FacetChart:
    """The probe's accuracy over training, one panel per run, the binding jump as a dashed rule."""
    frame = pd.concat(
        [f.assign(run=who, jump=float("nan") if ph.phase2 is None else ph.phase2) for who, (f, ph) in runs.items()],
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
    early = all(_before_jump(f, ph) for f, ph in runs.values())
    title = (
        "In both runs the variable can be read after layer 1 before the binding jump (dashed)"
        if early
        else "When the variable can be read after layer 1, against the binding jump (dashed)"
    )
    return (
        alt.layer(line, rule, data=frame)
        .properties(width=300, height=200)
        .facet(column=alt.Column("run:N", title=None))
        .resolve_scale(x="independent")
        .properties(title=title)
    )


def probe_prose(runs: dict[str, tuple[pd.DataFrame, Phases]], level: float = 0.95) -> str:
    """When the probe first reads the variable after layer 1, against the binding jump, per run."""
    lines = []
    for who, (frame, phases) in runs.items():
        first, jump = identity_step(frame, level), phases.phase2
        if first is None:
            text = f"the probe never reads the variable after layer 1 with {level:.0%} accuracy"
        elif jump is None:
            text = f"the probe reads the variable after layer 1 from step {first:,}; the rules found no binding jump"
        else:
            relation = "before" if first < jump else "at or after"
            text = (
                f"the probe reads the variable after layer 1 with {level:.0%} accuracy from step {first:,}, "
                f"{relation} the binding jump at step {jump:,}"
            )
        lines.append(f"- **{who}**: {text}.")
    return "\n".join(lines)


def record_analyses(plateau: dict[str, Plateau], probe: dict[str, tuple[pd.DataFrame, Phases]]) -> dict[str, object]:
    """Record the plateau's lagging cases and the probe's first readable step, both runs."""
    released, rebuild = plateau[RUNS[0]].lag, plateau[RUNS[1]].lag
    values = {
        "release_plateau_lagging": [] if released is None else _named(released[released.lags]),
        "release_plateau_b_right_only": b_right_only(released),
        "plateau_lagging": None if rebuild is None else _named(rebuild[rebuild.lags]),
        "release_identity_probe_step": identity_step(probe[RUNS[0]][0]),
        "identity_probe_step": identity_step(probe[RUNS[1]][0]),
    }
    return {name: mechbook.record(name, value) for name, value in values.items()}


def record_all(
    result: TrainResult, phases: Phases, measures: pd.DataFrame, pattern_checkpoints: int
) -> dict[str, object]:
    """Record the chapter's headline numbers (``book/thresholds/08_training_dynamics.yml``)."""
    acc = result.accuracy()
    final = acc.iloc[-1]
    values: dict[str, object] = {
        "n_parameters": n_parameters(result.config),
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
        "final_2var_union": union_score(acc),
        "final_2var_union_paper": union_paper(acc, Task(result.config.task)),
        **{f"measure_{name}": float(value) for name, value in final_measures(measures).items()},
        "adder_reaches_0.9_step": adder_first_step(measures),
        "pattern_checkpoints": pattern_checkpoints,
    }
    return {name: mechbook.record(name, value) for name, value in values.items()}
