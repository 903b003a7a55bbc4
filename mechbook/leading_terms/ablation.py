"""Ablating the leading terms of a trained model (chapter 5).

For a trained matrix M and its leading-term direction T (W_O: B, V: (B Phi)^T, W: Q, P: P-term),
the ablated matrix keeps only what the leading term does not explain:

    M' = M - (<M, T> / ||T||^2) T,        <M, T> = tr(M^T T)

so <M', T> = 0. Replacing one matrix at a time and measuring the loss shows how much of the
model's skill rides on each leading term.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import torch

from mechbook.cache import cached, fingerprint
from mechbook.leading_terms import leading
from mechbook.leading_terms.model import AttentionModel, parameter_names


def remove_projection(weight: torch.Tensor, term: np.ndarray | torch.Tensor) -> torch.Tensor:
    """M - (<M, T> / ||T||^2) T, computed in float64 and returned in M's dtype and device."""
    m = weight.detach().double()
    t = torch.as_tensor(term, dtype=torch.float64, device=m.device)
    if t.shape != m.shape:
        raise ValueError(
            f"leading term has shape {tuple(t.shape)}, the matrix {tuple(m.shape)}; use the stats of the training corpus"
        )
    norm2 = (t * t).sum()
    if norm2 == 0:
        raise ValueError("the leading term is zero, so there is no direction to remove")
    return (m - (m * t).sum() / norm2 * t).to(weight.dtype)


@torch.no_grad()
def evaluate_loss(model: AttentionModel, tokens: np.ndarray, batch_size: int = 256) -> float:
    """Mean cross-entropy over every (sequence, position) of ``tokens`` (N, T+1), in batches."""
    seqs = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
    total = 0.0
    for start in range(0, len(seqs), batch_size):
        batch = seqs[start : start + batch_size].to(model.W_O.device)
        total += model.loss(batch).item() * len(batch)
    return total / len(seqs)


@torch.no_grad()
def ablation_table(
    state: dict[str, torch.Tensor], model: AttentionModel, stats: Any, tokens: np.ndarray, batch_size: int = 256
) -> pd.DataFrame:
    """Loss with each matrix's leading component removed, one at a time, next to the full model,
    the model with every leading component removed at once, and the all-zero model (loss log |V|).

    Columns: ablation, matrix, kind, layer, cosine (of the matrix with its term), loss, delta_loss
    (loss minus the full model's). ``model`` is loaded with ``state`` and restored afterwards.
    """
    bases = leading.bases(stats)
    model.load_checkpoint(state)
    full = evaluate_loss(model, tokens, batch_size)
    rows = [{"ablation": "full model", "matrix": None, "kind": None, "layer": None, "cosine": None, "loss": full}]
    names = parameter_names(model.cfg)
    for name in names:
        kind, layer = leading.kind_of(name)
        param = model.get_parameter(name)
        param.copy_(remove_projection(param, bases[kind]))
        rows.append(
            {
                "ablation": f"remove leading term of {name}",
                "matrix": name,
                "kind": kind,
                "layer": layer,
                "cosine": leading.cosine(state[name].numpy(), bases[kind]),
                "loss": evaluate_loss(model, tokens, batch_size),
            }
        )
        param.copy_(state[name])
    for name in names:
        param = model.get_parameter(name)
        param.copy_(remove_projection(param, bases[leading.kind_of(name)[0]]))
    rows.append(
        {
            "ablation": "remove every leading term",
            "matrix": None,
            "kind": None,
            "layer": None,
            "cosine": None,
            "loss": evaluate_loss(model, tokens, batch_size),
        }
    )
    for param in model.parameters():
        param.zero_()
    rows.append(
        {
            "ablation": "zero model",
            "matrix": None,
            "kind": None,
            "layer": None,
            "cosine": None,
            "loss": evaluate_loss(model, tokens, batch_size),
        }
    )
    model.load_checkpoint(state)
    table = pd.DataFrame(rows)
    table["delta_loss"] = table["loss"] - full
    return table


def cached_ablation_table(
    state: dict[str, torch.Tensor], model: AttentionModel, stats: Any, tokens: np.ndarray
) -> pd.DataFrame:
    """:func:`ablation_table` through the disk cache (key: weights, bases, tokens)."""
    bases = leading.bases(stats)
    key = {
        "state": fingerprint(*(state[k] for k in sorted(state))),
        "bases": fingerprint(*(bases[k] for k in sorted(bases))),
        "tokens": fingerprint(np.ascontiguousarray(tokens, dtype=np.int64)),
    }
    return cached("leading_terms/ablation", key, lambda: ablation_table(state, model, stats, tokens))
