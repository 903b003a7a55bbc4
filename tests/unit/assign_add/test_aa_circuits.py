"""Attention and composition analyses (mechbook.assign_add.circuits, chapter 9), checked on a
small randomly initialised model against literal per-entry computations."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_aa_release import SHARED, needs_release

from mechbook.assign_add import circuits as C
from mechbook.assign_add import release
from mechbook.assign_add.model import AssignAddModel, ModelConfig
from mechbook.assign_add.task import Task, TaskConfig

CFG = ModelConfig(d_model=16, d_head=8, d_mlp=32, seed=3)


@pytest.fixture(scope="module")
def model():
    return AssignAddModel(CFG).eval()


@pytest.fixture(scope="module")
def task():
    return Task(TaskConfig())


def test_attention_patterns_are_causal_distributions(model, task):
    tokens = torch.from_numpy(task.sample(8, np.random.default_rng(0))[0])
    pat = C.attention_patterns(model, tokens)
    assert pat.shape == (2, 8, 16, 16)
    torch.testing.assert_close(pat.sum(-1), torch.ones(2, 8, 16))
    assert torch.all(pat.triu(1) == 0)


def test_positional_qk_matches_a_literal_loop(model):
    scores = C.positional_qk(model, 0)
    P = model.pos_embed.W_pos.detach()
    W_Q, W_K = model.blocks[0].attn.W_Q[0].detach(), model.blocks[0].attn.W_K[0].detach()
    for q in range(16):
        for k in range(16):
            if k > q:
                assert math.isnan(scores[q, k])
            else:
                ref = float((P[q] @ W_Q) @ (P[k] @ W_K) / math.sqrt(CFG.d_head))
                assert scores[q, k] == pytest.approx(ref, rel=1e-4, abs=1e-6)


def test_positional_qk_predicts_the_layer1_pattern_of_a_position_only_input(model):
    """With the token embedding zeroed, layer-1 scores are exactly P QK P^T."""
    tokens = torch.zeros(1, 16, dtype=torch.long)
    with torch.no_grad():
        saved = model.embed.W_E.clone()
        model.embed.W_E.zero_()
        try:
            _, cache = model.run_with_cache(tokens, names_filter=lambda n: n == "blocks.0.attn.hook_attn_scores")
        finally:
            model.embed.W_E.copy_(saved)
    got = cache["blocks.0.attn.hook_attn_scores"][0, 0].numpy()
    np.testing.assert_allclose(np.nan_to_num(C.positional_qk(model, 0), nan=-np.inf), got, rtol=1e-4, atol=1e-6)


def test_previous_token_share_on_a_planted_matrix():
    scores = np.full((6, 6), np.nan)
    for q in range(6):
        scores[q, : q + 1] = 0.0
        if q >= 1:
            scores[q, q - 1] = 1.0
    scores[5, 5] = 2.0  # one query prefers itself
    assert C.previous_token_share(scores, range(1, 6)) == pytest.approx(0.8)
    with pytest.raises(ValueError):
        C.previous_token_share(scores, [0])


def test_variable_qk_block_matches_a_literal_loop(model, task):
    block = C.variable_qk_block(model, task.cfg)
    a0, a1 = model.blocks[0].attn, model.blocks[1].attn
    E = model.embed.W_E.detach()
    for i in range(12):
        for j in range(12):
            ui = E[62 + i] @ a0.W_V[0] @ a0.W_O[0]
            uj = E[62 + j] @ a0.W_V[0] @ a0.W_O[0]
            ref = float(((ui @ a1.W_Q[0]) @ (uj @ a1.W_K[0])).detach() / math.sqrt(CFG.d_head))
            assert block[i, j] == pytest.approx(ref, rel=1e-4, abs=1e-7)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 12), seed=st.integers(0, 1000), boost=st.floats(2.0, 10.0))
def test_block_diagonality_of_identity_plus_noise(n, seed, boost):
    noise = np.random.default_rng(seed).uniform(-1, 1, size=(n, n))
    stats = C.block_diagonality(noise + boost * np.eye(n))
    assert stats["rows_diag_max"] == 1.0 and stats["margin"] > 0
    assert stats["ratio"] > 1
    literal_off = np.mean([abs(noise[i, j]) for i in range(n) for j in range(n) if i != j])
    assert stats["offdiag_abs_mean"] == pytest.approx(literal_off)
    assert stats["diag_mean"] == pytest.approx(np.trace(noise) / n + boost)


def test_block_diagonality_rejects_non_square():
    with pytest.raises(ValueError, match="square"):
        C.block_diagonality(np.zeros((3, 4)))


def test_direct_sequences_layout(task):
    tokens, labels = C.direct_sequences(task.cfg)
    assert tokens.shape == (59 * 59, 16)
    assert torch.all(tokens[:, :12] == task.cfg.pad)
    i = 5 * 59 + 57
    assert tokens[i, 12:].tolist() == [task.cfg.plus, 5, 57, task.cfg.eq] and labels[i] == (5 + 57) % 59


@pytest.mark.parametrize("kind", ["1var_left", "1var_right", "2var"])
def test_variable_sequences_ask_the_same_sum(task, kind):
    tokens, labels = C.variable_sequences(task, kind, seed=1)
    n, m = C.all_pairs(59)
    np.testing.assert_array_equal(labels.numpy(), (n + m) % 59)
    tokens = tokens.numpy()
    for i in range(0, len(tokens), 97):
        values = []
        for slot in (13, 14):
            t = tokens[i, slot]
            if t >= task.cfg.var0:
                pos = list(tokens[i, :12]).index(t)
                values.append(tokens[i, pos + 1])
            else:
                values.append(t)
        assert values == [n[i], m[i]]
        if kind == "2var":
            assert tokens[i, 13] >= task.cfg.var0 and tokens[i, 14] >= task.cfg.var0
    with pytest.raises(ValueError, match="kind"):
        C.variable_sequences(task, "3var")


def test_mismatched_partners_have_another_sum():
    n, m = C.all_pairs(59)
    partner = C.mismatched_partner(59, seed=4)
    assert np.all((n + m) % 59 != (n[partner] + m[partner]) % 59)


def test_composition_cosines_of_a_model_with_itself(model, task):
    df = C.composition_cosines(model, task, "2var")
    assert len(df) == 59 * 59 and df[["matched", "mismatched"]].abs().le(1 + 1e-6).all().all()


def test_adder_alone_logits_match_the_model_at_equals(model, task):
    tokens, _ = C.direct_sequences(task.cfg)
    tokens = tokens[:50]
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens, names_filter=lambda n: n == "blocks.1.hook_resid_mid")
    torch.testing.assert_close(
        C.mlp2_logits(model, cache["blocks.1.hook_resid_mid"][:, -1]), logits[:, -1], rtol=1e-4, atol=1e-5
    )


def test_ov2_sum_is_the_attention_output_when_attention_reads_two_embeddings(model):
    n, m = np.array([3, 10]), np.array([7, 58])
    E = model.embed.W_E.detach()
    a1 = model.blocks[1].attn
    literal = torch.stack(
        [(E[i] @ a1.W_V[0] @ a1.W_O[0]) + (E[j] @ a1.W_V[0] @ a1.W_O[0]) for i, j in zip(n, m)]
    ).detach()
    torch.testing.assert_close(C.ov2_sum(model, n, m), literal)


def test_needed_positions_point_at_the_numbers_to_add(task):
    tokens = C.variable_sequences(task, "1var_left", seed=2)[0].numpy()[:300]
    need = C.needed_positions(tokens, task.cfg)
    n, m = C.all_pairs(59)
    for i in range(len(tokens)):
        assert tokens[i, need[i, 0]] == n[i] and tokens[i, need[i, 0] - 1] == tokens[i, 13]
        assert need[i, 1] == 14 and tokens[i, 14] == m[i]


def test_role_attention_matches_a_literal_loop(model, task):
    tokens = task.sample(20, np.random.default_rng(5))[0]
    roles = C.role_attention(model, tokens, task.cfg)
    pat = C.attention_patterns(model, torch.from_numpy(tokens)).numpy()
    need = C.needed_positions(tokens, task.cfg)
    v2v, eq_ops, eq_need = [], [], []
    for b, seq in enumerate(tokens):
        for p in range(1, 12):
            if seq[p] < 59 and seq[p - 1] >= 62:
                v2v.append(pat[0, b, p, p - 1])
        eq_ops.append(pat[0, b, 15, 13] + pat[0, b, 15, 14])
        eq_need.append(sum(pat[1, b, 15, k] for k in need[b]))
    assert roles["value_to_variable"] == pytest.approx(np.mean(v2v), rel=1e-5)
    assert roles["eq_to_operands"] == pytest.approx(np.mean(eq_ops), rel=1e-5)
    assert roles["eq_to_needed"] == pytest.approx(np.mean(eq_need), rel=1e-5)


def test_pattern_frame_marks_each_role(model, task):
    seq = C.variable_sequences(task, "2var", seed=3)[0].numpy()[100]
    frame = C.pattern_frame(model, seq, task)
    assert len(frame) == 2 * 16 * 17 // 2
    layer2 = frame[(frame.layer == 2) & (frame.role != "")]
    assert sorted(layer2.key) == sorted(C.needed_positions(seq[None], task.cfg)[0])
    values = frame[frame.role == "value reads its variable"]
    assert all(seq[q] < 59 and seq[k] >= 62 and k == q - 1 for q, k in zip(values["query"], values["key"]))
    np.testing.assert_allclose(frame.groupby(["layer", "query"]).weight.sum(), 1.0, rtol=1e-5)


def test_adder_alone_is_perfect_for_a_planted_lookup_adder():
    """Plant an adder: one-hot number embeddings, OV2 = identity, and an MLP with one neuron per
    unordered pair {a, b} that fires most for the input e_a + e_b (offset -1.5 from the constant
    total mass 2 of the sum; the a = a neuron weighs 1.6 so it wins on 2 e_a and stays small on
    e_a + e_b) and writes a + b mod N."""
    N = 5
    m = AssignAddModel(ModelConfig(d_vocab=N + 3 + 12, d_out=N, d_model=2 * N, d_head=2 * N, d_mlp=N * N))
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
        m.blocks[1].attn.W_V[0].copy_(torch.eye(2 * N))
        m.blocks[1].attn.W_O[0].copy_(torch.eye(2 * N))
        m.embed.W_E[:N, :N] = torch.eye(N)
        W_in, W_out = m.blocks[1].mlp.W_in, m.blocks[1].mlp.W_out
        for a in range(N):
            for b in range(a, N):
                j = a * N + b
                W_in[:N, j] = -0.75  # x sums to 2 on the number coordinates: offset -1.5
                W_in[a, j] += 1.0 if b != a else 1.6
                if b != a:
                    W_in[b, j] += 1.0
                W_out[j, N + (a + b) % N] = 10.0
        m.unembed.W_U[N:, :] = torch.eye(N)
    assert C.adder_alone_accuracy(m, N) == 1.0
    with torch.no_grad():
        m.blocks[1].mlp.W_out.zero_()  # without the MLP the planted model cannot add
    assert C.adder_alone_accuracy(m, N) < 0.5


@needs_release
def test_adder_measures_on_the_released_run_at_step_1401():
    """The paper's adder-alone score and the book's with-residual variant differ there (0.980 vs
    0.956 by an independent reading of the same file)."""
    m = release.load_release(1401, folder=SHARED, download=False)
    assert C.adder_alone_accuracy(m, 59) == pytest.approx(0.980, abs=0.001)
    assert C.adder_with_residual_accuracy(m, 59) == pytest.approx(0.956, abs=0.001)


def _literal_layer1_scores(model, tokens: torch.Tensor) -> torch.Tensor:
    """Layer 1's pre-softmax scores (B, P, P) read from the model's own hook."""
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n == "blocks.0.attn.hook_attn_scores")
    return cache["blocks.0.attn.hook_attn_scores"][:, 0].double()


def test_previous_token_split_adds_up_to_the_real_score_margin(model, task):
    tokens = task.eval_pools(6, seed=1)["2var_train"][0]
    split = C.previous_token_score_split(model, tokens, task.cfg)
    assert sum(split[p] for p in C.QK1_PARTS) == pytest.approx(split["total"])
    scores = _literal_layer1_scores(model, torch.as_tensor(tokens))
    rows, pos = C.value_positions(tokens, task.cfg)
    margins = []
    for b, q in zip(rows, pos):
        others = [k for k in range(q + 1) if k != q - 1]
        margins.append(float(scores[b, q, q - 1] - scores[b, q, others].mean()))
    assert split["total"] == pytest.approx(np.mean(margins), rel=1e-4)
    size = sum(abs(split[p]) for p in C.QK1_PARTS)
    assert split["positional_share"] == pytest.approx(split["positional"] / size)


def test_previous_token_split_of_a_position_only_head(task):
    """With every token embedding zero the score is the position-position part alone: share 1."""
    torch.manual_seed(3)
    m = AssignAddModel(ModelConfig(d_model=16, d_head=16, d_mlp=32)).eval()
    with torch.no_grad():
        m.embed.W_E.zero_()
    split = C.previous_token_score_split(m, task.eval_pools(4, seed=2)["1var_train"][0], task.cfg)
    assert split["positional_share"] == pytest.approx(1.0)
    assert split["token"] == split["token_to_position"] == split["position_to_token"] == 0.0


def test_previous_token_split_needs_a_value_position(model, task):
    with pytest.raises(ValueError, match="no context value position"):
        C.previous_token_score_split(model, np.full((2, task.cfg.seq_len), task.cfg.pad), task.cfg)


def test_the_papers_shuffled_control_keeps_the_left_operand(model, task):
    right = C.shuffled_right(task.cfg.modulus, seed=4)
    _, m = C.all_pairs(task.cfg.modulus)
    assert sorted(right) == sorted(m) and (right != m).mean() > 0.9
    frame = C.ov2_cosines(model, task, "2var", seed=4)
    via, _ = C.variable_sequences(task, "2var", 4)
    with torch.no_grad():
        _, cache = model.run_with_cache(via, names_filter=lambda n: n == "blocks.1.hook_attn_out")
    out = cache["blocks.1.hook_attn_out"][:, -1]
    n, _ = C.all_pairs(task.cfg.modulus)
    for i in (0, 100, 3000):
        target = C.ov2_sum(model, n[i : i + 1], right[i : i + 1])[0]
        expected = float(torch.nn.functional.cosine_similarity(out[i], target, dim=0))
        assert frame.shuffled[i] == pytest.approx(expected, abs=1e-5)
    assert {"matched", "shuffled", "other_pair"} <= set(frame.columns)


def test_a_matched_output_beats_the_shuffled_control_by_the_shared_half():
    """Attention output exactly OV2(e_n) + OV2(e_m) with orthogonal number images: matched cosine
    1, the paper's shuffled control (n kept) about 1/2, another pair about 0."""
    torch.manual_seed(0)
    m = AssignAddModel(ModelConfig(d_model=128, d_head=128, d_mlp=32)).eval()
    with torch.no_grad():
        m.embed.W_E[:59] = torch.eye(128)[:59]
        m.blocks[1].attn.W_V[0] = torch.eye(128)
        m.blocks[1].attn.W_O[0] = torch.eye(128)
    n, mm = C.all_pairs(59)
    target = C.ov2_sum(m, n, mm)
    control = C.ov2_sum(m, n, C.shuffled_right(59))
    cos = torch.nn.functional.cosine_similarity(target, control, dim=-1).numpy()
    different = (C.shuffled_right(59) != mm) & (n != C.shuffled_right(59)) & (n != mm)
    assert np.allclose(cos[different], 0.5)
