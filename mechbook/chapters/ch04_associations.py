"""Chapter 4, "Reading the associations" (book/part1/04_associations.ipynb).

The chapter reads the trained matrices of chapter 3's two runs (same cached runs) next to their
leading terms, row by row: W_O against B (bigram successors), V W_O against G = (BΦ)ᵀB = ΦᵀΣ_B
(context -> interchangeable next words) and W against Q (which earlier tokens to attend to). It
shows ranked tables, the overlap@k of the rankings over the most frequent content words against
two baselines (chance :math:`k/|V|` and the harder mismatched-row overlap, also for the row-centred maps),
and an explorer of one word's corpus associations and trained rankings. The readings are computed
in :mod:`mechbook.leading_terms.associations`, the recorded numbers in
:mod:`mechbook.leading_terms.readings` and the claims are
:data:`mechbook.leading_terms.claims.CH04_CLAIMS`. The notebook reads the overlaps once
(:func:`mechbook.leading_terms.readings.read_associations`) and computes the verdicts once; this
module presents them, in page order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

import mechbook
from mechbook import claims
from mechbook.chapters.common import record_all as record_numbers
from mechbook.leading_terms.associations import TRAINED_TERMS, RunMaps, ranked_words, recurring_cells, top_k
from mechbook.leading_terms.check import TRAINED_NATS, decisive_run, is_trained
from mechbook.leading_terms.claims import CH04_CLAIM_OF
from mechbook.leading_terms.labels import run_labels
from mechbook.leading_terms.readings import AssociationReadings, association_numbers
from mechbook.leading_terms.runs import SHARED_RUNS
from mechbook.leading_terms.train import RunsConfig
from mechbook.validation import POSITIVE, at_least, check_fields

STEM = "04_associations"
TRAINED = tuple(TRAINED_TERMS)
"""The trained maps the chapter reads, in the order of its tables."""
TERM = TRAINED_TERMS
"""The leading term of each trained map."""


@dataclass(frozen=True)
class ChapterConfig:
    """Chapter 4's settings."""

    runs: RunsConfig
    """Chapter 3's shared runs of the profile (read from the cache, trained if missing)."""
    k: int = 10
    """k of overlap@k, a choice of the book (a row's strongest handful of associations). The paper's
    association lists (its Figure 5) show selected tokens from each map's top 30, not a top 10."""
    n_words: int = 20
    """The most frequent content words the overlaps average over (20: frequent enough for sharp rows)."""
    table_words: int = 5
    """Rows of the ranked table (a readable handful)."""
    table_k: int = 5
    """Tokens per row of the ranked table."""
    explorer_k: int = 8
    """Tokens per panel of the word explorer."""

    def __post_init__(self) -> None:
        check_fields(
            self,
            k=POSITIVE,
            n_words=at_least(2, "the mismatched-row baseline"),
            table_words=POSITIVE,
            table_k=POSITIVE,
            explorer_k=POSITIVE,
        )
        run_labels(self.runs.lrs)
        if self.table_words > self.n_words:
            raise ValueError(f"ChapterConfig.table_words ({self.table_words}) must not exceed n_words ({self.n_words})")


#: The chapter's config per profile: chapter 3's runs of that profile, read from the cache.
CONFIGS: dict[str, ChapterConfig] = {profile: ChapterConfig(runs) for profile, runs in SHARED_RUNS.items()}


def resolve(
    profile: str, steps: int | None = None, batch_size: int | None = None, seed: int | None = None, k: int | None = None
) -> ChapterConfig:
    """The chapter's config for ``profile`` with the reader's knobs (None: from the profile):
    ``steps``, ``batch_size`` and ``seed`` of chapter 3's runs, ``k`` of overlap@k."""
    return mechbook.resolve_profile(
        CONFIGS, profile, runs__steps=steps, runs__batch_size=batch_size, runs__seed=seed, k=k
    )


def profile_prose(cfg: ChapterConfig, rm: RunMaps) -> str:
    """Which runs the chapter reads and what the rankings leave out."""
    paper_lr, large_lr = rm.lrs
    steps = rm.runs.results[paper_lr].train_cfg.steps
    return (
        f"The runs of chapter 3 ({steps:,} steps at learning rates {paper_lr} and {large_lr}); "
        f"rankings over the {rm.runs.tokenizer.vocab_size} tokens minus {len(rm.exclude)} punctuation, "
        f"function-word and `<unk>` tokens, for the {len(rm.words)} most frequent content words."
    )


def ranked_table(cfg: ChapterConfig, rm: RunMaps, r: AssociationReadings) -> pd.DataFrame:
    """For the first ``table_words`` content words, the top ``table_k`` tokens of each leading
    term and of its trained map on the run the claims are decided on (the paper's rate when
    neither run has trained), one line per (word, map)."""
    few, tok = list(rm.words[: cfg.table_words]), rm.runs.tokenizer
    lr = decisive_run(r.drops) or rm.lrs[0]
    blocks = []
    for name in TRAINED:
        for label, matrix in (
            (f"{TERM[name]} (theory)", rm.theory[name]),
            (f"{name} (trained)", rm.maps[lr][name]),
        ):
            wide = ranked_words(
                top_k(matrix, tok, k=cfg.table_k, rows=few, exclude=rm.exclude, positive=label.startswith("B "))
            )
            blocks.append(wide.assign(map=label).set_index("map", append=True))
    return pd.concat(blocks).swaplevel().sort_index(level=1, sort_remaining=False)


def shared_profile_prose(table: pd.DataFrame) -> str:
    """Under the ranked table: per map, how many of its cells hold a word that stands in two of the
    table's rows or more (:func:`~mechbook.leading_terms.associations.recurring_cells`), and what
    a row of Q lists."""
    parts = []
    for label in dict.fromkeys(table.index.get_level_values(0)):
        cells, filled, words = recurring_cells(table.xs(label, level=0))
        top = ", ".join(f"*{w}*" for w in list(words)[:4])
        parts.append(f"{label} {cells} of {filled}" + (f" ({top})" if top else ""))
    return (
        "How many of each map's cells hold a word that stands in two of its rows or more, a profile shared by "
        f"the rows rather than one word's own association: {'; '.join(parts)}. A row of $Q$ lists the earlier "
        "words (keys) that, attended more than the average visible word, would most raise the logit of what "
        "actually follows the row's word, through their row of $G$; keys that recur across the rows help whatever "
        "the query is. That shared profile is why the overlaps below are judged against another word's row, "
        "and once more on the row-centred maps."
    )


def overlap_table(readings: AssociationReadings) -> pd.DataFrame:
    """One row per (learning rate, pair): the matched overlap@k, chance, the mismatched-row
    overlap, the excess over the harder baseline, and the same for the row-centred maps."""
    rows = []
    for lr, per_map in readings.overlaps.items():
        for name, r in per_map.items():
            rows.append(
                {
                    "learning rate": lr,
                    "pair": f"{TERM[name]} vs {name}",
                    "overlap": r.matched,
                    "chance k/|V|": r.chance,
                    "another word's row": r.mismatched,
                    "excess": r.excess,
                    "row-centred": r.centred,
                    "row-centred, another word's row": r.centred_mismatched,
                    "row-centred excess": r.centred - r.centred_mismatched,
                }
            )
    return pd.DataFrame(rows).set_index(["learning rate", "pair"])


def overlap_prose(readings: AssociationReadings, ev: dict[str, claims.Evidence], k: int) -> str:
    """Per run, how far its loss fell, then per map: the overlap and the two baselines (the words
    derived from the printed numbers); each claim's verdict sentence under the run it is decided on
    (the run that has trained), the other run's numbers shown beside it."""
    drops = readings.drops
    decided = decisive_run(drops)
    blocks = []
    for lr, per_map in readings.overlaps.items():
        state = (
            "the claims are decided on this run."
            if lr == decided
            else f"under the {TRAINED_NATS} nats a run must fall for the claims to be decided on it. Its matrices "
            "are still close to their leading terms (chapter 3), so its overlaps restate that closeness."
            if not is_trained(drops[lr])
            else "it has trained, but the other run fell further and decides."
        )
        lines = [f"At $\\eta = {lr}$ the loss fell **{drops[lr]:.3f}** nats below $\\log |V|$: {state}\n"]
        for name in TRAINED:
            r = per_map[name]
            raw, centred = CH04_CLAIM_OF[name]
            verdicts = f"\n  {ev[raw].sentence()}\n  {ev[centred].sentence()}" if lr == decided else ""
            lines.append(
                f"- **{TERM[name]} vs {name}**: overlap@{k} {r.matched:.2f}, against {r.chance:.2f} for a random "
                f"ranking and {r.mismatched:.2f} with another word's row "
                f"({claims.difference(r.matched, r.mismatched, '.2f')}); row-centred {r.centred:.2f} against "
                f"{r.centred_mismatched:.2f} ({claims.difference(r.centred, r.centred_mismatched, '.2f')}).{verdicts}"
            )
        blocks.append("\n".join(lines))
    if decided is None:
        blocks.append("\n\n".join(ev[cid].sentence() for pair in CH04_CLAIM_OF.values() for cid in pair))
    return "\n\n".join(blocks)


def drift_prose(readings: AssociationReadings, k: int) -> str:
    """Which ranking agrees least with its theory at each learning rate, and how its overlap moves
    between the two runs (the word derived from the numbers)."""
    overlaps = readings.overlaps
    paper_lr, large_lr = overlaps
    matched = {lr: {n: r.matched for n, r in overlaps[lr].items()} for lr in overlaps}
    low_paper = min(matched[paper_lr], key=matched[paper_lr].get)
    low_large = min(matched[large_lr], key=matched[large_lr].get)
    a, b = matched[paper_lr][low_large], matched[large_lr][low_large]
    return (
        f"At $\\eta = {paper_lr}$ the lowest overlap@{k} is **{TERM[low_paper]} vs {low_paper}** "
        f"({matched[paper_lr][low_paper]:.0%}). At $\\eta = {large_lr}$ the lowest is **{TERM[low_large]} vs "
        f"{low_large}**: its overlap@{k} {claims.change(a, b, '.0%', 'rises', 'falls', 'stays')} from {a:.0%} at "
        f"$\\eta = {paper_lr}$ to {b:.0%}."
    )


def explorer_panels(rm: RunMaps) -> dict[str, Callable[[float], np.ndarray]]:
    """The explorer's panels in reading order, each row a theory panel beside the trained map it
    predicts, then the two corpus maps that make up G: ``{title: lr -> matrix}``."""
    s = rm.runs.stats
    return {
        "B: next words": lambda lr: s.B,
        "trained W_O": lambda lr: rm.maps[lr]["W_O"],
        "G = ΦᵀΣ_B (theory of V W_O)": lambda lr: s.G,
        "trained V W_O": lambda lr: rm.maps[lr]["V W_O"],
        "Q (theory of W)": lambda lr: s.Q,
        "trained W": lambda lr: rm.maps[lr]["W"],
        "Φᵀ: later words": lambda lr: s.Phi.T,
        "Σ_B: interchangeable": lambda lr: s.Sigma_B,
    }


def word_panels(cfg: ChapterConfig, rm: RunMaps, word: str, lr: float) -> pd.DataFrame:
    r"""One word's top tokens in every explorer panel, each panel's scores divided by its largest
    :math:`|\mathrm{score}|` (column ``relative``)."""
    frames = []
    for panel, get in explorer_panels(rm).items():
        t = top_k(
            get(lr),
            rm.runs.tokenizer,
            k=cfg.explorer_k,
            rows=[word],
            exclude=rm.exclude,
            exclude_self=panel.startswith("Σ"),
            positive=panel.startswith(("B:", "Φ")),
        )
        peak = t["score"].abs().max()
        frames.append(t.assign(panel=panel, relative=t["score"] / peak if peak > 0 else 0.0))
    return pd.concat(frames, ignore_index=True).drop(columns="row")


def word_explorer(cfg: ChapterConfig, rm: RunMaps) -> Any:
    """The explorer: pick a word and a learning rate; eight bar panels in two columns, theory on
    the left and the trained map it predicts on the right."""
    import mechbook.viz

    panels = list(explorer_panels(rm))

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
        lambda word, lr: word_panels(cfg, rm, word, lr),
        chart,
        controls={"word": list(rm.words), "lr": list(rm.lrs)},
        title="Each word's corpus associations and what the trained matrices rank for it",
    )


def record_all(readings: AssociationReadings, ev: dict[str, claims.Evidence]) -> dict[str, Any]:
    """Record the chapter's numbers (:func:`~mechbook.leading_terms.readings.association_numbers`)
    and its claims' verdicts; returns the records."""
    records = record_numbers(association_numbers(readings.overlaps))
    records.update(claims.record_claims(ev.values()))
    return records
