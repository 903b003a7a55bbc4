"""Every Part I training configuration, per profile: the one home of the runs chapters 2-5 train.

- :data:`CHECK_RUNS`: chapter 2's full-batch check and validity sweep (chapter 3 cites the sweep);
- :data:`THEOREM_RUNS`: chapter 2's two runs inside the theorem's conditions (zero and Gaussian start);
- :data:`SHARED_RUNS`: chapter 3's shared runs, the paper's two runs (lr 0.005 and 0.05, 100
  epochs at batch = 1/32 of the data, so 3,200 steps), which chapters 4 and 5 read from the cache;
- :data:`BPE_RUNS`: chapter 3's run of the paper's Appendix B (its cased BPE, 10 epochs at lr 0.005).

:func:`run_plan` costs a run before it trains (from its config alone where it names its number of
sequences, so the ``paper`` profile plans without the text it needs), :func:`gpu_hours` turns that
into time on one GPU, and :func:`differences_from_paper` lists how a profile's runs differ from the
paper's. Chapters read these; none defines a run of its own. Each value carries a comment saying what it
is and why it has its value.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from mechbook.leading_terms.check import CheckRunsConfig
from mechbook.leading_terms.corpus import CORPUS_PROFILES, CorpusConfig
from mechbook.leading_terms.model import ModelConfig
from mechbook.leading_terms.plan import TrainingPlan, plan_training
from mechbook.leading_terms.theorem import TheoremRunsConfig
from mechbook.leading_terms.train import RunConfig, RunsConfig

__all__ = [
    "BPE_RUNS",
    "CHECK_RUNS",
    "PAPER_BATCH_RATIO",
    "PAPER_BPE_VOCAB",
    "PAPER_LRS",
    "SHARED_RUNS",
    "THEOREM_RUNS",
    "TheoremRunsConfig",
    "differences_from_paper",
    "gpu_hours",
    "run_plan",
]

PAPER_BPE_VOCAB = 10_000
"""The paper's BPE vocabulary size (App. B)."""

PAPER_LRS = (0.005, 0.05)
"""The paper's two learning rates: 0.005 (Table 1) and 0.05 (Figure 4, Table 3)."""

PAPER_BATCH_RATIO = 32
"""Sequences per batch in the paper's run, as a divisor of the data: 65,536 / 2,048, so an epoch
is 32 steps and 100 epochs are 3,200 steps whatever the data's size."""

CHECK_RUNS: dict[str, CheckRunsConfig] = {
    "smoke": CheckRunsConfig(
        CORPUS_PROFILES["smoke"],  # the training chapters' corpus (|V| 200, T 32)
        n_sequences=32,  # full-batch float64 on 32 sequences: seconds
        check_lrs=(0.03, 0.1),  # two small rates: enough for the slope in η
        check_steps=12,  # past step 3, where W and P first move
        sweep_lrs=(1.0, 2.0),  # η·s up to 16 and 32: past the paper's 16 at lr 0.005
        sweep_steps=16,  # few steps, for time
    ),
    "cpu": CheckRunsConfig(
        # the natural tokenizer at |V| 256, T 64: half the shared runs' |V|, since float64 full-batch
        # sweeps cost |V|² a sequence (chapter 2's theorem runs are the ones at |V| >= 500)
        CorpusConfig(vocab_size=256, context=64, policy="unk"),
        n_sequences=256,  # full batch on 256 sequences of 64 predictions
        check_lrs=(0.01, 0.03, 0.1),  # small rates, where the closed forms must hold to 1e-3
        check_steps=20,  # s = 1..20: the s⁴ growth of W and P is clear by then
        sweep_lrs=(0.25, 0.5, 1.0, 2.0),  # η·s up to 10, 20, 40 and 80: past the paper's 16 at lr 0.005
        sweep_steps=40,  # 40 full-batch steps per rate
    ),
    "paper": CheckRunsConfig(
        CORPUS_PROFILES["paper"],  # the paper's corpus (|V| 3000, T 200, drop filter)
        n_sequences=512,  # a full batch of 512 of the paper's sequences
        check_lrs=(0.01, 0.03, 0.1),  # as cpu
        check_steps=20,  # as cpu
        sweep_lrs=(0.25, 0.5, 1.0, 2.0),  # as cpu
        sweep_steps=80,  # twice cpu's: η·s up to 160
    ),
}
"""Chapter 2's full-batch runs per profile (chapter 3 reads the same cached sweep)."""

THEOREM_RUNS: dict[str, TheoremRunsConfig] = {
    "smoke": TheoremRunsConfig(
        # the theorem's conditions at the least cost: |V| 500, and T 144 so that L = 3 <= √T/4
        CorpusConfig(vocab_size=500, context=144, policy="unk", n_stories=1000),
        n_sequences=4,  # a full batch of 4 sequences: seconds
        zero_lr=0.002,  # window s <= 13 at L = 3
        steps=8,  # for time; the Gaussian run's window at η = 1/144 is s <= 4
    ),
    "cpu": TheoremRunsConfig(
        # |V| 512 >= 500 and T 144 >= 60 with L = 3 <= √144/4: the smallest corpus the theorem covers
        CorpusConfig(vocab_size=512, context=144, policy="unk"),
        n_sequences=32,  # a full batch of 32 sequences of 144 predictions: about a minute for both runs
        zero_lr=0.001,  # window s <= 27 at L = 3 (sη <= 1/36), so most of the run is inside it
        steps=30,  # past both windows (27 steps at 0.001, 4 at 1/144)
    ),
    "paper": TheoremRunsConfig(
        CORPUS_PROFILES["paper"],  # the paper's corpus: |V| 3000, T 200, its drop filter
        n_sequences=256,  # a full batch of 256 of the paper's sequences
        zero_lr=0.001,  # as cpu: window s <= 27
        steps=40,  # past both windows (27 steps at 0.001, 5 at the paper's η = 1/200)
    ),
}
"""Chapter 2's runs inside the theorem's conditions, per profile (zero and D.13's Gaussian start)."""

SHARED_RUNS: dict[str, RunsConfig] = {
    # the paper's two runs on 64 sequences: 100 epochs at batch 2 (= 64/32) are 3,200 steps, seconds
    "smoke": RunsConfig(CORPUS_PROFILES["smoke"], lrs=PAPER_LRS, epochs=100, batch_size=2, log_every=32),
    # the paper's two runs on 2,048 sequences: 100 epochs at batch 64 (= 2,048/32) are 3,200 steps,
    # logged every epoch (32 steps), as Table 1's minimum over epochs needs
    "cpu": RunsConfig(CORPUS_PROFILES["cpu"], lrs=PAPER_LRS, epochs=100, batch_size=64, log_every=32),
    # the paper's runs themselves: 65,536 sequences, 100 epochs of batch 2,048
    "paper": RunsConfig(CORPUS_PROFILES["paper"], lrs=PAPER_LRS, epochs=100, batch_size=2048, log_every=32),
}
"""Chapter 3's shared runs per profile (chapters 4 and 5 read the same cached runs)."""

BPE_RUNS: dict[str, RunConfig] = {
    # the paper's BPE run at smoke's size: 10 epochs at batch 2 of 64 sequences
    "smoke": RunConfig(
        CorpusConfig(vocab_size=200, context=32, n_stories=500, tokenizer="bpe_cased", n_sequences=64),
        lr=0.005,
        batch_size=2,
        log_every=32,
        epochs=10,
    ),
    # the cased BPE at the shared runs' |V| 512, T 64 and 2,048 sequences: 10 epochs are 320 steps
    "cpu": RunConfig(
        CorpusConfig(vocab_size=512, context=64, tokenizer="bpe_cased", n_sequences=2048),
        lr=0.005,
        batch_size=64,
        log_every=32,
        epochs=10,
    ),
    # the paper's: |V| 10,000, T 200, its drop filter, 65,536 samples, 10 epochs of batch 2,048
    "paper": RunConfig(
        CorpusConfig(
            vocab_size=PAPER_BPE_VOCAB,
            context=200,
            policy="drop",
            split="train",
            tokenizer="bpe_cased",
            n_sequences=65536,
        ),
        lr=0.005,
        batch_size=2048,
        log_every=32,
        epochs=10,
    ),
}
"""Chapter 3's run of the paper's Appendix B per profile (Table 2)."""


GPU_FLOP_RATE = 40e12
"""Sustained float32 operations a second assumed for one data-centre GPU (an H100's dense float32
peak is about 67 TFLOP/s; matrix products of these sizes sustain about 60% of it)."""


def run_plan(run: RunConfig, n_sequences: int | None = None) -> TrainingPlan:
    """The :class:`~mechbook.leading_terms.plan.TrainingPlan` of ``run`` on ``n_sequences`` kept
    sequences (None: the corpus's ``n_sequences``, so a profile whose text is not at hand still
    plans). |V| is the corpus's ``vocab_size`` (``<unk>`` included), T its ``context``."""
    n = n_sequences if n_sequences is not None else run.corpus.n_sequences
    if n is None:
        raise ValueError("the corpus names no n_sequences: give the kept count (n_sequences=...)")
    model = ModelConfig(run.corpus.vocab_size, run.corpus.context, run.n_layers)
    return plan_training(n, model, run.batch_size, run.lr, epochs=run.epochs, steps=run.steps)


def gpu_hours(plan: TrainingPlan, rate: float = GPU_FLOP_RATE) -> float:
    """Hours a run of ``plan`` takes on one GPU sustaining ``rate`` operations a second, from its
    dense operation count (an upper bound, so an estimate on the long side)."""
    return plan.flops / rate / 3600


_EFFECTS = {
    "vocab_size": "a smaller vocabulary merges the rarer words into one unknown-word token, whose rows of the maps mix many words",
    "context": "a shorter context gives Φ and Q fewer pairs per sequence and P fewer lags",
    "policy": "the paper drops every sample with a word outside the vocabulary; on this text that keeps almost "
    "nothing (chapter 1), so out-of-vocabulary words become one unknown-word token",
    "split": "the validation split at hand, not the train split",
    "n_sequences": "fewer samples: the maps are estimated on less text, and an epoch is still 32 steps",
    "batch_size": "the batch keeps the paper's ratio to the data (1/32), so the steps and η·s are the paper's",
    "n_stories": "a slice of the text, for time",
}
"""What each setting that differs from the paper's can change, in words (:data:`_BPE_EFFECTS`
where the BPE run's differs)."""

_BPE_EFFECTS = {
    "vocab_size": "a BPE of the paper's 10,000 tokens fitted on this much text would see most tokens a handful of "
    "times, so their rows of the maps would be mostly noise",
    "policy": "none: the cased BPE spells every word, so neither policy drops or replaces a token",
}


def _flat(run: RunsConfig | RunConfig) -> dict[str, object]:
    fields = {f.name: getattr(run, f.name) for f in dataclasses.fields(run) if f.name not in ("corpus", "log_every")}
    fields.update({f.name: getattr(run.corpus, f.name) for f in dataclasses.fields(run.corpus)})
    return fields


def differences_from_paper(profile: str) -> pd.DataFrame:
    """Every setting of ``profile``'s shared and BPE runs that differs from the paper's
    (``paper`` profile, the paper's own settings): ``run``, ``setting``, ``the paper``, ``this
    profile`` and what the difference can change. Empty for the ``paper`` profile."""
    rows = []
    for run, ours, paper in (
        ("shared runs", SHARED_RUNS[profile], SHARED_RUNS["paper"]),
        ("BPE run", BPE_RUNS[profile], BPE_RUNS["paper"]),
    ):
        a, b = _flat(paper), _flat(ours)
        rows += [
            {
                "run": run,
                "setting": name,
                "the paper": str(a[name]),
                "this profile": str(b[name]),
                "what it can change": (_BPE_EFFECTS if run == "BPE run" else {}).get(name, _EFFECTS.get(name, "")),
            }
            for name in a
            if a[name] != b[name]
        ]
    return pd.DataFrame(rows, columns=["run", "setting", "the paper", "this profile", "what it can change"])
