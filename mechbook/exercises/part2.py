"""Part II's exercises (chapters 7-11): one :class:`~mechbook.exercises.core.Exercise` each.

- chapter 7: the held-out split (:func:`train_pairs`), a sequence read literally
  (``literal_answer``) and the union score (``union_score``);
- chapter 8: the phase-2 rule on a curve (``sharpest_rise``);
- chapter 9: layer 2's query-key form on the variable directions (``variable_qk_block``), a
  neuron's Fourier spectrum over ``(n, m)`` (:func:`neuron_spectrum`) and an activation-patching
  hook (``patched_logits``);
- chapter 10: the layer-2 query-key gradient at uniform attention (:func:`qk2_gradient`);
- chapter 11: a threshold read off a sweep (:func:`sweep_threshold`).

Every reference is the library's own function, or a thin adapter to it here. The model-based
checks run on tiny randomly initialised models of a tiny task (:func:`tiny_task`,
:func:`tiny_model`): the quantities are defined for any weights, so no trained model is needed.
:mod:`mechbook.assign_add.theory`, ``sweeps`` and ``model`` import TransformerLens (seconds), so
the adapters to them import it when a check runs, not when a Part I chapter imports the checks.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from mechbook.assign_add import circuits, fourier, phases
from mechbook.assign_add.patching import PATCH_HOOK, one_var_patch_pairs, patched_logits
from mechbook.assign_add.pools import literal_answer
from mechbook.assign_add.task import GENERALISATION_UNION, Task, TaskConfig, union_accuracy
from mechbook.exercises.core import WRONG_SHAPE, Case, Diagnosis, Exercise, allclose, as_array, rng_cases, transposed


def _diagnosis(matches: Callable[[Any, Any, Case], bool], hint: str) -> Diagnosis:
    """A :class:`Diagnosis` whose predicate answers False where it cannot read the reader's answer
    (a mistake it does not name), so a check never raises from its diagnoses."""

    def safe(yours: Any, expected: Any, case: Case) -> bool:
        try:
            return bool(matches(yours, expected, case))
        except Exception:  # an answer of another kind is not this mistake
            return False

    return Diagnosis(safe, hint)


def _same(yours: Any, other: Any, expected: Any) -> bool:
    """The reader's answer is ``other`` (a wrong variant) and not the expected one."""
    return allclose(yours, other) and not allclose(yours, expected)


def _factor(yours: Any, expected: Any) -> float | None:
    """The constant ``c`` with ``yours == c * expected`` up to round-off relative to the largest
    entry (None when there is none, or it is 1)."""
    try:
        a, b = as_array(yours), as_array(expected)
    except (TypeError, ValueError):
        return None
    scale = float(np.abs(b).max(initial=0))
    if a.shape != b.shape or not np.all(np.isfinite(a)) or scale == 0:
        return None
    c = float(a.ravel() @ b.ravel() / (b.ravel() @ b.ravel()))
    close = np.allclose(a, c * b, rtol=1e-4, atol=1e-5 * abs(c) * scale)
    return c if close and not math.isclose(c, 1.0, rel_tol=1e-4) else None


def _scaled_by(factor: Callable[[Case], float]) -> Callable[[Any, Any, Case], bool]:
    """A predicate: the reader's answer is ``factor(case)`` times the expected one."""
    return lambda y, e, c: math.isclose(_factor(y, e) or 0.0, factor(c), rel_tol=1e-3)


def _is_nan(value: Any) -> bool:
    """Whether the answer is one NaN (``None`` reads as NaN)."""
    try:
        a = as_array(value)
    except (TypeError, ValueError):
        return False
    return a.size == 1 and bool(np.isnan(a).all())


def _shape_ok(value: Any, length: int) -> bool:
    """Whether ``value`` reads as a flat array of ``length`` numbers."""
    try:
        return as_array(value).shape == (length,)
    except (TypeError, ValueError):
        return False


def _close_float32(yours: Any, expected: Any) -> bool:
    """Equal up to float32 round-off relative to the largest entry (a reader's products and sums
    may run in another order than the library's, e.g. autograd against the page's formula)."""
    scale = float(np.abs(as_array(expected)).max(initial=0))
    return allclose(yours, expected, rtol=1e-4, atol=1e-5 * scale)


def tiny_task(modulus: int = 7, n_vars: int = 4, fraction: float = 0.7, seed: int = 42) -> Task:
    """A small task of the chapter 7 kind: ``modulus`` numbers, ``n_vars`` variables (the first
    never on the right, the last never on the left), 8 tokens a sequence, at most 2 assignments."""
    letters = string.ascii_lowercase[:n_vars]
    return Task(
        TaskConfig(
            modulus=modulus,
            n_vars=n_vars,
            seq_len=8,
            max_assignments=2,
            train_pair_fraction=fraction,
            split_seed=seed,
            no_right=(letters[0],),
            no_left=(letters[-1],),
        )
    )


def tiny_model(task: Task, seed: int, width: int = 16) -> torch.nn.Module:
    """A randomly initialised Assign-and-Add model (seeded) of width ``width`` for ``task``."""
    from mechbook.assign_add.model import AssignAddModel, ModelConfig

    cfg = task.cfg
    return AssignAddModel(
        ModelConfig(
            d_vocab=cfg.d_vocab,
            d_out=cfg.modulus,
            n_ctx=cfg.seq_len,
            d_model=width,
            d_head=width,
            d_mlp=2 * width,
            seed=seed,
        )
    )


# ---------------------------------------------------------------- chapter 7: the split


def train_pairs(modulus: int, fraction: float, seed: int) -> np.ndarray:
    """Chapter 7's split as a function of its three numbers: ``Task.train_pairs``, the (N, N)
    bool matrix of the ordered pairs ``(n1, n2)`` used for training."""
    return Task(TaskConfig(modulus=modulus, train_pair_fraction=fraction, split_seed=seed)).train_pairs


def _split_case(rng: np.random.Generator) -> Case:
    n = int(rng.integers(3, 16))
    count = int(rng.integers(1, n * n + 1))
    # fraction * N² sits half a pair above an integer, so floor is not a matter of round-off
    fraction = 1.0 if count == n * n else round((count + 0.5) / n**2, 4)
    seed = int(rng.integers(0, 1000))
    return Case(f"N = {n}, fraction {fraction}, seed {seed}", (n, fraction, seed))


TRAIN_PAIRS = Exercise(
    name="train_pairs",
    reference=train_pairs,
    cases=rng_cases(
        _split_case,
        8,
        seed=7,
        edges=(
            Case("N = 2, fraction 1.0, seed 0 (every pair trains)", (2, 1.0, 0)),
            Case("N = 5, fraction 0.5, seed 3 (12.5 pairs: floor)", (5, 0.5, 3)),
            Case("the paper's split: N = 59, fraction 0.7, seed 42", (59, 0.7, 42)),
        ),
    ),
    hint=(
        "list the N² ordered pairs row-major ((0, 0), (0, 1), ..., n1 outer), draw "
        "random.Random(seed).sample(pairs, k) with k = floor(fraction * N²), and mark those pairs True"
    ),
    diagnoses=(
        _diagnosis(
            lambda y, e, c: _same(y, ~e, e), "you marked the held-out pairs: True is where a pair is used for training"
        ),
        _diagnosis(
            transposed,
            "your matrix is the transpose: list the pairs row-major, n1 outer and n2 inner, and put (n1, n2) at row n1",
        ),
        WRONG_SHAPE,
        _diagnosis(
            lambda y, e, c: int(as_array(y).sum()) != int(e.sum()),
            "you chose the wrong number of training pairs: take floor(fraction * N²) of them",
        ),
    ),
)


# ---------------------------------------------------------------- chapter 7: reading a sequence


def _token_ids_added(seq: np.ndarray, tc: TaskConfig) -> int:
    """The query's two token ids added as if they were numbers (a mistake the check names)."""
    return (int(seq[tc.context_len + 1]) + int(seq[tc.context_len + 2])) % tc.modulus


def _sequence_case(task: Task, seq: np.ndarray) -> Case:
    return Case(f"`{task.raw(seq)}` (N = {task.cfg.modulus})", (seq, task.cfg))


def _sequence_cases() -> list[Case]:
    paper = Task()
    page = np.array([paper.cfg.pad] * 6 + [64, 1, 63, 17, 62, 42] + [paper.cfg.plus, 63, 19, paper.cfg.eq])
    cases = [_sequence_case(paper, page)]
    for task, seed in ((paper, 0), (tiny_task(), 1), (tiny_task(11, 6), 2)):
        pools = task.eval_pools(2, seed)
        cases += [_sequence_case(task, tokens[0]) for tokens, _ in pools.values()]
    return cases


LITERAL_ANSWER = Exercise(
    name="literal_answer",
    reference=literal_answer,
    cases=_sequence_cases,
    hint=(
        "drop the PADs of the context (the first seq_len - 4 tokens) and read the rest as pairs "
        "(variable token, value); an operand at positions context_len + 1 and + 2 is a number itself when it is "
        "below N, else the value its variable was assigned; add the two modulo N"
    ),
    diagnoses=(
        _diagnosis(
            lambda y, e, c: int(y) != e and int(y) % c.args[1].modulus == e,
            "you forgot the modulus: the answer is the sum mod N",
        ),
        _diagnosis(
            lambda y, e, c: _same(y, _token_ids_added(*c.args), e),
            "a variable operand stands for the value it is assigned in the context (without its PADs the context "
            "reads variable, value, variable, value, ...): look it up instead of adding its token id",
        ),
    ),
)


# ---------------------------------------------------------------- chapter 7: the union score


def _variable_pair_weights(accuracies: dict[str, float], task: Task) -> float:
    """The union score weighted by each part's variable pairs alone (a mistake the check names)."""
    sizes = {part: len(task.union_var_pairs(part)) for part in GENERALISATION_UNION}
    return sum(accuracies[p] * sizes[p] for p in GENERALISATION_UNION) / sum(sizes.values())


def _union_case(rng: np.random.Generator) -> Case:
    modulus = int(rng.choice([5, 7, 11, 13]))
    n_vars = int(rng.integers(3, 7))
    fraction = round(float(rng.uniform(0.2, 0.9)), 2)
    task = tiny_task(modulus, n_vars, fraction)
    accuracies = {p: round(float(a), 3) for p, a in zip(GENERALISATION_UNION, rng.uniform(0, 1, 3))}
    return Case(f"N = {modulus}, {n_vars} variables, fraction {fraction}, accuracies {accuracies}", (accuracies, task))


def _union_edges() -> tuple[Case, ...]:
    task = Task()
    one = dict.fromkeys(GENERALISATION_UNION, 0.0) | {"2var_misplaced_both": 1.0}
    return (
        Case("the paper's task, every part 0.5", (dict.fromkeys(GENERALISATION_UNION, 0.5), task)),
        Case("the paper's task, only 2var_misplaced_both right", (one, task)),
    )


def _union_cases() -> list[Case]:
    return [*_union_edges(), *rng_cases(_union_case, 8, seed=11)()]


UNION_SCORE = Exercise(
    name="union_score",
    reference=union_accuracy,
    cases=_union_cases,
    hint=(
        "weight each part's accuracy by its number of sequences in the enumerated union: its number pairs "
        "(held-out ones for 2var_heldout, training ones for the misplaced parts) times its variable pairs "
        "(task.union_var_pairs(part)); divide by the total"
    ),
    diagnoses=(
        _diagnosis(
            lambda y, e, c: _same(y, union_accuracy(*c.args, weighting="equal"), e),
            "you averaged the three parts equally (the book's earlier score): weight each by its size in the union",
        ),
        _diagnosis(
            lambda y, e, c: _same(y, _variable_pair_weights(*c.args), e),
            "you weighted by the variable pairs alone: a part's size is its number pairs times its variable pairs",
        ),
    ),
)


# ---------------------------------------------------------------- chapter 8: the phase-2 rule


def _neighbour_rise(steps: np.ndarray, acc: np.ndarray) -> tuple[int, float]:
    """The largest rise between two neighbouring evaluations (a mistake the check names)."""
    k = int(np.argmax(np.diff(acc)))
    return int(steps[k + 1]), float(acc[k + 1] - acc[k])


def _curve_case(rng: np.random.Generator) -> Case:
    n = int(rng.integers(6, 30))
    steps = np.cumsum(rng.choice([50, 100, 200], size=n))
    jump_at = rng.uniform(steps[0], steps[-1])
    climb = np.linspace(0, rng.uniform(0, 0.4), n)
    acc = np.clip(climb + 0.5 / (1 + np.exp(-(steps - jump_at) / 60)) + rng.normal(0, 0.03, n), 0, 1)
    window = int(rng.choice([200, 500, 1000]))
    return Case(f"{n} evaluations to step {steps[-1]}, window {window}", (steps, acc.round(3), window))


SHARPEST_RISE = Exercise(
    name="sharpest_rise",
    reference=phases.sharpest_rise,
    cases=rng_cases(
        _curve_case,
        10,
        seed=8,
        edges=(
            Case("one evaluation", (np.array([100]), np.array([0.2]), 500)),
            Case("a flat curve", (np.arange(100, 600, 100), np.full(5, 0.3), 500)),
            Case(
                "a steady climb, then a steeper stretch",
                (np.arange(100, 1100, 100), np.array([0.0, 0.1, 0.2, 0.3, 0.35, 0.45, 0.6, 0.75, 0.8, 0.85]), 300),
            ),
            Case(
                "evaluations further apart than the window",
                (np.array([0, 1000, 2000, 2100]), np.array([0.1, 0.6, 0.65, 0.7]), 500),
            ),
        ),
    ),
    hint=(
        "over every span (i, j), i < j, with steps[j] - steps[i] <= window (neighbouring evaluations always "
        "count), keep the first largest rise acc[j] - acc[i]; date it by the evaluation that ends the steepest "
        "interval inside the span; (None, None) with fewer than two evaluations"
    ),
    diagnoses=(
        _diagnosis(
            lambda y, e, c: _same(y, _neighbour_rise(*c.args[:2]), e),
            "you took the largest rise between two neighbouring evaluations: measure the rise over any span of "
            "up to `window` steps (that is what tells a jump from a steady climb)",
        ),
        _diagnosis(
            lambda y, e, c: c.label == "evaluations further apart than the window",
            "two neighbouring evaluations always form a span, even when they are further apart than the window",
        ),
        _diagnosis(
            lambda y, e, c: _shape_ok(y, 2) and allclose(as_array(y)[1], e[1]),
            "the rise is right but not its date: date it by the evaluation that ends the steepest interval "
            "(largest acc[k] - acc[k - 1]) inside the span",
        ),
    ),
)


# ---------------------------------------------------------------- chapter 9: the variable block


def _variable_block(model: torch.nn.Module, task_cfg: TaskConfig, embedded: bool, layer: int) -> np.ndarray:
    """``X QK_layer X^T`` with ``X`` the variables' embeddings (``embedded``) or their copies
    ``U = E_var OV1``: the wrong variants the check names (``False, 1`` is the right one)."""
    X = circuits.variable_directions(model, task_cfg)
    if embedded:
        X = model.embed.W_E.detach()[task_cfg.var0 : task_cfg.var0 + task_cfg.n_vars]
    return (X @ circuits.qk(model, layer) @ X.T).numpy()


def _block_case(rng: np.random.Generator) -> Case:
    seed = int(rng.integers(0, 10_000))
    task = tiny_task(int(rng.choice([5, 7])), int(rng.integers(3, 7)))
    return Case(
        f"a random model (seed {seed}, width 16), {task.cfg.n_vars} variables",
        (tiny_model(task, seed), task.cfg),
    )


def _block_cases() -> list[Case]:
    task = tiny_task(5, 2)
    two = Case("a random model (seed 0, width 16), two variables", (tiny_model(task, 0), task.cfg))
    return [two, *rng_cases(_block_case, 4, seed=14)()]


VARIABLE_QK_BLOCK = Exercise(
    name="variable_qk_block",
    reference=circuits.variable_qk_block,
    cases=_block_cases,
    close=_close_float32,
    hint=(
        "U = E_var W_V¹ W_O¹ (rows: the variables' embeddings, model.embed.W_E[var0 : var0 + n_vars], times "
        "layer 1's value-output map, blocks[0].attn.W_V[0] @ blocks[0].attn.W_O[0]); then U QK₂ Uᵀ with "
        "QK₂ = W_Q W_Kᵀ / sqrt(d_head) of blocks[1]"
    ),
    diagnoses=(
        _diagnosis(
            transposed,
            "your block is the transpose: rows are the query's variable, so it is U W_Q W_Kᵀ Uᵀ (not W_K W_Qᵀ)",
        ),
        _diagnosis(
            _scaled_by(lambda c: math.sqrt(c.args[0].cfg.d_head)),
            "divide by sqrt(d_head): the scores are q·k / sqrt(d_head), so QK₂ carries the scale",
        ),
        _diagnosis(
            lambda y, e, c: _same(y, _variable_block(*c.args, embedded=True, layer=1), e),
            "you used the variables' embeddings: layer 2 sees what layer 1 copies, U = E_var W_V¹ W_O¹",
        ),
        _diagnosis(
            lambda y, e, c: _same(y, _variable_block(*c.args, embedded=False, layer=0), e),
            "that is layer 1's query-key form: take W_Q and W_K of blocks[1]",
        ),
        WRONG_SHAPE,
    ),
)


# ---------------------------------------------------------------- chapter 9: a neuron's spectrum


def neuron_spectrum(grid_map: np.ndarray) -> np.ndarray:
    """The variance of one neuron's ``(N, N)`` map that the two-cosine form explains at each
    frequency ``k = 1 .. (N-1)/2``: row 0 of :func:`mechbook.assign_add.fourier.frequency_fve`."""
    return fourier.frequency_fve(grid_map)[0][0]


def _partial_spectra(grid_map: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Wrong variants the check names: the n part alone, the m part alone, and the full spectrum
    over the uncentred map's squared norm."""
    coef_n, coef_m, total = fourier.marginal_coefficients(grid_map)
    energy_n = coef_n[0, 0::2] ** 2 + coef_n[0, 1::2] ** 2
    energy_m = coef_m[0, 0::2] ** 2 + coef_m[0, 1::2] ** 2
    raw = float((np.asarray(grid_map, dtype=np.float64) ** 2).sum())
    safe = total[0] if total[0] > 0 else 1.0
    return energy_n / safe, energy_m / safe, (energy_n + energy_m) / (raw if raw > 0 else 1.0)


def _map_case(rng: np.random.Generator) -> Case:
    n = int(rng.choice([5, 7, 11, 13]))
    k = int(rng.integers(1, (n - 1) // 2 + 1))
    grid = 2 * math.pi * k * np.arange(n) / n
    a, b, alpha, beta = rng.uniform(0.5, 2), rng.uniform(0.5, 2), rng.uniform(-3, 3), rng.uniform(-3, 3)
    offset = rng.uniform(-2, 2)
    noise = rng.normal(0, 0.3, (n, n))
    grid_map = offset + a * np.cos(grid + alpha)[:, None] + b * np.cos(grid + beta)[None, :] + noise
    return Case(f"N = {n}, two cosines at k = {k} plus noise, mean {offset:.2f}", (grid_map,))


def _spectrum_edges() -> tuple[Case, ...]:
    grid = 2 * math.pi * np.arange(7) / 7
    return (
        Case("N = 3, a map of zeros", (np.zeros((3, 3)),)),
        Case("N = 7, cos(2πn/7) + 1 (n only)", (np.cos(grid)[:, None] + np.ones((7, 7)),)),
        Case("N = 7, cos(4πn/7)·cos(4πm/7) (a product)", (np.outer(np.cos(2 * grid), np.cos(2 * grid)),)),
    )


def _spectrum_cases() -> list[Case]:
    return [*_spectrum_edges(), *rng_cases(_map_case, 8, seed=9)()]


NEURON_SPECTRUM = Exercise(
    name="neuron_spectrum",
    reference=neuron_spectrum,
    cases=_spectrum_cases,
    hint=(
        "centre the map, project its row means and its column means onto cos and sin(2πkn/N) normalised to "
        "unit length on Z_N; at each k add the four squared coefficients (times N: each mean stands for N "
        "entries) and divide by the centred map's squared norm; a constant map explains nothing (0)"
    ),
    diagnoses=(
        _diagnosis(
            lambda y, e, c: _same(y, _partial_spectra(*c.args)[0], e) or _same(y, _partial_spectra(*c.args)[1], e),
            "you kept one operand's cosines only: the two-cosine form has a term in n and one in m, add both",
        ),
        _diagnosis(
            lambda y, e, c: _same(y, _partial_spectra(*c.args)[2], e),
            "subtract the map's mean before taking its squared norm: the variance is that of the centred map",
        ),
        WRONG_SHAPE,
        _diagnosis(
            lambda y, e, c: _factor(y, e) is not None,
            "your spectrum is off by a constant factor: use cos and sin of unit norm on the grid (sqrt(2/N) "
            "cos(2πkn/N)) and remember each row mean stands for N entries",
        ),
    ),
)


# ---------------------------------------------------------------- chapter 9: the patching hook


def _patch_case(rng: np.random.Generator) -> Case:
    seed = int(rng.integers(0, 10_000))
    task = tiny_task(int(rng.choice([5, 7])), int(rng.integers(3, 6)))
    model = tiny_model(task, seed)
    n = int(rng.integers(2, 6))
    pairs = one_var_patch_pairs(task, n, seed)
    return Case(
        f"a random model (seed {seed}, width 16), {n} 1-var sequences, patching the queried value",
        (model, pairs.clean, pairs.source, pairs.value_pos),
    )


def _patch_edges() -> tuple[Case, ...]:
    task = tiny_task()
    model = tiny_model(task, 0)
    pairs = one_var_patch_pairs(task, 3, 1)
    last = torch.full((3,), task.cfg.seq_len - 1)
    return (
        Case("one sequence", (model, pairs.clean[:1], pairs.source[:1], pairs.value_pos[:1])),
        Case("patching '=' itself", (model, pairs.clean, pairs.source, last)),
    )


def _patch_cases() -> list[Case]:
    return [*_patch_edges(), *rng_cases(_patch_case, 4, seed=10)()]


def _run_logits(model: torch.nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(tokens, last_only=True)


def _patched_after(yours: Any, expected: Any, case: Case) -> bool:
    """The reader patched one position too far right (where there is one)."""
    model, clean, source, positions = case.args
    if int(positions.max()) + 1 >= clean.shape[1]:
        return False
    return _same(yours, patched_logits(model, clean, source, positions + 1), expected)


PATCHED_LOGITS = Exercise(
    name="patched_logits",
    reference=patched_logits,
    cases=_patch_cases,
    hint=(
        f"run the source with model.run_with_cache and take its {PATCH_HOOK!r} activation at positions[b] of "
        "row b; then model.run_with_hooks(clean, fwd_hooks=[(that name, hook)]) with a hook that copies those "
        "vectors into the clean activation at the same places and returns it; keep the logits at '=' ([:, -1])"
    ),
    diagnoses=(
        WRONG_SHAPE,
        _diagnosis(
            lambda y, e, c: _same(y, _run_logits(c.args[0], c.args[1]), e),
            "these are the clean run's logits: nothing changed. Either the hook does not write the source's "
            "vectors into the activation it receives (and return it), or it writes them where the two runs agree: "
            "before the changed value (its variable) the causal runs are identical; patch positions[b] itself",
        ),
        _diagnosis(
            lambda y, e, c: _same(y, _run_logits(c.args[0], c.args[2]), e),
            "these are the source run's logits: you replaced every position, or patched the embeddings (before "
            f"layer 1, the same as running the source); patch {PATCH_HOOK!r} at positions[b] of row b only",
        ),
        _diagnosis(
            _patched_after,
            "you patched the position after the value: patch positions[b] itself",
        ),
    ),
)


# ---------------------------------------------------------------- chapter 10: the QK₂ gradient


def qk2_gradient(model: torch.nn.Module, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``dL/dM`` at ``M = 0`` (uniform layer-2 attention) on a batch: chapter 10's
    :func:`mechbook.assign_add.theory.qk2_gradient` at its default ``M``."""
    from mechbook.assign_add import theory

    return theory.qk2_gradient(model, tokens, labels)


def _gradient_case(rng: np.random.Generator) -> Case:
    seed = int(rng.integers(0, 10_000))
    task = tiny_task(int(rng.choice([5, 7])), int(rng.integers(3, 6)))
    tokens, labels = task.sample(int(rng.integers(2, 9)), rng)
    return Case(
        f"a random model (seed {seed}, width 16), {len(labels)} training sequences",
        (tiny_model(task, seed), torch.from_numpy(tokens), torch.from_numpy(labels)),
    )


def _gradient_edges() -> tuple[Case, ...]:
    task = tiny_task()
    tokens, labels = task.sample(1, np.random.default_rng(0))
    return (Case("one sequence", (tiny_model(task, 0), torch.from_numpy(tokens), torch.from_numpy(labels))),)


def _gradient_cases() -> list[Case]:
    return [*_gradient_edges(), *rng_cases(_gradient_case, 4, seed=12)()]


QK2_GRADIENT = Exercise(
    name="qk2_gradient",
    reference=qk2_gradient,
    cases=_gradient_cases,
    close=_close_float32,
    hint=(
        "make M = torch.zeros(d_model, d_model, requires_grad=True); keep x at 'blocks.1.hook_resid_pre' with a "
        "hook, replace the scores at 'blocks.1.attn.hook_attn_scores' by x_q M x_kᵀ (the query at '=', "
        "run with last_only=True), take the mean cross-entropy at '=' and torch.autograd.grad it with respect to M"
    ),
    diagnoses=(
        _diagnosis(
            _scaled_by(lambda c: -1.0),
            "wrong sign: -dL/dM is the descent direction the page draws; return dL/dM itself",
        ),
        _diagnosis(
            _scaled_by(lambda c: len(c.args[2])),
            "yours is the number of sequences times the answer: the loss is the mean cross-entropy over the batch",
        ),
        _diagnosis(
            _scaled_by(lambda c: 1 / math.sqrt(c.args[0].cfg.d_head)),
            "a factor 1/sqrt(d_head) too many: M replaces the scores whole, the scale is part of M",
        ),
        _diagnosis(
            transposed,
            "your matrix is the transpose: the score is x_qᵀ M x_k, so the gradient is a sum of x_q x_kᵀ (query "
            "rows, key columns)",
        ),
        WRONG_SHAPE,
    ),
)


# ---------------------------------------------------------------- chapter 11: a sweep's threshold


def sweep_threshold(values: np.ndarray, scores: np.ndarray, level: float) -> float:
    """The smallest knob value whose score reaches ``level``, interpolated: chapter 11's
    :func:`mechbook.assign_add.sweeps.threshold`."""
    from mechbook.assign_add import sweeps

    return sweeps.threshold(values, scores, level)


def _sweep_case(rng: np.random.Generator) -> Case:
    n = int(rng.integers(3, 10))
    values = np.sort(rng.choice(np.arange(1, 21), size=n, replace=False)) / 20
    middle = rng.uniform(0.1, 0.9)
    scores = np.clip(1 / (1 + np.exp(-(values - middle) / 0.08)) + rng.normal(0, 0.03, n), 0, 1).round(3)
    level = float(rng.choice([0.5, 0.8, 0.9]))
    return Case(f"{n} points, level {level}", (values, scores, level))


def _next_point(values: np.ndarray, scores: np.ndarray, level: float) -> float:
    """The first value at or above the level, not interpolated (a mistake the check names)."""
    above = np.nonzero(np.asarray(scores) >= level)[0]
    return float(values[above[0]]) if len(above) else math.nan


SWEEP_THRESHOLD = Exercise(
    name="sweep_threshold",
    reference=sweep_threshold,
    cases=rng_cases(
        _sweep_case,
        10,
        seed=13,
        edges=(
            Case("one point, above the level", (np.array([0.3]), np.array([0.95]), 0.9)),
            Case("no point reaches the level", (np.array([0.1, 0.2, 0.4]), np.array([0.1, 0.5, 0.85]), 0.9)),
            Case(
                "a score exactly at the level, then a dip",
                (np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.5, 0.9, 0.6, 0.95]), 0.9),
            ),
            Case(
                "a dip after the first crossing",
                (np.array([0.1, 0.2, 0.3, 0.4, 0.5]), np.array([0.3, 0.92, 0.6, 0.8, 0.99]), 0.9),
            ),
        ),
    ),
    hint=(
        "find the first point i with scores[i] >= level; return values[0] if it is the first, NaN if there is "
        "none, else interpolate on the line through points i - 1 and i: x = x0 + (level - y0)(x1 - x0)/(y1 - y0)"
    ),
    diagnoses=(
        _diagnosis(
            lambda y, e, c: not math.isnan(e) and _is_nan(y),
            "a point reaches the level here, yet you returned NaN",
        ),
        _diagnosis(
            lambda y, e, c: math.isnan(e) and not _is_nan(y),
            "no point reaches the level: return math.nan (the threshold is not reached)",
        ),
        _diagnosis(
            lambda y, e, c: _same(y, _next_point(*c.args), e),
            "you returned the first value at or above the level: interpolate linearly between it and the point before",
        ),
        _diagnosis(
            lambda y, e, c: _same(y, sweep_threshold(*c.args[:2], float(np.nextafter(c.args[2], 2.0))), e),
            "a score equal to the level reaches it: compare with >=, not >",
        ),
    ),
)


EXERCISES: tuple[Exercise, ...] = (
    TRAIN_PAIRS,
    LITERAL_ANSWER,
    UNION_SCORE,
    SHARPEST_RISE,
    VARIABLE_QK_BLOCK,
    NEURON_SPECTRUM,
    PATCHED_LOGITS,
    QK2_GRADIENT,
    SWEEP_THRESHOLD,
)
"""Every exercise of the part, in page order; ``mechbook.exercises`` exports a ``check_<name>`` for each."""
