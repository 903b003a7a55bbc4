"""The paper's Pythia findings (section 5.2, Figures 6-8), each read off chapter 6's similarity
table over the window the paper reads (pure pandas and numpy, uncached; the claims are
:mod:`mechbook.pythia.claims`).

**The window.** The paper's figures read Pythia's checkpoints at steps 1 to 512: the log-spaced
ones (1, 2, 4, ..., 512) that Pythia saves before its evenly spaced ones (every 1,000 steps).
:func:`mechbook.pythia.checkpoints.scaled_schedule` gives a miniature run the same shape, the
powers of two below its spacing ``steps // n_linear`` and then evenly spaced steps, so
:func:`paper_window` is the same rule on both: the checkpoints ``1 <= step < linear_every``. On
Pythia that is steps 1 to 512 (0.36% of its 143,000 steps); on the miniature it is the same
positions of its schedule (the smoke profile's 1 to 16 of 120 steps, the cpu profile's 1 to 64 of
1,200), a larger share of a much shorter run.

**The readings**, each a number one rule decides (the claims state the rules). Every one reads
layer-level rows (``head == -1``) except the per-head ones, and compares a layer with its own
baseline: the strongest negative control at that layer (random initialisation, shuffled-token
feature; the model-free random + shared offset, which has one value for every layer). The
embedding is ``embedding`` (resid_post) and the attention is ``attention_resid_pre``, the scores
as the paper's pipeline takes them:

- :func:`embedding_match`: the smallest, over layers, of a layer's best value in the window minus
  its baseline (finding: the embedding mapping matches at all layers early in training);
- :func:`attention_match_but_first`: the smaller of the later layers' smallest such margin and the
  first layer's margin negated (finding: attention matches at all layers but the first);
- :func:`earlier_drift_first`: how much more the first layer has lost from its best value in the
  window by the window's last checkpoint than the last layer has (finding: the drift starts with
  the earlier layers);
- :func:`features_kept`: the smallest, over layers, share of a layer's margin over its baseline
  that it still holds at the window's last checkpoint (finding: the features are kept to a large
  extent);
- :func:`no_mlp_differs_first`: the first layer's mean gap, over the window, between the output
  without the MLP and the embedding, minus the largest such gap of any later layer (finding:
  without the MLP the correlations are similar except at the first layer);
- :func:`heads_learned`: per layer, the mean over the window of the head-mean similarity's gain
  over its value at the first checkpoint read (the initialisation), which :func:`earlier_heads_slower`
  compares between an early layer and later ones (finding: earlier layers learn the features more
  slowly);
- :func:`head_spread`: per layer, the mean over the window of the standard deviation across heads
  (gain over the initialisation): how far the heads have parted, which
  :func:`middle_heads_fastest` compares between Figure 7's middle layer and its other two
  (finding: layer 13 specialises its heads fastest);
- :func:`texts_agree`: the largest difference, over mappings, layers and window checkpoints,
  between two tables computed from two texts (finding: FineWeb gives very similar results).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from mechbook.pythia.analysis import LAYER_LEVEL

NEGATIVE_CONTROLS: tuple[str, ...] = ("random_init", "shuffled_tokens", "offset")
"""The controls a layer must beat (as :data:`mechbook.pythia.study.NEGATIVE_CONTROLS`)."""
EMBEDDING = "embedding"
NO_MLP = "no_mlp"
ATTENTION = "attention_resid_pre"
"""The attention scores as the paper's pipeline takes them (from resid_pre)."""
PAPER_WINDOW_STEPS = (1, 512)
"""The Pythia steps the paper's Figures 6-7 span."""
FIGURE7_LAYERS = (2, 13, 24)
"""The layers Figure 7 shows per head, counted from 1, of Pythia-1.4B's 24."""
PYTHIA_14B_LAYERS = 24


def paper_window(steps: Sequence[int], linear_every: int) -> tuple[int, ...]:
    """The checkpoints of ``steps`` that stand for Pythia's steps 1 to 512: ``1 <= step <
    linear_every``, the log-spaced ones before the evenly spaced ones (Pythia: ``linear_every``
    1,000; a miniature: ``steps // n_linear``)."""
    window = tuple(int(s) for s in sorted(steps) if 1 <= s < linear_every)
    if not window:
        raise ValueError(f"no checkpoint of {sorted(steps)} lies in 1 <= step < {linear_every}: nothing to read")
    return window


def layer_curves(table: pd.DataFrame, measure: str, mapping: str, steps: Sequence[int]) -> pd.DataFrame:
    """Layer-level similarity of one (measure, mapping): one row per layer (sorted), one column
    per step of ``steps`` (in order)."""
    rows = table[(table["measure"] == measure) & (table["mapping"] == mapping) & (table["head"] == LAYER_LEVEL)]
    grid = rows.pivot_table(index="layer", columns="step", values="similarity", aggfunc="first").sort_index()
    missing = sorted(set(steps) - set(grid.columns))
    if missing:
        raise KeyError(f"the table has no {measure}/{mapping} rows at steps {missing}")
    return grid[list(steps)]


def layer_baselines(controls: pd.DataFrame, measure: str, mapping: str, n_layers: int) -> np.ndarray:
    """(n_layers,): at each layer the strongest negative control; a control given at one layer
    only (the model-free offset) counts at every layer."""
    rows = controls[
        (controls["measure"] == measure)
        & (controls["mapping"] == mapping)
        & (controls["head"] == LAYER_LEVEL)
        & controls["control"].isin(NEGATIVE_CONTROLS)
    ]
    if rows.empty:
        raise KeyError(f"no negative control for measure {measure!r} and mapping {mapping!r}")
    base = np.full(n_layers, -np.inf)
    for _, per_control in rows.groupby("control"):
        values = per_control.set_index("layer")["similarity"]
        if len(values) == 1:
            base = np.maximum(base, float(values.iloc[0]))
        else:
            base = np.maximum(base, values.reindex(range(n_layers)).to_numpy(dtype=float))
    return base


def window_margins(
    table: pd.DataFrame, controls: pd.DataFrame, measure: str, mapping: str, window: Sequence[int]
) -> np.ndarray:
    """(n_layers,): each layer's best value in the window minus its baseline."""
    grid = layer_curves(table, measure, mapping, window)
    return grid.max(axis=1).to_numpy() - layer_baselines(controls, measure, mapping, len(grid))


def embedding_match(table: pd.DataFrame, controls: pd.DataFrame, measure: str, window: Sequence[int]) -> float:
    """The smallest margin of any layer's embedding (best in the window minus its baseline)."""
    return float(window_margins(table, controls, measure, EMBEDDING, window).min())


def attention_match_but_first(
    table: pd.DataFrame, controls: pd.DataFrame, measure: str, window: Sequence[int]
) -> float:
    """min(smallest margin of layers 1.., minus the margin of layer 0) of the attention scores:
    positive exactly when every layer but the first beats its baseline and the first does not."""
    margins = window_margins(table, controls, measure, ATTENTION, window)
    if margins.size < 2:
        raise ValueError("all layers but the first needs at least two layers")
    return float(min(margins[1:].min(), -margins[0]))


def window_drops(table: pd.DataFrame, measure: str, mapping: str, window: Sequence[int]) -> np.ndarray:
    """(n_layers,): each layer's best value in the window minus its value at the window's last
    checkpoint (how far it has drifted from its best by then)."""
    grid = layer_curves(table, measure, mapping, window)
    return (grid.max(axis=1) - grid[window[-1]]).to_numpy()


def earlier_drift_first(table: pd.DataFrame, measure: str, window: Sequence[int]) -> float:
    """The first layer's drop (:func:`window_drops`, embedding) minus the last layer's."""
    drops = window_drops(table, measure, EMBEDDING, window)
    if drops.size < 2:
        raise ValueError("comparing an earlier layer with a later one needs at least two layers")
    return float(drops[0] - drops[-1])


def features_kept(table: pd.DataFrame, controls: pd.DataFrame, measure: str, window: Sequence[int]) -> float:
    """The smallest, over layers, of (value at the window's last checkpoint minus the baseline) /
    (best value in the window minus the baseline), embedding; a layer that never beats its baseline
    keeps 0."""
    grid = layer_curves(table, measure, EMBEDDING, window)
    base = layer_baselines(controls, measure, EMBEDDING, len(grid))
    margin = grid.max(axis=1).to_numpy() - base
    end = grid[window[-1]].to_numpy() - base
    kept = np.divide(end, margin, out=np.zeros_like(margin), where=margin > 0)
    return float(kept.min())


def no_mlp_differs_first(table: pd.DataFrame, measure: str, window: Sequence[int]) -> float:
    """Per layer the mean over the window of |no-MLP - embedding|; the first layer's minus the
    largest of the later layers'."""
    gap = (
        (layer_curves(table, measure, NO_MLP, window) - layer_curves(table, measure, EMBEDDING, window))
        .abs()
        .mean(axis=1)
        .to_numpy()
    )
    if gap.size < 2:
        raise ValueError("all layers but the first needs at least two layers")
    return float(gap[0] - gap[1:].max())


def _heads(table: pd.DataFrame, measure: str, steps: Sequence[int]) -> pd.DataFrame:
    rows = table[(table["measure"] == measure) & (table["mapping"] == ATTENTION) & (table["head"] != LAYER_LEVEL)]
    rows = rows[rows["step"].isin(steps)]
    if set(rows["step"]) != set(steps):
        raise KeyError(f"the table has no per-head {measure} rows at steps {sorted(set(steps) - set(rows['step']))}")
    return rows


def heads_learned(table: pd.DataFrame, measure: str, window: Sequence[int], start: int) -> np.ndarray:
    """(n_layers,): mean over the window of (mean over heads at a step minus mean over heads at
    ``start``), attention scores per head."""
    rows = _heads(table, measure, [start, *window])
    mean = rows.groupby(["layer", "step"])["similarity"].mean().unstack("step").sort_index()
    return (mean[list(window)].sub(mean[start], axis=0)).mean(axis=1).to_numpy()


def earlier_heads_slower(
    table: pd.DataFrame, measure: str, window: Sequence[int], start: int, early: int, later: Sequence[int]
) -> float:
    """The smallest :func:`heads_learned` of the ``later`` layers minus that of the ``early``
    layer (layers counted from 0)."""
    learned = heads_learned(table, measure, window, start)
    return float(min(learned[list(later)]) - learned[early])


def head_spread(table: pd.DataFrame, measure: str, window: Sequence[int], start: int) -> np.ndarray:
    """(n_layers,): mean over the window of (standard deviation across heads at a step minus at
    ``start``): how far a layer's heads part from one another."""
    rows = _heads(table, measure, [start, *window])
    spread = rows.groupby(["layer", "step"])["similarity"].std(ddof=0).unstack("step").sort_index()
    return (spread[list(window)].sub(spread[start], axis=0)).mean(axis=1).to_numpy()


def middle_heads_fastest(
    table: pd.DataFrame, measure: str, window: Sequence[int], start: int, middle: int, others: Sequence[int]
) -> float:
    """The ``middle`` layer's :func:`head_spread` minus the largest of the ``others``' (layers
    counted from 0)."""
    spread = head_spread(table, measure, window, start)
    return float(spread[middle] - max(spread[list(others)]))


def texts_agree(a: pd.DataFrame, b: pd.DataFrame, measure: str, window: Sequence[int]) -> float:
    """The largest |a - b| over mappings, layers and window checkpoints of two similarity tables
    of the same checkpoints whose features came from two texts."""
    keys = ["mapping", "layer", "step"]
    pick = [
        t[(t["measure"] == measure) & (t["head"] == LAYER_LEVEL) & t["step"].isin(window)].set_index(keys)["similarity"]
        for t in (a, b)
    ]
    if not pick[0].index.sort_values().equals(pick[1].index.sort_values()):
        raise ValueError("the two tables do not hold the same mappings, layers and checkpoints")
    return float((pick[0] - pick[1].reindex(pick[0].index)).abs().max())
