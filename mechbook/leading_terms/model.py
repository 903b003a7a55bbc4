"""The paper's attention-only transformer on one-hot tokens (chapters 2-5).

    h^(0) = X                                        (one-hot rows, |V| wide)
    h^(l) = h^(l-1) + softmax(Mask(h^(l-1) W^(l) h^(l-1)^T + DM(P^(l)))) h^(l-1) V^(l)
    logits = h^(L) W_O

W^(l), V^(l), W_O are |V| x |V| (rows of W: query tokens, columns: key tokens), P^(l) has length T
and DM(P)[t, j] = P[t - j] for j <= t. Every parameter starts at exactly zero; there is no scaling,
LayerNorm, MLP or bias. Hook points follow TransformerLens names so ``run_with_cache`` works:
``hook_embed``, ``blocks.{l}.hook_resid_pre``, ``blocks.{l}.attn.hook_attn_scores`` (pre-softmax,
position bias and mask included), ``blocks.{l}.attn.hook_pattern``, ``blocks.{l}.hook_attn_out``,
``blocks.{l}.hook_resid_post``.

In training (no hooks attached, and a batch of at least |V| token positions) the first two layers
never multiply by a |V|-wide residual:
h^(0) W h^(0)^T is the gather W[x_t, x_j], h^(0) V is V[x], and h^(1) M = M[x] + A^(1) (V^(1) M)[x]
for M = W^(2), V^(2) (see :meth:`AttentionModel._fast_logits`). :func:`dense_reference_logits` is the literal formulation
(one-hot matmuls, a position bias built in a Python loop), kept as the oracle for tests and the
benchmark.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformer_lens import HookedRootModule
from transformer_lens.hook_points import HookPoint

from mechbook.device import default_device
from mechbook.validation import POSITIVE, at_least, check_allocatable, check_fields, one_of

DTYPES = {"float32": torch.float32, "float64": torch.float64}


@dataclass(frozen=True)
class ModelConfig:
    """Size of the attention-only model, in TransformerLens's field names: vocabulary |V|
    (``d_vocab``), context T (``n_ctx``), layers L (``n_layers``), parameter dtype."""

    d_vocab: int
    n_ctx: int
    n_layers: int = 3
    dtype: str = "float32"

    def __post_init__(self) -> None:
        check_fields(self, d_vocab=at_least(2), n_ctx=POSITIVE, n_layers=POSITIVE, dtype=one_of(sorted(DTYPES)))
        check_allocatable(
            self,
            self.n_parameters * DTYPES[self.dtype].itemsize,
            "its weights",
            "lower d_vocab (the tokenizer's vocabulary) or n_layers",
        )

    @property
    def n_parameters(self) -> int:
        """Trainable numbers of the model: W_O plus W, V (|V| x |V| each) and P (T) per layer."""
        return self.d_vocab**2 * (1 + 2 * self.n_layers) + self.n_layers * self.n_ctx

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]


def relative_position_index(context: int) -> torch.Tensor:
    """The (T, T) index t - j, clamped to 0 above the diagonal (those entries are masked anyway),
    so that ``P[index]`` is DM(P)."""
    t = torch.arange(context)
    return (t[:, None] - t[None, :]).clamp(min=0)


class Attention(nn.Module):
    """One attention layer: key-query W, value V, relative-position bias P (all zero at init)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        v, t, dt = cfg.d_vocab, cfg.n_ctx, cfg.torch_dtype
        self.W = nn.Parameter(torch.zeros(v, v, dtype=dt))
        self.V = nn.Parameter(torch.zeros(v, v, dtype=dt))
        self.P = nn.Parameter(torch.zeros(t, dtype=dt))
        self.register_buffer("pos_index", relative_position_index(t), persistent=False)
        self.register_buffer("causal", torch.ones(t, t, dtype=torch.bool).tril(), persistent=False)
        self.hook_attn_scores = HookPoint()
        self.hook_pattern = HookPoint()

    def pattern(self, scores: torch.Tensor) -> torch.Tensor:
        """softmax(Mask(scores + DM(P))) for token-token ``scores`` h W h^T of shape (batch, T, T)."""
        n = scores.shape[-1]
        bias = self.P.index_select(0, self.pos_index[:n, :n].reshape(-1)).view(n, n)
        scores = scores + bias.masked_fill(~self.causal[:n, :n], float("-inf"))  # DM(P) and the mask, T x T
        return self.hook_pattern(torch.softmax(self.hook_attn_scores(scores), dim=-1))


class Block(nn.Module):
    """Layer l: its attention and the residual hook points around it (h^(l) = h^(l-1) + attn_out)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.attn = Attention(cfg)
        self.hook_resid_pre = HookPoint()
        self.hook_attn_out = HookPoint()
        self.hook_resid_post = HookPoint()


class _Gather(torch.autograd.Function):
    """matrix[index] along the first dimension; the backward adds the gradient rows back with
    index_add_. Same values and gradients as index_select (why not index_select or F.embedding:
    mechbook/benchmarks/README.md). Used by the hook-free path (chapters 2-5)."""

    @staticmethod
    def forward(ctx, matrix: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(index)
        ctx.shape = matrix.shape
        return matrix.index_select(0, index)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (index,) = ctx.saved_tensors
        return grad.new_zeros(ctx.shape).index_add_(0, index, grad), None


class AttentionModel(HookedRootModule):
    """The paper's L-layer attention-only model (chapters 2-5); ``forward`` returns logits.

    Without hooks, on a batch of at least |V| token positions, the first two layers read the tokens
    directly (:meth:`_fast_logits`). With any hook attached, or on a smaller batch (there the |V|³
    products of the fast form cost more than the dense residual's b·T·|V|² ones: chapter 3's tiny
    theory-setting runs), every layer multiplies the (possibly edited) residual as the definition
    says, so hooks see and change exactly the definition's activations.
    """

    def __init__(self, cfg: ModelConfig, device: str | torch.device | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.hook_embed = HookPoint()
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.W_O = nn.Parameter(torch.zeros(cfg.d_vocab, cfg.d_vocab, dtype=cfg.torch_dtype))
        self.setup()
        self.to(device or default_device())

    def _check_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.ndim != 2:
            raise ValueError(f"tokens must have shape (batch, positions), got {tuple(tokens.shape)}")
        if tokens.shape[1] > self.cfg.n_ctx:
            raise ValueError(f"{tokens.shape[1]} positions exceed the model's context {self.cfg.n_ctx}")
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.cfg.d_vocab):
            raise ValueError(f"token ids must lie in [0, {self.cfg.d_vocab}); re-tokenize with this vocabulary")
        return tokens.to(device=self.W_O.device, dtype=torch.long)

    def _hooked(self) -> bool:
        """True when any hook point carries a forward or backward hook."""
        return any(hp._forward_hooks or hp._forward_pre_hooks or hp._backward_hooks for hp in self.hook_dict.values())

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (batch, T, |V|) for integer ``tokens`` (batch, T)."""
        tokens = self._check_tokens(tokens)
        if not self._hooked() and tokens.numel() >= self.cfg.d_vocab:
            return self._fast_logits(tokens)
        resid = self.hook_embed(F.one_hot(tokens, self.cfg.d_vocab).to(self.W_O.dtype))
        for block in self.blocks:
            resid = block.hook_resid_pre(resid)
            attn = block.attn
            scores = (resid @ attn.W) @ resid.transpose(1, 2)
            out = block.hook_attn_out(attn.pattern(scores) @ (resid @ attn.V))
            resid = block.hook_resid_post(resid + out)
        return resid @ self.W_O

    def _fast_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """The logits of :meth:`forward` without hooks: the first two layers read from the tokens.

        Layer 1: h^(0) W^(1) h^(0)^T is the gather W^(1)[x_t, x_j] and h^(0) V^(1) is V^(1)[x], so
        h^(1) = X + A^(1) V^(1)[x], A^(1) the layer's attention pattern. Layer 2: every product
        h^(1) M is therefore M[x] + A^(1) (V^(1) M)[x], here for M = W^(2) and V^(2): a |V|^3 product
        and a (batch, T, T) x (batch, T, |V|) attention product instead of a (batch T) x |V| x |V|
        one (T/|V| of the multiply-adds). Later layers multiply the dense residual: there the same
        expansion needs three attention products and three |V|^3 table products per matrix
        (mechbook/benchmarks/README.md, ``attention-model``, compares the two). Exact up to float
        rounding (tests compare it with :func:`dense_reference_logits`).
        """
        batch, n = tokens.shape
        v = self.cfg.d_vocab
        flat = tokens.reshape(-1)

        def rows(matrix: torch.Tensor) -> torch.Tensor:  # matrix[x], (batch, T, |V|)
            return _Gather.apply(matrix, flat).view(batch, n, v)

        first = self.blocks[0].attn
        pairs = (tokens[:, :, None] * v + tokens[:, None, :]).reshape(-1)
        pattern = first.pattern(_Gather.apply(first.W.reshape(-1), pairs).view(batch, n, n))
        ones = torch.ones(batch, n, 1, dtype=self.W_O.dtype, device=tokens.device)
        resid = (pattern @ rows(first.V)).scatter_add_(-1, tokens[..., None], ones)  # h^(1) = A^(1) V^(1)[x] + X
        if len(self.blocks) > 1:
            second = self.blocks[1].attn
            query_key = torch.baddbmm(rows(second.W), pattern, rows(first.V @ second.W))  # h^(1) W^(2)
            values = torch.baddbmm(rows(second.V), pattern, rows(first.V @ second.V))  # h^(1) V^(2)
            resid = torch.baddbmm(resid, second.pattern(query_key @ resid.transpose(1, 2)), values)
        for block in self.blocks[2:]:
            attn = block.attn
            scores = (resid @ attn.W) @ resid.transpose(1, 2)
            resid = torch.baddbmm(resid, attn.pattern(scores), resid @ attn.V)
        return resid @ self.W_O

    def loss(self, sequences: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy over every (sequence, position) of ``sequences`` (batch, T+1)."""
        return sequence_loss(self(sequences[:, :-1]), sequences)

    def load_checkpoint(self, state: Mapping[str, torch.Tensor]) -> AttentionModel:
        """Load a state dict, with a clear error when its names or shapes do not fit the config."""
        own = self.state_dict()
        missing, extra = sorted(set(own) - set(state)), sorted(set(state) - set(own))
        if missing or extra:
            raise ValueError(
                f"checkpoint does not fit this model: missing {missing}, unexpected {extra}; "
                f"was it saved from a model with n_layers={self.cfg.n_layers}?"
            )
        for name, tensor in own.items():
            if tuple(state[name].shape) != tuple(tensor.shape):
                raise ValueError(
                    f"checkpoint {name} has shape {tuple(state[name].shape)}, this model expects "
                    f"{tuple(tensor.shape)} (d_vocab={self.cfg.d_vocab}, n_ctx={self.cfg.n_ctx}); "
                    "build the model with the config the checkpoint was trained with"
                )
        self.load_state_dict({k: state[k].to(own[k].dtype) for k in own})
        return self


def sequence_loss(logits: torch.Tensor, sequences: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``logits`` (batch, T, |V|) against the next tokens ``sequences[:, 1:]``."""
    targets = sequences[:, 1:].to(device=logits.device, dtype=torch.long)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def dense_reference_logits(model: AttentionModel, tokens: torch.Tensor) -> torch.Tensor:
    """The literal formulation of the model, for tests and the benchmark (slow on purpose).

    Every layer multiplies the dense residual (one-hot at layer 0) by W and V, and DM(P) is filled
    entry by entry, DM[t, j] = P[t - j] for j <= t, in a Python loop.
    """
    tokens = model._check_tokens(tokens)
    n = tokens.shape[1]
    resid = F.one_hot(tokens, model.cfg.d_vocab).to(model.W_O.dtype)
    mask = torch.full((n, n), float("-inf"), dtype=resid.dtype, device=resid.device).triu(1)
    for block in model.blocks:
        attn = block.attn
        rows = []
        for t in range(n):
            row = [attn.P[t - j] if j <= t else attn.P.new_zeros(()) for j in range(n)]
            rows.append(torch.stack(row))
        dm = torch.stack(rows)
        scores = resid @ attn.W @ resid.transpose(1, 2) + dm + mask
        resid = resid + torch.softmax(scores, dim=-1) @ (resid @ attn.V)
    return resid @ model.W_O


def parameter_names(cfg: ModelConfig) -> list[str]:
    """Names of the trainable matrices in a fixed order: W_O, then W, V, P of each layer."""
    names = ["W_O"]
    for layer in range(cfg.n_layers):
        names += [f"blocks.{layer}.attn.{m}" for m in ("W", "V", "P")]
    return names
