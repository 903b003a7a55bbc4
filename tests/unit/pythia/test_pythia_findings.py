"""The paper's Pythia findings (mechbook.pythia.findings): the window on Pythia's and a miniature's
schedule, and every reading against a literal loop over a random table or a hand-built example
where the finding holds and one where it does not."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mechbook.pythia import findings as f
from mechbook.pythia.analysis import LAYER_LEVEL
from mechbook.pythia.checkpoints import PYTHIA_LINEAR_EVERY, pythia_steps, scaled_schedule

MAPPINGS = ("embedding", "no_mlp", "attention_resid_pre")


def test_the_window_is_pythias_steps_1_to_512():
    assert f.paper_window(pythia_steps(), PYTHIA_LINEAR_EVERY) == (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


@given(st.integers(1, 30), st.integers(2, 300))
def test_the_window_is_the_log_spaced_part_of_a_scaled_schedule(n_linear, every):
    steps = scaled_schedule(n_linear * every, every)
    window = f.paper_window(steps, every)
    assert window == tuple(s for s in steps if s and s & (s - 1) == 0 and s < every)
    assert window[0] == 1 and max(window) < every <= steps[-1]


def test_a_window_with_no_checkpoint_is_an_error():
    with pytest.raises(ValueError, match="nothing to read"):
        f.paper_window([0, 100, 200], 100)


def _table(values: dict[str, np.ndarray], steps, heads: np.ndarray | None = None, measure="cka") -> pd.DataFrame:
    """Layer rows from ``values[mapping]`` (layers x steps), head rows of the attention from
    ``heads`` (layers x heads x steps)."""
    rows = [
        (step, measure, mapping, layer, LAYER_LEVEL, float(grid[layer, i]))
        for mapping, grid in values.items()
        for layer in range(grid.shape[0])
        for i, step in enumerate(steps)
    ]
    if heads is not None:
        rows += [
            (step, measure, f.ATTENTION, layer, head, float(heads[layer, head, i]))
            for layer in range(heads.shape[0])
            for head in range(heads.shape[1])
            for i, step in enumerate(steps)
        ]
    return pd.DataFrame(rows, columns=["step", "measure", "mapping", "layer", "head", "similarity"])


def _controls(per_layer: dict[str, np.ndarray], offset: float, measure="cka", linear: float = 5.0) -> pd.DataFrame:
    """random_init and shuffled_tokens per layer, the offset at layer 0 only, and a linear control
    (not a negative control: it must never count)."""
    rows = []
    for mapping in MAPPINGS:
        for control, values in per_layer.items():
            rows += [(control, measure, mapping, layer, LAYER_LEVEL, float(v)) for layer, v in enumerate(values)]
        rows += [("offset", measure, mapping, 0, LAYER_LEVEL, offset), ("linear", measure, mapping, 0, -1, linear)]
    return pd.DataFrame(rows, columns=["control", "measure", "mapping", "layer", "head", "similarity"])


STEPS = [0, 1, 2, 4, 8, 20, 40]
WINDOW = (1, 2, 4, 8)


def _random_case(seed: int, n_layers: int = 3, n_heads: int = 4):
    rng = np.random.default_rng(seed)
    values = {m: rng.uniform(0, 1, (n_layers, len(STEPS))) for m in MAPPINGS}
    heads = rng.uniform(0, 1, (n_layers, n_heads, len(STEPS)))
    ctl = {"random_init": rng.uniform(0, 0.5, n_layers), "shuffled_tokens": rng.uniform(0, 0.5, n_layers)}
    offset = float(rng.uniform(0, 0.5))
    return values, heads, ctl, offset


def _literal(values, heads, ctl, offset):
    """Every reading by plain loops over layers and window steps."""
    idx = [STEPS.index(s) for s in WINDOW]
    n = values["embedding"].shape[0]
    base = [max(ctl["random_init"][l], ctl["shuffled_tokens"][l], offset) for l in range(n)]

    def best(mapping, l):
        return max(values[mapping][l, i] for i in idx)

    def end(mapping, l):
        return values[mapping][l, idx[-1]]

    margins = {m: [best(m, l) - base[l] for l in range(n)] for m in MAPPINGS}
    kept = []
    for l in range(n):
        m = margins["embedding"][l]
        kept.append((end("embedding", l) - base[l]) / m if m > 0 else 0.0)
    gap = [sum(abs(values["no_mlp"][l, i] - values["embedding"][l, i]) for i in idx) / len(idx) for l in range(n)]

    def head_gain(l, stat):
        return sum(stat(heads[l, :, i]) - stat(heads[l, :, 0]) for i in idx) / len(idx)

    learned = [head_gain(l, np.mean) for l in range(n)]
    spread = [head_gain(l, np.std) for l in range(n)]
    return {
        "embedding": min(margins["embedding"]),
        "attention": min(min(margins[f.ATTENTION][1:]), -margins[f.ATTENTION][0]),
        "drift": (best("embedding", 0) - end("embedding", 0)) - (best("embedding", n - 1) - end("embedding", n - 1)),
        "kept": min(kept),
        "no_mlp": gap[0] - max(gap[1:]),
        "slower": min(learned[1:]) - learned[0],
        "middle": spread[1] - max(spread[0], spread[2]),
    }


@pytest.mark.parametrize("seed", range(6))
def test_every_reading_matches_a_literal_loop(seed):
    values, heads, ctl, offset = _random_case(seed)
    table, controls = _table(values, STEPS, heads), _controls(ctl, offset)
    want = _literal(values, heads, ctl, offset)
    got = {
        "embedding": f.embedding_match(table, controls, "cka", WINDOW),
        "attention": f.attention_match_but_first(table, controls, "cka", WINDOW),
        "drift": f.earlier_drift_first(table, "cka", WINDOW),
        "kept": f.features_kept(table, controls, "cka", WINDOW),
        "no_mlp": f.no_mlp_differs_first(table, "cka", WINDOW),
        "slower": f.earlier_heads_slower(table, "cka", WINDOW, 0, early=0, later=[1, 2]),
        "middle": f.middle_heads_fastest(table, "cka", WINDOW, 0, middle=1, others=[0, 2]),
    }
    assert got == pytest.approx(want, abs=1e-12)


def test_steps_after_the_window_and_the_other_measure_are_never_read():
    values, heads, ctl, offset = _random_case(0)
    table, controls = _table(values, STEPS, heads), _controls(ctl, offset)
    late = table["step"] > WINDOW[-1]
    noisy = pd.concat(
        [
            table.assign(similarity=np.where(late, 99.0, table["similarity"])),
            table.assign(measure="paper", similarity=-9),
        ]
    )
    assert f.embedding_match(noisy, controls, "cka", WINDOW) == f.embedding_match(table, controls, "cka", WINDOW)
    assert f.earlier_drift_first(noisy, "cka", WINDOW) == f.earlier_drift_first(table, "cka", WINDOW)


def _grid(*rows):
    return np.array(rows, dtype=float)


def test_hand_built_findings_hold_and_fail_as_stated():
    steps, window = [0, 1, 2, 4, 100], (1, 2, 4)
    controls = _controls({"random_init": [0.2, 0.2], "shuffled_tokens": [0.1, 0.3]}, offset=0.25)
    # layer 0 peaks at 0.6 then falls to 0.4; layer 1 rises to 0.7 and stays: both above 0.25 / 0.3
    emb = _grid([0.1, 0.3, 0.6, 0.4, 0.0], [0.1, 0.2, 0.5, 0.7, 0.0])
    no_mlp = _grid([0.1, 0.1, 0.2, 0.2, 0.0], [0.1, 0.2, 0.5, 0.6, 0.0])  # gaps: layer 0 0.267, layer 1 0.033
    att = _grid([0.1, 0.2, 0.2, 0.2, 0.0], [0.1, 0.3, 0.4, 0.5, 0.0])  # layer 0 below its 0.25, layer 1 above 0.3
    table = _table({"embedding": emb, "no_mlp": no_mlp, f.ATTENTION: att}, steps)
    assert f.embedding_match(table, controls, "cka", window) == pytest.approx(min(0.6 - 0.25, 0.7 - 0.3))
    assert f.attention_match_but_first(table, controls, "cka", window) == pytest.approx(min(0.5 - 0.3, 0.25 - 0.2))
    assert f.earlier_drift_first(table, "cka", window) == pytest.approx(0.2)
    assert f.features_kept(table, controls, "cka", window) == pytest.approx((0.4 - 0.25) / (0.6 - 0.25))
    assert f.no_mlp_differs_first(table, "cka", window) == pytest.approx((0.2 + 0.4 + 0.2) / 3 - 0.1 / 3)
    # the same run with the first layer's attention above its controls: the finding fails
    att_first = _table({"embedding": emb, "no_mlp": no_mlp, f.ATTENTION: att[::-1]}, steps)
    assert f.attention_match_but_first(att_first, controls, "cka", window) < 0
    # no layer drifts: the drift reading is 0, which the rule (> 0) rejects
    flat = _table({"embedding": np.maximum.accumulate(emb, axis=1), "no_mlp": no_mlp, f.ATTENTION: att}, steps)
    assert f.earlier_drift_first(flat, "cka", window) == 0


def test_a_layer_never_above_its_controls_keeps_nothing():
    steps, window = [0, 1, 2], (1, 2)
    controls = _controls({"random_init": [0.5, 0.5], "shuffled_tokens": [0.1, 0.1]}, offset=0.0)
    table = _table({"embedding": _grid([0.1, 0.3, 0.4], [0.1, 0.9, 0.8])}, steps)
    assert f.features_kept(table, controls, "cka", window) == 0.0
    assert f.layer_baselines(controls, "cka", "embedding", 2).tolist() == [0.5, 0.5]


def test_heads_learning_faster_in_later_layers_and_a_middle_layer_that_parts_its_heads():
    steps, window = [0, 1, 2], (1, 2)
    heads = np.zeros((3, 2, 3))
    heads[0] = [[0.1, 0.1, 0.2], [0.1, 0.1, 0.2]]  # the first layer gains 0.05 on average, heads together
    heads[1] = [[0.1, 0.5, 0.9], [0.1, 0.1, 0.1]]  # the middle gains most and its heads part
    heads[2] = [[0.1, 0.3, 0.4], [0.1, 0.3, 0.4]]  # the last gains 0.25, heads together
    table = _table({}, steps, heads)
    assert f.heads_learned(table, "cka", window, 0) == pytest.approx([0.05, 0.3, 0.25])
    assert f.earlier_heads_slower(table, "cka", window, 0, early=0, later=[1, 2]) == pytest.approx(0.2)
    assert f.earlier_heads_slower(table, "cka", window, 0, early=1, later=[0, 2]) < 0
    assert f.head_spread(table, "cka", window, 0) == pytest.approx([0.0, (0.2 + 0.4) / 2, 0.0])
    assert f.middle_heads_fastest(table, "cka", window, 0, middle=1, others=[0, 2]) == pytest.approx(0.3)


def test_two_texts_agree_by_their_largest_difference():
    values, heads, _, _ = _random_case(1)
    a = _table(values, STEPS, heads)
    b = a.assign(similarity=a["similarity"] + np.where(a["step"] == 2, 0.03, 0.0))
    b.loc[(b["step"] == 40) & (b["head"] == LAYER_LEVEL), "similarity"] += 1.0  # outside the window
    assert f.texts_agree(a, b.iloc[::-1], "cka", WINDOW) == pytest.approx(0.03)
    with pytest.raises(ValueError, match="same mappings"):
        f.texts_agree(a, a[a["layer"] > 0], "cka", WINDOW)


def test_one_layer_cannot_be_compared_with_later_ones():
    table = _table({m: _grid([0.1, 0.2, 0.3]) for m in MAPPINGS}, [0, 1, 2])
    controls = _controls({"random_init": [0.0]}, offset=0.0)
    with pytest.raises(ValueError, match="at least two layers"):
        f.attention_match_but_first(table, controls, "cka", (1, 2))
    with pytest.raises(ValueError, match="at least two layers"):
        f.earlier_drift_first(table, "cka", (1, 2))
    with pytest.raises(KeyError, match="steps \\[4\\]"):
        f.layer_curves(table, "cka", "embedding", (1, 4))
