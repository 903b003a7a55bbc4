"""The paper's claim that V and W keep cosine > 0.99 with their leading terms "even after 100
epochs" (chapter 3), and the experiments that say what explains a disagreement with it.

- :func:`paper_target`: what 100 of the paper's epochs are in steps and in η·s, as the book
  extrapolates them from the share of the text at hand its filter keeps (the paper itself states
  65,536 training samples, App. C: 3,200 steps, η·s = 16 at lr 0.005; the estimate does not use
  that count);
- :func:`claim_run_configs` / :func:`train_claim`: the claim runs at the paper's lr towards that
  η·s, one per tokenizer (natural, cased BPE), cached;
- :func:`unk_share` and :func:`cosines_excluding`: how much of a corpus is ``<unk>``, and a run's
  final cosines with ``<unk>``'s row and column left out of every map (the vocabulary's part);
- :func:`setting_runs`: the claim in the theory's own setting: on a subset small enough for a CPU,
  full-batch SGD at the paper's lr to the paper's η·s, and a series of mini-batch sizes at the same
  lr and η·s (gradient noise's part);
- :func:`explain`: the one rule that names what explains the disagreement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from mechbook.cache import cached
from mechbook.data import data_fingerprint
from mechbook.leading_terms import tokenize
from mechbook.leading_terms.check import cosines_at
from mechbook.leading_terms.corpus import CorpusConfig, corpus_stories, load_corpus
from mechbook.leading_terms.leading import KINDS, bases, cosine, kind_of
from mechbook.leading_terms.model import ModelConfig, parameter_names
from mechbook.leading_terms.plan import TrainingPlan, plan_training, steps_for_epochs
from mechbook.leading_terms.stats import cached_corpus_stats
from mechbook.leading_terms.train import (
    RunConfig,
    TrainConfig,
    TrainResult,
    cached_train,
    load_or_train,
    load_training_corpus,
)
from mechbook.validation import POSITIVE, SEED, above, at_least, check_fields

THRESHOLD = 0.99
"""The paper's cosine: V and W "> 0.99" with their leading terms."""

CLAIM_KINDS = ("V", "W")
"""The matrices the paper's claim is about."""


@dataclass(frozen=True)
class SettingConfig:
    """The claim in the theory's setting (full-batch gradient descent): the first ``n_sequences``
    sequences of each claim corpus, cut to ``context`` predicted positions, trained at ``lr`` to
    the paper's η·s (capped at ``max_steps``; None: no cap) with the full batch and with each of
    ``batch_sizes`` (the gradient-noise series; sizes not below ``n_sequences`` are the full batch
    and left out), batches drawn with ``seed``."""

    n_sequences: int
    context: int
    batch_sizes: tuple[int, ...]
    max_steps: int | None = None
    lr: float = 0.005
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(
            self,
            n_sequences=at_least(2),
            context=POSITIVE,
            batch_sizes=POSITIVE,
            max_steps=at_least(1, "or None for no cap"),
            lr=above(0),
            seed=SEED,
        )

    @property
    def series(self) -> tuple[int | None, ...]:
        """The batch sizes trained, smallest first, the full batch (None) last."""
        return (*sorted(b for b in set(self.batch_sizes) if b < self.n_sequences), None)


@dataclass(frozen=True)
class ClaimConfig:
    """The paper's claim at its step count. ``paper_corpus``: the paper's corpus (:math:`|V|` 3000,
    T 200, its drop filter), read to count the sequences it keeps; ``paper_epochs``,
    ``paper_batch``, ``lr``: the paper's run. The chapter's runs towards that η·s use
    ``batch_size`` and stop at ``max_steps`` (None: no cap); ``bpe_corpus`` is the second
    tokenizer's corpus and ``bpe_sizes`` the vocabularies whose support the chapter shows;
    ``setting`` the runs in the theory's setting (:class:`SettingConfig`)."""

    paper_corpus: CorpusConfig
    bpe_corpus: CorpusConfig
    batch_size: int
    max_steps: int | None
    log_every: int
    bpe_sizes: tuple[int, ...]
    setting: SettingConfig
    paper_epochs: float = 100
    paper_batch: int = 2048
    lr: float = 0.005

    def __post_init__(self) -> None:
        check_fields(
            self,
            batch_size=POSITIVE,
            max_steps=at_least(1, "or None for no cap"),
            log_every=POSITIVE,
            bpe_sizes=POSITIVE,
            paper_epochs=above(0),
            paper_batch=POSITIVE,
            lr=above(0),
        )
        if self.bpe_corpus.tokenizer != "bpe_cased":
            raise ValueError(
                f"ClaimConfig.bpe_corpus must use tokenizer 'bpe_cased', got {self.bpe_corpus.tokenizer!r}"
            )


@dataclass(frozen=True)
class PaperTarget:
    """The paper's run in numbers, as the book estimates it: of ``n_stories`` stories at hand its
    filter keeps ``n_kept``; over the train split that is ``n_sequences`` (the paper states 65,536,
    App. C), and ``epochs`` epochs at ``batch_size`` are ``steps`` steps, η·s = ``eta_s``."""

    n_stories: int
    n_kept: int
    n_sequences: int
    epochs: float
    batch_size: int
    steps: int
    lr: float

    @property
    def eta_s(self) -> float:
        return self.lr * self.steps


def paper_target(claim: ClaimConfig) -> PaperTarget:
    """Count the sequences the paper's filter keeps of the text at hand, extrapolate to the train
    split (:func:`~mechbook.leading_terms.plan.paper_sequences`) and turn its epochs into steps."""
    # 730a9c0 removed plan.paper_sequences (the extrapolation goes, issue 40): imported here, where
    # only chapter 3's old path reaches it, so that importing Part I's claims works again.
    from mechbook.leading_terms.plan import paper_sequences

    _, sequences = load_corpus(claim.paper_corpus)
    n = paper_sequences(sequences.n_kept, sequences.n_stories)
    steps = steps_for_epochs(claim.paper_epochs, n, claim.paper_batch)
    return PaperTarget(sequences.n_stories, sequences.n_kept, n, claim.paper_epochs, claim.paper_batch, steps, claim.lr)


def steps_to(eta_s: float, lr: float, max_steps: int | None) -> int:
    """Steps that reach ``eta_s`` at ``lr``, capped at ``max_steps`` (None: no cap)."""
    needed = math.ceil(eta_s / lr - 1e-9)
    return needed if max_steps is None else min(needed, max_steps)


def claim_steps(claim: ClaimConfig, target: PaperTarget) -> int:
    """Steps of the claim runs: those that reach the paper's η·s at lr ``claim.lr``, capped at
    ``claim.max_steps``."""
    return steps_to(target.eta_s, claim.lr, claim.max_steps)


def claim_run_configs(
    claim: ClaimConfig, natural: CorpusConfig, target: PaperTarget, n_layers: int = 3, seed: int = 0
) -> dict[str, RunConfig]:
    """The claim runs, one per tokenizer (``natural``: the shared runs' corpus; ``bpe_cased``)."""
    steps = claim_steps(claim, target)
    corpora = {"natural": natural, "bpe_cased": claim.bpe_corpus}
    return {
        name: RunConfig(corpus, claim.lr, claim.batch_size, claim.log_every, steps=steps, n_layers=n_layers, seed=seed)
        for name, corpus in corpora.items()
    }


def run_plan(run: RunConfig) -> TrainingPlan:
    """The :class:`TrainingPlan` of ``run`` on its corpus, computed before it trains."""
    corpus = load_training_corpus(run.corpus)
    n = corpus.sequences.n_kept
    model_cfg = corpus.model_cfg(run.n_layers)
    if run.epochs is not None:
        return plan_training(n, model_cfg, run.batch_size, run.lr, epochs=run.epochs)
    return plan_training(n, model_cfg, run.batch_size, run.lr, steps=run.steps)


def train_claim(runs: dict[str, RunConfig]) -> dict[str, TrainResult]:
    """The claim runs (cached; a corpus that cannot fill a batch fails before training)."""
    return {name: load_or_train(run) for name, run in runs.items()}


def final_min_cosines(result: TrainResult) -> dict[str, float]:
    """Per kind of matrix, the lowest cosine over the layers at the run's last logged step."""
    hist = result.history
    last = hist[hist["step"] == hist["step"].max()]
    return {kind: float(last.loc[last["kind"] == kind, "cosine"].min()) for kind in KINDS}


def final_loss(result: TrainResult) -> float:
    """The batch loss at the run's last logged step (nats)."""
    hist = result.history
    return float(hist.loc[hist["step"] == hist["step"].max(), "loss"].iloc[0])


def reached_eta_s(result: TrainResult) -> float:
    """The η·s a run ends at."""
    return result.train_cfg.lr * result.train_cfg.steps


def claim_value(cosines: dict[str, float]) -> float:
    """The paper's claim's measure for one run: the lowest of V's and W's cosines."""
    return min(cosines[k] for k in CLAIM_KINDS)


def unk_share(tokens: np.ndarray, unk_id: int | None) -> float:
    """The share of the tokens that are ``<unk>`` (0 for a tokenizer without one)."""
    return 0.0 if unk_id is None else float((np.asarray(tokens) == unk_id).mean())


def cosines_excluding(state: dict[str, torch.Tensor], stats: object, exclude: int | None) -> dict[str, float]:
    """Per kind, the lowest cosine over the layers of the weights ``state`` with their leading
    terms (``stats``' bases), with the row and the column of token ``exclude`` left out of both the
    weight and the map (None: nothing left out). P is a vector over positions and is compared whole."""
    basis = bases(stats)
    keep = np.arange(basis["W_O"].shape[0])
    if exclude is not None:
        keep = keep[keep != exclude]
    out: dict[str, float] = {}
    for name, weight in state.items():
        kind, _ = kind_of(name)
        w, b = weight.detach().double().cpu().numpy(), basis[kind]
        if kind != "P":
            w, b = w[np.ix_(keep, keep)], b[np.ix_(keep, keep)]
        out[kind] = min(out.get(kind, np.inf), cosine(w, b))
    return {k: out[k] for k in KINDS}


@dataclass(frozen=True)
class SettingRun:
    """One run of :func:`setting_runs`: its ``batch_size`` (None: the full batch of
    ``n_sequences``), ``steps`` and the ``eta_s`` reached, the lowest final cosine over the layers
    per kind with the maps as they are (``cosines``) and with ``<unk>`` left out
    (``cosines_no_unk``, equal where there is no ``<unk>``), and the loss of the final model on the
    whole subset against log |V| (``loss``, ``log_vocab``, nats)."""

    batch_size: int | None
    n_sequences: int
    steps: int
    eta_s: float
    cosines: dict[str, float]
    cosines_no_unk: dict[str, float]
    loss: float
    log_vocab: float

    @property
    def batch(self) -> int:
        """The batch in sequences (the full batch counted as ``n_sequences``)."""
        return self.batch_size or self.n_sequences


def subset(tokens: np.ndarray, setting: SettingConfig) -> np.ndarray:
    """The first ``n_sequences`` sequences, cut to ``context + 1`` tokens (``context`` predictions)."""
    tokens = np.asarray(tokens)
    if tokens.shape[0] < setting.n_sequences or tokens.shape[1] < setting.context + 1:
        raise ValueError(
            f"the corpus has {tokens.shape[0]} sequences of {tokens.shape[1] - 1} predictions; the setting needs "
            f"n_sequences <= {tokens.shape[0]} and context <= {tokens.shape[1] - 1}: lower them"
        )
    return np.ascontiguousarray(tokens[: setting.n_sequences, : setting.context + 1], dtype=np.int64)


def setting_runs(
    tokens: np.ndarray, vocab_size: int, unk_id: int | None, setting: SettingConfig, eta_s: float, n_layers: int = 3
) -> list[SettingRun]:
    """Train from zero on the :func:`subset` of ``tokens``, at ``setting.lr`` towards ``eta_s``
    (capped at ``setting.max_steps``), once per batch size of ``setting.series`` (the full batch
    last), each run cached; compare the final weights with the subset's own leading terms (the
    full-batch gradient's), with and without ``<unk>`` (``unk_id``)."""
    sub = subset(tokens, setting)
    stats = cached_corpus_stats(sub, vocab_size)
    model_cfg = ModelConfig(d_vocab=vocab_size, n_ctx=setting.context, n_layers=n_layers)
    steps = steps_to(eta_s, setting.lr, setting.max_steps)
    out = []
    for batch in setting.series:
        cfg = TrainConfig(lr=setting.lr, steps=steps, batch_size=batch, seed=setting.seed, log_every=max(steps, 1))
        result = cached_train(sub, stats, model_cfg, cfg)
        model = result.model(device="cpu")
        with torch.no_grad():
            loss = float(model.loss(torch.as_tensor(sub)))
        state = {name: model.get_parameter(name) for name in parameter_names(model_cfg)}
        out.append(
            SettingRun(
                batch_size=batch,
                n_sequences=setting.n_sequences,
                steps=steps,
                eta_s=setting.lr * steps,
                cosines=cosines_excluding(state, stats, None),
                cosines_no_unk=cosines_excluding(state, stats, unk_id),
                loss=loss,
                log_vocab=float(np.log(vocab_size)),
            )
        )
    return out


CAUSES = ("none", "noise", "vocabulary", "departure", "unsettled", "untested")


def explain(
    claim_holds: bool | None,
    full_batch_holds: bool | None,
    without_unk_holds: bool | None,
    chapter2_holds: bool | None = None,
) -> str:
    """What explains the claim runs' disagreement with the paper, by one rule, from four verdicts:
    the paper's claim on the claim runs (``claim_holds``), on the full-batch runs of the theory's
    setting (``full_batch_holds``), on those runs with ``<unk>`` left out of the maps
    (``without_unk_holds``), and on chapter 2's full-batch curves (``chapter2_holds``, a larger
    full-batch corpus at larger rates); None where a verdict is untested.

    ``"none"``: the claim runs hold, nothing to explain. ``"noise"``: the full batch holds, so the
    mini-batches' gradient noise made the gap. ``"vocabulary"``: only leaving ``<unk>`` out holds.
    ``"departure"``: neither holds, and chapter 2's full-batch curves do not hold either (or do not
    reach the paper's η·s): in the theory's own setting the matrices have left their leading terms
    at that η·s. ``"unsettled"``: the subset's full batch fails where chapter 2's holds, so the two
    full-batch settings disagree. ``"untested"``: a verdict it needs is missing."""
    if claim_holds is None:
        return "untested"
    if claim_holds:
        return "none"
    if full_batch_holds is None or without_unk_holds is None:
        return "untested"
    if full_batch_holds:
        return "noise"
    if without_unk_holds:
        return "vocabulary"
    return "unsettled" if chapter2_holds else "departure"


def bpe_support(corpus: CorpusConfig, sizes: tuple[int, ...], rare: int = 10) -> pd.DataFrame:
    """For each cased-BPE vocabulary size fitted on the stories of ``corpus``: how many of its
    tokens occur fewer than ``rare`` times in them, and that share (cached by stories and sizes)."""
    stories = corpus_stories(corpus)

    def compute() -> pd.DataFrame:
        rows = []
        for size in sizes:
            tok = tokenize.CasedBPETokenizer.fit(stories, size)
            counts = tok.counts(stories)
            n_rare = int((counts < rare).sum())
            rows.append({"vocabulary": size, f"tokens seen < {rare} times": n_rare, "share": n_rare / size})
        return pd.DataFrame(rows)

    key = {"sizes": sizes, "rare": rare, "data": data_fingerprint(stories)}
    return cached("leading_terms/bpe_support", key, compute)


@dataclass(frozen=True)
class ClaimReading:
    """Everything chapter 3 reads about the paper's claim, per tokenizer name: the paper's
    ``target``; the claim runs' η·s (``reached``), their lowest final cosines per kind as they are
    (``cosines``) and with ``<unk>`` left out of the maps (``cosines_no_unk``), their final batch
    loss and log |V| (``losses``, ``log_vocab``); each corpus's ``<unk>`` share (``unk_shares``);
    the runs in the theory's setting (``setting``); and chapter 2's full-batch sweep read at the
    paper's η·s (``chapter2``, :func:`~mechbook.leading_terms.check.cosines_at`)."""

    target: PaperTarget
    reached: float
    cosines: dict[str, dict[str, float]]
    cosines_no_unk: dict[str, dict[str, float]]
    losses: dict[str, float]
    log_vocab: dict[str, float]
    unk_shares: dict[str, float]
    setting: dict[str, list[SettingRun]]
    chapter2: pd.DataFrame

    @property
    def setting_eta_s(self) -> float:
        """The η·s the theory-setting runs reach."""
        return min(run.eta_s for runs in self.setting.values() for run in runs)

    def full_batch(self, name: str) -> SettingRun:
        """Tokenizer ``name``'s full-batch run in the theory's setting."""
        return next(run for run in self.setting[name] if run.batch_size is None)


def read_claim(
    results: dict[str, TrainResult],
    runs: dict[str, RunConfig],
    setting: SettingConfig,
    target: PaperTarget,
    sweep: pd.DataFrame,
) -> ClaimReading:
    """Chapter 3's reading of the claim: the claim runs ``results`` (of the configs ``runs``) with
    and without ``<unk>``, each corpus's ``<unk>`` share, the runs of ``setting`` on each corpus
    (trained here, cached), and chapter 2's ``sweep`` at the paper's η·s."""
    cosines, no_unk, losses, log_vocab, shares, setting_out = {}, {}, {}, {}, {}, {}
    for name, result in results.items():
        corpus = load_training_corpus(runs[name].corpus)
        unk = corpus.tokenizer.unk_id
        cosines[name] = final_min_cosines(result)
        no_unk[name] = cosines_excluding(result.state, corpus.stats, unk)
        losses[name] = final_loss(result)
        log_vocab[name] = float(np.log(corpus.tokenizer.vocab_size))
        shares[name] = unk_share(corpus.sequences.tokens, unk)
        setting_out[name] = setting_runs(
            corpus.sequences.tokens, corpus.tokenizer.vocab_size, unk, setting, target.eta_s, runs[name].n_layers
        )
    reached = min(reached_eta_s(r) for r in results.values())
    return ClaimReading(
        target, reached, cosines, no_unk, losses, log_vocab, shares, setting_out, cosines_at(sweep, target.eta_s)
    )
