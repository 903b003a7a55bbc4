"""Token representations and attention scores read from any ``TransformerBridge``, compared with
the leading-term features, per layer, head and checkpoint (chapter 6).

Each of the k top tokens is run alone, as a sequence of length 1. At position 0 rotary embedding
is the identity and attention can only look at the token itself, so layer l gives per token:

- ``embedding``: ``blocks.{l}.hook_resid_post``, the residual stream after the layer;
- ``no_mlp``: ``blocks.{l}.hook_resid_pre + blocks.{l}.hook_attn_out``, the layer's output
  without its parallel MLP;
- ``attention``: the score matrix S_l = E_l M_l E_l^T, with E_l = ``blocks.{l}.ln1.hook_out``
  (the normalised layer input that the attention reads) and M_l = mean over heads of
  W_Q^h W_K^h^T; S_l[a, b] is how much query token a attends to key token b (biases left out).
  Per head: S_{l,h} = (E_l W_Q^h)(E_l W_K^h)^T.

The first two are compared with (B Phi)^T, the scores with Q, by
:func:`mechbook.pythia.similarity.covariance_similarity`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mechbook.pythia.features import LeadingFeatures
from mechbook.pythia.similarity import covariance_similarity, feature_gram

MAPPINGS: tuple[str, ...] = ("embedding", "no_mlp", "attention")
LAYER_LEVEL = -1  # ``head`` value of the rows that describe a whole layer


def read_layers(bridge, token_ids: np.ndarray) -> dict[str, np.ndarray]:
    """``{"embedding", "no_mlp", "attn_in"}`` -> (n_layers, k, d_model) float64 arrays from
    single-token runs of ``token_ids``."""
    import torch

    n_layers = bridge.cfg.n_layers
    wanted = {f"blocks.{l}.{h}" for l in range(n_layers) for h in ("hook_resid_post", "hook_resid_pre", "hook_attn_out", "ln1.hook_out")}
    device = next(bridge.parameters()).device
    tokens = torch.as_tensor(np.asarray(token_ids), dtype=torch.long, device=device).reshape(-1, 1)
    with torch.no_grad():
        _, cache = bridge.run_with_cache(tokens, names_filter=lambda name: name in wanted)

    def stack(name: str) -> np.ndarray:
        return np.stack([cache[f"blocks.{l}.{name}"][:, 0].double().cpu().numpy() for l in range(n_layers)])

    return {
        "embedding": stack("hook_resid_post"),
        "no_mlp": stack("hook_resid_pre") + stack("hook_attn_out"),
        "attn_in": stack("ln1.hook_out"),
    }


def head_scores(bridge, attn_in: np.ndarray) -> np.ndarray:
    """(n_layers, n_heads, k, k): S_{l,h} = (E_l W_Q^h)(E_l W_K^h)^T for layer inputs ``attn_in``."""
    W_Q = bridge.W_Q.detach().double().cpu().numpy()  # (layers, heads, d_model, d_head)
    W_K = bridge.W_K.detach().double().cpu().numpy()
    q = np.einsum("lkd,lhde->lhke", attn_in, W_Q)
    k = np.einsum("lkd,lhde->lhke", attn_in, W_K)
    return np.einsum("lhae,lhbe->lhab", q, k)


def checkpoint_similarity(bridge, features: LeadingFeatures) -> pd.DataFrame:
    """Tidy rows ``mapping, layer, head, similarity`` for one model: every mapping per layer
    (``head = -1``) and the attention mapping per head."""
    reps = read_layers(bridge, features.token_ids)
    scores = head_scores(bridge, reps["attn_in"])
    grams = {m: feature_gram(features.feature(m)) for m in ("embedding", "attention")}
    rows = []
    for layer in range(scores.shape[0]):
        for mapping in ("embedding", "no_mlp"):
            rows.append((mapping, layer, LAYER_LEVEL, covariance_similarity(reps[mapping][layer], gram=grams["embedding"])))
        rows.append(("attention", layer, LAYER_LEVEL, covariance_similarity(scores[layer].mean(0), gram=grams["attention"])))
        for head in range(scores.shape[1]):
            rows.append(("attention", layer, head, covariance_similarity(scores[layer, head], gram=grams["attention"])))
    return pd.DataFrame(rows, columns=["mapping", "layer", "head", "similarity"])


def shuffled_features(features: LeadingFeatures, seed: int) -> LeadingFeatures:
    """The features with their rows dealt to the wrong tokens (one random permutation): the
    control for 'any matrix with these statistics would match as well'."""
    perm = np.random.default_rng(seed).permutation(features.k)
    return replace(features, BPhi_T=features.BPhi_T[perm], Q=features.Q[perm])


def layer_mean(table: pd.DataFrame) -> pd.DataFrame:
    """Mean over layers of the layer-level rows: one value per mapping (and step, if present)."""
    keys = ["mapping"] + (["step"] if "step" in table.columns else [])
    rows = table[table["head"] == LAYER_LEVEL]
    return rows.groupby(keys, as_index=False, sort=False)["similarity"].mean()


def summarise(curve: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per mapping, from the layer-mean curve over steps: the peak, its step and the final value."""
    out = {}
    for mapping, rows in curve.groupby("mapping", sort=False):
        rows = rows.sort_values("step")
        best = rows.loc[rows["similarity"].idxmax()]
        out[mapping] = {"peak": float(best["similarity"]), "peak_step": int(best["step"]), "final": float(rows["similarity"].iloc[-1])}
    return out
