"""Chapter 7, "The task and what is held out": its config, claims, tables, charts and computed
prose, in the order the page shows them.

The notebook ``book/part2/07_task.ipynb`` calls these; everything it shows about the task comes
from :mod:`mechbook.assign_add.task` and :mod:`mechbook.assign_add.pools`, read back here in the
forms a reader sees.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import altair as alt
import numpy as np
import pandas as pd

import mechbook
from mechbook.assign_add.baselines import best_constant, chance
from mechbook.assign_add.claims import TaskReadings
from mechbook.assign_add.pools import (
    distinct_questions,
    label_errors,
    variable_configurations,
)
from mechbook.assign_add.readings import task_numbers
from mechbook.assign_add.task import KIND_NAMES, POOL_NAMES, TWO_VAR, Task, TaskConfig
from mechbook.chapters.common import record_all as record_numbers
from mechbook.claims import Evidence, fmt, record_claims
from mechbook.validation import POSITIVE, SEED, check_fields

STEM = "07_task"
SPLIT_COLOURS = {"training pair": "#cfd8e3", "held out": "#d1495b"}
PAIR_COLOURS = {"allowed in training": "#cfd8e3", "misplaced: held out": "#d1495b", "same variable": "#ffffff"}
ROLE_COLOURS = {"variable": "#2e86ab", "value": "#a3d5ff", "PAD": "#eeeeee", "query": "#f6ae2d"}


@dataclass(frozen=True)
class ChapterConfig:
    """Chapter 7: the task shown (``task``), the sequences drawn per evaluation pool for the tables
    (``n_per_pool``), and the seed of the examples and pools (``seed``)."""

    n_per_pool: int
    seed: int
    task: TaskConfig = field(default_factory=TaskConfig)

    def __post_init__(self) -> None:
        check_fields(self, n_per_pool=POSITIVE, seed=SEED)


#: The chapter's config per profile: the task, how many sequences each pool draws and the seed.
CONFIGS: dict[str, ChapterConfig] = {
    "smoke": ChapterConfig(n_per_pool=200, seed=0),
    "cpu": ChapterConfig(n_per_pool=2000, seed=0),
    "paper": ChapterConfig(n_per_pool=10000, seed=0),
}


def resolve(profile: str, n_per_pool: int | None = None, seed: int | None = None) -> ChapterConfig:
    """The chapter's config for ``profile`` with the reader's knobs (None: from the profile)."""
    return mechbook.resolve_profile(CONFIGS, profile, n_per_pool=n_per_pool, seed=seed)


def _sentences(ev: dict[str, Evidence], ids: tuple[str, ...]) -> str:
    return " ".join(ev[i].sentence() for i in ids)


def sizes_prose(tc: TaskConfig) -> str:
    """Markdown list of the task's sizes: modulus, variables, token ids, layout."""
    return (
        f"- modulus $N$ = {tc.modulus}; variables `{tc.letters[0]}`..`{tc.letters[-1]}` ({tc.n_vars}); "
        f"{tc.d_vocab} input tokens (numbers 0..{tc.modulus - 1}, `+` = {tc.plus}, `=` = {tc.eq}, PAD = {tc.pad}, "
        f"variables {tc.var0}..{tc.d_vocab - 1})\n"
        f"- {tc.seq_len} tokens a sequence: positions 0..{tc.context_len - 1} hold 1 to {tc.max_assignments} "
        f"assignments, positions {tc.context_len}..{tc.seq_len - 1} the query"
    )


def examples_table(task: Task, seed: int, per_kind: int = 3) -> pd.DataFrame:
    """``per_kind`` freshly drawn training sequences of each kind: raw tokens, reading, answer."""
    rng = np.random.default_rng(seed)
    examples = []
    for kind, name in enumerate(KIND_NAMES):
        of_kind = np.nonzero(task.train_rows[:, 1] == kind)[0]
        tokens, labels = task.sample(of_kind[rng.integers(0, len(of_kind), per_kind)], rng)
        for t, y in zip(tokens, labels):
            examples.append(
                {"kind": name, "tokens (PAD = _)": task.raw(t), "reads as": task.render(t), "answer": int(y)}
            )
    return pd.DataFrame(examples)


def split_prose(task: Task, ev: dict[str, Evidence]) -> str:
    """The sentence stating f, the split seed and the two counts, then the split's claims."""
    tc = task.cfg
    return (
        f"Here $f$ = {tc.train_pair_fraction:.0%} with split seed {tc.split_seed}: "
        f"{int(task.train_pairs.sum()):,} training pairs and {int(task.heldout_pairs.sum()):,} held out.\n\n"
        + _sentences(ev, ("ch07.heldout_pairs", "ch07.sums_covered"))
    )


def split_frame(task: Task) -> pd.DataFrame:
    """One row per ordered pair ``(n1, n2)``: its sum and whether it is a training pair."""
    n = task.cfg.modulus
    n1, n2 = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return pd.DataFrame(
        {
            "n1": n1.ravel(),
            "n2": n2.ravel(),
            "split": np.where(task.train_pairs.ravel(), "training pair", "held out"),
            "sum": (n1 + n2).ravel() % n,
        }
    )


def split_chart(task: Task) -> alt.Chart:
    """Heatmap of the ordered pairs, held-out ones in red; the title gives their share."""
    n = task.cfg.modulus
    held, total = int(task.heldout_pairs.sum()), n * n
    ticks = alt.Axis(values=list(range(0, n, 5)))
    return (
        alt.Chart(
            split_frame(task),
            title=f"{held:,} of the {total:,} ordered pairs ({held / total:.0%}) never appear as a training sum",
        )
        .mark_rect()
        .encode(
            x=alt.X("n2:O", title="right operand n₂", axis=ticks),
            y=alt.Y("n1:O", title="left operand n₁", axis=ticks),
            color=alt.Color(
                "split:N",
                scale=alt.Scale(domain=list(SPLIT_COLOURS), range=list(SPLIT_COLOURS.values())),
                title=None,
                legend=alt.Legend(orient="bottom"),
            ),
            tooltip=["n1", "n2", "sum", "split"],
        )
        .properties(width=420, height=420)
    )


def variable_pairs_frame(task: Task) -> pd.DataFrame:
    """One row per ordered variable pair ``(v1, v2)`` with its status in 2-var training queries."""
    letters = np.array(task.cfg.letters)
    v1, v2 = np.meshgrid(np.arange(len(letters)), np.arange(len(letters)), indexing="ij")
    status = np.where(
        v1 == v2, "same variable", np.where(task.allowed_two_var, "allowed in training", "misplaced: held out")
    )
    return pd.DataFrame({"v1": letters[v1.ravel()], "v2": letters[v2.ravel()], "status": status.ravel()})


def variable_pairs_chart(task: Task) -> alt.Chart:
    """The 12 x 12 grid of variable pairs, allowed ones grey, misplaced ones red."""
    letters = list(task.cfg.letters)
    return (
        alt.Chart(
            variable_pairs_frame(task),
            title=f"{int(task.allowed_two_var.sum())} ordered variable pairs may appear in a 2-var training query",
        )
        .mark_rect(stroke="white")
        .encode(
            x=alt.X("v2:N", title="right variable v₂", sort=letters),
            y=alt.Y("v1:N", title="left variable v₁", sort=letters),
            color=alt.Color(
                "status:N",
                title=None,
                legend=alt.Legend(orient="bottom"),
                scale=alt.Scale(domain=list(PAIR_COLOURS), range=list(PAIR_COLOURS.values())),
            ),
            tooltip=["v1", "v2", "status"],
        )
        .properties(width=300, height=300)
    )


def positions_prose(ev: dict[str, Evidence]) -> str:
    """The claim on the allowed 2-var variable pairs."""
    return _sentences(ev, ("ch07.allowed_two_var_pairs",))


def rows_table(task: Task) -> pd.DataFrame:
    """Training rows per kind and their share of all rows."""
    counts = task.kind_counts()
    table = pd.DataFrame({"kind": list(counts), "rows": list(counts.values())})
    table["share"] = table.rows / table.rows.sum()
    return table


def rows_prose(table: pd.DataFrame, ev: dict[str, Evidence]) -> str:
    """The total and the 2-var share of :func:`rows_table`, then the claim on that share."""
    two_var = float(table.loc[table.kind == KIND_NAMES[TWO_VAR], "share"].iloc[0])
    return f"{int(table.rows.sum()):,} training rows in all; 2-var rows are {two_var:.1%} of them. " + _sentences(
        ev, ("ch07.two_var_share",)
    )


def pool_table(task: Task, pools: dict[str, tuple[np.ndarray, np.ndarray]]) -> pd.DataFrame:
    """One row per pool: variables, pairs, configurations, distinct questions, sequences drawn,
    the accuracy of answering every sequence with the pool's most common label, an example."""
    configs, questions = variable_configurations(task), distinct_questions(task)
    return pd.DataFrame(
        [
            {
                "pool": name,
                "variables": int(name[0]),
                "pairs": "held out" if name.endswith("heldout") else "training",
                "variable configurations": configs[name],
                "distinct questions": questions[name],
                "sequences drawn": len(pools[name][1]),
                "best constant answer": best_constant(pools[name][1]),
                "example": task.render(pools[name][0][0]),
            }
            for name in POOL_NAMES
        ]
    )


def pools_prose(readings: TaskReadings, ev: dict[str, Evidence]) -> str:
    """Chance and the constant-answer control on these pools, then the claim on the hard pool."""
    task, pools = readings.task, readings.pools
    controls = [best_constant(labels) for _, labels in pools.values()]
    n = task.cfg.modulus
    return (
        f"A uniform guess is right with probability 1/{n} = {fmt(chance(task.cfg.modulus), '.3f')} (**chance**). "
        "Answering every sequence of a pool with that pool's most common label does at least as well on a "
        f"finite pool: here from {fmt(min(controls), '.3f')} to {fmt(max(controls), '.3f')} (column *best "
        "constant answer*), the harder baseline that chapter 11 reads its accuracies against. "
        + _union_prose(task)
        + " "
        + _sentences(ev, ("ch07.misplaced_both_pairs", "ch07.union_size"))
    )


def _union_prose(task: Task) -> str:
    """The sizes of the enumerated 2-var union's parts and their weights in its score."""
    counts = task.union_counts()
    total = sum(counts.values())
    parts = ", ".join(f"`{name}` {n:,} ({n / total:.1%})" for name, n in counts.items())
    return (
        f"Chapter 11 scores the r sweep on the 2-var generalisation union, its parts weighted by their sizes "
        f"in the enumerated union as the paper scores it: {parts}."
    )


def label_prose(readings: TaskReadings, ev: dict[str, Evidence]) -> str:
    """The literal-reading check of every label: its count and its claim."""
    task, pools = readings.task, readings.pools
    total = sum(len(p[1]) for p in pools.values())
    errors = int(label_errors(task, pools))
    return f"Labels that disagree with the literal reading: **{errors:,}** of {total:,}. " + _sentences(
        ev, ("ch07.label_errors",)
    )


def position_roles(seq: np.ndarray, tc: TaskConfig) -> list[str]:
    """What each position of ``seq`` holds: variable, value, PAD (context) or query."""
    roles = []
    for p, t in enumerate(seq):
        if p >= tc.context_len:
            roles.append("query")
        elif t == tc.pad:
            roles.append("PAD")
        else:
            roles.append("variable" if t >= tc.var0 else "value")
    return roles


def draw_sequence(task: Task, kind: str, assignments: int, seed: int) -> pd.DataFrame:
    """One training sequence of ``kind`` with ``assignments`` assignments, one row per position.

    A 2-var sequence needs two assignments; asked for fewer, it is drawn with two and the
    ``program`` line says so (the explorer offers every combination of its controls)."""
    if kind not in KIND_NAMES:
        raise ValueError(f"unknown kind {kind!r}; the kinds are {', '.join(KIND_NAMES)}")
    tc = task.cfg
    k = KIND_NAMES.index(kind)
    least = 2 if k == TWO_VAR else 1
    if not 1 <= assignments <= tc.max_assignments:
        raise ValueError(f"assignments must be in 1..{tc.max_assignments}, got {assignments}")
    rng = np.random.default_rng(seed)
    rows = task.train_rows[task.train_rows[:, 1] == k]
    row = rows[rng.integers(0, len(rows), size=1)]
    used = max(assignments, least)
    tokens, labels = task.generate(row, rng, n_assign=np.array([used]))
    seq = tokens[0]
    note = f"   ({kind} needs {least} assignments: drawn with {used}, not {assignments})" if used != assignments else ""
    return pd.DataFrame(
        {
            "position": np.arange(tc.seq_len),
            "token": [task.token_str(int(t)) for t in seq],
            "role": position_roles(seq, tc),
            "program": f"{task.render(seq)}   answer {int(labels[0])}{note}",
        }
    )


def sequence_chart(base: alt.Chart) -> alt.LayerChart:
    """The 16 positions as coloured cells with their tokens, the program written above."""
    cells = base.mark_rect(stroke="white", strokeWidth=2).encode(
        x=alt.X("position:O", title="position"),
        color=alt.Color(
            "role:N",
            scale=alt.Scale(domain=list(ROLE_COLOURS), range=list(ROLE_COLOURS.values())),
            title="holds",
            legend=alt.Legend(orient="bottom"),
        ),
        tooltip=["position", "token", "role"],
    )
    text = base.mark_text(fontSize=16).encode(x="position:O", text="token:N")
    program = (
        base.transform_filter("datum.position == 0")
        .mark_text(align="left", dx=-20, dy=-45, fontSize=15)
        .encode(x="position:O", text="program:N")
    )
    return (cells + text + program).properties(width=560, height=50)


def record_all(readings: TaskReadings, ev: dict[str, Evidence]) -> dict[str, object]:
    """Record the chapter's headline numbers (:func:`~mechbook.assign_add.readings.task_numbers`,
    bounded by ``book/thresholds/07_task.yml``) and its claims (``claim.<id>``), and return the
    records."""
    return {**record_numbers(task_numbers(readings)), **record_claims(ev.values())}
