"""The QK2 gradient at uniform attention and chapter 10's readings of it (mechbook.assign_add.theory)."""

import itertools

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tolerance import assert_close_scaled

from mechbook.assign_add import circuits, theory
from mechbook.assign_add.circuits import qk
from mechbook.assign_add.model import AssignAddModel, ModelConfig
from mechbook.assign_add.runs import SEED_RUNS
from mechbook.assign_add.task import Task, TaskConfig
from mechbook.assign_add.theory import block_similarity, gradient_variable_block, loss_with_qk2, qk2_gradient

TC = TaskConfig()
SMOKE_TRAIN = SEED_RUNS["smoke"].train


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(1)
    return AssignAddModel(SMOKE_TRAIN.model).double().eval()


@pytest.fixture(scope="module")
def tiny():
    model = AssignAddModel(ModelConfig(d_model=6, d_head=4, d_mlp=8, seed=1)).double().eval()
    tokens, labels = Task().sample(24, np.random.default_rng(0))
    return model, torch.from_numpy(tokens), torch.from_numpy(labels)


def test_replaced_scores_with_the_models_own_form_give_the_models_loss(tiny):
    model, tokens, labels = tiny
    with torch.no_grad():
        plain = torch.nn.functional.cross_entropy(model(tokens, last_only=True), labels)
        replaced = loss_with_qk2(model, tokens, labels, qk(model, 1))
    assert replaced.item() == pytest.approx(plain.item(), rel=1e-10)


def test_zero_form_is_uniform_attention(tiny):
    model, tokens, labels = tiny
    saved = model.blocks[1].attn.W_Q.detach().clone()
    with torch.no_grad():
        model.blocks[1].attn.W_Q.zero_()
        try:
            zero_q = torch.nn.functional.cross_entropy(model(tokens, last_only=True), labels)
        finally:
            model.blocks[1].attn.W_Q.copy_(saved)
        at_zero = loss_with_qk2(model, tokens, labels, torch.zeros(6, 6, dtype=torch.float64))
    assert at_zero.item() == pytest.approx(zero_q.item(), rel=1e-10)


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 100))
def test_gradient_matches_central_finite_differences(tiny, seed):
    model, tokens, labels = tiny
    rng = np.random.default_rng(seed)
    M = torch.from_numpy(rng.normal(scale=0.3, size=(6, 6)))
    grad = qk2_gradient(model, tokens, labels, M)
    eps = 1e-6
    # Each loss (about log 59) carries round-off up to c * terms * eps64 * loss, terms its chain of
    # sums: the mean over 24 sequences, the log-sum-exp over 59 answers, and the forward's
    # products and softmaxes (2 x (d_model + d_head + positions + d_head) + d_model + d_mlp + d_model
    # = 80 at this size); the central difference divides two of them by 2 eps, so its round-off is
    # within c * terms * eps64 * (loss / eps), about 1.2e-6 (measured: 1e-9 on three kernel paths,
    # already 0.4 of the former rel 1e-5, abs 1e-9 at the smallest entries). The truncation,
    # eps^2 / 6 times a third derivative, is 1e-12. The entries are 1e-4 to 2e-2: a wrong sign, a
    # transposed M or a missing 1/sqrt(d_head) still fails.
    terms = 24 + 59 + 2 * (6 + 4 + 16 + 4) + 6 + 8 + 6
    for i, j in rng.integers(0, 6, size=(4, 2)):
        up, down = M.clone(), M.clone()
        up[i, j] += eps
        down[i, j] -= eps
        with torch.no_grad():
            up_loss, down_loss = loss_with_qk2(model, tokens, labels, up), loss_with_qk2(model, tokens, labels, down)
        fd = (up_loss - down_loss).item() / (2 * eps)
        scale = max(up_loss.item(), down_loss.item()) / eps
        assert_close_scaled(grad[i, j].item(), fd, terms=terms, scale=scale)


def test_gradient_leaves_the_model_untouched(tiny):
    model, tokens, labels = tiny
    before = {k: v.clone() for k, v in model.state_dict().items()}
    qk2_gradient(model, tokens, labels)
    assert all(p.grad is None and p.requires_grad for p in model.parameters())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_gradient_block_is_square_in_variables(tiny):
    model, tokens, labels = tiny
    block = gradient_variable_block(model, Task().cfg, tokens, labels)
    assert block.shape == (12, 12) and np.isfinite(block).all()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 1000), scale=st.floats(0.1, 10), shift=st.floats(-5, 5))
def test_block_similarity_ignores_scale_and_offset(seed, scale, shift):
    a = np.random.default_rng(seed).normal(size=(5, 5))
    assert block_similarity(a, scale * a + shift) == pytest.approx(1.0)
    assert block_similarity(a, -a) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="constant"):
        block_similarity(a, np.ones((5, 5)))


def test_zero_query_step_block_is_the_autograd_step_of_a_zeroed_query(tiny):
    """Literal route: zero W_Q2, backpropagate the model's own loss to W_Q2, take the step on
    M = W_Q W_K^T / sqrt(d) and restrict it to the variable subspace."""
    import copy

    from mechbook.assign_add.circuits import variable_directions
    from mechbook.assign_add.theory import zero_query_step_block

    model, tokens, labels = tiny
    cfg = Task().cfg
    zeroed = copy.deepcopy(model)
    with torch.no_grad():
        zeroed.blocks[1].attn.W_Q.zero_()
    loss = torch.nn.functional.cross_entropy(zeroed(tokens, last_only=True), labels)
    (g_q,) = torch.autograd.grad(loss, zeroed.blocks[1].attn.W_Q)
    W_K = model.blocks[1].attn.W_K[0].detach()
    step = -g_q[0] @ W_K.T / W_K.shape[1] ** 0.5
    U = variable_directions(model, cfg)
    np.testing.assert_allclose(
        zero_query_step_block(model, cfg, tokens, labels), (U @ step @ U.T).numpy(), rtol=1e-8, atol=1e-14
    )


def test_after_phase1_step_picks_the_last_checkpoint_before_the_binding_jump():
    import pandas as pd

    from mechbook.assign_add.theory import after_phase1_step

    steps = list(range(0, 3001, 100))
    add = [min(1.0, s / 500) for s in steps]  # phase 1 (0.9) at step 500
    bind = [0.3 if s < 2000 else 0.98 for s in steps]  # a sharp jump between 1900 and 2000
    misplaced = ("1var_misplaced", "2var_misplaced_one", "2var_misplaced_both")
    history = pd.DataFrame(
        [
            {"step": s, "pool": p, "accuracy": a}
            for s, x, y in zip(steps, add, bind)
            for p, a in (("0var_train", x), ("1var_train", y), *((m, y) for m in misplaced))
        ]
    )
    assert after_phase1_step(history, [0, 500, 1000, 1500, 2500, 3000]) == 1500
    assert after_phase1_step(history, [0, 300, 2500]) == 300  # nothing kept between phase 1 and the jump
    flat = history.assign(accuracy=lambda h: h["accuracy"].where(h["pool"] == "0var_train", 0.3))
    assert after_phase1_step(flat, [0, 1000, 3000]) == 3000  # no jump: the last checkpoint
    with pytest.raises(ValueError, match="checkpoints"):
        after_phase1_step(history, [])


def test_gradient_split_by_keys_adds_up_to_the_full_gradient(tiny):
    from mechbook.assign_add.theory import qk2_gradient_by_keys

    model, tokens, labels = tiny
    full = qk2_gradient(model, tokens, labels)
    context = qk2_gradient_by_keys(model, tokens, labels, list(range(12)))
    query = qk2_gradient_by_keys(model, tokens, labels, [12, 13, 14, 15])
    torch.testing.assert_close(context + query, full, rtol=1e-9, atol=1e-12)
    assert not torch.allclose(context, full)


def test_gradient_block_over_training_reads_every_checkpoint(tmp_path, monkeypatch):
    from mechbook.assign_add.circuits import block_diagonality
    from mechbook.assign_add.config import TrainConfig, load_model
    from mechbook.assign_add.theory import gradient_block_over_training
    from mechbook.assign_add.train import train

    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    monkeypatch.setenv("MECHBOOK_QUIET", "1")
    cfg = TrainConfig(
        steps=4,
        batch_size=8,
        eval_every=2,
        eval_per_pool=4,
        keep_every=2,
        resume_every=2,
        model=ModelConfig(d_model=6, d_head=4, d_mlp=8),
    )
    result = train(cfg, device="cpu")
    tokens, labels = (torch.from_numpy(x) for x in Task().sample(16, np.random.default_rng(1)))
    table = gradient_block_over_training(result, tokens, labels)
    assert list(table["step"]) == sorted(result.checkpoints)
    last = load_model(result, max(result.checkpoints)).double()
    expected = block_diagonality(gradient_variable_block(last, Task().cfg, tokens, labels))["ratio"]
    assert table["ratio"].iloc[-1] == pytest.approx(expected, rel=1e-3)  # float16 checkpoint vs float32 final
    assert gradient_block_over_training(result, tokens, labels).equals(table)  # from the cache


def test_pool_batch_stacks_the_named_pools_in_order():
    from mechbook.assign_add.theory import pool_batch

    pools = Task().eval_pools(5, seed=1)
    tokens, labels = pool_batch(pools)
    assert torch.equal(tokens[:5], torch.from_numpy(pools["1var_train"][0]))
    assert torch.equal(labels[5:], torch.from_numpy(pools["2var_train"][1]))
    zero, _ = pool_batch(pools, ["0var_train"])
    assert torch.equal(zero, torch.from_numpy(pools["0var_train"][0]))


def test_direction_spread_against_a_literal_loop(model):
    u = circuits.variable_directions(model, TC).numpy()
    cosines = [
        abs(float(u[i] @ u[j]) / (np.linalg.norm(u[i]) * np.linalg.norm(u[j])))
        for i, j in itertools.permutations(range(len(u)), 2)
    ]
    lengths = [float(np.linalg.norm(row)) for row in u]
    got = theory.direction_spread(model, TC)
    assert got["mean_abs_cos"] == pytest.approx(sum(cosines) / len(cosines), rel=1e-9)
    assert got["norm_ratio"] == pytest.approx(max(lengths) / min(lengths), rel=1e-9)


def test_key_split_adds_up_to_the_whole_gradient(model):
    tokens, labels = (torch.from_numpy(x) for x in Task(TC).sample(24, np.random.default_rng(0)))
    parts = theory.key_split_blocks(model, TC, tokens, labels)
    whole = theory.gradient_variable_block(model, TC, tokens, labels)
    assert list(parts) == ["context", "query"]
    np.testing.assert_allclose(sum(parts.values()), whole, rtol=1e-6, atol=1e-9 * np.abs(whole).max())


def test_first_identity_step_needs_more_than_half_the_rows():
    over = pd.DataFrame({"step": [100, 200, 300], "rows_diag_max": [0.1, 0.5, 0.9]})
    assert theory.first_identity_step(over) == 300
    assert theory.first_identity_step(over.assign(rows_diag_max=0.0)) is None


def test_read_gradient_matches_its_parts(model):
    task = Task(TC)
    tokens, labels = (torch.from_numpy(x) for x in task.sample(16, np.random.default_rng(1)))
    zero = tuple(torch.from_numpy(x) for x in task.eval_pools(8, seed=5)["0var_train"])
    torch.manual_seed(2)
    late = AssignAddModel(SMOKE_TRAIN.model).double().eval()
    r = theory.read_gradient(model, late, TC, (tokens, labels), zero, step=300, final_step=900)
    grad = theory.gradient_variable_block(model, TC, tokens, labels)
    assert r.learned == pytest.approx(theory.block_similarity(grad, circuits.variable_qk_block(late, TC)))
    assert r.form == pytest.approx(theory.block_similarity(grad, theory.associative_memory_block(model, TC)))
    assert r.zero_ratio == pytest.approx(
        circuits.block_diagonality(theory.gradient_variable_block(model, TC, *zero))["ratio"]
    )
    assert r.numbers()["gradient_query_diag_mean"] == pytest.approx(np.diag(r.split["query"]).mean())
