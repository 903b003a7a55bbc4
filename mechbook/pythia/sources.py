"""Where chapter 6's checkpoints come from: real Pythia on the Hub, or Pythia in miniature.

Both sources give the same things (checkpoint steps, the corpus the features are computed on as an
(N, T+1) token array, a ``TransformerBridge`` per step, a randomly initialised model of the same
architecture), so the analysis runs one code path. :func:`choose_source` decides which one runs,
never waiting more than its deadline for the network. :func:`similarity_over_checkpoints` and
:func:`controls` are cached on the source, the features and the analysis code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd

from mechbook.cache import cached, fingerprint
from mechbook.progress import progress
from mechbook.pythia import analysis
from mechbook.pythia.features import LeadingFeatures

SOURCES = ("auto", "pythia", "miniature")


class CheckpointSource(Protocol):
    """What the chapter's analysis needs from a family of checkpoints."""

    kind: str
    label: str
    steps: list[int]
    tokens: np.ndarray
    vocab_size: int

    def identity(self) -> dict[str, Any]: ...

    def load(self, step: int) -> Any: ...

    def random_init(self, seed: int) -> Any: ...

    def decode(self, token_id: int) -> str: ...


def choose_source(requested: str, deadline: float = 5.0) -> tuple[str, str]:
    """``("pythia" | "miniature", reason)``. ``auto`` takes Pythia only if the Hub answers within
    ``deadline`` seconds; ``pythia`` without a reachable Hub is an error saying what to do."""
    from mechbook.pythia.hub import hub_available

    if requested not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {requested!r}")
    if requested == "miniature":
        return "miniature", "the profile asks for the miniature"
    if hub_available(deadline):
        return "pythia", "the Hugging Face Hub is reachable"
    if requested == "pythia":
        raise RuntimeError(
            "source='pythia' needs the Hugging Face Hub, which did not answer; connect, or set source='miniature'"
        )
    return "miniature", f"the Hugging Face Hub did not answer within {deadline:g} s"


def _bridge(hf_model, tokenizer, name: str):
    """Wrap a loaded ``transformers`` model in a ``TransformerBridge`` (no download)."""
    from transformer_lens.model_bridge import TransformerBridge

    hf_model.eval()
    bridge = TransformerBridge.boot_transformers(
        name, hf_model=hf_model, tokenizer=tokenizer, device=str(next(hf_model.parameters()).device)
    )
    bridge.eval()
    return bridge


def _random_model(hf_config, seed: int):
    import torch
    from transformers import GPTNeoXForCausalLM

    torch.manual_seed(seed)
    return GPTNeoXForCausalLM(hf_config)


@dataclass
class MiniatureSource:
    """Checkpoints of a :class:`~mechbook.pythia.miniature.MiniatureRun`."""

    run: Any
    kind: str = "miniature"
    _hf_tokenizer: Any = field(default=None, repr=False)

    @property
    def label(self) -> str:
        c = self.run.config
        return f"Pythia in miniature (GPT-NeoX, {c.n_layers} layers, d_model {c.d_model}, {c.n_heads} heads, {self.vocab_size} tokens, {c.steps} steps on TinyStories)"

    @property
    def steps(self) -> list[int]:
        return sorted(self.run.checkpoints)

    @property
    def tokens(self) -> np.ndarray:
        return self.run.tokens

    @property
    def vocab_size(self) -> int:
        return self.run.vocab_size

    def identity(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "config": self.run.config,
            "tokens": fingerprint(self.run.tokens),
            "losses": self.run.losses,
        }

    def _tokenizer(self):
        from mechbook.pythia.miniature import hf_tokenizer

        if self._hf_tokenizer is None:
            self._hf_tokenizer = hf_tokenizer(self.run.tokenizer)
        return self._hf_tokenizer

    def _config(self):
        from mechbook.pythia.miniature import neox_config

        return neox_config(self.run.config, self.vocab_size)

    def load(self, step: int):
        if step not in self.run.checkpoints:
            raise KeyError(f"the miniature has no checkpoint at step {step}; it has {self.steps}")
        model = _random_model(self._config(), 0)
        model.load_state_dict(self.run.checkpoints[step])
        return _bridge(model, self._tokenizer(), "mechbook/pythia-miniature")

    def random_init(self, seed: int):
        return _bridge(_random_model(self._config(), seed), self._tokenizer(), "mechbook/pythia-miniature")

    def decode(self, token_id: int) -> str:
        return self.run.tokenizer.decode([int(token_id)])


@dataclass
class PythiaSource:
    """Real Pythia checkpoints (``size``, ``deduped``) at ``steps``, features from the first
    ``n_texts`` texts of ``text`` (a key of :data:`mechbook.pythia.hub.TEXTS`) with at least 512
    characters, ``context + 1`` tokens of each."""

    size: str
    deduped: bool
    steps: list[int]
    n_texts: int
    context: int
    text: str = "openwebtext"
    kind: str = "pythia"
    _tokens: np.ndarray | None = field(default=None, repr=False)
    _tok: Any = field(default=None, repr=False)

    @property
    def label(self) -> str:
        from mechbook.pythia.checkpoints import repo_id
        from mechbook.pythia.hub import TEXTS

        return (
            f"{repo_id(self.size, self.deduped)} ({len(self.steps)} checkpoints; features from {self.n_texts:,} "
            f"{TEXTS[self.text].name} texts)"
        )

    def _tokenizer(self):
        from mechbook.pythia.hub import pythia_tokenizer

        if self._tok is None:
            self._tok = pythia_tokenizer(self.size, self.deduped)
        return self._tok

    @property
    def tokens(self) -> np.ndarray:
        from mechbook.pythia.hub import hf_sequences, web_texts

        if self._tokens is None:
            self._tokens = hf_sequences(web_texts(self.text, self.n_texts), self._tokenizer(), self.context)
        return self._tokens

    @property
    def vocab_size(self) -> int:
        return len(self._tokenizer())

    def identity(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "size": self.size,
            "deduped": self.deduped,
            "steps": self.steps,
            "text": self.text,
            "tokens": fingerprint(self.tokens),
        }

    def load(self, step: int):
        from mechbook.pythia.hub import load_pythia

        return load_pythia(self.size, step, self.deduped)

    def random_init(self, seed: int):
        from mechbook.pythia.hub import pythia_config

        return _bridge(
            _random_model(pythia_config(self.size, self.deduped), seed), self._tokenizer(), "pythia-random-init"
        )

    def decode(self, token_id: int) -> str:
        return self._tokenizer().decode([int(token_id)])


def _key(source: CheckpointSource, features: LeadingFeatures, **extra: Any) -> dict[str, Any]:
    return {
        "source": source.identity(),
        "features": fingerprint(features.token_ids, features.BPhi_T, features.Q),
        **extra,
    }


def similarity_over_checkpoints(source: CheckpointSource, features: LeadingFeatures) -> pd.DataFrame:
    """:func:`~mechbook.pythia.analysis.checkpoint_similarity` at every step of ``source``, with a
    ``step`` column (one checkpoint in memory at a time)."""

    def compute() -> pd.DataFrame:
        tables = []
        for step in progress(source.steps, desc="checkpoints"):
            table = analysis.checkpoint_similarity(source.load(step), features)
            table.insert(0, "step", step)
            tables.append(table)
        return pd.concat(tables, ignore_index=True)

    return cached("pythia/similarity", _key(source, features), compute)


def controls(source: CheckpointSource, features: LeadingFeatures, seed: int = 1) -> pd.DataFrame:
    """The four baselines, as tidy rows ``control, measure, mapping, layer, head, similarity``:
    ``random_init`` (a freshly initialised model of the same architecture, seed ``seed``),
    ``shuffled_tokens`` (the last checkpoint against features whose rows were permuted), and the
    model-free ``offset`` and ``linear`` representations of
    :func:`~mechbook.pythia.analysis.synthetic_controls` at the model's width."""

    def compute() -> pd.DataFrame:
        random_model = source.random_init(seed)
        random_rows = analysis.checkpoint_similarity(random_model, features)
        shuffled_rows = analysis.checkpoint_similarity(
            source.load(source.steps[-1]), analysis.shuffled_features(features, seed)
        )
        random_rows.insert(0, "control", "random_init")
        shuffled_rows.insert(0, "control", "shuffled_tokens")
        synthetic = analysis.synthetic_controls(features, random_model.cfg.d_model, seed)
        return pd.concat([random_rows, shuffled_rows, synthetic], ignore_index=True)

    return cached("pythia/controls", _key(source, features, seed=seed), compute)
