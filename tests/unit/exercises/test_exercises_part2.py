"""Part II's exercises (chapters 7-11): every check passes the library's solution and fails a
deliberately wrong one with the hint of the diagnosis that names its mistake."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.assign_add import phases
from mechbook.assign_add.patching import patched_logits
from mechbook.assign_add.task import union_accuracy
from mechbook.exercises import EXERCISES, part2, run
from mechbook.exercises.core import ROUNDOFF, WRONG_SHAPE, allclose, roundoff


def outcome(name, fn):
    return run(EXERCISES[name], fn, quiet=True)


def hint(name, fragment):
    """The hint of the diagnosis of exercise ``name`` whose text contains ``fragment`` (one only)."""
    found = [d.hint for d in EXERCISES[name].diagnoses if fragment in d.hint]
    assert len(found) == 1, found
    return found[0]


def assert_diagnosed(name, fn, fragment):
    result = outcome(name, fn)
    assert result.status == "differs", result.line
    assert result.hint == hint(name, fragment), result.line


@pytest.mark.parametrize("exercise", part2.EXERCISES, ids=lambda e: e.name)
def test_the_library_solution_passes(exercise):
    result = run(exercise, exercise.reference, quiet=True)
    assert result.status == "passed", result.line
    assert result.line.startswith(f"✓ check_{exercise.name}: passed on all")


@pytest.mark.parametrize("exercise", part2.EXERCISES, ids=lambda e: e.name)
def test_every_exercise_has_a_hint_and_a_diagnosis_and_a_stub_is_not_written(exercise):
    assert exercise.hint and exercise.diagnoses

    def stub(*args, **kwargs):
        raise NotImplementedError(f"{exercise.name}: write it, then run the check below")

    assert run(exercise, stub, quiet=True).status == "not written"


@pytest.mark.parametrize("exercise", part2.EXERCISES, ids=lambda e: e.name)
@pytest.mark.parametrize("answer", [None, (1, 2, 3)], ids=["none", "tuple"])
def test_an_answer_of_another_kind_differs_and_never_raises(exercise, answer):
    """No diagnosis fails on an answer it cannot read: the check prints its line and returns. (A
    string is refused before any diagnosis: test_exercises_answers.py.)"""
    result = run(exercise, lambda *args: answer, quiet=True)
    assert result.status == "differs", result.line
    assert result.hint in {exercise.hint} | {d.hint for d in exercise.diagnoses}


def test_the_part_holds_its_exercises_in_page_order():
    names = [e.name for e in part2.EXERCISES]
    assert names == [
        "train_pairs",
        "literal_answer",
        "union_score",
        "sharpest_rise",
        "variable_qk_block",
        "neuron_spectrum",
        "patched_logits",
        "qk2_gradient",
        "sweep_threshold",
    ]


# ---------------------------------------------------------------- chapter 7


def test_train_pairs_diagnoses():
    ref = part2.train_pairs
    assert_diagnosed("train_pairs", lambda n, f, s: ~ref(n, f, s), "held-out pairs")
    assert_diagnosed("train_pairs", lambda n, f, s: ref(n, f, s).T, "transpose")
    assert_diagnosed("train_pairs", lambda n, f, s: ref(n, f, s)[:, :-1], "wrong shape")

    def rounded(n, f, s):  # round instead of floor: one pair too many where f N² ends in .5 or more
        import random

        pairs = [(a, b) for a in range(n) for b in range(n)]
        split = np.zeros((n, n), dtype=bool)
        for a, b in random.Random(s).sample(pairs, min(round(f * n * n), n * n)):
            split[a, b] = True
        return split

    assert_diagnosed("train_pairs", rounded, "floor(fraction")


def test_train_pairs_with_numpy_randomness_gets_the_general_hint():
    def numpy_split(n, f, s):
        split = np.zeros(n * n, dtype=bool)
        split[np.random.default_rng(s).choice(n * n, math.floor(f * n * n), replace=False)] = True
        return split.reshape(n, n)

    result = outcome("train_pairs", numpy_split)
    assert result.status == "differs" and result.hint == EXERCISES["train_pairs"].hint


def _operand_values(seq, tc):
    context = [int(t) for t in seq[: tc.context_len] if t != tc.pad]
    values = dict(zip(context[0::2], context[1::2]))
    return [values.get(int(t), int(t)) for t in seq[tc.context_len + 1 : tc.context_len + 3]]


def test_literal_answer_diagnoses():
    assert_diagnosed("literal_answer", lambda seq, tc: sum(_operand_values(seq, tc)), "modulus")
    assert_diagnosed(
        "literal_answer",
        lambda seq, tc: int(seq[tc.context_len + 1] + seq[tc.context_len + 2]) % tc.modulus,
        "token id",
    )

    def pads_kept(seq, tc):  # pairs read without dropping the PADs: misaligned whenever a PAD sits inside
        context = [int(t) for t in seq[: tc.context_len]]
        values = dict(zip(context[0::2], context[1::2]))
        lhs, rhs = (int(t) for t in seq[tc.context_len + 1 : tc.context_len + 3])
        return (values.get(lhs, lhs) + values.get(rhs, rhs)) % tc.modulus

    # a PAD inside the context shifts the pairs, so the variable is not found: its token id is added
    assert_diagnosed("literal_answer", pads_kept, "token id")


def test_literal_answer_cases_ask_every_kind_of_query():
    """Constants, a variable on either side and two variables all occur, so a reader who handles
    one kind only cannot pass."""
    kinds = set()
    for case in EXERCISES["literal_answer"].cases():
        seq, tc = case.args
        kinds.add(tuple(int(t) >= tc.var0 for t in seq[tc.context_len + 1 : tc.context_len + 3]))
    assert kinds == {(False, False), (True, False), (False, True), (True, True)}


def test_union_score_diagnoses():
    assert_diagnosed("union_score", lambda acc, task: union_accuracy(acc, task, "equal"), "averaged")

    def variable_pairs_only(acc, task):
        sizes = {p: len(task.union_var_pairs(p)) for p in acc}
        return sum(acc[p] * sizes[p] for p in acc) / sum(sizes.values())

    assert_diagnosed("union_score", variable_pairs_only, "variable pairs alone")


def test_union_score_cases_separate_the_weightings():
    """Every random case weights the parts unequally, so an equal mean cannot pass by luck."""
    for case in EXERCISES["union_score"].cases():
        counts = case.args[1].union_counts()
        assert len(set(counts.values())) == 3, case.label


# ---------------------------------------------------------------- chapter 8


def test_sharpest_rise_diagnoses():
    def neighbours(steps, acc, window):
        if len(acc) < 2:
            return None, None
        k = int(np.argmax(np.diff(acc)))
        return int(steps[k + 1]), float(acc[k + 1] - acc[k])

    assert_diagnosed("sharpest_rise", neighbours, "neighbouring evaluations:")

    def strict_window(steps, acc, window):  # neighbours further apart than the window never count
        spans = [
            (acc[j] - acc[i], i, j)
            for i in range(len(acc))
            for j in range(i + 1, len(acc))
            if steps[j] - steps[i] <= window
        ]
        if not spans:
            return None, None
        rise, i, j = max(spans, key=lambda s: s[0])
        return int(steps[i + 1 + int(np.argmax(np.diff(acc[i : j + 1])))]), float(rise)

    assert_diagnosed("sharpest_rise", strict_window, "always form a span")

    def dated_by_span_end(steps, acc, window):
        step, rise = phases.sharpest_rise(steps, acc, window)
        if rise is None:
            return step, rise
        # the end of the first span with that rise, not its steepest interval
        for i in range(len(acc)):
            for j in range(i + 1, len(acc)):
                if acc[j] - acc[i] == rise and (j == i + 1 or steps[j] - steps[i] <= window):
                    return int(steps[j]), rise
        return step, rise

    assert_diagnosed("sharpest_rise", dated_by_span_end, "not its date")


# ---------------------------------------------------------------- chapter 9


def _copies(model, task_cfg):
    E_var = model.embed.W_E.detach()[task_cfg.var0 : task_cfg.var0 + task_cfg.n_vars]
    layer1 = model.blocks[0].attn
    return E_var, E_var @ layer1.W_V[0].detach() @ layer1.W_O[0].detach()


def _qk(model, layer, scaled=True):
    attn = model.blocks[layer].attn
    W_Q, W_K = attn.W_Q[0].detach(), attn.W_K[0].detach()
    return W_Q @ W_K.T / (W_Q.shape[1] ** 0.5 if scaled else 1.0)


def test_variable_qk_block_diagnoses():
    def keys_first(model, cfg):
        _, U = _copies(model, cfg)
        return (U @ _qk(model, 1).T @ U.T).numpy()

    def unscaled(model, cfg):
        _, U = _copies(model, cfg)
        return (U @ _qk(model, 1, scaled=False) @ U.T).numpy()

    def embeddings(model, cfg):
        E_var, _ = _copies(model, cfg)
        return (E_var @ _qk(model, 1) @ E_var.T).numpy()

    def layer_one(model, cfg):
        _, U = _copies(model, cfg)
        return (U @ _qk(model, 0) @ U.T).numpy()

    assert_diagnosed("variable_qk_block", keys_first, "transpose")
    assert_diagnosed("variable_qk_block", unscaled, "sqrt(d_head)")
    assert_diagnosed("variable_qk_block", embeddings, "embeddings")
    assert_diagnosed("variable_qk_block", layer_one, "layer 1's")
    assert_diagnosed("variable_qk_block", lambda model, cfg: _qk(model, 1).numpy(), "wrong shape")


def _spectrum_parts(grid_map):
    n = grid_map.shape[0]
    ks = np.arange(1, (n - 1) // 2 + 1)
    angles = 2 * np.pi * np.outer(np.arange(n), ks) / n
    cos, sin = np.sqrt(2 / n) * np.cos(angles), np.sqrt(2 / n) * np.sin(angles)
    centred = grid_map - grid_map.mean()
    parts = [n * ((m @ cos) ** 2 + (m @ sin) ** 2) for m in (centred.mean(axis=1), centred.mean(axis=0))]
    return parts, (centred**2).sum(), (grid_map**2).sum()


def test_neuron_spectrum_diagnoses():
    def n_only(grid_map):
        (n_part, _), total, _ = _spectrum_parts(grid_map)
        return n_part / total if total > 0 else np.zeros_like(n_part)

    assert_diagnosed("neuron_spectrum", n_only, "one operand")

    def uncentred(grid_map):
        (n_part, m_part), _, raw = _spectrum_parts(grid_map)
        return (n_part + m_part) / raw if raw > 0 else np.zeros_like(n_part)

    assert_diagnosed("neuron_spectrum", uncentred, "subtract the map's mean")
    assert_diagnosed("neuron_spectrum", lambda g: np.concatenate([[0.0], part2.neuron_spectrum(g)]), "wrong shape")

    def unnormalised_basis(grid_map):  # cos and sin without sqrt(2/N): every entry N/2 times too large
        (n_part, m_part), total, _ = _spectrum_parts(grid_map)
        return (n_part + m_part) / total * grid_map.shape[0] / 2 if total > 0 else np.zeros_like(n_part)

    assert_diagnosed("neuron_spectrum", unnormalised_basis, "constant factor")


@settings(max_examples=25, deadline=None)
@given(st.floats(0.05, 20).filter(lambda c: abs(c - 1) > 1e-2 and abs(c - 1 / 3) > 1e-6))
def test_a_spectrum_off_by_any_constant_factor_is_named(c):
    """Any factor but one: on the first case (cos + 1, variance 1/2, squared mean 1) a map left
    uncentred gives exactly 1/3 of the answer, so a factor of 1/3 there is read, rightly, as the
    centring mistake (hypothesis found it)."""
    assert_diagnosed("neuron_spectrum", lambda g: c * part2.neuron_spectrum(g), "constant factor")


def test_patched_logits_diagnoses():
    assert_diagnosed("patched_logits", lambda model, clean, source, pos: model(clean, last_only=True), "clean run")
    assert_diagnosed("patched_logits", lambda model, clean, source, pos: model(source, last_only=True), "source run")
    # patching the variable before the value changes nothing: the two causal runs agree up to the value
    assert_diagnosed(
        "patched_logits", lambda model, clean, source, pos: patched_logits(model, clean, source, pos - 1), "clean run"
    )
    assert_diagnosed(
        "patched_logits", lambda model, clean, source, pos: patched_logits(model, clean, source, pos + 1), "after"
    )
    # patching the embedding of the value is running the source
    assert_diagnosed(
        "patched_logits",
        lambda model, clean, source, pos: patched_logits(model, clean, source, pos, "blocks.0.hook_resid_pre"),
        "source run",
    )

    def every_position(model, clean, source, pos):
        return patched_logits(model, clean, source, pos)[:, None].expand(-1, clean.shape[1], -1)

    result = outcome("patched_logits", every_position)
    assert result.status == "differs" and result.hint == WRONG_SHAPE.hint


def _rounded_elsewhere(logits: torch.Tensor) -> torch.Tensor:
    """``logits`` as another CPU's kernels may give them: each entry moved by a few float32 ulps of
    the tensor's largest entry (what summing in another order does), so entries near zero move by
    far more than their own relative precision."""
    scale = logits.abs().max()
    noise = torch.randn(logits.shape, generator=torch.Generator().manual_seed(0))
    return logits + 4 * torch.finfo(torch.float32).eps * scale * noise


def test_patched_logits_diagnoses_survive_another_cpus_rounding():
    """An answer that is the source run's logits, computed along a path that rounds otherwise (an
    Intel CPU's AMX kernels, say), is still named as the source run, not given the general hint."""
    assert_diagnosed(
        "patched_logits",
        lambda model, clean, source, pos: _rounded_elsewhere(model(source, last_only=True)),
        "source run",
    )
    assert_diagnosed(
        "patched_logits",
        lambda model, clean, source, pos: _rounded_elsewhere(model(clean, last_only=True)),
        "clean run",
    )


def test_roundoff_tolerance_is_relative_to_the_largest_entry_and_still_fails_a_mistake():
    big = torch.tensor([3857.0, -2000.0, 1e-3], dtype=torch.float64)
    near_cancellation = big + torch.tensor([0.0, 0.0, 1e-9])  # 1e-6 relative to its own entry
    assert allclose(near_cancellation, big)
    assert not allclose(big * 1.001, big)
    assert not allclose(big.flip(0), big)
    as_float32 = big.float() + torch.tensor([0.0, 0.0, 1e-3])  # float32 rounding of a 3857-sized sum
    assert allclose(as_float32, big.float()) and not allclose(big.float() * 1.001, big.float())
    assert roundoff(big, 1.0) == ROUNDOFF["float64"] and roundoff(big, big.float()) == ROUNDOFF["float32"]
    assert roundoff(big.to(torch.bfloat16)) == ROUNDOFF["bfloat16"]


def test_patching_cases_move_the_logits():
    """On every case patching changes the answer's logits, so doing nothing cannot pass."""
    for case in EXERCISES["patched_logits"].cases():
        model, clean, source, pos = case.args
        with torch.no_grad():
            assert not torch.allclose(patched_logits(model, clean, source, pos), model(clean, last_only=True))


# ---------------------------------------------------------------- chapter 10


def test_qk2_gradient_diagnoses():
    ref = part2.qk2_gradient
    assert_diagnosed("qk2_gradient", lambda m, t, y: -ref(m, t, y), "wrong sign")
    assert_diagnosed("qk2_gradient", lambda m, t, y: ref(m, t, y).T, "transpose")
    assert_diagnosed("qk2_gradient", lambda m, t, y: len(y) * ref(m, t, y), "mean cross-entropy")
    assert_diagnosed("qk2_gradient", lambda m, t, y: ref(m, t, y) / math.sqrt(m.cfg.d_head), "1/sqrt(d_head)")
    assert_diagnosed("qk2_gradient", lambda m, t, y: ref(m, t, y)[:-1], "wrong shape")


def test_qk2_gradient_check_accepts_round_off_only():
    """The check's tolerance admits float32 round-off (another summation order) and no more."""
    exercise = EXERCISES["qk2_gradient"]
    case = exercise.cases()[1]
    expected = exercise.reference(*case.args)
    scale = expected.abs().max()
    assert exercise.close(expected + 1e-7 * scale, expected)
    assert not exercise.close(expected + 1e-3 * scale * torch.eye(len(expected)), expected)


# ---------------------------------------------------------------- chapter 11


def test_sweep_threshold_diagnoses():
    def next_point(values, scores, level):
        above = np.nonzero(np.asarray(scores) >= level)[0]
        return float(values[above[0]]) if len(above) else math.nan

    assert_diagnosed("sweep_threshold", next_point, "interpolate linearly")

    def strictly_above(values, scores, level):
        return part2.sweep_threshold(values, scores, float(np.nextafter(level, 2.0)))

    assert_diagnosed("sweep_threshold", strictly_above, ">=")

    def zero_for_nan(values, scores, level):
        found = part2.sweep_threshold(values, scores, level)
        return 0.0 if math.isnan(found) else found

    assert_diagnosed("sweep_threshold", zero_for_nan, "return math.nan")


def test_sweep_threshold_none_reads_as_not_reached_but_not_as_a_value():
    def none_for_nan(values, scores, level):
        found = part2.sweep_threshold(values, scores, level)
        return None if math.isnan(found) else found

    assert outcome("sweep_threshold", none_for_nan).status == "passed"
    assert_diagnosed("sweep_threshold", lambda v, s, level: None, "yet you returned NaN")
