"""Chapter 4, "Reading the associations" (book/part1/04_associations.ipynb).

The chapter reads the trained matrices of chapter 3's two runs (same cached runs) next to their
leading terms, row by row: W_O against B (bigram successors), V W_O against G = (BΦ)ᵀB = ΦᵀΣ_B
(context -> interchangeable next words) and W against Q (which earlier tokens to attend to). It
shows ranked tables, the overlap@k of the rankings over the most frequent content words, and an
explorer of one word's corpus associations and trained rankings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import torch

from mechbook.chapters.part1_labels import run_labels
from mechbook.leading_terms.associations import content_words, ranked_words, readable_exclusions, top_k
from mechbook.leading_terms.leading import ranking_overlap
from mechbook.leading_terms.runs import SHARED_RUNS
from mechbook.leading_terms.train import Runs, RunsConfig, chapter_runs

TRAINED = ("W_O", "V W_O", "W")
"""The trained maps the chapter reads, in the order of its tables."""
TERM = {"W_O": "B", "V W_O": "G", "W": "Q"}
"""The leading term of each trained map."""


@dataclass(frozen=True)
class AssociationsConfig:
    """Chapter 4: the ``runs`` of chapter 3, ``k`` of overlap@k, the ``n_words`` most frequent
    content words it is averaged over, ``table_words`` rows and ``table_k`` tokens of the ranked
    table, ``explorer_k`` tokens per explorer panel."""

    runs: RunsConfig
    k: int = 10
    n_words: int = 20
    table_words: int = 5
    table_k: int = 5
    explorer_k: int = 8

    def __post_init__(self) -> None:
        if not isinstance(self.runs, RunsConfig):
            raise TypeError(f"AssociationsConfig.runs must be a RunsConfig, got {type(self.runs).__name__}")
        run_labels(self.runs.lrs)
        for name in ("k", "n_words", "table_words", "table_k", "explorer_k"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"AssociationsConfig.{name} must be a positive integer, got {value!r}")
        if self.table_words > self.n_words:
            raise ValueError(
                f"AssociationsConfig.table_words ({self.table_words}) must not exceed n_words ({self.n_words})"
            )


#: The chapter's config per profile: chapter 3's runs of that profile, read from the cache.
CONFIGS: dict[str, AssociationsConfig] = {profile: AssociationsConfig(runs) for profile, runs in SHARED_RUNS.items()}


def trained(state: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """The trained maps of one run as float64 arrays: W_O, V W_O (the product taken in the weights'
    dtype) and W of layer 0 (at leading order every layer has the same terms)."""
    return {
        "W_O": state["W_O"].double().numpy(),
        "V W_O": (state["blocks.0.attn.V"] @ state["W_O"]).double().numpy(),
        "W": state["blocks.0.attn.W"].double().numpy(),
    }


@dataclass
class Associations:
    """The runs of chapter 3 read as maps: ``theory`` {trained map: its leading term} and
    ``maps`` {lr: {trained map: matrix}}, the tokens left out of rankings and the content words."""

    cfg: AssociationsConfig
    runs: Runs
    maps: dict[float, dict[str, np.ndarray]]
    exclude: list[str] = field(init=False)
    words: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.exclude = readable_exclusions(self.runs.tokenizer)
        self.words = content_words(self.runs.tokenizer, self.cfg.n_words)

    @property
    def theory(self) -> dict[str, np.ndarray]:
        s = self.runs.stats
        return {"W_O": s.B, "V W_O": s.G, "W": s.Q}

    @property
    def lrs(self) -> tuple[float, float]:
        return self.cfg.runs.lrs


def load(cfg: AssociationsConfig) -> Associations:
    """Chapter 3's runs (trained, or read from the cache) and their trained maps."""
    runs = chapter_runs(cfg.runs)
    return Associations(cfg, runs, {lr: trained(r.state) for lr, r in runs.results.items()})


def profile_note(a: Associations) -> str:
    """Which runs the chapter reads and what the rankings leave out."""
    paper_lr, large_lr = a.lrs
    return (
        f"The runs of chapter 3 ({a.runs.results[a.lrs[0]].train_cfg.steps:,} steps at learning rates {paper_lr} and {large_lr}); "
        f"rankings over the {a.runs.tokenizer.vocab_size} tokens minus {len(a.exclude)} punctuation, "
        f"function-word and `<unk>` tokens, for the {len(a.words)} most frequent content words."
    )


def ranked_table(a: Associations) -> pd.DataFrame:
    """For the first ``table_words`` content words, the top ``table_k`` tokens of each leading
    term and of its trained map at the paper's learning rate, one line per (word, map)."""
    few, tok, paper_lr = a.words[: a.cfg.table_words], a.runs.tokenizer, a.lrs[0]
    blocks = []
    for name in TRAINED:
        for label, matrix in (
            (f"{TERM[name]} (theory)", a.theory[name]),
            (f"{name} (trained)", a.maps[paper_lr][name]),
        ):
            wide = ranked_words(
                top_k(matrix, tok, k=a.cfg.table_k, rows=few, exclude=a.exclude, positive=label.startswith("B "))
            )
            blocks.append(wide.assign(map=label).set_index("map", append=True))
    return pd.concat(blocks).swaplevel().sort_index(level=1, sort_remaining=False)


def overlap_table(a: Associations) -> pd.DataFrame:
    """overlap@k of each leading term and its trained map, averaged over the content words;
    index: learning rate, columns "B vs W_O", "G vs V W_O", "Q vs W". For B a row's k is cut to
    its number of successors above the uniform baseline (the others are tied)."""
    tok = a.runs.tokenizer
    keep_out = [tok.token_to_id[t] for t in a.exclude if t in tok.token_to_id]
    rows = [tok.token_to_id[w] for w in a.words]
    table = pd.DataFrame(
        {
            f"{TERM[name]} vs {name}": [
                ranking_overlap(
                    a.theory[name], a.maps[lr][name], rows, k=a.cfg.k, exclude=keep_out, positive=name == "W_O"
                )
                for lr in a.lrs
            ]
            for name in TRAINED
        },
        index=pd.Index(a.lrs, name="learning rate"),
    )
    return table


def headline(table: pd.DataFrame) -> dict[str, float]:
    """The recorded overlaps: ``overlap_<term>_<map>_<run>``, e.g. ``overlap_G_VW_O_paper_lr``."""
    labels = run_labels(table.index)
    return {
        f"overlap_{col.replace(' vs ', '_').replace(' ', '')}_{labels[lr]}": float(table.loc[lr, col])
        for lr in table.index
        for col in table.columns
    }


def overlap_prose(a: Associations, table: pd.DataFrame) -> str:
    """The overlaps of V W_O with G and of W with Q at both learning rates."""
    paper_lr, large_lr = a.lrs
    k = a.cfg.k
    return (
        f"overlap@{k}, averaged over {len(a.words)} words. At the paper's learning rate the trained value-output "
        f"path shares **{table.loc[paper_lr, 'G vs V W_O']:.0%}** of its top-{k} with $G$ and the key-query matrix "
        f"**{table.loc[paper_lr, 'Q vs W']:.0%}** with $Q$; at $\\eta = {large_lr}$: "
        f"**{table.loc[large_lr, 'G vs V W_O']:.0%}** and **{table.loc[large_lr, 'Q vs W']:.0%}**."
    )


def drift_prose(a: Associations, table: pd.DataFrame) -> str:
    """Which ranking agrees least with its theory at each learning rate."""
    paper_lr, large_lr = a.lrs
    k = a.cfg.k
    lowest, lowest_paper = table.loc[large_lr].idxmin(), table.loc[paper_lr].idxmin()
    return (
        f"At $\\eta = {paper_lr}$ the lowest overlap@{k} is **{lowest_paper}** "
        f"({table.loc[paper_lr, lowest_paper]:.0%}). At $\\eta = {large_lr}$, where chapter 3 measured the larger "
        f"drift, the ranking that moves most is **{lowest}** (overlap@{k} {table.loc[large_lr, lowest]:.0%}, against "
        f"{table.loc[paper_lr, lowest]:.0%} at $\\eta = {paper_lr}$)."
    )


def explorer_panels(a: Associations) -> dict[str, Callable[[float], np.ndarray]]:
    """The explorer's panels in reading order, each row a theory panel beside the trained map it
    predicts, then the two corpus maps that make up G: ``{title: lr -> matrix}``."""
    s = a.runs.stats
    return {
        "B: next words": lambda lr: s.B,
        "trained W_O": lambda lr: a.maps[lr]["W_O"],
        "G = ΦᵀΣ_B (theory of V W_O)": lambda lr: s.G,
        "trained V W_O": lambda lr: a.maps[lr]["V W_O"],
        "Q (theory of W)": lambda lr: s.Q,
        "trained W": lambda lr: a.maps[lr]["W"],
        "Φᵀ: later words": lambda lr: s.Phi.T,
        "Σ_B: interchangeable": lambda lr: s.Sigma_B,
    }


def word_panels(a: Associations, word: str, lr: float) -> pd.DataFrame:
    r"""One word's top tokens in every explorer panel, each panel's scores divided by its largest
    :math:`|\mathrm{score}|` (column ``relative``)."""
    frames = []
    for panel, get in explorer_panels(a).items():
        t = top_k(
            get(lr),
            a.runs.tokenizer,
            k=a.cfg.explorer_k,
            rows=[word],
            exclude=a.exclude,
            exclude_self=panel.startswith("Σ"),
            positive=panel.startswith(("B:", "Φ")),
        )
        peak = t["score"].abs().max()
        frames.append(t.assign(panel=panel, relative=t["score"] / peak if peak > 0 else 0.0))
    return pd.concat(frames, ignore_index=True).drop(columns="row")


def word_explorer(a: Associations) -> Any:
    """The explorer: pick a word and a learning rate; eight bar panels in two columns, theory on
    the left and the trained map it predicts on the right."""
    import mechbook.viz

    panels = list(explorer_panels(a))

    def chart(base: alt.Chart) -> alt.FacetChart:
        return (
            base.mark_bar()
            .encode(
                x=alt.X("relative:Q", title="score / panel maximum", scale=alt.Scale(domain=[-1, 1])),
                y=alt.Y("token:N", sort=alt.EncodingSortField("rank"), title=None),
                color=alt.Color("panel:N", legend=None),
                tooltip=["panel", "rank", "token", alt.Tooltip("score:Q", format=".3e")],
            )
            .properties(width=210, height=130)
            .facet(facet=alt.Facet("panel:N", title=None, sort=panels), columns=2)
            .resolve_scale(y="independent")
        )

    return mechbook.viz.explore(
        lambda word, lr: word_panels(a, word, lr),
        chart,
        controls={"word": a.words, "lr": list(a.lrs)},
        title="Each word's corpus associations and what the trained matrices rank for it",
    )
