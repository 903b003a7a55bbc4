"""Token representations and attention scores read from any ``TransformerBridge``, compared with
the leading-term features, per measure, layer, head and checkpoint (chapter 6).

Each of the k top tokens is run alone, as a sequence of length 1. At position 0 rotary embedding
is the identity and attention can only look at the token itself, so layer l gives per token:

- ``embedding``: ``blocks.{l}.hook_resid_post``, the residual stream after the layer;
- ``no_mlp``: ``blocks.{l}.hook_resid_pre + blocks.{l}.hook_attn_out``, the layer's output
  without its parallel MLP;
- ``attention``: the score matrix S_l = E_l M_l E_l^T, with E_l = ``blocks.{l}.ln1.hook_out``
  (the LayerNorm output, which is what the attention reads) and M_l = mean over heads of
  W_Q^h W_K^h^T; S_l[a, b] is how much query token a attends to key token b (biases left out).
  Per head: S_{l,h} = (E_l W_Q^h)(E_l W_K^h)^T.
- ``attention_resid_pre``: the same scores with E_l = ``blocks.{l}.hook_resid_pre``, the
  un-normalised layer input, as the paper's pipeline takes them. In a model with LayerNorm these
  are not the scores the model computes: each token's row is scaled by its norm and shifted by
  its mean before the query and key maps see it.

The first two are compared with (B Phi)^T, the scores with Q, by both measures of
:mod:`mechbook.pythia.similarity`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mechbook.pythia.features import LeadingFeatures
from mechbook.pythia.similarity import MEASURES, covariance_similarity, feature_gram

MAPPINGS: tuple[str, ...] = ("embedding", "no_mlp", "attention", "attention_resid_pre")
SCORE_INPUTS = {"attention": "attn_in", "attention_resid_pre": "resid_pre"}
SYNTHETIC_OFFSET = 3.0  # standard deviation of the shared offset, in units of the per-token noise
LAYER_LEVEL = -1  # ``head`` value of the rows that describe a whole layer


def read_layers(bridge, token_ids: np.ndarray) -> dict[str, np.ndarray]:
    """``{"embedding", "no_mlp", "attn_in", "resid_pre"}`` -> (n_layers, k, d_model) float64 arrays from
    single-token runs of ``token_ids``."""
    import torch

    n_layers = bridge.cfg.n_layers
    wanted = {
        f"blocks.{l}.{h}"
        for l in range(n_layers)
        for h in ("hook_resid_post", "hook_resid_pre", "hook_attn_out", "ln1.hook_out")
    }
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
        "resid_pre": stack("hook_resid_pre"),
    }


def head_scores(bridge, attn_in: np.ndarray) -> np.ndarray:
    """(n_layers, n_heads, k, k): S_{l,h} = (E_l W_Q^h)(E_l W_K^h)^T for layer inputs ``attn_in``."""
    W_Q = bridge.W_Q.detach().double().cpu().numpy()  # (layers, heads, d_model, d_head)
    W_K = bridge.W_K.detach().double().cpu().numpy()
    q = np.einsum("lkd,lhde->lhke", attn_in, W_Q)
    k = np.einsum("lkd,lhde->lhke", attn_in, W_K)
    return np.einsum("lhae,lhbe->lhab", q, k)


def _grams(features: LeadingFeatures) -> dict[tuple[str, str], np.ndarray]:
    """C(F_hat) per (measure, feature name) for (B Phi)^T and Q."""
    return {(m, f): feature_gram(features.feature(f), m) for m in MEASURES for f in ("embedding", "attention")}


def checkpoint_similarity(bridge, features: LeadingFeatures) -> pd.DataFrame:
    """Tidy rows ``measure, mapping, layer, head, similarity`` for one model: every mapping per
    layer (``head = -1``) and both attention mappings per head, under both measures."""
    reps = read_layers(bridge, features.token_ids)
    scores = {mapping: head_scores(bridge, reps[name]) for mapping, name in SCORE_INPUTS.items()}
    grams = _grams(features)
    rows = []
    for measure in MEASURES:
        for layer in range(reps["embedding"].shape[0]):
            for mapping in ("embedding", "no_mlp"):
                rows.append(
                    (
                        measure,
                        mapping,
                        layer,
                        LAYER_LEVEL,
                        covariance_similarity(reps[mapping][layer], gram=grams[measure, "embedding"], measure=measure),
                    )
                )
            for mapping, s in scores.items():
                gram = grams[measure, "attention"]
                rows.append(
                    (
                        measure,
                        mapping,
                        layer,
                        LAYER_LEVEL,
                        covariance_similarity(s[layer].mean(0), gram=gram, measure=measure),
                    )
                )
                rows += [
                    (measure, mapping, layer, head, covariance_similarity(s[layer, head], gram=gram, measure=measure))
                    for head in range(s.shape[1])
                ]
    return pd.DataFrame(rows, columns=["measure", "mapping", "layer", "head", "similarity"])


def synthetic_controls(features: LeadingFeatures, d_model: int, seed: int) -> pd.DataFrame:
    """Two representations built without any model, as rows ``control, measure, mapping, layer,
    head, similarity`` (layer 0, head -1), compared with the mapping's feature F (k x m):

    - ``offset``: Z + 1 m^T, Z ~ N(0, 1) (k x d) and one offset m ~ N(0, SYNTHETIC_OFFSET^2 I)
      shared by every token: random, so a measure that rates it high is fooled by the offset;
    - ``linear``: F W with W ~ N(0, 1) (m x d): exactly linear in the feature, so a measure that
      rates it low can miss a representation that carries the feature in full.

    d is ``d_model`` for the representation mappings and k for the k x k attention scores.
    """
    rng = np.random.default_rng(seed)
    grams = _grams(features)
    rows = []
    for feature, mappings, d in (
        ("embedding", ("embedding", "no_mlp"), d_model),
        ("attention", tuple(SCORE_INPUTS), features.k),
    ):
        F = features.feature(feature)
        reps = {
            "offset": rng.normal(size=(features.k, d)) + SYNTHETIC_OFFSET * rng.normal(size=d),
            "linear": F @ rng.normal(size=(F.shape[1], d)),
        }
        for control, rep in reps.items():
            for measure in MEASURES:
                value = covariance_similarity(rep, gram=grams[measure, feature], measure=measure)
                rows += [(control, measure, mapping, 0, LAYER_LEVEL, value) for mapping in mappings]
    return pd.DataFrame(rows, columns=["control", "measure", "mapping", "layer", "head", "similarity"])


def shuffled_features(features: LeadingFeatures, seed: int) -> LeadingFeatures:
    """The features with their rows dealt to the wrong tokens (one random permutation): the
    control for 'any matrix with these statistics would match as well'."""
    perm = np.random.default_rng(seed).permutation(features.k)
    return replace(features, BPhi_T=features.BPhi_T[perm], Q=features.Q[perm])


def layer_mean(table: pd.DataFrame) -> pd.DataFrame:
    """Mean over layers of the layer-level rows: one value per measure and mapping (and step, or
    control, when present)."""
    keys = [c for c in ("control", "measure", "mapping", "step") if c in table.columns]
    rows = table[table["head"] == LAYER_LEVEL]
    return rows.groupby(keys, as_index=False, sort=False)["similarity"].mean()


def summarise(curve: pd.DataFrame) -> dict[tuple[str, str], dict[str, float]]:
    """Per (measure, mapping), from the layer-mean curve over steps: the peak, its step, the value
    at the first checkpoint (the initialisation) and at the last."""
    out = {}
    for (measure, mapping), rows in curve.groupby(["measure", "mapping"], sort=False):
        rows = rows.sort_values("step")
        best = rows.loc[rows["similarity"].idxmax()]
        out[measure, mapping] = {
            "peak": float(best["similarity"]),
            "peak_step": int(best["step"]),
            "initial": float(rows["similarity"].iloc[0]),
            "final": float(rows["similarity"].iloc[-1]),
        }
    return out
