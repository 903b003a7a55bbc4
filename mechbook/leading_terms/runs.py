"""Every Part I training configuration, per profile: the one home of the runs chapters 3-5 train.

- :data:`SHARED_RUNS`: chapter 3's shared runs (the paper's lr 0.005 and a larger one, on the
  natural-tokenizer corpus), which chapters 4 and 5 read from the cache;
- :data:`CLAIM_RUNS`: chapter 3's runs towards the η·s of the paper's "100 epochs" claim.

Chapters read these; none defines a run of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from mechbook.leading_terms.corpus import CORPUS_PROFILES, CorpusConfig
from mechbook.leading_terms.train import RunsConfig

PAPER_BPE_VOCAB = 10_000
"""The paper's BPE vocabulary size."""


@dataclass(frozen=True)
class ClaimConfig:
    """The paper's claim at its step count. ``paper_corpus``: the paper's corpus (:math:`|V|` 3000,
    T 200, its drop filter), read to count the sequences it keeps; ``paper_epochs``,
    ``paper_batch``, ``lr``: the paper's run. The chapter's runs towards that η·s use
    ``batch_size`` and stop at ``max_steps`` (None: no cap); ``bpe_corpus`` is the second
    tokenizer's corpus and ``bpe_sizes`` the vocabularies whose support the chapter shows."""

    paper_corpus: CorpusConfig
    bpe_corpus: CorpusConfig
    batch_size: int
    max_steps: int | None
    log_every: int
    bpe_sizes: tuple[int, ...]
    paper_epochs: float = 100
    paper_batch: int = 2048
    lr: float = 0.005

    def __post_init__(self) -> None:
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"ClaimConfig.max_steps must be positive or None (no cap), got {self.max_steps}")
        if self.bpe_corpus.tokenizer != "bpe_cased":
            raise ValueError(
                f"ClaimConfig.bpe_corpus must use tokenizer 'bpe_cased', got {self.bpe_corpus.tokenizer!r}"
            )


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
        _SAMPLE_PAPER_CORPUS,
        # a small cased BPE corpus: the second tokenizer's machinery, not its numbers
        CorpusConfig(vocab_size=200, context=32, policy="unk", n_stories=500, tokenizer="bpe_cased"),
        batch_size=32,  # small batches, for time
        max_steps=100,  # smoke only exercises the runs
        log_every=25,
        bpe_sizes=(200, 500),
    ),
    "cpu": ClaimConfig(
        _SAMPLE_PAPER_CORPUS,
        # cased BPE at the natural tokenizer's |V| = 256, so the two tokenizers compare at one size
        CorpusConfig(vocab_size=256, context=64, policy="unk", tokenizer="bpe_cased"),
        batch_size=16,  # small batches reach the paper's η·s = 27.9 within the cold build's budget
        max_steps=6000,  # above the 5,583 steps that η·s = 27.9 needs at lr 0.005
        log_every=250,
        bpe_sizes=(256, 1000, PAPER_BPE_VOCAB),
    ),
    "paper": ClaimConfig(
        CORPUS_PROFILES["paper"],
        CorpusConfig(vocab_size=10000, context=200, policy="drop", split="train", tokenizer="bpe_cased"),
        batch_size=2048,  # the paper's batch
        max_steps=None,  # no cap: the paper's 100 epochs
        log_every=250,
        bpe_sizes=(PAPER_BPE_VOCAB,),
    ),
}
"""Chapter 3's claim runs per profile."""
