"""Pythia in miniature: a GPT-NeoX model trained from scratch on TinyStories, with checkpoints on
Pythia's schedule (chapter 6, used when the Hugging Face Hub cannot be reached).

Same architecture family as Pythia (``transformers`` ``GPTNeoXForCausalLM``: rotary embeddings on a
quarter of each head, attention and MLP in parallel off one residual stream, LayerNorm, untied
embedding and unembedding), the same optimiser recipe (AdamW, linear warm-up over the first 1% of
steps, cosine decay to 10% of the peak rate) and the same checkpoint shape (step 0, powers of two,
then evenly spaced steps; :func:`mechbook.pythia.checkpoints.scaled_schedule`). Only the sizes
shrink: a locally trained byte-level BPE vocabulary of a few hundred to a few thousand tokens,
2-4 layers, d_model 64-128. The trained run (tokenizer, sequences, every checkpoint's weights) is
cached by :func:`miniature_run`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mechbook.cache import cached
from mechbook.data import data_fingerprint
from mechbook.determinism import deterministic
from mechbook.progress import progress
from mechbook.pythia.checkpoints import scaled_schedule
from mechbook.validation import POSITIVE, SEED, above, at_least, between, check_allocatable, check_fields

EOS = "<|endoftext|>"


@dataclass(frozen=True)
class MiniatureConfig:
    """Sizes and training recipe of the miniature.

    ``bpe_vocab``: BPE tokens (256 bytes included; the model adds one end-of-text token);
    ``context``: T, sequences hold T + 1 tokens; ``steps``: optimiser steps; ``n_linear``: evenly
    spaced late checkpoints (``steps`` must be a multiple of it).
    """

    bpe_vocab: int = 1024
    context: int = 64
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    d_mlp: int = 512
    steps: int = 2000
    batch_size: int = 32
    lr: float = 1e-3
    warmup_frac: float = 0.01
    weight_decay: float = 0.01
    n_linear: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(
            self,
            bpe_vocab=at_least(257, "the 256 bytes and at least one merge"),
            context=POSITIVE,
            d_model=POSITIVE,
            n_layers=POSITIVE,
            n_heads=POSITIVE,
            d_mlp=POSITIVE,
            steps=POSITIVE,
            batch_size=POSITIVE,
            lr=above(0),
            warmup_frac=between(0.0, 1.0, high_open=True),
            weight_decay=at_least(0),
            n_linear=POSITIVE,
            seed=SEED,
        )
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be a multiple of n_heads={self.n_heads}")
        if self.steps % self.n_linear:
            raise ValueError(f"steps={self.steps} must be a multiple of n_linear={self.n_linear} (checkpoint spacing)")
        check_allocatable(
            self,
            training_bytes(self),
            "training (the weights, their gradients, AdamW's state and one batch's activations)",
            "lower batch_size, context, bpe_vocab or the model's sizes",
        )

    @property
    def schedule(self) -> list[int]:
        """Checkpoint steps: 0, 1, 2, 4, ... then every ``steps / n_linear`` steps."""
        return scaled_schedule(self.steps, self.steps // self.n_linear)


def training_bytes(cfg: MiniatureConfig) -> int:
    """An upper estimate of the memory the miniature's training holds at once, in bytes (float32):
    its parameters four times (weights, gradients, AdamW's two moments), and per sequence position
    every layer's residual-wide activations and MLP, its attention scores and patterns, and the
    logits with their gradient, twice (activations and their gradients)."""
    vocab, d = cfg.bpe_vocab + 1, cfg.d_model
    parameters = (2 * vocab + cfg.context) * d + cfg.n_layers * (4 * d * d + 2 * d * cfg.d_mlp + 9 * d + cfg.d_mlp)
    per_position = cfg.n_layers * (12 * d + 2 * cfg.d_mlp + 3 * cfg.n_heads * cfg.context) + 2 * vocab
    return 4 * (4 * parameters + 2 * cfg.batch_size * cfg.context * per_position)


@dataclass
class MiniatureRun:
    """A trained miniature: its BPE tokenizer, the (N, T+1) training sequences, the weights at
    every checkpoint step (``state_dict`` of ``GPTNeoXForCausalLM``) and the loss of every step."""

    config: MiniatureConfig
    tokenizer: object
    tokens: np.ndarray
    checkpoints: dict[int, dict] = field(repr=False)
    losses: list[float] = field(repr=False)

    @property
    def vocab_size(self) -> int:
        """Model vocabulary: the BPE tokens plus the end-of-text token."""
        return self.tokenizer.vocab_size + 1


def neox_config(cfg: MiniatureConfig, vocab_size: int):
    """The ``GPTNeoXConfig`` of the miniature (no dropout; end-of-text is the last id)."""
    from transformers import GPTNeoXConfig

    return GPTNeoXConfig(
        vocab_size=vocab_size,
        hidden_size=cfg.d_model,
        num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads,
        intermediate_size=cfg.d_mlp,
        max_position_embeddings=cfg.context + 1,
        rotary_pct=0.25,
        use_parallel_residual=True,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        tie_word_embeddings=False,
        bos_token_id=vocab_size - 1,
        eos_token_id=vocab_size - 1,
        pad_token_id=vocab_size - 1,
    )


def hf_tokenizer(bpe) -> object:
    """A ``transformers`` fast tokenizer around Part I's :class:`BPETokenizer`, with the
    end-of-text token appended (id ``bpe.vocab_size``), as ``TransformerBridge`` expects."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    inner = Tokenizer.from_str(bpe.__getstate__()["json"])
    return PreTrainedTokenizerFast(
        tokenizer_object=inner,
        eos_token=EOS,
        bos_token=EOS,
        pad_token=EOS,
        name_or_path="mechbook/pythia-miniature",
        add_bos_token=True,
    )


def learning_rate(step: int, cfg: MiniatureConfig) -> float:
    """Pythia's recipe: linear warm-up over ``warmup_frac`` of the steps, cosine decay to 10%."""
    warm = max(1, int(cfg.warmup_frac * cfg.steps))
    if step < warm:
        return cfg.lr * (step + 1) / warm
    progress_frac = (step - warm) / max(1, cfg.steps - warm)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress_frac)))


def train_miniature(stories: list[str], cfg: MiniatureConfig) -> MiniatureRun:
    """Fit the BPE tokenizer, cut sequences of T + 1 tokens, train from a seeded initialisation and
    keep a copy of the weights at every step of ``cfg.schedule`` (step s = after s updates)."""
    with deterministic():
        return _train(stories, cfg)


def _train(stories: list[str], cfg: MiniatureConfig) -> MiniatureRun:
    import torch
    from transformers import GPTNeoXForCausalLM

    from mechbook.leading_terms.tokenize import BPETokenizer, make_sequences

    bpe = BPETokenizer.fit(stories, cfg.bpe_vocab)
    tokens = make_sequences(stories, bpe, cfg.context, policy="unk").tokens
    if tokens.shape[0] < cfg.batch_size:
        raise ValueError(
            f"only {tokens.shape[0]} stories have {cfg.context + 1} tokens; give more stories or a shorter context"
        )
    torch.manual_seed(cfg.seed)
    model = GPTNeoXForCausalLM(neox_config(cfg, bpe.vocab_size + 1)).train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
    rng = np.random.default_rng(cfg.seed)
    data = torch.from_numpy(tokens)
    keep = set(cfg.schedule)
    snapshots = {0: {k: v.detach().clone() for k, v in model.state_dict().items()}}
    losses: list[float] = []
    for step in progress(range(cfg.steps), desc="Pythia in miniature"):
        for group in opt.param_groups:
            group["lr"] = learning_rate(step, cfg)
        batch = data[rng.integers(0, data.shape[0], size=cfg.batch_size)]
        loss = model(input_ids=batch, labels=batch).loss
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"the miniature diverged: its loss is {float(loss)} at step {step} with lr {cfg.lr:g}; lower the "
                "learning rate (nothing was cached)"
            )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        if step + 1 in keep:
            snapshots[step + 1] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return MiniatureRun(cfg, bpe, tokens, snapshots, losses)


def miniature_run(stories: list[str], cfg: MiniatureConfig) -> MiniatureRun:
    """:func:`train_miniature`, cached on the config and the stories."""
    key = {"config": cfg, "data": data_fingerprint(stories)}
    return cached("pythia/miniature", key, lambda: train_miniature(stories, cfg))
