"""The two-layer attention model of Assign and Add (chapters 8-11).

One head per layer, ``d_model = d_head = 128``, a ReLU MLP (``d_mlp = 512``) in layer 2 only,
learned absolute positions, causal mask, scale ``1/sqrt(d_head)``, untied embed/unembed, no
biases and no LayerNorm. With residual stream ``x``:

    x_0 = W_E[t] + W_pos
    x_1 = x_0 + Attn_1(x_0)
    x_2 = x_1 + Attn_2(x_1)
    logits = (x_2 + W_out^T ReLU(W_in^T x_2)) W_U          (at '=' only in training)

Parameters and hook points carry TransformerLens names (``blocks.1.attn.W_Q``,
``blocks.0.attn.hook_pattern`` ...), so ``run_with_cache`` and hooks work as in the library.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from transformer_lens import HookedRootModule
from transformer_lens.hook_points import HookPoint

from mechbook.validation import POSITIVE, SEED, check_allocatable, check_fields, one_of


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of the model; ``init_std`` is computed as ``0.8 / sqrt(d_model)``."""

    d_vocab: int = 74
    d_out: int = 59
    n_ctx: int = 16
    d_model: int = 128
    d_head: int = 128
    d_mlp: int = 512
    n_layers: int = 2
    seed: int = 42
    init_std: float = field(init=False)

    def __post_init__(self) -> None:
        check_fields(
            self,
            d_vocab=POSITIVE,
            d_out=POSITIVE,
            n_ctx=POSITIVE,
            d_model=POSITIVE,
            d_head=POSITIVE,
            d_mlp=POSITIVE,
            n_layers=one_of((2,), "this model has exactly 2 layers, with its MLP in layer 2 only"),
            seed=SEED,
        )
        object.__setattr__(self, "init_std", 0.8 / math.sqrt(self.d_model))
        check_allocatable(self, 4 * self.n_parameters, "its float32 weights", "lower d_model, d_head or d_mlp")

    @property
    def n_parameters(self) -> int:
        """Trainable numbers of the model: embeddings, four d_model x d_head maps per layer, layer
        2's MLP, the unembedding."""
        d = self.d_model
        return (
            (self.d_vocab + self.n_ctx) * d + self.n_layers * 4 * d * self.d_head + 2 * d * self.d_mlp + d * self.d_out
        )


class Attention(nn.Module):
    """One causal attention head: ``softmax(q k^T / sqrt(d_head)) v W_O`` with TL-shaped weights."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.scale = 1.0 / math.sqrt(cfg.d_head)
        self.W_Q = nn.Parameter(torch.empty(1, cfg.d_model, cfg.d_head))
        self.W_K = nn.Parameter(torch.empty(1, cfg.d_model, cfg.d_head))
        self.W_V = nn.Parameter(torch.empty(1, cfg.d_model, cfg.d_head))
        self.W_O = nn.Parameter(torch.empty(1, cfg.d_head, cfg.d_model))
        self.hook_q = HookPoint()
        self.hook_k = HookPoint()
        self.hook_v = HookPoint()
        self.hook_attn_scores = HookPoint()
        self.hook_pattern = HookPoint()
        self.hook_z = HookPoint()
        self.register_buffer("mask", torch.tril(torch.ones(cfg.n_ctx, cfg.n_ctx, dtype=torch.bool)), persistent=False)

    def forward(self, x: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """Attention output (B, P, d_model) for ``x`` (B, P, d_model); with ``last_only`` only the
        last position queries (output (B, 1, d_model)). Shapes at hooks: q/k/v/z (B, P, 1, d_head),
        scores/pattern (B, 1, P_q, P)."""
        n_pos = x.shape[1]
        xq = x[:, -1:] if last_only else x
        q = self.hook_q(torch.einsum("bpd,hde->bphe", xq, self.W_Q))
        k = self.hook_k(torch.einsum("bpd,hde->bphe", x, self.W_K))
        v = self.hook_v(torch.einsum("bpd,hde->bphe", x, self.W_V))
        scores = torch.einsum("bqhe,bkhe->bhqk", q, k) * self.scale
        mask = self.mask[n_pos - 1 : n_pos, :n_pos] if last_only else self.mask[:n_pos, :n_pos]
        scores = self.hook_attn_scores(scores.masked_fill(~mask, float("-inf")))
        pattern = self.hook_pattern(scores.softmax(dim=-1))
        z = self.hook_z(torch.einsum("bhqk,bkhe->bqhe", pattern, v))
        return torch.einsum("bqhe,hed->bqd", z, self.W_O)


class MLP(nn.Module):
    """``W_out^T ReLU(W_in^T x)`` without biases (layer 2 only)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.W_in = nn.Parameter(torch.empty(cfg.d_model, cfg.d_mlp))
        self.W_out = nn.Parameter(torch.empty(cfg.d_mlp, cfg.d_model))
        self.hook_pre = HookPoint()
        self.hook_post = HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        post = self.hook_post(torch.relu(self.hook_pre(x @ self.W_in)))
        return post @ self.W_out


class Block(nn.Module):
    """A residual block: attention, then (layer 2 only) the MLP."""

    def __init__(self, cfg: ModelConfig, has_mlp: bool) -> None:
        super().__init__()
        self.attn = Attention(cfg)
        self.mlp = MLP(cfg) if has_mlp else None
        self.hook_resid_pre = HookPoint()
        self.hook_attn_out = HookPoint()
        self.hook_resid_post = HookPoint()
        if has_mlp:
            self.hook_resid_mid = HookPoint()
            self.hook_mlp_out = HookPoint()

    def forward(self, x: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        x = self.hook_resid_pre(x)
        attn = self.hook_attn_out(self.attn(x, last_only=last_only))
        x = (x[:, -1:] if last_only else x) + attn
        if self.mlp is not None:
            x = self.hook_resid_mid(x)
            x = x + self.hook_mlp_out(self.mlp(x))
        return self.hook_resid_post(x)


class Embed(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.W_E = nn.Parameter(torch.empty(cfg.d_vocab, cfg.d_model))


class PosEmbed(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.W_pos = nn.Parameter(torch.empty(cfg.n_ctx, cfg.d_model))


class Unembed(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.W_U = nn.Parameter(torch.empty(cfg.d_model, cfg.d_out))


class AssignAddModel(HookedRootModule):
    """The Assign-and-Add transformer (about 281k parameters at the paper's size)."""

    def __init__(self, cfg: ModelConfig = ModelConfig()) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = Embed(cfg)
        self.pos_embed = PosEmbed(cfg)
        self.blocks = nn.ModuleList([Block(cfg, has_mlp=False), Block(cfg, has_mlp=True)])
        self.unembed = Unembed(cfg)
        self.hook_embed = HookPoint()
        self.hook_pos_embed = HookPoint()
        gen = torch.Generator().manual_seed(cfg.seed)
        with torch.no_grad():
            for p in self.parameters():
                p.normal_(0.0, cfg.init_std, generator=gen)
        self.setup()

    def forward(self, tokens: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """Logits over the ``d_out`` residues: (B, d_out) at the last position if ``last_only``
        (layer-2 query, MLP and unembedding computed there only), else (B, P, d_out)."""
        if tokens.ndim != 2 or tokens.shape[1] > self.cfg.n_ctx:
            raise ValueError(f"tokens must be (batch, positions <= {self.cfg.n_ctx}), got shape {tuple(tokens.shape)}")
        n_pos = tokens.shape[1]
        x = self.hook_embed(self.embed.W_E[tokens]) + self.hook_pos_embed(self.pos_embed.W_pos[:n_pos])
        x = self.blocks[0](x)
        x = self.blocks[1](x, last_only=last_only)
        logits = x @ self.unembed.W_U
        return logits[:, -1] if last_only else logits

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):  # type: ignore[override]
        """Load weights, with a clear error when they come from a model of another configuration."""
        own = self.state_dict()
        wrong = [
            f"{k}: checkpoint {tuple(v.shape)} vs model {tuple(own[k].shape)}"
            for k, v in state_dict.items()
            if k in own and tuple(v.shape) != tuple(own[k].shape)
        ]
        missing = sorted(set(own) - set(state_dict))
        unexpected = sorted(set(state_dict) - set(own))
        if wrong or (strict and (missing or unexpected)):
            details = "; ".join(
                wrong + [f"missing {missing}"] * bool(missing) + [f"unexpected {unexpected}"] * bool(unexpected)
            )
            raise ValueError(
                f"this checkpoint was saved from a model with another configuration ({details}); "
                f"build AssignAddModel with the ModelConfig it was trained with (this model: {self.cfg})"
            )
        return super().load_state_dict(
            {k: v.to(own[k].dtype) for k, v in state_dict.items()}, strict=strict, assign=assign
        )


def stack_parameters(models: list[AssignAddModel], device: str | torch.device) -> dict[str, torch.Tensor]:
    """The parameters of ``models`` stacked along a new first axis: ``{name: (K, *shape)}`` leaf
    tensors on ``device`` that require grad (the training state of :func:`stacked_logits`)."""
    names = [n for n, _ in models[0].named_parameters()]
    return {
        n: torch.stack([dict(m.named_parameters())[n].detach().cpu() for m in models]).to(device).requires_grad_()
        for n in names
    }


def stacked_logits(
    params: dict[str, torch.Tensor], tokens: torch.Tensor, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Logits at the last position, (K, B, d_out) in float32, of K models at once: ``params`` as
    :func:`stack_parameters` gives them, ``tokens`` (K, B, P). The training and evaluation forward
    of chapters 8-11 (:func:`mechbook.assign_add.train.train_stacked`; a run trained alone is a
    stack of one); the same function as :meth:`AssignAddModel.forward` with ``last_only``.

    Written for speed: Q, K and V of a layer are one product, every product is a batched matrix
    product over the K runs (so run k's arithmetic does not depend on K), and with ``dtype``
    ``torch.bfloat16`` the products run in bf16 on inputs cast once each (weights once per call,
    each activation once where it enters products), while the residual stream, the softmax and the
    logits stay float32: what bf16 autocast computes, without its cast per operation.
    """
    K, B, P = tokens.shape
    w = {n: p[:, 0] if p.ndim == 4 else p for n, p in params.items()}  # drop the one-head axis
    low = {n: v.to(dtype) for n, v in w.items() if n not in ("embed.W_E", "pos_embed.W_pos")}
    d_vocab, h = w["embed.W_E"].shape[1], w["blocks.0.attn.W_Q"].shape[-1]
    scale = 1.0 / math.sqrt(h)
    # embedding: one lookup in the K tables laid end to end
    offsets = (torch.arange(K, device=tokens.device) * d_vocab).view(K, 1, 1)
    x0 = F.embedding(tokens + offsets, w["embed.W_E"].flatten(0, 1)) + w["pos_embed.W_pos"][:, None, :P]
    x0 = x0.view(K, B * P, -1)
    # layer 1: all positions, causal
    wqkv = torch.cat([low["blocks.0.attn.W_Q"], low["blocks.0.attn.W_K"], low["blocks.0.attn.W_V"]], dim=-1)
    q, k, v = torch.bmm(x0.to(dtype), wqkv).view(K * B, P, 3 * h).split(h, dim=-1)
    scores = torch.bmm(q, k.transpose(1, 2)).float() * scale
    causal = torch.ones(P, P, dtype=torch.bool, device=tokens.device).tril()
    pattern = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
    z = torch.bmm(pattern.to(dtype), v).view(K, B * P, h)
    x1 = x0 + torch.bmm(z, low["blocks.0.attn.W_O"])
    # layer 2: keys and values at all positions, the query at '=' only
    x1_low = x1.to(dtype)
    wkv = torch.cat([low["blocks.1.attn.W_K"], low["blocks.1.attn.W_V"]], dim=-1)
    k2, v2 = torch.bmm(x1_low, wkv).view(K * B, P, 2 * h).split(h, dim=-1)
    q2 = torch.bmm(x1_low.view(K, B, P, -1)[:, :, -1], low["blocks.1.attn.W_Q"]).view(K * B, 1, h)
    pattern2 = (torch.bmm(q2, k2.transpose(1, 2)).float() * scale).softmax(dim=-1)
    z2 = torch.bmm(pattern2.to(dtype), v2).view(K, B, h)
    x2 = x1.view(K, B, P, -1)[:, :, -1] + torch.bmm(z2, low["blocks.1.attn.W_O"])
    # layer 2's MLP and the unembedding, at '=' only
    hidden = torch.relu(torch.bmm(x2.to(dtype), low["blocks.1.mlp.W_in"]))
    x3 = x2 + torch.bmm(hidden, low["blocks.1.mlp.W_out"])
    return torch.bmm(x3.to(dtype), low["unembed.W_U"]).float()
