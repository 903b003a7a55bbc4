"""Where the logits come from: the residual (bigram) path and each layer's attention path (chapter 5).

The residual stream is the one-hot input plus every layer's attention output, and the output map
is linear, so the logits split exactly into paths:

    logits_t = e_{x_t}^T W_O + sum_l attn_out^(l)_t W_O

At leading order the first term is eta s B[x_t] (the bigram prediction) and the attention terms
carry the context -> interchangeable-token association G = (B Phi)^T B. Softmax ignores a constant
shift, so each path is scored by its *centred* contribution to the correct next token y_t:
c = (v W_O)[y_t] - mean_c (v W_O)[c], and the paths' contributions add up to the centred logit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from mechbook.leading_terms.model import AttentionModel

RESIDUAL = "residual (bigram)"


def path_name(layer: int) -> str:
    """Label of layer ``layer``'s attention path."""
    return f"attention, layer {layer}"


@torch.no_grad()
def logit_paths(model: AttentionModel, sequences: np.ndarray) -> pd.DataFrame:
    """Per-path centred contribution to the correct next token's logit, for every position.

    ``sequences``: (n, T+1) or (T+1,) token ids (inputs and their next tokens). Returns a tidy frame
    with columns sequence, position, token, next_token, path, contribution; summed over paths it
    gives the model's centred logit of the next token.
    """
    seqs = torch.as_tensor(np.atleast_2d(np.asarray(sequences)), dtype=torch.long)
    inputs, targets = seqs[:, :-1], seqs[:, 1:].to(model.W_O.device)
    names = ["hook_embed"] + [f"blocks.{l}.hook_attn_out" for l in range(model.cfg.n_layers)]
    _, cache = model.run_with_cache(inputs, names_filter=names)
    labels = [RESIDUAL] + [path_name(l) for l in range(model.cfg.n_layers)]
    n, T = inputs.shape
    frames = []
    for name, label in zip(names, labels):
        logits = (cache[name] @ model.W_O).double()
        centred = logits.gather(-1, targets[..., None])[..., 0] - logits.mean(-1)
        frames.append(
            pd.DataFrame(
                {
                    "sequence": np.repeat(np.arange(n), T),
                    "position": np.tile(np.arange(T), n),
                    "token": inputs.reshape(-1).numpy(),
                    "next_token": seqs[:, 1:].reshape(-1).numpy(),
                    "path": label,
                    "contribution": centred.reshape(-1).cpu().numpy(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def mean_paths(models: dict, sequences: np.ndarray) -> pd.DataFrame:
    """Per learning rate (the keys of ``models``), the mean over every position of ``sequences`` of
    the residual path's and of all attention paths' (summed) centred logit of the next token, and
    the attention share a / (|a| + |r|) for attention a and residual r (negative when the attention
    paths lower the right token). Chapter 5."""
    rows = {}
    for lr, model in models.items():
        frame = logit_paths(model, sequences)
        frame["kind"] = np.where(frame["path"] == RESIDUAL, "residual", "attention")
        rows[lr] = frame.groupby(["sequence", "position", "kind"])["contribution"].sum().unstack().mean()
    table = pd.DataFrame(rows).T[["residual", "attention"]].rename_axis(index="learning rate", columns=None)
    table["attention share"] = table["attention"] / (table["attention"].abs() + table["residual"].abs())
    return table
