"""The circuits of the trained Assign-and-Add model, read from its weights and activations
(chapter 9; chapter 10 reuses the variable directions and the QK block).

Notation: ``E`` is the token embedding, ``P`` the position embedding, and for attention layer 1
and 2 (hook index 0 and 1, the ``layer`` argument below) ``QK = W_Q W_K^T / sqrt(d_head)`` and
``OV = W_V W_O``. The model has one head per layer, no biases and no LayerNorm, so these two
products are the whole of each attention layer's query-key and value-output paths.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from mechbook.assign_add.task import ONE_VAR_LEFT, ONE_VAR_RIGHT, TWO_VAR, Task, TaskConfig

EQ_POS = -1
"""The answer is read at the last position, '='."""


def _head(model: torch.nn.Module, layer: int, name: str) -> torch.Tensor:
    """``W_Q``/``W_K``/``W_V``/``W_O`` of the single head of attention layer ``layer``."""
    return getattr(model.blocks[layer].attn, name)[0].detach()


def qk(model: torch.nn.Module, layer: int) -> torch.Tensor:
    """The bilinear form ``W_Q W_K^T / sqrt(d_head)`` (d_model x d_model) of attention layer ``layer``."""
    W_Q, W_K = _head(model, layer, "W_Q"), _head(model, layer, "W_K")
    return W_Q @ W_K.T / W_Q.shape[1] ** 0.5


def ov(model: torch.nn.Module, layer: int) -> torch.Tensor:
    """The value-output map ``W_V W_O`` (d_model x d_model) of attention layer ``layer`` (hook
    index): a token attended with weight 1 adds ``x @ ov`` to the residual stream."""
    return _head(model, layer, "W_V") @ _head(model, layer, "W_O")


def attention_patterns(model: torch.nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """Attention patterns ``(layers, batch, query, key)`` of both layers for ``tokens`` (B, 16)."""
    tokens = torch.as_tensor(tokens)
    names = [f"blocks.{layer}.attn.hook_pattern" for layer in range(len(model.blocks))]
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names)
    return torch.stack([cache[n][:, 0] for n in names])


def positional_qk(model: torch.nn.Module, layer: int = 0) -> np.ndarray:
    """``P QK P^T`` (positions x positions) of attention layer ``layer`` (hook index): the attention score a query at position ``q``
    gives a key at position ``k`` from position embeddings alone. Entries above the diagonal
    (future keys, masked) are NaN."""
    P = model.pos_embed.W_pos.detach()
    scores = (P @ qk(model, layer) @ P.T).numpy().astype(np.float64)
    scores[np.triu_indices_from(scores, 1)] = np.nan
    return scores


def previous_token_share(scores: np.ndarray, queries: range | list[int]) -> float:
    """Fraction of the query positions ``q`` in ``queries`` whose highest-scoring allowed key
    (``k <= q`` in a causal score matrix) is ``q - 1``, the previous token."""
    hits = [int(np.nanargmax(scores[q, : q + 1]) == q - 1) for q in queries if q >= 1]
    if not hits:
        raise ValueError("need at least one query position >= 1")
    return float(np.mean(hits))


def value_positions(tokens: np.ndarray, task_cfg: TaskConfig) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, positions)`` of every context value token (a number right after a variable):
    the queries of layer 1's previous-token head."""
    ctx = np.asarray(tokens)[:, : task_cfg.context_len]
    is_value = np.zeros_like(ctx, dtype=bool)
    is_value[:, 1:] = (ctx[:, 1:] < task_cfg.modulus) & (ctx[:, :-1] >= task_cfg.var0)
    return np.nonzero(is_value)


QK1_PARTS = ("token", "positional", "token_to_position", "position_to_token")
"""The four parts of layer 1's score ``(E_q + P_q) QK1 (E_k + P_k)^T``: token-token
``E_q QK1 E_k^T``, position-position ``P_q QK1 P_k^T`` and the two cross terms (query token on key
position, query position on key token)."""


def previous_token_score_split(model: torch.nn.Module, tokens: np.ndarray, task_cfg: TaskConfig) -> dict[str, float]:
    """What makes layer 1's previous-token head (chapter 9): at every context value position
    ``q``, the previous key's pre-softmax score minus the mean score of the other allowed keys
    (``k <= q``, ``k != q - 1``), split exactly into the four :data:`QK1_PARTS` (the layer-1
    input is ``E[t] + P[pos]``: no LayerNorm, no biases). Returns each part's mean margin over the
    value positions, their sum ``total`` (the real score margin) and ``positional_share``, the
    position-position part over the sum of the four parts' sizes (its share of the margin when
    every part pushes the same way; in [-1, 1] even when the parts cancel)."""
    tokens = np.asarray(tokens)
    rows, pos = value_positions(tokens, task_cfg)
    if not len(rows):
        raise ValueError("tokens hold no context value position (a number right after a variable)")
    QK = qk(model, 0).double()
    E = model.embed.W_E.detach().double()[torch.as_tensor(tokens[rows])]  # (V, T, d)
    P = model.pos_embed.W_pos.detach().double()[: tokens.shape[1]]  # (T, d)
    q = torch.as_tensor(pos)
    Eq, Pq = E[torch.arange(len(q)), q], P[q]  # (V, d)
    parts = {
        "token": torch.einsum("vd,de,vke->vk", Eq, QK, E),
        "positional": (Pq @ QK @ P.T),
        "token_to_position": (Eq @ QK @ P.T),
        "position_to_token": torch.einsum("vd,de,vke->vk", Pq, QK, E),
    }
    keys = torch.arange(tokens.shape[1])[None, :]
    others = (keys <= q[:, None]) & (keys != (q - 1)[:, None])
    out = {}
    for name, score in parts.items():
        prev = score[torch.arange(len(q)), q - 1]
        rest = (score * others).sum(1) / others.sum(1)
        out[name] = float((prev - rest).mean())
    out["total"] = float(sum(out[name] for name in QK1_PARTS))
    size = sum(abs(out[name]) for name in QK1_PARTS)
    out["positional_share"] = out["positional"] / size if size > 0 else float("nan")
    return out


def variable_directions(model: torch.nn.Module, task_cfg: TaskConfig) -> torch.Tensor:
    """``E_var OV1`` (n_vars x d_model): what layer-1 attention writes when it copies a variable.

    A value token attends to its variable (previous-token head), and '=' attends to its operand
    variables, so both ends of the layer-2 lookup carry these vectors.
    """
    E_var = model.embed.W_E.detach()[task_cfg.var0 : task_cfg.var0 + task_cfg.n_vars]
    return E_var @ ov(model, 0)


def variable_qk_block(model: torch.nn.Module, task_cfg: TaskConfig) -> np.ndarray:
    """The layer-2 QK restricted to the variable subspace: ``U QK2 U^T`` with ``U = E_var OV1``
    (n_vars x n_vars). Row = the query's operand variable, column = the key's variable; an
    identity-like block means '=' attends to the value of the variable it asks for."""
    U = variable_directions(model, task_cfg)
    return (U @ qk(model, 1) @ U.T).numpy().astype(np.float64)


def block_diagonality(block: np.ndarray) -> dict[str, float]:
    """How identity-like a square block is: ``diag_mean``, ``offdiag_mean``,
    ``offdiag_abs_mean``, ``ratio = diag_mean / offdiag_abs_mean``, ``margin`` (mean over rows of
    the diagonal entry minus the row's largest off-diagonal entry) and ``rows_diag_max`` (share of
    rows whose largest entry is on the diagonal)."""
    block = np.asarray(block, dtype=np.float64)
    if block.ndim != 2 or block.shape[0] != block.shape[1] or block.shape[0] < 2:
        raise ValueError(f"need a square block of size >= 2, got shape {block.shape}")
    n = len(block)
    diag = np.diag(block)
    off = block[~np.eye(n, dtype=bool)].reshape(n, n - 1)
    offdiag_abs = float(np.abs(off).mean())
    return {
        "diag_mean": float(diag.mean()),
        "offdiag_mean": float(off.mean()),
        "offdiag_abs_mean": offdiag_abs,
        "ratio": float(diag.mean() / offdiag_abs) if offdiag_abs > 0 else float("inf"),
        "margin": float((diag - off.max(axis=1)).mean()),
        "rows_diag_max": float((block.argmax(axis=1) == np.arange(n)).mean()),
    }


# ---------------------------------------------------------------------------- inputs
def all_pairs(modulus: int) -> tuple[np.ndarray, np.ndarray]:
    """``(n, m)``: every ordered pair of residues, ``n`` major (N^2 each)."""
    n, m = np.divmod(np.arange(modulus * modulus), modulus)
    return n, m


def direct_sequences(task_cfg: TaskConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens ``PAD x 12 + '+' n m '='`` for all N^2 pairs (n major) and their labels
    ``(n + m) mod N``: the adder's inputs with no variables at all."""
    n, m = all_pairs(task_cfg.modulus)
    tokens = np.full((len(n), task_cfg.seq_len), task_cfg.pad, dtype=np.int64)
    tokens[:, -4:] = np.stack([np.full_like(n, task_cfg.plus), n, m, np.full_like(n, task_cfg.eq)], axis=1)
    return torch.from_numpy(tokens), torch.from_numpy((n + m) % task_cfg.modulus)


VIA_KINDS = {"1var_left": ONE_VAR_LEFT, "1var_right": ONE_VAR_RIGHT, "2var": TWO_VAR}


def variable_sequences(task: Task, kind: str, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """For every pair (n, m), n major, one sequence asking the same sum through variables.

    ``kind`` is ``"1var_left"`` (``v n`` assigned, query ``+ v m =``), ``"1var_right"`` or
    ``"2var"`` (``v1 n``, ``v2 m``, query ``+ v1 v2 =``); variables are drawn among those the
    training distribution allows in that slot, contexts as in training (``Task.generate``).
    """
    if kind not in VIA_KINDS:
        raise ValueError(f"kind must be one of {sorted(VIA_KINDS)}, got {kind!r}")
    cfg = task.cfg
    rng = np.random.default_rng([seed, 11])
    n, m = all_pairs(cfg.modulus)
    code = VIA_KINDS[kind]
    if code == TWO_VAR:
        vpairs = np.argwhere(task.allowed_two_var)
        var, var2 = vpairs[rng.integers(0, len(vpairs), size=len(n))].T
    else:
        ok = ~task.no_left if code == ONE_VAR_LEFT else ~task.no_right
        var = np.nonzero(ok)[0][rng.integers(0, ok.sum(), size=len(n))]
        var2 = np.full(len(n), -1)
    rows = np.stack([var, np.full(len(n), code), n, m], axis=1)
    tokens, labels = task.generate(rows, rng, var2=var2)
    return torch.from_numpy(tokens), torch.from_numpy(labels)


def _at_eq(model: torch.nn.Module, tokens: torch.Tensor, hook: str) -> torch.Tensor:
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n == hook)
    return cache[hook][:, EQ_POS]


def _cos(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    return torch.nn.functional.cosine_similarity(a, b, dim=-1).numpy().astype(np.float64)


def mismatched_partner(modulus: int, seed: int = 0) -> np.ndarray:
    """For each pair index (n major), a random other pair index whose sum differs."""
    rng = np.random.default_rng([seed, 13])
    n, m = all_pairs(modulus)
    partner = rng.permutation(len(n))
    same = (n + m) % modulus == (n[partner] + m[partner]) % modulus
    partner[same] = (partner[same] + modulus) % len(n)  # (n+1, m): the sum moves by one
    return partner


def composition_cosines(model: torch.nn.Module, task: Task, kind: str = "2var", seed: int = 0) -> pd.DataFrame:
    """Residual stream at '=' before the layer-2 MLP (``blocks.1.hook_resid_mid``) for
    ``+ n m =`` against the same sum asked through variables (``kind``), for all N^2 pairs.

    Columns ``n``, ``m``, ``matched`` (cosine with the same pair through variables) and
    ``mismatched`` (cosine with a random pair of a different sum through variables).
    Cosines are of the raw residual vectors (nothing subtracted).
    """
    direct, _ = direct_sequences(task.cfg)
    via, _ = variable_sequences(task, kind, seed)
    hook = "blocks.1.hook_resid_mid"
    r_direct, r_via = _at_eq(model, direct, hook), _at_eq(model, via, hook)
    partner = torch.from_numpy(mismatched_partner(task.cfg.modulus, seed))
    n, m = all_pairs(task.cfg.modulus)
    return pd.DataFrame(
        {"n": n, "m": m, "matched": _cos(r_direct, r_via), "mismatched": _cos(r_direct, r_via[partner])}
    )


def ov2_sum(model: torch.nn.Module, n: np.ndarray, m: np.ndarray) -> torch.Tensor:
    """``OV2(e_n) + OV2(e_m)`` (batch x d_model), ``OV2 = ov(model, 1)``: the layer-2 attention
    output at '=' if it put weight 1 on each of the two number tokens and read only their
    embeddings (the "adder input" of chapter 9)."""
    E = model.embed.W_E.detach()
    OV = ov(model, 1)
    return (E[torch.as_tensor(n)] + E[torch.as_tensor(m)]) @ OV


def shuffled_right(modulus: int, seed: int = 0) -> np.ndarray:
    """For each pair index (n major), the right operand ``m'`` of a random permutation of the
    pairs: the paper's shuffled control keeps ``n`` and draws ``m'`` this way."""
    rng = np.random.default_rng([seed, 17])
    _, m = all_pairs(modulus)
    return m[rng.permutation(len(m))]


def ov2_cosines(model: torch.nn.Module, task: Task, kind: str = "2var", seed: int = 0) -> pd.DataFrame:
    """Layer-2 attention output at '=' (``blocks.1.hook_attn_out``) against ``OV2(e_n) + OV2(e_m)``
    for all pairs asked through variables (``kind``): columns ``n``, ``m``, ``matched``,
    ``shuffled`` (the paper's control: against ``OV2(e_n) + OV2(e_m')``, the left operand kept and
    ``m'`` from a random pair, :func:`shuffled_right`) and ``other_pair`` (against the vector of a
    random pair of a different sum, both operands replaced)."""
    via, _ = variable_sequences(task, kind, seed)
    out = _at_eq(model, via, "blocks.1.hook_attn_out")
    n, m = all_pairs(task.cfg.modulus)
    target = ov2_sum(model, n, m)
    partner = torch.from_numpy(mismatched_partner(task.cfg.modulus, seed))
    control = ov2_sum(model, n, shuffled_right(task.cfg.modulus, seed))
    return pd.DataFrame(
        {
            "n": n,
            "m": m,
            "matched": _cos(out, target),
            "shuffled": _cos(out, control),
            "other_pair": _cos(out, target[partner]),
        }
    )


def mlp2_logits(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Logits of the model from just before the layer-2 MLP: ``(x + MLP_2(x)) W_U`` for residual
    vectors ``x`` (batch x d), with nothing else in the stream (the residual ``x`` included)."""
    mlp = model.blocks[1].mlp
    with torch.no_grad():
        hidden = torch.relu(x @ mlp.W_in)
        return (x + hidden @ mlp.W_out) @ model.unembed.W_U


def mlp2_only_logits(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Logits of the layer-2 MLP's output alone: ``MLP_2(x) W_U``, without the residual ``x``."""
    mlp = model.blocks[1].mlp
    with torch.no_grad():
        return (torch.relu(x @ mlp.W_in) @ mlp.W_out) @ model.unembed.W_U


def adder_alone_accuracy(model: torch.nn.Module, modulus: int) -> float:
    """The paper's adder-alone score: share of all N^2 pairs with ``argmax MLP_2(h) W_U = (n + m)
    mod N`` for ``h = OV2(e_n) + OV2(e_m)``, the MLP's output alone (no residual ``h`` added).
    :func:`adder_with_residual_accuracy` is the book's variant with ``h`` kept in the stream."""
    n, m = all_pairs(modulus)
    pred = mlp2_only_logits(model, ov2_sum(model, n, m)).argmax(-1).numpy()
    return float((pred == (n + m) % modulus).mean())


def adder_with_residual_accuracy(model: torch.nn.Module, modulus: int) -> float:
    """The book's adder-alone variant: ``argmax (h + MLP_2(h)) W_U = (n + m) mod N`` with
    ``h = OV2(e_n) + OV2(e_m)``, i.e. what the model computes from ``h`` at '=' (the residual ``h``
    also reaches the unembedding). It differs from :func:`adder_alone_accuracy` by the direct path
    ``h W_U`` added to the logits."""
    n, m = all_pairs(modulus)
    pred = mlp2_logits(model, ov2_sum(model, n, m)).argmax(-1).numpy()
    return float((pred == (n + m) % modulus).mean())


def needed_positions(tokens: np.ndarray, task_cfg: TaskConfig) -> np.ndarray:
    """(B, 2): where each operand's number sits, for the left and right operand: the operand
    position itself (13 or 14) for a number, the value position of its variable otherwise."""
    c = task_cfg.context_len
    out = np.empty((len(tokens), 2), dtype=np.int64)
    for j, slot in enumerate((c + 1, c + 2)):
        tok = tokens[:, slot]
        is_var = tok >= task_cfg.var0
        var_at = np.argmax(tokens[:, :c] == tok[:, None], axis=1)
        out[:, j] = np.where(is_var, var_at + 1, slot)
    return out


def role_attention(model: torch.nn.Module, tokens: np.ndarray, task_cfg: TaskConfig) -> dict[str, float]:
    """Mean attention along the three roles of the circuit (chapter 9's annotated patterns):

    - ``value_to_variable``: layer 1, from each context value token to its variable (q-1);
    - ``eq_to_operands``: layer 1, from '=' to the two operand positions 13 and 14 (summed);
    - ``eq_to_needed``: layer 2, from '=' to the two positions holding the numbers it needs
      (:func:`needed_positions`, summed; 1.0 = all attention where the circuit says).
    """
    pat = attention_patterns(model, torch.as_tensor(tokens)).numpy()
    rows, pos = value_positions(tokens, task_cfg)
    c = task_cfg.context_len
    need = needed_positions(tokens, task_cfg)
    b = np.arange(len(tokens))
    eq2 = pat[1, b, -1, need[:, 0]] + pat[1, b, -1, need[:, 1]]  # two distinct positions
    return {
        "value_to_variable": float(pat[0, rows, pos, pos - 1].mean()) if len(rows) else float("nan"),
        "eq_to_operands": float((pat[0, :, -1, c + 1] + pat[0, :, -1, c + 2]).mean()),
        "eq_to_needed": float(eq2.mean()),
    }


def pattern_frame(model: torch.nn.Module, tokens: np.ndarray, task: Task) -> pd.DataFrame:
    """Tidy attention patterns of ONE sequence (16 tokens) for chapter 9's annotated heatmaps:
    columns ``layer`` (1, 2), ``query``, ``key`` (positions), ``query_token``, ``key_token``
    (``"pos token"`` labels), ``weight`` and ``role`` (the circuit's role of the cell, or "")."""
    tokens = np.asarray(tokens).reshape(1, -1)
    cfg = task.cfg
    pat = attention_patterns(model, torch.as_tensor(tokens))[:, 0].numpy()
    labels = [f"{i:>2} {task.token_str(int(t))}" for i, t in enumerate(tokens[0])]
    roles: dict[tuple[int, int, int], str] = {}
    for p in range(1, cfg.context_len):
        if tokens[0, p] < cfg.modulus and tokens[0, p - 1] >= cfg.var0:
            roles[(1, p, p - 1)] = "value reads its variable"
    for slot in (cfg.context_len + 1, cfg.context_len + 2):
        roles[(1, cfg.seq_len - 1, slot)] = "'=' reads the operands"
    for p in needed_positions(tokens, cfg)[0]:
        roles[(2, cfg.seq_len - 1, int(p))] = "'=' reads the numbers it adds"
    rows = []
    for layer in (1, 2):
        for q in range(cfg.seq_len):
            for k in range(q + 1):
                rows.append(
                    {
                        "layer": layer,
                        "query": q,
                        "key": k,
                        "query_token": labels[q],
                        "key_token": labels[k],
                        "weight": float(pat[layer - 1, q, k]),
                        "role": roles.get((layer, q, k), ""),
                    }
                )
    return pd.DataFrame(rows)
