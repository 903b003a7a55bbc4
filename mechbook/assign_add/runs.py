"""Every Part II training configuration, per profile: the one home of the runs chapters 8-11 train.

- :data:`TRAIN_PROFILES`: one run's configuration (smoke, cpu, paper);
- :data:`SEED_RUNS`: chapter 8's seed runs, which chapters 9 and 10 open too (the same object, so
  the same cached stack);
- :data:`SWEEPS`: chapter 11's f and r sweeps.

Chapters read these; none defines a run of its own. Each value carries a comment saying what it
is and why it has its value.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from mechbook.assign_add.config import TrainConfig
from mechbook.assign_add.model import ModelConfig
from mechbook.assign_add.seeds import SeedRuns
from mechbook.assign_add.sweeps import LOSS_BOUND, SweepsConfig

SMOKE_RUN = TrainConfig(
    steps=300,  # enough for the adder to start (phase 1), not for binding: smoke checks the machinery
    batch_size=256,  # half the paper's 512, to fit the smoke budget of about a minute a chapter
    eval_every=50,  # six evaluations: enough points for the phase rules to run on
    eval_per_pool=256,  # sequences per pool per evaluation; half the paper's, for time
    keep_every=100,  # checkpoints chapters 9-10 can open
    resume_every=100,  # a stopped smoke run resumes from at most 100 steps back
)

CPU_RUN = TrainConfig(
    # the paper's model, batch, learning rate, weight decay and evaluation (every other field is the
    # paper's); half its steps: over seeds 42 and 0-4 (README) four of six went through all three
    # phases by 20,000 steps, the latest refinement at 19,200; the six cost 25 min of two cores
    steps=20_000,
    keep_every=1000,  # checkpoints for chapters 9-10 and the attention slider (plus those at every phase change)
    resume_every=1000,  # a stopped run resumes from at most 1,000 steps back
)

QUARTER_RUN = TrainConfig(
    steps=8000,  # all six seeds of this size bound by 8,000 steps (measured 2026-12-01)
    batch_size=256,  # half the paper's batch
    lr=3e-3,  # three times the paper's 1e-3: the smaller model and batch bind within 8,000 steps
    eval_every=250,  # 32 evaluations
    eval_per_pool=256,  # sequences per pool per evaluation
    keep_every=500,  # checkpoints at every 500 steps (plus those at every phase change)
    resume_every=500,  # a stopped run resumes from at most 500 steps back
    model=ModelConfig(d_model=64, d_head=64, d_mlp=256),  # half the paper's widths: a quarter of its matrix weights
)
"""Chapter 11's cpu sweep run: a quarter of the paper's matrix weights (half its widths), so that 12 sweep points of two seeds
fit the cold cpu build (each paper-sized point costs about five of these); chapter 11's set-up
says which of its claims this size leaves confounded."""

PAPER_RUN = TrainConfig()  # the paper's configuration: every TrainConfig default is the paper's value

TRAIN_PROFILES: dict[str, TrainConfig] = {"smoke": SMOKE_RUN, "cpu": CPU_RUN, "paper": PAPER_RUN}
"""One run per profile. ``paper`` is the paper's configuration (40,000 steps); ``cpu`` the size
the cold cpu build affords (README: the pilot over seeds); ``smoke`` a few hundred steps."""

SEED_RUNS: dict[str, SeedRuns] = {
    # seeds 0-3 so that `python -m mechbook spread` (seeds 0-4) reads the stack's own runs
    "smoke": SeedRuns(SMOKE_RUN, seeds=(0, 1, 2, 3)),
    # 42 (the paper's seed) and 0-4: six runs as two stacks of three, one per core of a 2-core CPU
    "cpu": SeedRuns(CPU_RUN, seeds=(42, 0, 1, 2, 3, 4)),
    # the paper's configuration over SeedRuns' default seeds
    "paper": SeedRuns(PAPER_RUN),
}
"""Chapter 8's seed runs per profile (chapters 9 and 10 open the same stack)."""

_SMOKE_SWEEP_RUN = TrainConfig(
    steps=60,  # a sweep point in smoke only exercises the machinery
    batch_size=128,  # small, for time
    eval_every=30,  # two evaluations
    eval_per_pool=64,  # few sequences per pool, for time
    keep_every=60,  # only the final checkpoint
    resume_every=60,  # resume at the end only
    model=ModelConfig(d_model=32, d_head=32, d_mlp=128),  # an eighth of the paper's width
)


def _grid(lo: float, hi: float, n: int) -> tuple[float, ...]:
    """``n`` evenly spaced values from ``lo`` to ``hi``, rounded to 4 digits (the paper's grids)."""
    return tuple(round(float(v), 4) for v in np.linspace(lo, hi, n))


SWEEPS: dict[str, SweepsConfig] = {
    "smoke": SweepsConfig(
        f_train=dataclasses.replace(_SMOKE_SWEEP_RUN, stop_loss=LOSS_BOUND),  # as cpu's: stop where it fits
        r_train=_SMOKE_SWEEP_RUN,  # as cpu's: every step
        f_values=(0.3, 0.9),  # two points: the machinery, not a threshold
        r_values=(0.1, 0.9),
        seeds=(0, 1),  # two seeds a point, so smoke exercises the threshold's spread over seeds
    ),
    "cpu": SweepsConfig(
        # each f point a QUARTER_RUN that stops where it fits its training data (the loss bound that
        # defines convergence), at most 8,000 steps: its score, 0-var held-out pairs, is phase 1's,
        # which comes before the fit
        f_train=dataclasses.replace(QUARTER_RUN, stop_loss=LOSS_BOUND),
        # each r point 16,000 steps, not stopped at the fit: the 2-var generalisation pools come after
        # the training loss is low (stopped at the bound, r = 0.1 seed 43 stopped at step 1,500 with a
        # union of 0.43, and no point reached 0.9; measured 2026-12-02)
        r_train=dataclasses.replace(QUARTER_RUN, steps=16_000),
        f_values=(0.1, 0.2, 0.3, 0.45, 0.7, 0.95),  # six points, dense near the paper's f* ~ 0.25
        r_values=(0.05, 0.1, 0.2, 0.35, 0.6, 0.9),  # six points, dense near the paper's r* ~ 0.2
        seeds=(42, 43),  # two seeds a point (the paper's and the next), so each threshold has a spread
    ),
    "paper": SweepsConfig(
        f_train=PAPER_RUN,  # the paper's run (SOURCE.md of the released run: the sweep script's grid)
        r_train=PAPER_RUN,
        f_values=_grid(0.06, 0.99, 20),  # the authors' f grid: 20 points
        r_values=_grid(0.01, 0.99, 20),  # the authors' r grid: 20 points
        # seeds: None, one run a point with seed 42, as the authors' sweep script runs them; each run
        # is 40,000 steps (the released main run) where that script's default is 30,000, and none
        # stops early (stop_loss None), as there, so the 30,000-step budget reads every run
        budgets=(0.75,),  # the thresholds read again at 30,000 steps: the authors' sweep length, from the same runs
    ),
}
"""Chapter 11's sweeps per profile. ``paper`` is the 20 + 20 full-size runs (a GPU job: each
sweep trains as one stack of 20 models); ``cpu`` six points a sweep at half the paper's
width, two seeds a point, each f run stopping where it fits its data; ``smoke`` two points and two
seeds a point."""


BOOKKEEPING = ("keep_every", "keep_change", "resume_every")
"""The :class:`~mechbook.assign_add.config.TrainConfig` fields that decide what a run saves (which
checkpoints, how far back a stopped run resumes), never what it learns."""


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
    """Every setting of ``train`` that changes what it learns and differs from the paper's run
    (``TRAIN_PROFILES["paper"]``, the released run's configuration): ``setting``, ``the paper``,
    ``this run``. The seeds are left out, and so are the fields of
    :data:`BOOKKEEPING` (what a run saves, never what it learns).
    Empty when the run is the paper's."""
    paper, ours = _flat(TRAIN_PROFILES["paper"]), _flat(train)
    rows = [
        {"setting": name, "the paper": str(paper[name]), "this run": str(ours[name])}
        for name in paper
        if paper[name] != ours[name] and not name.endswith("seed") and name not in BOOKKEEPING
    ]
    return pd.DataFrame(rows, columns=["setting", "the paper", "this run"])


def on_the_papers_dates(train: TrainConfig) -> bool:
    """Whether ``train`` is the paper's run up to its own length: it differs from the paper in at
    most the number of steps, and trains no longer. The paper's learning rate has no schedule, so
    such a run's first steps are the paper's run's for the same seed, and its phase dates can be
    held to the paper's (a phase after its last step counts as missed). Chapter 8's timing claims
    read this."""
    return set(differences_from_paper(train)["setting"]) <= {"steps"} and train.steps <= TRAIN_PROFILES["paper"].steps
