"""The TinyStories corpus of Part I at each profile's size (chapters 1-5 share these settings).

``CORPUS_PROFILES`` is what the training chapters (2-5) use; ``MAPS_PROFILES`` is chapter 1's
own, with larger vocabularies so that its association tables are readable. Its ``smoke`` corpus
is 5,000 stories rather than a few hundred: tokenising them takes about a second, and with fewer
the context map has too few co-occurrences to show anything (e.g. "fish" and "pond" do not both
make a 200-token vocabulary of 500 stories).
:func:`load_corpus` turns a :class:`CorpusConfig` into a fitted tokenizer and the training
sequences, cached on disk.
"""

from __future__ import annotations

from dataclasses import dataclass

from mechbook.cache import cached
from mechbook.data import data_fingerprint, load_stories
from mechbook.leading_terms import tokenize
from mechbook.leading_terms.tokenize import (
    BPETokenizer,
    CasedBPETokenizer,
    NaturalTokenizer,
    SequenceSet,
    Tokenizer,
    make_sequences,
)
from mechbook.validation import POSITIVE, at_least, check_fields, one_of

TOKENIZERS = {"natural": NaturalTokenizer, "bpe": BPETokenizer, "bpe_cased": CasedBPETokenizer}


@dataclass(frozen=True)
class CorpusConfig:
    """Which text and how it becomes sequences.

    ``n_stories``: the first n TinyStories stories (None: all available text); ``vocab_size``:
    |V| (``<unk>`` included when ``policy == "unk"``); ``context``: T, predicted positions per
    sequence; ``policy``: ``"unk"`` or the paper's ``"drop"`` (see :func:`make_sequences`);
    ``tokenizer``: ``"natural"``, ``"bpe"`` (byte-level, lowercased) or ``"bpe_cased"`` (the paper's
    BPE variant); ``split``: TinyStories split when downloading (the paper trained on ``"train"``);
    ``n_sequences``: keep the first n sequences the policy keeps (the paper keeps 65,536; None: all),
    the tokenizer still fitted on every story.
    """

    vocab_size: int
    context: int
    policy: str = "unk"
    n_stories: int | None = None
    tokenizer: str = "natural"
    split: str = "valid"
    n_sequences: int | None = None

    def __post_init__(self) -> None:
        check_fields(
            self,
            vocab_size=POSITIVE,
            context=POSITIVE,
            policy=one_of(tokenize.POLICIES),
            n_stories=at_least(1, "or None for all stories"),
            n_sequences=at_least(1, "or None for every kept sequence"),
            tokenizer=one_of(sorted(TOKENIZERS)),
        )


CORPUS_PROFILES: dict[str, CorpusConfig] = {
    # the smallest corpus that exercises everything: 64 sequences, so 100 epochs at batch 2 take seconds
    "smoke": CorpusConfig(vocab_size=200, context=32, policy="unk", n_stories=500, n_sequences=64),
    # |V| 512 >= 500 and T 64 >= 60, inside the theorem's window conditions; 2,048 sequences, so that
    # the paper's batch-to-data ratio (1/32) is batch 64 and its 100 epochs are 3,200 steps on two cores
    "cpu": CorpusConfig(vocab_size=512, context=64, policy="unk", n_sequences=2048),
    # the paper's corpus: |V| 3,000, T 200, its drop filter, 65,536 kept samples of the train split
    "paper": CorpusConfig(vocab_size=3000, context=200, policy="drop", split="train", n_sequences=65536),
}

MAPS_PROFILES: dict[str, CorpusConfig] = {
    "smoke": CorpusConfig(vocab_size=400, context=32, policy="unk", n_stories=5000),
    "cpu": CorpusConfig(vocab_size=1000, context=64, policy="unk"),
    "paper": CorpusConfig(vocab_size=3000, context=200, policy="drop"),
}


def corpus_stories(cfg: CorpusConfig) -> list[str]:
    """The stories ``cfg`` selects (see :func:`mechbook.data.load_stories` for where they come from)."""
    return load_stories(split=cfg.split, max_stories=cfg.n_stories)


def build_corpus(cfg: CorpusConfig, stories: list[str]) -> tuple[Tokenizer, SequenceSet]:
    """Fit ``cfg``'s tokenizer on ``stories`` and cut them into sequences of T+1 tokens; raise when
    they keep fewer than ``cfg.n_sequences``."""
    cls = TOKENIZERS[cfg.tokenizer]
    if cls is CasedBPETokenizer:
        tok = cls.fit(stories, cfg.vocab_size)
    else:
        tok = cls.fit(stories, cfg.vocab_size, unk=cfg.policy == "unk" and cls is NaturalTokenizer)
    sequences = make_sequences(stories, tok, cfg.context, cfg.policy, limit=cfg.n_sequences)
    if cfg.n_sequences is not None and sequences.n_kept < cfg.n_sequences:
        raise ValueError(
            f"the corpus keeps {sequences.n_kept:,} sequences of the {len(stories):,} stories at hand, fewer than the "
            f"{cfg.n_sequences:,} it asks for: give more text (set MECHBOOK_TINYSTORIES to the full TinyStories "
            "train file, or let the book download it), or lower n_sequences"
        )
    return tok, sequences


def load_corpus(cfg: CorpusConfig) -> tuple[Tokenizer, SequenceSet]:
    """Tokenizer and sequences for ``cfg``, cached by config and text fingerprint."""
    stories = corpus_stories(cfg)
    key = {"cfg": cfg, "data": data_fingerprint(stories)}
    return cached("leading_terms/corpus", key, lambda: build_corpus(cfg, stories))
