"""The Assign-and-Add model (chapters 8-11): shapes, hooks, the fast path, a literal reference."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tolerance import assert_close_scaled

from mechbook import validation
from mechbook.assign_add.config import TrainConfig
from mechbook.assign_add.model import AssignAddModel, ModelConfig, stack_parameters, stacked_logits
from mechbook.determinism import deterministic

SMALL = ModelConfig(d_model=32, d_head=32, d_mlp=64)


def forward_terms(cfg: ModelConfig) -> int:
    """The reductions behind a logit, stage after stage (to first order their rounding errors add):
    in each layer the query, key and value products (d_model), the scores and the output product
    (d_head each) and the softmax and mix over the positions (n_ctx); then the MLP's two products
    (d_model, d_mlp) and the unembedding (d_model). 352 for SMALL, 1568 at the paper's size."""
    return 2 * (cfg.d_model + 2 * cfg.d_head + cfg.n_ctx) + 2 * cfg.d_model + cfg.d_mlp


def reference_logits(model: AssignAddModel, tokens: torch.Tensor) -> torch.Tensor:
    """Slow literal forward pass, one sequence and one query position at a time."""
    sd = {k: v.double() for k, v in model.state_dict().items()}
    out = []
    for seq in tokens:
        x = sd["embed.W_E"][seq] + sd["pos_embed.W_pos"][: len(seq)]
        for layer in (0, 1):
            p = f"blocks.{layer}."
            q, k, v = (x @ sd[p + f"attn.W_{n}"][0] for n in "QKV")
            new = []
            for i in range(len(seq)):
                scores = torch.stack([q[i] @ k[j] / math.sqrt(q.shape[1]) for j in range(i + 1)])
                w = torch.softmax(scores, 0)
                new.append(x[i] + sum(w[j] * v[j] for j in range(i + 1)) @ sd[p + "attn.W_O"][0])
            x = torch.stack(new)
        x = x + torch.relu(x @ sd["blocks.1.mlp.W_in"]) @ sd["blocks.1.mlp.W_out"]
        out.append(x @ sd["unembed.W_U"])
    return torch.stack(out)


def test_parameter_count_and_names_match_the_paper():
    model = AssignAddModel()
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
    assert sum(p.numel() for p in model.parameters()) == 281_216
    assert shapes["blocks.0.attn.W_Q"] == (1, 128, 128) and shapes["blocks.1.attn.W_O"] == (1, 128, 128)
    assert shapes["blocks.1.mlp.W_in"] == (128, 512) and shapes["unembed.W_U"] == (128, 59)
    assert not any(n.startswith("blocks.0.mlp") for n in shapes)
    assert not any("b_" in n or "ln" in n for n in shapes)
    std = torch.cat([p.flatten() for p in model.parameters()]).std().item()
    assert abs(std - 0.8 / math.sqrt(128)) < 0.002


@settings(max_examples=20, deadline=None)
@given(d_model=st.integers(1, 40), d_head=st.integers(1, 40), d_mlp=st.integers(1, 80))
def test_n_parameters_counts_the_models_parameters(d_model, d_head, d_mlp):
    cfg = ModelConfig(d_model=d_model, d_head=d_head, d_mlp=d_mlp)
    assert cfg.n_parameters == sum(p.numel() for p in AssignAddModel(cfg).parameters())


def test_sizes_this_machine_cannot_hold_are_refused_with_one_line(monkeypatch):
    with pytest.raises(
        ValueError, match=r"^ModelConfig needs about [\d,.]+ GiB for its float32 weights, more than"
    ) as e:
        ModelConfig(d_model=10**6, d_head=10**6)
    assert "\n" not in str(e.value) and "lower d_model" in str(e.value)
    with pytest.raises(ValueError, match=r"^TrainConfig needs about .* GiB for training .*lower batch_size"):
        TrainConfig(batch_size=10**9)
    monkeypatch.setattr(validation, "physical_memory", lambda: None)  # a system that does not say: no refusal
    assert TrainConfig(batch_size=10**9).batch_size == 10**9


def test_forward_matches_literal_reference_and_fast_path():
    model = AssignAddModel(SMALL)
    tokens = torch.randint(0, 74, (3, 16))
    full = model(tokens)
    assert full.shape == (3, 16, 59)
    torch.testing.assert_close(full.double(), reference_logits(model, tokens), rtol=1e-4, atol=1e-5)
    # two float32 paths (products over 3 positions vs 48): 3.4e-4 of the largest logit (measured 2.4
    # eps32 of it on three kernel paths; the former atol 1e-6 was 8 eps32 of it)
    assert_close_scaled(model(tokens, last_only=True), full[:, -1], terms=forward_terms(SMALL))


def test_causal_mask_later_tokens_do_not_change_earlier_logits():
    model = AssignAddModel(SMALL)
    a = torch.randint(0, 74, (2, 16))
    b = a.clone()
    b[:, 10:] = torch.randint(0, 74, (2, 6))
    torch.testing.assert_close(model(a)[:, :10], model(b)[:, :10])


def test_run_with_cache_exposes_transformerlens_hooks():
    model = AssignAddModel(SMALL)
    _, cache = model.run_with_cache(torch.randint(0, 74, (2, 16)))
    assert cache["blocks.0.attn.hook_pattern"].shape == (2, 1, 16, 16)
    torch.testing.assert_close(cache["blocks.1.attn.hook_pattern"].sum(-1), torch.ones(2, 1, 16))
    assert cache["blocks.1.mlp.hook_post"].shape == (2, 16, 64)
    resid = cache["blocks.0.hook_resid_post"]
    torch.testing.assert_close(resid, cache["hook_embed"] + cache["hook_pos_embed"] + cache["blocks.0.hook_attn_out"])


def test_same_seed_same_weights():
    a, b = AssignAddModel(SMALL), AssignAddModel(SMALL)
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="exactly 2 layers"):
        ModelConfig(n_layers=3)
    with pytest.raises(ValueError, match="positions <= 16"):
        AssignAddModel(SMALL)(torch.zeros(2, 17, dtype=torch.long))
    with pytest.raises(ValueError, match="another configuration"):
        AssignAddModel(SMALL).load_state_dict(AssignAddModel(ModelConfig(d_model=16, d_head=16, d_mlp=64)).state_dict())


@pytest.mark.parametrize("cfg", [SMALL, ModelConfig()])
def test_benchmark_flop_count_is_torchs_count_of_a_training_step(cfg):
    """The benchmark's GFLOP/s divide by :func:`step_flops`: it must be what torch's own counter
    sees in a forward and backward of the training forward (the paper's size: 5.57 GFLOP)."""
    from torch.utils.flop_counter import FlopCounterMode

    from mechbook.benchmarks.assign_add import step_flops

    params = stack_parameters([AssignAddModel(cfg)], "cpu")
    tokens = torch.randint(0, cfg.d_vocab, (1, 8, cfg.n_ctx))
    with FlopCounterMode(display=False) as counter:
        stacked_logits(params, tokens).sum().backward()
    assert step_flops(cfg, 8) == counter.get_total_flops()


def test_stacked_forward_is_each_model_forward_bit_for_bit_and_bf16_close():
    """The training forward (K models at once) equals each model's own forward at '=' on one
    thread, a stack of one equals its slice of a stack of three, and bf16 products stay close."""
    models = [AssignAddModel(ModelConfig(d_model=32, d_head=32, d_mlp=64, seed=s)) for s in range(3)]
    params = stack_parameters(models, "cpu")
    tokens = torch.randint(0, 74, (3, 5, 16))
    with deterministic(), torch.no_grad():
        stacked = stacked_logits(params, tokens)
        one = stacked_logits({n: p[1:2] for n, p in params.items()}, tokens[1:2])
        for k, model in enumerate(models):
            assert torch.equal(stacked[k], model(tokens[k], last_only=True))
        assert torch.equal(one[0], stacked[1])
        low = stacked_logits(params, tokens, torch.bfloat16)
    assert low.dtype == torch.float32 and not torch.equal(low, stacked)
    torch.testing.assert_close(low, stacked, rtol=0.05, atol=0.02)
