"""Every Part I training configuration, per profile: the one home of the runs chapters 2-5 train.

- :data:`CHECK_RUNS`: chapter 2's full-batch check and validity sweep (chapter 3 cites the sweep);
- :data:`THEOREM_RUNS`: chapter 2's two runs inside the theorem's conditions (zero and Gaussian start);
- :data:`SHARED_RUNS`: chapter 3's shared runs (the paper's lr 0.005 and a larger one, on the
  natural-tokenizer corpus), which chapters 4 and 5 read from the cache;
- :data:`CLAIM_RUNS`: chapter 3's runs towards the η·s of the paper's "100 epochs" claim, and its
  runs in the theory's setting (full batch and a batch-size series on a small subset).

Chapters read these; none defines a run of its own. Each value carries a comment saying what it
is and why it has its value.
"""

from __future__ import annotations

from mechbook.leading_terms.check import CheckRunsConfig
from mechbook.leading_terms.claim import ClaimConfig, SettingConfig
from mechbook.leading_terms.corpus import CORPUS_PROFILES, CorpusConfig
from mechbook.leading_terms.theorem import TheoremRunsConfig
from mechbook.leading_terms.train import RunsConfig

__all__ = [
    "CHECK_RUNS",
    "CLAIM_RUNS",
    "PAPER_BPE_VOCAB",
    "SHARED_RUNS",
    "THEOREM_RUNS",
    "ClaimConfig",
    "SettingConfig",
    "TheoremRunsConfig",
]

PAPER_BPE_VOCAB = 10_000
"""The paper's BPE vocabulary size."""

CHECK_RUNS: dict[str, CheckRunsConfig] = {
    "smoke": CheckRunsConfig(
        CORPUS_PROFILES["smoke"],  # the training chapters' corpus (|V| 200, T 32)
        n_sequences=32,  # full-batch float64 on 32 sequences: seconds
        check_lrs=(0.03, 0.1),  # two small rates: enough for the slope in η
        check_steps=12,  # past step 3, where W and P first move
        sweep_lrs=(1.0, 2.0),  # η·s up to 16 and 32: past the paper's 27.9
        sweep_steps=16,  # few steps, for time
    ),
    "cpu": CheckRunsConfig(
        CORPUS_PROFILES["cpu"],  # the natural tokenizer at |V| 256, T 64: the corpus of chapters 3-5
        n_sequences=256,  # full batch on 256 sequences of 64 predictions
        check_lrs=(0.01, 0.03, 0.1),  # small rates, where the closed forms must hold to 1e-3
        check_steps=20,  # s = 1..20: the s⁴ growth of W and P is clear by then
        sweep_lrs=(0.25, 0.5, 1.0, 2.0),  # η·s up to 10, 20, 40 and 80: 1.0 and 2.0 pass the paper's 27.9
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
    # 100 steps of batch 64: enough for the leading terms to be measurable, within smoke's minute
    "smoke": RunsConfig(CORPUS_PROFILES["smoke"], lrs=(0.005, 0.1), steps=100, batch_size=64, log_every=20),
    # 1,500 steps of batch 128 at the paper's lr 0.005 and at 0.1, where the terms visibly cooperate
    "cpu": RunsConfig(CORPUS_PROFILES["cpu"], lrs=(0.005, 0.1), steps=1500, batch_size=128, log_every=50),
    # the paper's run: 100 epochs of batch 2,048
    "paper": RunsConfig(CORPUS_PROFILES["paper"], lrs=(0.005, 0.1), epochs=100, batch_size=2048, log_every=250),
}
"""Chapter 3's shared runs per profile (chapters 4 and 5 read the same cached runs)."""

_SAMPLE_PAPER_CORPUS = CorpusConfig(vocab_size=3000, context=200, policy="drop")
"""The paper's corpus settings (|V| 3000, T 200, its drop filter) on the text at hand."""

CLAIM_RUNS: dict[str, ClaimConfig] = {
    "smoke": ClaimConfig(
        _SAMPLE_PAPER_CORPUS,  # counts the sequences the paper's filter keeps, for its η·s
        # a small cased BPE corpus: the second tokenizer's machinery, not its numbers
        CorpusConfig(vocab_size=200, context=32, policy="unk", n_stories=500, tokenizer="bpe_cased"),
        batch_size=32,  # small batches, for time
        max_steps=100,  # smoke only exercises the runs
        log_every=25,  # five points a curve
        bpe_sizes=(200, 500),  # two sizes: the support table's machinery
        setting=SettingConfig(
            n_sequences=8,  # a tiny subset: the theory-setting runs cost seconds
            context=8,  # 8 predictions a sequence, for time
            batch_sizes=(2,),  # one mini-batch size beside the full batch of 8
            max_steps=200,  # η·s 1 of the paper's 27.9: smoke only exercises the experiment
        ),
    ),
    "cpu": ClaimConfig(
        _SAMPLE_PAPER_CORPUS,  # counts the sequences the paper's filter keeps, for its η·s
        # cased BPE at the natural tokenizer's |V| = 256, so the two tokenizers compare at one size
        CorpusConfig(vocab_size=256, context=64, policy="unk", tokenizer="bpe_cased"),
        batch_size=16,  # small batches reach the paper's η·s = 27.9 within the cold build's budget
        max_steps=6000,  # above the 5,583 steps that η·s = 27.9 needs at lr 0.005
        log_every=250,  # 23 points a curve
        bpe_sizes=(256, 1000, PAPER_BPE_VOCAB),  # the chosen size, a larger one and the paper's
        setting=SettingConfig(
            n_sequences=8,  # a subset whose 5,583 full-batch steps a CPU affords: the |V|³ products set the floor
            context=8,  # 8 predictions a sequence: each step costs about that floor (~11 ms of one core)
            batch_sizes=(2,),  # one mini-batch size beside the full batch: each size costs 5,583 steps more
            max_steps=None,  # no cap: the paper's η·s = 27.9 at lr 0.005
        ),
    ),
    "paper": ClaimConfig(
        CORPUS_PROFILES["paper"],  # the paper's corpus itself
        CorpusConfig(vocab_size=10000, context=200, policy="drop", split="train", tokenizer="bpe_cased"),
        batch_size=2048,  # the paper's batch
        max_steps=None,  # no cap: the paper's 100 epochs
        log_every=250,  # as many points as cpu's curves
        bpe_sizes=(PAPER_BPE_VOCAB,),  # the paper's size only
        setting=SettingConfig(
            n_sequences=256,  # the batch series the issue asks for: 16, 64 and the full 256
            context=64,  # the cpu corpus's T
            batch_sizes=(16, 64),  # the claim runs' batch and a larger one, beside the full batch
            max_steps=None,  # no cap: the paper's η·s
        ),
    ),
}
"""Chapter 3's claim runs per profile."""
