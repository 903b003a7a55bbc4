"""Chapter 3, "Training the 3-layer attention model": its profiles, runs, charts and prose.

Two sets of runs. The shared runs (``runs``: the paper's lr 0.005 and a larger one, on the
natural-tokenizer corpus) are the models chapters 4 and 5 read as well. The claim runs test the
paper's statement that V and W keep cosine > 0.99 with their leading terms "even after 100 epochs":
:func:`paper_target` computes the η·s that 100 of the paper's epochs mean (lr × floor(100 N / 2048),
N the sequences its filter keeps of the train split, extrapolated from the text at hand), and the
chapter trains at lr 0.005 towards it under the natural tokenizer and the paper's cased BPE, as
far as the profile's ``max_steps`` allows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import altair as alt
import numpy as np
import pandas as pd

from mechbook.cache import cached
from mechbook.data import data_fingerprint
from mechbook.leading_terms import tokenize
from mechbook.leading_terms.corpus import CorpusConfig, corpus_stories, load_corpus
from mechbook.leading_terms.leading import KINDS
from mechbook.leading_terms.plan import TrainingPlan, paper_sequences, plan_training, steps_for_epochs
from mechbook.leading_terms.runs import CLAIM_RUNS, PAPER_BPE_VOCAB, SHARED_RUNS, ClaimConfig
from mechbook.leading_terms.train import RunConfig, Runs, RunsConfig, TrainResult, load_or_train, load_training_corpus

TERMS = {"W_O": "W_O vs B", "V": "V vs (BΦ)ᵀ", "W": "W vs Q", "P": "P vs 𝒫"}
TOKENIZER_LABELS = {"natural": "natural (lowercased words)", "bpe_cased": "cased BPE"}
THRESHOLD = 0.99
WIDTH = 680


@dataclass(frozen=True)
class Chapter3Config:
    """Chapter 3: the shared ``runs`` (chapters 4-5 read them), the ``claim`` runs, and the
    ``seed`` of every run's batch order."""

    runs: RunsConfig
    claim: ClaimConfig
    seed: int = 0

    def shared_runs(self) -> RunsConfig:
        """The shared runs with this chapter's seed."""
        return replace(self.runs, seed=self.seed)


#: The chapter's config per profile: the shared runs (chapters 4 and 5 read them too) and the claim
#: runs, both from :mod:`mechbook.leading_terms.runs`.
CONFIGS: dict[str, Chapter3Config] = {
    profile: Chapter3Config(SHARED_RUNS[profile], CLAIM_RUNS[profile]) for profile in SHARED_RUNS
}


@dataclass(frozen=True)
class PaperTarget:
    """The paper's run in numbers: of ``n_stories`` stories at hand its filter keeps ``n_kept``;
    over the train split that is ``n_sequences``, and ``epochs`` epochs at ``batch_size`` are
    ``steps`` steps, η·s = ``eta_s``."""

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
    _, sequences = load_corpus(claim.paper_corpus)
    n = paper_sequences(sequences.n_kept, sequences.n_stories)
    steps = steps_for_epochs(claim.paper_epochs, n, claim.paper_batch)
    return PaperTarget(sequences.n_stories, sequences.n_kept, n, claim.paper_epochs, claim.paper_batch, steps, claim.lr)


def claim_steps(claim: ClaimConfig, target: PaperTarget) -> int:
    """Steps of the claim runs: those that reach the paper's η·s at lr ``claim.lr``, capped at
    ``claim.max_steps``."""
    needed = math.ceil(target.eta_s / claim.lr - 1e-9)
    return needed if claim.max_steps is None else min(needed, claim.max_steps)


def claim_run_configs(cfg: Chapter3Config, target: PaperTarget) -> dict[str, RunConfig]:
    """The claim runs, one per tokenizer (``natural``: the shared runs' corpus; ``bpe_cased``)."""
    steps = claim_steps(cfg.claim, target)
    corpora = {"natural": cfg.runs.corpus, "bpe_cased": cfg.claim.bpe_corpus}
    return {
        name: RunConfig(
            corpus,
            cfg.claim.lr,
            cfg.claim.batch_size,
            cfg.claim.log_every,
            steps=steps,
            n_layers=cfg.runs.n_layers,
            seed=cfg.seed,
        )
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


def plans_markdown(cfg: Chapter3Config, target: PaperTarget) -> str:
    """What the chapter's runs will cost, as a list computed before any of them trains: the shared
    runs (one plan for all their learning rates, which share sizes) and each claim run."""
    shared = cfg.shared_runs()
    items = {f"Shared runs (η = {' and '.join(f'{lr:g}' for lr in shared.lrs)})": run_plan(shared.run(shared.lrs[0]))}
    for name, run in claim_run_configs(cfg, target).items():
        items[f"Claim run, {TOKENIZER_LABELS[name]}"] = run_plan(run)
    return "\n".join(f"- **{label}**: {plan.markdown()}" for label, plan in items.items())


def train_claim(cfg: Chapter3Config, target: PaperTarget) -> dict[str, TrainResult]:
    """The claim runs (cached; a corpus that cannot fill a batch fails before training)."""
    return {name: load_or_train(run) for name, run in claim_run_configs(cfg, target).items()}


def final_min_cosines(result: TrainResult) -> dict[str, float]:
    """Per kind of matrix, the lowest cosine over the layers at the run's last logged step."""
    hist = result.history
    last = hist[hist["step"] == hist["step"].max()]
    return {kind: float(last.loc[last["kind"] == kind, "cosine"].min()) for kind in KINDS}


def final_loss(result: TrainResult) -> float:
    """The batch loss at the run's last logged step (nats)."""
    hist = result.history
    return float(hist.loc[hist["step"] == hist["step"].max(), "loss"].iloc[0])


def headline_records(runs: Runs, claim: dict[str, TrainResult], target: PaperTarget) -> dict[str, float]:
    """The numbers ``book/thresholds/03_training.yml`` bounds: per shared run (``paper_lr``, ``large_lr``)
    the lowest final cosine of each kind and the final loss; the paper's η·s; per tokenizer the
    claim runs' η·s, lowest final cosines and loss."""
    paper_lr, large_lr = sorted(runs.results)
    out: dict[str, float] = {}
    for tag, lr in (("paper_lr", paper_lr), ("large_lr", large_lr)):
        for kind, value in final_min_cosines(runs.results[lr]).items():
            out[f"min_cos_{kind}_{tag}"] = value
        out[f"final_loss_{tag}"] = final_loss(runs.results[lr])
    out["paper_eta_s"] = target.eta_s
    for name, result in claim.items():
        out[f"claim_eta_s_{name}"] = result.train_cfg.lr * result.train_cfg.steps
        for kind, value in final_min_cosines(result).items():
            out[f"claim_min_cos_{kind}_{name}"] = value
        out[f"claim_final_loss_{name}"] = final_loss(result)
    return out


def _history(results: dict, key_name: str) -> pd.DataFrame:
    frames = [r.history.assign(**{key_name: key}) for key, r in results.items()]
    data = pd.concat(frames, ignore_index=True)
    data["term"] = data["kind"].map(TERMS)
    data["layer_label"] = data["layer"].map(lambda l: "output" if pd.isna(l) else f"layer {int(l)}")
    return data


def min_cosine_table(runs: Runs) -> pd.DataFrame:
    """Lowest final cosine over the layers, learning rate x kind (columns named by :data:`TERMS`)."""
    table = pd.DataFrame({lr: final_min_cosines(r) for lr, r in runs.results.items()}).T.rename(columns=TERMS)
    table.index.name = "learning rate"
    return table


def cosine_chart(runs: Runs) -> alt.FacetChart:
    """Cosine with the leading term over training, one panel per kind, one line per layer; a menu
    picks the learning rate."""
    data = _history(runs.results, "run_lr")
    lrs = sorted(runs.results)
    worst = {lr: min(final_min_cosines(r).values()) for lr, r in runs.results.items()}
    pick = alt.selection_point(
        fields=["run_lr"], bind=alt.binding_select(options=lrs, name="learning rate "), value=lrs[0]
    )
    return (
        alt.Chart(data)
        .mark_line(point=alt.OverlayMarkDef(size=15))
        .encode(
            x=alt.X("step:Q", title="SGD step s"),
            y=alt.Y("cosine:Q", title="cosine with the leading term", scale=alt.Scale(zero=False)),
            color=alt.Color("layer_label:N", title="layer", legend=alt.Legend(orient="bottom")),
            tooltip=[
                "term",
                "layer_label",
                alt.Tooltip("run_lr:Q", title="learning rate"),
                "step",
                alt.Tooltip("cosine:Q", format=".4f"),
            ],
        )
        .add_params(pick)
        .transform_filter(pick)
        .properties(width=WIDTH // 2 - 60, height=150)
        .facet(facet=alt.Facet("term:N", title=None, sort=list(TERMS.values())), columns=2)
        .properties(title="Lowest final cosine: " + ", ".join(f"{worst[lr]:.4f} at η = {lr:g}" for lr in lrs))
    )


def loss_chart(runs: Runs) -> alt.Chart:
    """The batch loss at the logged steps of each shared run."""
    data = _history(runs.results, "run_lr")
    data = data[data["kind"] == "W_O"]
    ends = {lr: final_loss(r) for lr, r in runs.results.items()}
    return (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=alt.X("step:Q", title="SGD step s"),
            y=alt.Y("loss:Q", title="cross-entropy of the batch (nats)", scale=alt.Scale(zero=False)),
            color=alt.Color("run_lr:O", title="learning rate η", legend=alt.Legend(orient="bottom")),
            tooltip=[alt.Tooltip("run_lr:Q", title="learning rate"), "step", alt.Tooltip("loss:Q", format=".3f")],
        )
        .properties(
            width=WIDTH - 80,
            height=220,
            title="Loss after the run: " + ", ".join(f"{ends[lr]:.3f} nats at η = {lr:g}" for lr in sorted(ends)),
        )
    )


def claim_chart(claim: dict[str, TrainResult], target: PaperTarget) -> alt.LayerChart:
    """Lowest cosine over the layers against η·s, per kind, for both tokenizers, with the 0.99 line
    and the paper's η·s marked."""
    data = _history(claim, "tokenizer")
    worst = data.groupby(["tokenizer", "term", "eta_s"], as_index=False)["cosine"].min()
    worst["tokenizer"] = worst["tokenizer"].map(TOKENIZER_LABELS)
    reached = max(r.train_cfg.lr * r.train_cfg.steps for r in claim.values())
    x = alt.X("eta_s:Q", title="η·s (learning rate × steps)", scale=alt.Scale(domain=[0, max(reached, target.eta_s)]))
    lines = (
        alt.Chart(worst)
        .mark_line(point=alt.OverlayMarkDef(size=12))
        .encode(
            x=x,
            y=alt.Y("cosine:Q", title="lowest cosine over the layers", scale=alt.Scale(zero=False)),
            color=alt.Color("term:N", title="matrix", sort=list(TERMS.values()), legend=alt.Legend(orient="bottom")),
            strokeDash=alt.StrokeDash("tokenizer:N", title="tokenizer", legend=alt.Legend(orient="bottom")),
            tooltip=[
                "tokenizer",
                "term",
                alt.Tooltip("eta_s:Q", format=".2f", title="η·s"),
                alt.Tooltip("cosine:Q", format=".4f"),
            ],
        )
    )
    rule_y = (
        alt.Chart(pd.DataFrame({"cosine": [THRESHOLD]})).mark_rule(strokeDash=[2, 2], color="gray").encode(y="cosine:Q")
    )
    rule_x = alt.Chart(pd.DataFrame({"eta_s": [target.eta_s]})).mark_rule(color="firebrick").encode(x="eta_s:Q")
    short = "reaches" if reached >= target.eta_s - 1e-9 else f"stops at η·s = {reached:.3g} of"
    return (lines + rule_y + rule_x).properties(
        width=WIDTH - 80,
        height=260,
        title=f"The claim runs {short} the paper's η·s = {target.eta_s:.3g} (red line); dashed gray: cosine 0.99",
    )


def target_markdown(target: PaperTarget) -> str:
    """The paper's run in numbers, as computed."""
    return (
        f"The paper's filter (|V| = 3000, T = 200, every token in the vocabulary) keeps **{target.n_kept:,}** of the "
        f"**{target.n_stories:,}** stories at hand ({target.n_kept / target.n_stories:.1%}). Over the "
        f"TinyStories train split that share is about **{target.n_sequences:,}** sequences, so {target.epochs:g} epochs "
        f"at batch {target.batch_size:,} are ⌊{target.epochs:g} × {target.n_sequences:,} / {target.batch_size:,}⌋ = "
        f"**{target.steps:,} steps**, and at η = {target.lr:g} that is **η·s = {target.eta_s:.3g}**."
    )


def claim_reading(
    target: PaperTarget, reached: float, cosines: dict[str, dict[str, float]], batch_size: int | None = None
) -> str:
    """Whether the paper's claim (V and W keep cosine > 0.99 with their terms at the paper's η·s)
    holds, from the claim runs' lowest final cosines per tokenizer and kind; ``batch_size``, the
    claim runs' batch, adds what a batch smaller than the paper's changes (the leading terms are
    those of the full-batch gradient, and a batch of b sequences has gradient-noise variance ∝ 1/b)."""
    short = reached < target.eta_s - 1e-9
    parts = []
    for name, cos in cosines.items():
        listed = ", ".join(f"{TERMS[k]} {cos[k]:.4f}" for k in KINDS)
        parts.append(f"{TOKENIZER_LABELS.get(name, name)}: {listed}")
    where = (
        f"At η·s = {reached:.3g} ({reached / target.eta_s:.0%} of the paper's {target.eta_s:.3g}) the lowest final cosines are "
        + "; ".join(parts)
        + "."
    )
    failing = sorted(
        {
            f"{TERMS[k]} ({TOKENIZER_LABELS.get(n, n)})"
            for n, cos in cosines.items()
            for k in ("V", "W")
            if not cos[k] > THRESHOLD
        }
    )
    if not failing and not short:
        verdict = "The claim holds here: V and W stay above 0.99 at the paper's step count, under both tokenizers."
    elif not failing:
        verdict = (
            f"V and W are still above 0.99 where the run stops, but it stops {target.eta_s - reached:.3g} short of the "
            "paper's η·s, so the claim is supported only that far, not confirmed at the paper's step count."
        )
    elif short:
        verdict = (
            f"The claim does not hold on this corpus: {', '.join(failing)} already fall to 0.99 or below before the "
            "paper's step count is reached."
        )
    else:
        verdict = f"The claim does not hold on this corpus: at the paper's step count {', '.join(failing)} are at 0.99 or below."
    if batch_size is not None and batch_size != target.batch_size:
        verdict += (
            f" These runs take batches of {batch_size:,} sequences where the paper took {target.batch_size:,}, to reach"
            " its η·s on a CPU: the leading terms describe the full-batch gradient, so the paper's run had"
            f" {target.batch_size / batch_size:.0f} times less gradient-noise variance than these, and the verdict is"
            " about this training, not a measurement of the paper's."
        )
    return where + " " + verdict


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


def bpe_markdown(claim: ClaimConfig, support: pd.DataFrame, natural_vocab: int) -> str:
    """Why the cased BPE has the size it has, from the support table."""
    share = support.set_index("vocabulary")["share"]
    chosen = claim.bpe_corpus.vocab_size
    largest = int(support["vocabulary"].max())
    text = (
        f"The cased BPE has |V| = **{chosen}**"
        + (
            ", the natural tokenizer's size, so both models have the same size and cost per step"
            if chosen == natural_vocab
            else ""
        )
        + "."
    )
    if chosen in share.index:
        text += f" Fitted on these stories, {share[chosen]:.0%} of its tokens occur fewer than 10 times"
        if largest != chosen:
            paper = " (the paper's size, fitted there on the whole corpus)" if largest == PAPER_BPE_VOCAB else ""
            text += f"; at |V| = {largest:,}{paper} that share is {share[largest]:.0%}"
            if share[largest] > 0.5:
                text += ": a vocabulary that size would be mostly tokens the text barely shows"
        text += "."
    return text


def runs_markdown(profile: str, cfg: Chapter3Config, runs: Runs) -> str:
    """The shared runs in one sentence."""
    shared = cfg.shared_runs()
    n = runs.sequences.n_kept
    steps = next(iter(runs.results.values())).train_cfg.steps
    epochs = steps * (shared.batch_size or n) / n
    lrs = sorted(runs.results)
    return (
        f"Profile **{profile}**: {n:,} sequences of T = {runs.sequences.context} predictions, |V| = {runs.tokenizer.vocab_size} "
        f"(with `<unk>`), {shared.n_layers} layers, plain SGD from zero with batches of {shared.batch_size} for "
        f"**{steps:,} steps** ({epochs:.1f} epochs) at learning rates {' and '.join(f'{lr:g}' for lr in lrs)}; "
        f"that is η·s = {' and '.join(f'{lr * steps:g}' for lr in lrs)}."
    )


def drift_markdown(runs: Runs) -> str:
    """Which kind of matrix ends furthest from its term at the larger learning rate."""
    large = max(runs.results)
    cos = final_min_cosines(runs.results[large])
    worst = min(cos, key=cos.get)
    return f"At η = {large:g} the kind of matrix furthest from its leading term at the end is **{TERMS[worst]}** (lowest cosine {cos[worst]:.4f})."


def claim_cosines(claim: dict[str, TrainResult]) -> dict[str, dict[str, float]]:
    """Lowest final cosines per kind, per tokenizer."""
    return {name: final_min_cosines(r) for name, r in claim.items()}


def reached_eta_s(claim: dict[str, TrainResult]) -> float:
    """The η·s the claim runs end at (the same for both tokenizers)."""
    return float(np.min([r.train_cfg.lr * r.train_cfg.steps for r in claim.values()]))
