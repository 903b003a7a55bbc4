"""Activation patching with hooks: a causal check of the variable lookup (chapter 9).

Run a *source* sequence, keep one activation, and splice it into the run of a *clean* sequence
at chosen positions. If layer 2 reads a variable's value from the value token's position, then
replacing the residual stream there (``blocks.1.hook_resid_pre``, after layer 1) by that of a
sequence where the variable holds another value must change the answer to the other value's sum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mechbook.assign_add.task import ONE_VAR_LEFT, ONE_VAR_RIGHT, Task
from mechbook.determinism import deterministic

PATCH_HOOK = "blocks.1.hook_resid_pre"
"""The residual stream after layer 1, read by layer-2 attention's keys and values."""


@deterministic()
def patched_logits(
    model: torch.nn.Module, clean: torch.Tensor, source: torch.Tensor, positions: torch.Tensor, hook: str = PATCH_HOOK
) -> torch.Tensor:
    """Logits at '=' (B, d_out) of ``clean`` (B, P) with the activation at ``hook`` replaced, at
    ``positions[b]`` in row ``b``, by the same activation in the run of ``source`` (B, P)."""
    clean, source = torch.as_tensor(clean), torch.as_tensor(source)
    positions = torch.as_tensor(positions, dtype=torch.long)
    if clean.shape != source.shape or positions.shape != clean.shape[:1]:
        raise ValueError(
            f"clean {tuple(clean.shape)} and source {tuple(source.shape)} must match and positions "
            f"must hold one index per row, got {tuple(positions.shape)}"
        )
    rows = torch.arange(len(clean))
    with torch.no_grad():
        _, cache = model.run_with_cache(source, names_filter=lambda n: n == hook)
        donor = cache[hook][rows, positions]

        def splice(act: torch.Tensor, hook: object) -> torch.Tensor:
            act = act.clone()
            act[rows, positions] = donor
            return act

        return model.run_with_hooks(clean, fwd_hooks=[(hook, splice)])[:, -1]


@dataclass(frozen=True)
class PatchPairs:
    """Clean/source sequence pairs for the value-patching experiment.

    ``source`` is ``clean`` with the queried variable's value token changed (``value_pos``);
    ``clean_label``/``source_label`` the two sums. The control: ``control_source`` is ``clean``
    with the value of another assigned variable changed, at ``distractor_pos``.
    """

    clean: torch.Tensor
    source: torch.Tensor
    control_source: torch.Tensor
    value_pos: torch.Tensor
    distractor_pos: torch.Tensor
    clean_label: torch.Tensor
    source_label: torch.Tensor


def one_var_patch_pairs(task: Task, n: int, seed: int = 0) -> PatchPairs:
    """``n`` 1-var sequences on training pairs with at least two assignments, each with a twin
    whose queried variable holds a different random value (everything else identical)."""
    cfg = task.cfg
    rng = np.random.default_rng([seed, 17])
    pairs = np.argwhere(task.train_pairs)
    n1, n2 = pairs[rng.integers(0, len(pairs), size=n)].T
    kind = np.where(rng.random(n) < 0.5, ONE_VAR_LEFT, ONE_VAR_RIGHT)
    ok_left, ok_right = np.nonzero(~task.no_left)[0], np.nonzero(~task.no_right)[0]
    var = np.where(
        kind == ONE_VAR_LEFT, ok_left[rng.integers(0, len(ok_left), n)], ok_right[rng.integers(0, len(ok_right), n)]
    )
    n_assign = rng.integers(2, cfg.max_assignments + 1, size=n)
    tokens, labels = task.generate(np.stack([var, kind, n1, n2], axis=1), rng, n_assign=n_assign)
    ctx = tokens[:, : cfg.context_len]
    var_pos = np.argmax(ctx == (cfg.var0 + var)[:, None], axis=1)
    value_pos = var_pos + 1
    old = tokens[np.arange(n), value_pos]
    new = (old + rng.integers(1, cfg.modulus, size=n)) % cfg.modulus
    source = tokens.copy()
    source[np.arange(n), value_pos] = new
    is_var = (ctx >= cfg.var0) & (ctx < cfg.d_vocab)
    is_var[np.arange(n), var_pos] = False
    distractor_pos = np.argmax(is_var, axis=1) + 1  # n_assign >= 2: there is always another variable
    control = tokens.copy()
    control[np.arange(n), distractor_pos] = (
        tokens[np.arange(n), distractor_pos] + rng.integers(1, cfg.modulus, size=n)
    ) % cfg.modulus
    return PatchPairs(
        clean=torch.from_numpy(tokens),
        source=torch.from_numpy(source),
        control_source=torch.from_numpy(control),
        value_pos=torch.from_numpy(value_pos),
        distractor_pos=torch.from_numpy(distractor_pos),
        clean_label=torch.from_numpy(labels),
        source_label=torch.from_numpy((labels - old + new) % cfg.modulus),
    )


@deterministic()
def value_patching_effect(model: torch.nn.Module, pairs: PatchPairs) -> dict[str, float]:
    """What patching does to the answer at '='.

    - ``clean_accuracy``: unpatched clean runs answering the clean sum;
    - ``patched_to_source``: patching the queried value position from the source run makes the
      model answer the *source* sum (the circuit's prediction);
    - ``patched_as_source_run``: the patched run answers what the source run itself answers;
    - ``control_unchanged``: patching the value position of a distractor variable from a run
      where that distractor holds another value leaves the clean run's answer as it was.
    """
    with torch.no_grad():
        clean_pred = model(pairs.clean, last_only=True).argmax(-1)
        source_pred = model(pairs.source, last_only=True).argmax(-1)
    patched = patched_logits(model, pairs.clean, pairs.source, pairs.value_pos).argmax(-1)
    control = patched_logits(model, pairs.clean, pairs.control_source, pairs.distractor_pos).argmax(-1)
    rate = lambda hits: hits.float().mean().item()  # noqa: E731
    return {
        "clean_accuracy": rate(clean_pred == pairs.clean_label),
        "patched_to_source": rate(patched == pairs.source_label),
        "patched_as_source_run": rate(patched == source_pred),
        "control_unchanged": rate(control == clean_pred),
    }
