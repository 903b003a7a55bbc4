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
from types import SimpleNamespace

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


def autograd_lookup_logits(
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


def _addmm(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype, alpha: float = 1.0) -> torch.Tensor:
    """``c + alpha * a @ b`` batched over the runs, the product's operands in ``dtype``."""
    if a.dtype == b.dtype == c.dtype == dtype:
        return torch.baddbmm(c, a, b, alpha=alpha)
    return c + alpha * _mm(a, b, dtype)


def _scatter_rows(weights: torch.Tensor, tokens: torch.Tensor, n_rows: int, n_vocab: int) -> torch.Tensor:
    """``Σ_j w_j e_j`` for each sequence and each weight set: ``weights`` (K, B, S, P), S sets of
    weights on the positions, scattered onto the ``n_rows`` rows of ``X`` (row ``tokens_j`` and
    row ``V + j`` each get ``w_j``), as (K, B, S, n_rows)."""
    K, B, S, P = weights.shape
    out = weights.new_zeros(K, B, S, n_rows)
    out.scatter_add_(-1, tokens[:, :, None, :].expand(K, B, S, P), weights)
    out[..., n_vocab : n_vocab + P] += weights
    return out


def _gather_rows(values: torch.Tensor, tokens: torch.Tensor, n_vocab: int) -> torch.Tensor:
    """``e_j · v`` for each position j and each of S value sets: ``values`` (K, B, S, rows) per row
    of ``X``, read at position j's token and at position j, as (K, B, S, P). The adjoint of
    :func:`_scatter_rows`."""
    K, B, S, _ = values.shape
    P = tokens.shape[-1]
    return values.gather(-1, tokens[:, :, None, :].expand(K, B, S, P)) + values[..., n_vocab : n_vocab + P]


_SAVED = (
    "tokens",
    "pairs",
    "by_run",
    "last_rows",
    "X",
    "QK",
    "Qr",
    "Kr",
    "Wv",
    "Wo",
    "Wvo",
    "VO",
    "XVO",
    "pattern",
    "w1",
    "x1",
    "M2",
    "N",
    "mixed",
    "pattern2",
    "w2",
    "Wq2",
    "Wk2",
    "Wv2",
    "Wo2",
    "Wvo2",
    "T2",
    "x2",
    "hidden",
    "Win",
    "Wout",
    "x3",
    "WU",
)
"""What :class:`_Lookup`'s forward keeps for its backward, in order."""


class _Lookup(torch.autograd.Function):
    """:func:`lookup_logits` as one autograd node: the forward of the module's docstring, and its
    backward written out product by product (each product's two adjoint products, each gather's
    scatter and each scatter's gather), so a step runs a few dozen kernels where autograd's
    recording of the same forward ran several hundred."""

    @staticmethod
    def forward(ctx, tokens, dtype, *weights):
        ctx.heads = tuple(w.ndim == 4 for w in weights)  # attention maps carry a one-head axis: dropped here
        E, Pos, Wq, Wk, Wv, Wo, Wq2, Wk2, Wv2, Wo2, Win, Wout, WU = (w[:, 0] if w.ndim == 4 else w for w in weights)
        K, B, P = tokens.shape
        V = E.shape[1]
        R = V + Pos.shape[1]
        s = 1.0 / math.sqrt(Wq.shape[-1])
        X = torch.cat([E, Pos], dim=1)  # (K, R, d)
        QK = torch.cat([Wq * s, Wk], dim=-1)
        qk = _mm(X, QK, dtype)
        Qr, Kr = qk.split(Wq.shape[-1], dim=-1)
        A = _mm(Qr, Kr.transpose(1, 2), dtype)  # (K, R, R): e_i A e_jᵀ is layer 1's score
        Wvo = _mm(Wv, Wo, dtype)
        VO = _mm(X, Wvo, dtype)
        XVO = torch.cat([X, VO], dim=1)  # (K, 2R, d)

        # layer 1's scores from four reads of A, then its pattern
        runs = torch.arange(K, device=tokens.device)
        by_run = tokens + (runs * V).view(K, 1, 1)  # rows of K (V x P) tables laid end to end
        pairs = ((tokens + (runs * R).view(K, 1, 1)) * R)[..., :, None] + tokens[
            ..., None, :
        ]  # A[t_i, t_j] in A's K R² entries
        scores = A.reshape(-1).take(pairs)
        scores += F.embedding(by_run, A[:, :V, V : V + P].reshape(K * V, P))  # A[t_i, V + j]
        scores += F.embedding(by_run, A[:, V : V + P, :V].transpose(1, 2).reshape(K * V, P)).transpose(-1, -2)
        causal = torch.ones(P, P, dtype=torch.bool, device=tokens.device).tril()
        scores += A[:, None, V : V + P, V : V + P].masked_fill(~causal, float("-inf"))  # A[V + i, V + j], masked
        pattern = scores.softmax(dim=-1)  # (K, B, P, P)

        # the residual at '=': its own rows, plus the rows its pattern mixes through VO
        w1 = _scatter_rows(pattern[:, :, -1:, :], tokens, R, V)[:, :, 0]  # (K, B, R)
        last_rows = tokens[..., -1] + (runs * R).view(K, 1)
        x1 = _addmm(X.reshape(K * R, -1)[last_rows] + X[:, None, V + P - 1], w1, VO, dtype)  # (K, B, d)

        # layer 2's scores at '=' against every key, read from x1 N, N = (W_Q2 W_K2ᵀ / sqrt(d_head)) [X; VO]ᵀ
        M2 = _mm(Wq2 * s, Wk2.transpose(1, 2), dtype)
        N = _mm(M2, XVO.transpose(1, 2), dtype)  # (K, d, 2R)
        on_rows = _mm(x1, N, dtype).view(K, B, 2, R)
        own, mixed = _gather_rows(on_rows, tokens, V).unbind(2)  # x0_j · u, and Σ_k VO_k · u over j's rows
        pattern2 = (own + (pattern @ mixed[..., None])[..., 0]).softmax(dim=-1)  # (K, B, P)
        through = (pattern2[..., None, :] @ pattern)[..., 0, :]  # c = q p
        w2 = _scatter_rows(torch.stack([pattern2, through], dim=2), tokens, R, V).view(K, B, 2 * R)
        Wvo2 = _mm(Wv2, Wo2, dtype)
        T2 = _mm(XVO, Wvo2, dtype)  # (K, 2R, d): layer 2's output of each row
        x2 = _addmm(x1, w2, T2, dtype)

        # layer 2's MLP and the unembedding, at '=' only
        hidden = torch.relu(_mm(x2, Win, dtype))
        x3 = _addmm(x2, hidden, Wout, dtype)
        ctx.dtype, ctx.s, ctx.n_vocab = dtype, s, V
        ctx.names = _SAVED
        ctx.save_for_backward(
            tokens,
            pairs,
            by_run,
            last_rows,
            X,
            QK,
            Qr,
            Kr,
            Wv,
            Wo,
            Wvo,
            VO,
            XVO,
            pattern,
            w1,
            x1,
            M2,
            N,
            mixed,
            pattern2,
            w2,
            Wq2,
            Wk2,
            Wv2,
            Wo2,
            Wvo2,
            T2,
            x2,
            hidden,
            Win,
            Wout,
            x3,
            WU,
        )
        return _mm(x3, WU, dtype)

    @staticmethod
    def backward(ctx, g_logits):
        v = SimpleNamespace(**dict(zip(ctx.names, ctx.saved_tensors)))
        dtype, s = ctx.dtype, ctx.s
        K, B, P = v.tokens.shape
        R = v.X.shape[1]
        V = ctx.n_vocab
        t = lambda m: m.transpose(1, 2)  # noqa: E731
        g_logits = g_logits.contiguous()

        # unembedding and MLP
        gWU = _mm(t(v.x3), g_logits, dtype)
        gx3 = _mm(g_logits, t(v.WU), dtype)
        gWout = _mm(t(v.hidden), gx3, dtype)
        g_hidden = torch.ops.aten.threshold_backward(_mm(gx3, t(v.Wout), dtype), v.hidden, 0.0)
        gWin = _mm(t(v.x2), g_hidden, dtype)
        gx2 = _addmm(gx3, g_hidden, t(v.Win), dtype)

        # x2 = x1 + w2 T2, T2 = [X; VO] W_V2 W_O2
        gw2 = _mm(gx2, t(v.T2), dtype).view(K, B, 2, R)
        gT2 = _mm(t(v.w2), gx2, dtype)
        gWvo2 = _mm(t(v.XVO), gT2, dtype)
        gXVO = _mm(gT2, t(v.Wvo2), dtype)
        g_weights2 = _gather_rows(gw2, v.tokens, V)
        g_pattern2, g_through = g_weights2.unbind(2)
        # through = q p; pattern2 = softmax(own + p mixed)
        g_pattern2 = g_pattern2 + (v.pattern @ g_through[..., None])[..., 0]
        g_pattern = v.pattern2[..., :, None] * g_through[..., None, :]
        g_scores2 = torch._softmax_backward_data(g_pattern2, v.pattern2, -1, v.pattern2.dtype)
        g_pattern.addcmul_(g_scores2[..., :, None], v.mixed[..., None, :])
        g_mixed = (g_scores2[..., None, :] @ v.pattern)[..., 0, :]
        g_on = _scatter_rows(torch.stack([g_scores2, g_mixed], dim=2), v.tokens, R, V).view(K, B, 2 * R)
        # on = x1 N, N = M2 [X; VO]ᵀ, M2 = s W_Q2 W_K2ᵀ
        gx1 = _addmm(gx2, g_on, t(v.N), dtype)
        gN = _mm(t(v.x1), g_on, dtype)
        gM2 = _mm(gN, v.XVO, dtype)
        gXVO = _addmm(gXVO, t(gN), v.M2, dtype)
        gWq2 = _mm(gM2, v.Wk2, dtype) * s
        gWk2 = _mm(t(gM2), v.Wq2, dtype) * s

        # x1 = X[t_last] + X[V + P - 1] + w1 VO, w1 the last row of layer 1's pattern scattered
        gX = gXVO[:, :R].clone()
        gVO = _addmm(gXVO[:, R:], t(v.w1), gx1, dtype)
        gX.view(K * R, -1).index_add_(0, v.last_rows.view(-1), gx1.reshape(K * B, -1))
        gX[:, V + P - 1] += gx1.sum(1)
        gw1 = _mm(gx1, t(v.VO), dtype)
        g_pattern[:, :, -1] += _gather_rows(gw1[:, :, None], v.tokens, V)[:, :, 0]

        # layer 1's pattern and scores, back onto the four parts of A
        g_scores = torch._softmax_backward_data(g_pattern, v.pattern, -1, v.pattern.dtype)
        gA = v.X.new_zeros(K, R, R)
        gA.view(-1).scatter_add_(0, v.pairs.view(-1), g_scores.reshape(-1))
        rows = v.by_run.view(-1)
        tok_pos = v.X.new_zeros(K * V, P).index_add_(0, rows, g_scores.reshape(-1, P))
        pos_tok = v.X.new_zeros(K * V, P).index_add_(0, rows, g_scores.transpose(-1, -2).reshape(-1, P))
        gA[:, :V, V : V + P] += tok_pos.view(K, V, P)
        gA[:, V : V + P, :V] += pos_tok.view(K, V, P).transpose(1, 2)
        gA[:, V : V + P, V : V + P] += g_scores.sum(1)
        # A = (X W_Q s)(X W_K)ᵀ, VO = X W_V W_O
        g_qk = torch.cat([_mm(gA, v.Kr, dtype), _mm(t(gA), v.Qr, dtype)], dim=-1)
        gX = _addmm(gX, g_qk, t(v.QK), dtype)
        gQK = _mm(t(v.X), g_qk, dtype)
        gX = _addmm(gX, gVO, t(v.Wvo), dtype)
        gWvo = _mm(t(v.X), gVO, dtype)
        h = v.Qr.shape[-1]
        grads = (
            gX[:, :V],
            gX[:, V:],
            gQK[..., :h] * s,
            gQK[..., h:],
            _mm(gWvo, t(v.Wo), dtype),
            _mm(t(v.Wv), gWvo, dtype),
            gWq2,
            gWk2,
            _mm(gWvo2, t(v.Wo2), dtype),
            _mm(t(v.Wv2), gWvo2, dtype),
            gWin,
            gWout,
            gWU,
        )
        return None, None, *(g.unsqueeze(1) if head else g for g, head in zip(grads, ctx.heads))


def lookup_logits(
    params: dict[str, torch.Tensor], tokens: torch.Tensor, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Logits at the last position, (K, B, d_out) in float32, of K models at once: ``params`` as
    :func:`~mechbook.assign_add.model.stack_parameters` gives them (K stacked models), ``tokens``
    (K, B, P) int64; the function of :func:`autograd_lookup_logits` with layer 2's query and value
    maps folded into the tables (``x1 N`` with ``N = W_Q2 W_K2ᵀ [X; VO]ᵀ / sqrt(d_head)``, and
    ``[X; VO] W_V2 W_O2``) and a hand-written backward (:class:`_Lookup`). The training and
    evaluation forward of chapters 8-11. ``dtype`` as in :func:`autograd_lookup_logits`."""
    return _Lookup.apply(tokens, dtype, *(params[n] for n in _PARAMETERS))


_PARAMETERS = (
    "embed.W_E",
    "pos_embed.W_pos",
    "blocks.0.attn.W_Q",
    "blocks.0.attn.W_K",
    "blocks.0.attn.W_V",
    "blocks.0.attn.W_O",
    "blocks.1.attn.W_Q",
    "blocks.1.attn.W_K",
    "blocks.1.attn.W_V",
    "blocks.1.attn.W_O",
    "blocks.1.mlp.W_in",
    "blocks.1.mlp.W_out",
    "unembed.W_U",
)
"""The parameters :class:`_Lookup` takes, in its order."""
