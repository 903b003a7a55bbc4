"""The table-lookup forward (mechbook.assign_add.lookup) is the hooked model's function: logits
and gradients against AssignAddModel and against the direct products of stacked_logits, and its
hand-written backward against autograd's, over sizes, stacks and random weights."""

import torch
import torch.nn.functional as F
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tolerance import assert_close_scaled

from mechbook.assign_add.lookup import autograd_lookup_logits, lookup_logits
from mechbook.assign_add.model import AssignAddModel, ModelConfig, stack_parameters, stacked_logits
from mechbook.determinism import deterministic


def _models(d_model: int, d_head: int, d_mlp: int, runs: int, scale: float) -> list[AssignAddModel]:
    """``runs`` models of one shape with random weights ``scale`` times the init's, so the
    attention patterns are far from uniform (the init's are nearly so)."""
    out = []
    for k in range(runs):
        model = AssignAddModel(ModelConfig(d_model=d_model, d_head=d_head, d_mlp=d_mlp, seed=k))
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(scale)
        out.append(model.double())
    return out


ROWS = 74 + 16  # rows of the lookup's table X = [W_E; W_pos]: every token, then every position


def _logit_terms(d_model: int, d_head: int, d_mlp: int, n_pos: int) -> int:
    """The reductions behind a logit, stage after stage (to first order their rounding errors add,
    and layer 2's softmax passes layer 1's on): the two mixes over the 2 x ROWS rows of [X; VO]
    (the residual at '=' and layer 2's pattern-weighted residual), six products over d_model and
    four over d_head (queries, keys, values, outputs, the MLP's input, the unembedding), four
    softmaxes and mixes over the positions, and the MLP's two sides of d_mlp. The hooked model
    sums fewer terms (positions instead of table rows); the bound covers the longer chain."""
    return 2 * 2 * ROWS + 6 * d_model + 4 * d_head + 4 * n_pos + 2 * d_mlp


SIZES = st.tuples(st.sampled_from([8, 16, 32]), st.sampled_from([4, 8, 16]), st.sampled_from([8, 24]))
CASES = {
    "size": SIZES,
    "runs": st.integers(1, 3),
    "batch": st.integers(1, 6),
    "n_pos": st.integers(1, 16),
    "scale": st.sampled_from([1.0, 4.0]),
    "seed": st.integers(0, 10_000),
}
"""(d_model, d_head, d_mlp), runs in the stack, batch, prompt length, weight scale, seed."""


@settings(max_examples=25, deadline=None)
@given(**CASES)
def test_lookup_logits_are_the_hooked_models_logits(size, runs, batch, n_pos, scale, seed):
    d_model, d_head, d_mlp = size
    models = _models(d_model, d_head, d_mlp, runs, scale)
    params = {n: p.detach() for n, p in stack_parameters(models, "cpu").items()}
    tokens = torch.randint(0, 74, (runs, batch, n_pos), generator=torch.Generator().manual_seed(seed))
    got = lookup_logits(params, tokens, torch.float64)
    assert got.shape == (runs, batch, 59)
    for k, model in enumerate(models):
        want = model(tokens[k], last_only=True)
        # float64, 444-728 terms: 7.9e-13-1.3e-12 of the largest logit (up to 8.5e4 at scale 4; measured
        # at most 380 eps of it on the AVX2, AVX-512 and default kernel paths)
        assert_close_scaled(got[k], want, terms=_logit_terms(d_model, d_head, d_mlp, n_pos))


def test_lookup_gradients_are_the_hooked_models_gradients():
    models = _models(16, 8, 24, 2, 4.0)
    params = stack_parameters(models, "cpu")
    tokens = torch.randint(0, 74, (2, 5, 16), generator=torch.Generator().manual_seed(3))
    labels = torch.randint(0, 59, (2, 5), generator=torch.Generator().manual_seed(4))
    logits = lookup_logits(params, tokens, torch.float64)
    F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="sum").backward()
    # the backward runs the forward's chain again and sums every weight gradient over the batch's
    # 5 x 16 positions; round-off is relative to the largest gradient entry of any parameter (a
    # parameter whose own gradients are small carries the round-off of the shared computation)
    terms = 2 * _logit_terms(16, 8, 24, 16) + 5 * 16
    for k, model in enumerate(models):
        F.cross_entropy(model(tokens[k], last_only=True), labels[k], reduction="sum").backward()
        scale = max(float(p.grad.abs().max()) for p in model.parameters())
        for name, p in model.named_parameters():
            # float64, 1280 terms: 2.3e-12 of the largest gradient (9e3-1.3e4 here; measured at most
            # 1925 eps of it over twelve seeds and three kernel paths, 1300 on an Intel Xeon)
            assert_close_scaled(params[name].grad[k], p.grad, terms=terms, scale=scale, msg=name)


@settings(max_examples=25, deadline=None)
@example(size=(16, 8, 24), runs=1, batch=4, n_pos=13, scale=4.0, seed=1)  # 1.03x the one-chain bound
@given(**CASES)
def test_the_written_backward_is_autograds_backward_of_the_same_function(size, runs, batch, n_pos, scale, seed):
    """The hand-written backward of lookup_logits against autograd's derivative of the same tables
    (autograd_lookup_logits), in float64, over sizes, stacks, prompt lengths and weight scales."""
    d_model, d_head, d_mlp = size
    models = _models(d_model, d_head, d_mlp, runs, scale)
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 74, (runs, batch, n_pos), generator=gen)
    labels = torch.randint(0, 59, (runs, batch), generator=gen)
    grads = []
    for logits_fn in (lookup_logits, autograd_lookup_logits):
        params = stack_parameters(models, "cpu")
        logits = logits_fn(params, tokens, torch.float64)
        F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="sum").backward()
        grads.append({n: p.grad for n, p in params.items()})
    # each side runs the whole chain with its own rounding (the autograd side's products are not
    # the written side's), so their difference is bounded by the two chains' errors added
    terms = 2 * (2 * _logit_terms(d_model, d_head, d_mlp, n_pos) + batch * n_pos)
    scale_of = max(float(g.abs().max()) for g in grads[1].values())
    for name, want in grads[1].items():
        assert_close_scaled(grads[0][name], want, terms=terms, scale=scale_of, msg=name)


def test_lookup_logits_match_the_direct_products_in_float32_at_the_papers_size():
    params = {n: p.detach() for n, p in stack_parameters([AssignAddModel(ModelConfig())], "cpu").items()}
    tokens = torch.randint(0, 74, (1, 64, 16), generator=torch.Generator().manual_seed(0))
    direct = stacked_logits(params, tokens)
    got = lookup_logits(params, tokens)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, direct, rtol=1e-4, atol=1e-5)


@deterministic()
def test_a_run_in_a_stack_computes_what_it_computes_alone_bit_for_bit():
    """On one thread (how every run trains), each run's products are the same kernels on the same
    numbers whatever the stack's size."""
    models = _models(16, 16, 32, 3, 1.0)
    params = {n: p.detach().float() for n, p in stack_parameters(models, "cpu").items()}
    tokens = torch.randint(0, 74, (3, 7, 16), generator=torch.Generator().manual_seed(1))
    stacked = lookup_logits(params, tokens)
    for k in range(3):
        alone = lookup_logits({n: p[k : k + 1] for n, p in params.items()}, tokens[k : k + 1])
        assert torch.equal(stacked[k], alone[0])
