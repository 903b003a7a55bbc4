"""The Assign-and-Add model's logits as table lookups: Part II's training and evaluation forward
(chapters 8-11, :func:`mechbook.assign_add.train.train_stacked`).

The model has no nonlinearity and no normalisation between its embedding and layer 2's attention,
and layer 2's query, MLP and unembedding are needed at '=' only. So every position-wise linear map
before layer 2's MLP acts on rows of ``X = [W_E; W_pos]``, the (V+P) x d table of the token and
position embeddings, and the model reads as tables over those V+P rows instead of products over
the B·P residuals of a batch. With ``e_i`` the sum of the one-hot rows of position i's token and of
position i itself (so ``x0_i = e_i X``):

- layer 1's score of key j at query i is ``e_i A e_jᵀ`` with ``A = (X W_Q)(X W_K)ᵀ / sqrt(d_head)``,
  a (V+P) x (V+P) table read by four gathers;
- layer 1's output at i is ``Σ_j p_ij e_j (X W_V W_O)``, so the residual is ``x1_i = (e_i X) +
  (Σ_j p_ij e_j) VO`` with ``VO = X W_V W_O``;
- layer 2's query at '=' is ``u = x1_last W_Q2 W_K2ᵀ / sqrt(d_head)``; its score of key j is
  ``x1_j · u = e_j (X u) + Σ_k p_jk e_k (VO u)``, two gathers from the (V+P)-vectors ``X u``
  and ``VO u`` of each sequence;
- layer 2's pattern-weighted residual is ``Σ_j q_j x1_j = (Σ_j q_j e_j) X + (Σ_k c_k e_k) VO``
  with ``c = q p``: token-space weights scattered from the P positions, then one product with the
  stacked tables ``[X; VO]``; its output is that times ``W_V2 W_O2``.

A step's matrix work falls from O(B·P·d²) (every residual times every weight) to O(B·(V+P)·d)
plus O((V+P)·d²) plus layer 2's MLP at '=', which then dominates. The function is the same as
:meth:`~mechbook.assign_add.model.AssignAddModel.forward` with ``last_only`` and as
:func:`~mechbook.assign_add.model.stacked_logits` (the direct products, kept as the benchmark's
baseline), to rounding (tests/unit/assign_add/test_aa_lookup.py); the additions come in another order, so the
rounding and hence a run's bits are its own. ``python -m mechbook bench assign-add`` measures the
speed-up.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def _mm(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``a @ b`` batched over the runs, with both operands in ``dtype`` and the result in ``a``'s dtype."""
    if a.dtype == b.dtype == dtype:
        return torch.bmm(a, b)
    return torch.bmm(a.to(dtype), b.to(dtype)).to(a.dtype)


def _row_weights(weights: torch.Tensor, tokens: torch.Tensor, n_rows: int, n_vocab: int) -> torch.Tensor:
    """``Σ_j w_j e_j`` for each sequence: ``weights`` (..., P) on the positions scattered onto the
    V+P rows of ``X`` (row ``tokens_j`` and row ``V + j`` each get ``w_j``), as (..., V+P)."""
    n_pos = weights.shape[-1]
    on_tokens = torch.zeros(*weights.shape[:-1], n_vocab, dtype=weights.dtype, device=weights.device)
    on_tokens = on_tokens.scatter_add(-1, tokens, weights)
    tail = torch.zeros(*weights.shape[:-1], n_rows - n_vocab - n_pos, dtype=weights.dtype, device=weights.device)
    return torch.cat([on_tokens, weights, tail], dim=-1)


def _read_rows(values: torch.Tensor, tokens: torch.Tensor, n_vocab: int) -> torch.Tensor:
    """``e_j · v`` for each position j: ``values`` (..., V+P) per row of ``X``, read at position
    j's token and at position j, as (..., P)."""
    n_pos = tokens.shape[-1]
    return values.gather(-1, tokens) + values[..., n_vocab : n_vocab + n_pos]


def lookup_logits(
    params: dict[str, torch.Tensor], tokens: torch.Tensor, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Logits at the last position, (K, B, d_out) in float32, of K models at once: ``params`` as
    :func:`~mechbook.assign_add.model.stack_parameters` gives them (K stacked models), ``tokens``
    (K, B, P) int64. With ``dtype`` ``torch.bfloat16`` the matrix products take bf16 operands (a
    speed option where the hardware multiplies bf16 natively); the tables' gathers, the softmaxes
    and the residual sums stay float32."""
    K, B, P = tokens.shape
    w = {n: p[:, 0] if p.ndim == 4 else p for n, p in params.items()}  # drop the one-head axis
    embed, pos = w["embed.W_E"], w["pos_embed.W_pos"]
    V = embed.shape[1]
    R = V + pos.shape[1]  # rows of X: every token, then every position
    scale = 1.0 / math.sqrt(w["blocks.0.attn.W_Q"].shape[-1])
    X = torch.cat([embed, pos], dim=1)  # (K, R, d)

    # layer 1: the score table A over pairs of rows, and the value-output table VO
    qk = _mm(X, torch.cat([w["blocks.0.attn.W_Q"] * scale, w["blocks.0.attn.W_K"]], dim=-1), dtype)
    q_rows, k_rows = qk.split(qk.shape[-1] // 2, dim=-1)
    A = _mm(q_rows, k_rows.transpose(1, 2), dtype)  # (K, R, R)
    VO = _mm(X, _mm(w["blocks.0.attn.W_V"], w["blocks.0.attn.W_O"], dtype), dtype)  # (K, R, d)
    positions = torch.arange(P, device=tokens.device)
    # e_i A e_jᵀ: token-token, token-position, position-token and position-position parts
    by_run = tokens + (torch.arange(K, device=tokens.device) * V).view(K, 1, 1)  # rows of the K tables laid end to end
    tok_tok = A[:, :V, :V].reshape(-1).gather(0, (by_run[..., :, None] * V + tokens[..., None, :]).reshape(-1))
    tok_pos = F.embedding(by_run, A[:, :V, V : V + P].reshape(K * V, P))  # (K, B, P_i, P_j)
    pos_tok = F.embedding(by_run, A[:, V : V + P, :V].transpose(1, 2).reshape(K * V, P)).transpose(-1, -2)
    scores = tok_tok.view(K, B, P, P) + tok_pos + pos_tok + A[:, None, V : V + P, V : V + P]
    causal = torch.ones(P, P, dtype=torch.bool, device=tokens.device).tril()
    pattern = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)  # (K, B, P, P)

    # the residual at '=': its own rows, plus the rows its pattern mixes through VO
    last = torch.zeros(P, device=tokens.device).index_fill(0, positions[-1:], 1.0).expand(K, B, P)
    XVO = torch.cat([X, VO], dim=1)  # (K, 2R, d)
    mix_last = torch.cat([_row_weights(last, tokens, R, V), _row_weights(pattern[:, :, -1], tokens, R, V)], dim=-1)
    x1_last = _mm(mix_last, XVO, dtype)  # (K, B, d)

    # layer 2: the query at '=' against every key, read through X u and VO u
    u = _mm(x1_last, _mm(w["blocks.1.attn.W_Q"] * scale, w["blocks.1.attn.W_K"].transpose(1, 2), dtype), dtype)
    on_rows = _mm(u, XVO.transpose(1, 2), dtype)  # (K, B, 2R): X u, then VO u
    own = _read_rows(on_rows[..., :R], tokens, V)  # (K, B, P): x0_j · u
    mixed = _read_rows(on_rows[..., R:], tokens, V)  # (K, B, P): VO_k · u summed over k's rows
    pattern2 = (own + (pattern * mixed[:, :, None, :]).sum(-1)).softmax(dim=-1)  # (K, B, P)
    through = (pattern2[..., None] * pattern).sum(-2)  # c = q p: (K, B, P)
    mix2 = torch.cat([_row_weights(pattern2, tokens, R, V), _row_weights(through, tokens, R, V)], dim=-1)
    resid2 = _mm(mix2, XVO, dtype)  # Σ_j q_j x1_j: (K, B, d)
    x2 = x1_last + _mm(resid2, _mm(w["blocks.1.attn.W_V"], w["blocks.1.attn.W_O"], dtype), dtype)

    # layer 2's MLP and the unembedding, at '=' only
    hidden = torch.relu(_mm(x2, w["blocks.1.mlp.W_in"], dtype))
    x3 = x2 + _mm(hidden, w["blocks.1.mlp.W_out"], dtype)
    return _mm(x3, w["unembed.W_U"], dtype)
