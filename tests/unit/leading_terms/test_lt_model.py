"""The attention-only model of chapters 2-5: fast form vs the literal one, hooks, checkpoints."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tolerance import assert_close_scaled

from mechbook.leading_terms.model import AttentionModel, ModelConfig, dense_reference_logits, relative_position_index


def random_model(vocab=11, context=7, layers=3, seed=0, scale=0.7):
    torch.manual_seed(seed)
    model = AttentionModel(ModelConfig(vocab, context, layers, dtype="float64"), device="cpu")
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, scale)
    return model


def logit_terms(layers: int, vocab: int = 11, context: int = 7) -> int:
    """The reductions behind a logit of ``random_model``, stage after stage (to first order their
    rounding errors add, and a later layer's softmax passes an earlier layer's on): per layer the
    score product h W h^T (two sums of |V|), the value product h V (|V|), the softmax and the
    pattern product (T each); then h W_O (|V|). 199 at 4 layers: float64 allows 3.5e-13 of the
    largest logit (measured at most 0.17 of that over 333 seeds on the AVX2, AVX-512 and default
    kernel paths)."""
    return layers * (3 * vocab + 2 * context) + vocab


def test_fresh_model_is_all_zero_and_predicts_uniformly():
    model = AttentionModel(ModelConfig(13, 5), device="cpu")
    assert all((p == 0).all() for p in model.parameters())
    seqs = torch.randint(0, 13, (3, 6))
    assert model.loss(seqs).item() == pytest.approx(np.log(13), rel=1e-6)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 1000), batch=st.integers(1, 4), length=st.integers(1, 7), layers=st.integers(1, 4))
def test_fast_forward_and_gradients_equal_the_dense_reference(seed, batch, length, layers):
    """The hook-free path (gathers in layer 1, the h^(1) M = M[x] + A^(1) (V^(1) M)[x] expansion in
    layer 2) against the literal one-hot formulation, for 1 to 4 layers."""
    model = random_model(seed=seed, layers=layers)
    gen = torch.Generator().manual_seed(seed)
    seqs = torch.randint(0, 11, (batch, length + 1), generator=gen)
    targets = seqs[:, 1:].reshape(-1)
    fast = model._fast_logits(seqs[:, :-1])
    slow = dense_reference_logits(model, seqs[:, :-1])
    assert_close_scaled(fast, slow, terms=logit_terms(layers))
    g_fast = torch.autograd.grad(
        torch.nn.functional.cross_entropy(fast.reshape(-1, 11), targets), list(model.parameters())
    )
    g_slow = torch.autograd.grad(
        torch.nn.functional.cross_entropy(slow.reshape(-1, 11), targets), list(model.parameters())
    )
    # round-off relative to the largest gradient entry of any parameter: a parameter whose own
    # gradient is ~1e-11 (a saturated softmax) still carries the round-off of the shared computation
    scale = max(float(b.abs().max()) for b in g_slow)
    for a, b in zip(g_fast, g_slow):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10 * scale)


def test_position_index_builds_dm_by_its_definition():
    T = 9
    p = torch.randn(T, dtype=torch.float64)
    dm = p[relative_position_index(T)]
    for t in range(T):
        for j in range(t + 1):
            assert dm[t, j] == p[t - j]


def test_run_with_cache_gives_the_documented_hooks():
    model = random_model(vocab=10, context=6, layers=2)
    tokens = torch.randint(0, 10, (3, 6))
    logits, cache = model.run_with_cache(tokens)
    expected = {"hook_embed": (3, 6, 10)}
    for l in range(2):
        expected |= {
            f"blocks.{l}.hook_resid_pre": (3, 6, 10),
            f"blocks.{l}.attn.hook_attn_scores": (3, 6, 6),
            f"blocks.{l}.attn.hook_pattern": (3, 6, 6),
            f"blocks.{l}.hook_attn_out": (3, 6, 10),
            f"blocks.{l}.hook_resid_post": (3, 6, 10),
        }
    assert {k: tuple(v.shape) for k, v in cache.items()} == expected
    torch.testing.assert_close(cache["hook_embed"], torch.nn.functional.one_hot(tokens, 10).double())
    pattern = cache["blocks.1.attn.hook_pattern"]
    torch.testing.assert_close(pattern.sum(-1), torch.ones(3, 6, dtype=torch.float64))
    assert (pattern.triu(1) == 0).all()
    assert torch.isinf(cache["blocks.0.attn.hook_attn_scores"].triu(1)[..., 0, 1:]).all()
    resid = cache["blocks.1.hook_resid_post"]
    torch.testing.assert_close(resid, cache["blocks.1.hook_resid_pre"] + cache["blocks.1.hook_attn_out"])
    torch.testing.assert_close(logits, resid @ model.W_O)


def test_checkpoint_round_trip_and_clear_errors():
    model = random_model()
    other = AttentionModel(ModelConfig(11, 7, 3, dtype="float64"), device="cpu").load_checkpoint(model.state_dict())
    tokens = torch.randint(0, 11, (2, 7))
    torch.testing.assert_close(other(tokens), model(tokens))
    with pytest.raises(ValueError, match="d_vocab=12"):
        AttentionModel(ModelConfig(12, 7, 3), device="cpu").load_checkpoint(model.state_dict())
    with pytest.raises(ValueError, match="n_layers=2"):
        AttentionModel(ModelConfig(11, 7, 2), device="cpu").load_checkpoint(model.state_dict())


def test_bad_config_and_inputs_say_what_to_do():
    with pytest.raises(ValueError, match=r"ModelConfig\.d_vocab must be at least 2, got 0"):
        ModelConfig(0, 5)
    with pytest.raises(ValueError, match="dtype must be one of"):
        ModelConfig(5, 5, dtype="float16")
    model = AttentionModel(ModelConfig(5, 4), device="cpu")
    with pytest.raises(ValueError, match="exceed the model's context"):
        model(torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="re-tokenize"):
        model(torch.full((1, 3), 5))


def test_hooks_see_and_edit_layer_zero_like_any_other():
    model = random_model()
    tokens = torch.randint(0, 11, (2, 7))
    plain = model(tokens)
    seen = {}
    model.add_hook("hook_embed", lambda act, hook: seen.setdefault("embed", act.clone()))
    assert_close_scaled(model(tokens), plain, terms=logit_terms(3))  # the dense path against the fast one
    model.reset_hooks()
    model.add_hook("blocks.0.hook_resid_pre", lambda act, hook: torch.zeros_like(act))
    zeroed = model(tokens)
    model.reset_hooks()
    assert "embed" in seen and torch.equal(zeroed, torch.zeros_like(zeroed))
    torch.testing.assert_close(model(tokens), plain)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 1000), layers=st.integers(1, 4))
def test_hooked_path_computes_the_fast_paths_logits_and_gradients(seed, layers):
    """With a no-op hook attached the model multiplies the dense residual at every layer (the
    definition); its logits and gradients equal the hook-free fast path's."""
    model = random_model(seed=seed, layers=layers)
    tokens = torch.randint(0, 11, (3, 7), generator=torch.Generator().manual_seed(seed))
    params = list(model.parameters())
    fast = model(tokens)  # 21 positions, at least |V| = 11: the fast path
    g_fast = torch.autograd.grad(fast.square().sum(), params)
    model.add_hook("blocks.0.hook_resid_pre", lambda act, hook: act)
    assert model._hooked()
    hooked = model(tokens)
    g_hooked = torch.autograd.grad(hooked.square().sum(), params)
    model.reset_hooks()
    assert_close_scaled(fast, hooked, terms=logit_terms(layers))
    # round-off relative to the largest gradient entry of any parameter: a parameter whose own
    # gradient is tiny (1e-2 beside others of 1e5 at 4 layers) carries the others' round-off
    scale = max(float(b.abs().max()) for b in g_hooked)
    for a, b in zip(g_fast, g_hooked):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12 * scale)


def test_a_batch_smaller_than_the_vocabulary_takes_the_dense_path():
    """Below |V| token positions the forward multiplies the dense residual (cheaper there) and gives
    the fast path's logits."""
    model = random_model(seed=3, layers=3)
    tokens = torch.randint(0, 11, (2, 4), generator=torch.Generator().manual_seed(3))  # 8 < 11 positions
    called = []
    original = model._fast_logits
    model._fast_logits = lambda t: called.append(t) or original(t)
    small = model(tokens)
    assert not called
    model(torch.randint(0, 11, (3, 4)))  # 12 >= 11 positions
    assert len(called) == 1
    assert_close_scaled(small, original(tokens), terms=logit_terms(3))


@settings(max_examples=15, deadline=None)
@given(vocab=st.integers(2, 40), context=st.integers(1, 12), layers=st.integers(1, 3))
def test_n_parameters_counts_the_models_parameters(vocab, context, layers):
    cfg = ModelConfig(vocab, context, layers)
    assert cfg.n_parameters == sum(p.numel() for p in AttentionModel(cfg).parameters())


def test_a_vocabulary_this_machine_cannot_hold_is_refused_with_one_line():
    with pytest.raises(ValueError, match=r"^ModelConfig needs about [\d,.]+ GiB for its weights, .*lower d_vocab") as e:
        ModelConfig(10**7, 64)
    assert "\n" not in str(e.value)
