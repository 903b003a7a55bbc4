"""Chapter 5: removing leading components, and splitting the logits into paths."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from lt_markov import markov_tokens

from mechbook.leading_terms.ablation import ablation_table, evaluate_loss, remove_projection
from mechbook.leading_terms.logit_paths import RESIDUAL, logit_paths
from mechbook.leading_terms.model import AttentionModel, ModelConfig
from mechbook.leading_terms.stats import corpus_stats

VOCAB, LENGTH = 9, 7


@pytest.fixture(scope="module")
def corpus():
    tokens = markov_tokens(n=20, length=LENGTH, vocab=VOCAB, seed=7)
    return tokens, corpus_stats(tokens, VOCAB)


def random_state(seed, layers=2):
    model = AttentionModel(ModelConfig(VOCAB, LENGTH - 1, layers, dtype="float64"), device="cpu")
    gen = torch.Generator().manual_seed(seed)
    return model, {k: torch.randn(v.shape, generator=gen, dtype=v.dtype) * 0.5 for k, v in model.state_dict().items()}


@settings(max_examples=40)
@given(seed=st.integers(0, 10_000), c=st.floats(-5, 5))
def test_projection_removes_exactly_the_term(seed, c):
    rng = np.random.default_rng(seed)
    term, other = rng.normal(size=(5, 5)), rng.normal(size=(5, 5))
    weight = torch.as_tensor(c * term + other)
    out = remove_projection(weight, term).numpy()
    assert abs((out * term).sum()) < 1e-9 * (1 + np.abs(weight.numpy()).sum() * np.abs(term).sum())
    np.testing.assert_allclose(remove_projection(torch.as_tensor(out), term).numpy(), out, atol=1e-12)
    np.testing.assert_allclose(remove_projection(torch.as_tensor(c * term), term).numpy(), 0, atol=1e-12)


def test_ablating_a_pure_leading_term_equals_zeroing_it(corpus):
    tokens, stats = corpus
    model, state = random_state(0)
    state["W_O"] = torch.as_tensor(3.0 * stats.B)
    table = ablation_table(state, model, stats, tokens).set_index("ablation")
    model.load_checkpoint({**state, "W_O": torch.zeros(VOCAB, VOCAB, dtype=torch.float64)})
    assert table.loc["remove leading term of W_O", "loss"] == pytest.approx(evaluate_loss(model, tokens), rel=1e-9)
    assert table.loc["remove leading term of W_O", "cosine"] == pytest.approx(1.0)
    assert table.loc["zero model", "loss"] == pytest.approx(np.log(VOCAB))
    assert len(table) == 1 + 1 + 3 * 2 + 2
    model.load_checkpoint(state)
    assert table.loc["full model", "loss"] == pytest.approx(evaluate_loss(model, tokens, batch_size=3))
    assert torch.equal(model.W_O, state["W_O"]), "the table must leave the model as it found it"


def test_logit_paths_add_up_to_the_centred_logit(corpus):
    tokens, _ = corpus
    model, state = random_state(1, layers=3)
    model.load_checkpoint(state)
    paths = logit_paths(model, tokens[:3])
    assert set(paths["path"]) == {RESIDUAL, "attention, layer 0", "attention, layer 1", "attention, layer 2"}
    total = paths.groupby(["sequence", "position"])["contribution"].sum().to_numpy()
    with torch.no_grad():
        logits = model(torch.as_tensor(tokens[:3, :-1])).double()
    y = torch.as_tensor(tokens[:3, 1:])
    centred = (logits.gather(-1, y[..., None])[..., 0] - logits.mean(-1)).reshape(-1).numpy()
    np.testing.assert_allclose(total, centred, rtol=1e-9, atol=1e-9)
    resid = paths[paths["path"] == RESIDUAL]
    W_O = state["W_O"].numpy()
    expected = W_O[resid["token"], resid["next_token"]] - W_O[resid["token"]].mean(1)
    np.testing.assert_allclose(resid["contribution"], expected, atol=1e-12)


def test_bad_projection_inputs_say_what_to_do():
    with pytest.raises(ValueError, match="shape"):
        remove_projection(torch.ones(3, 3), np.ones((2, 2)))
    with pytest.raises(ValueError, match="zero"):
        remove_projection(torch.ones(3, 3), np.zeros((3, 3)))


def _literal_loss(logits, tokens):
    """Mean cross-entropy read with numpy, entry by entry."""
    targets = tokens[:, 1:]
    shifted = logits - logits.max(-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return float(-np.mean(np.take_along_axis(logp, targets[..., None], -1)))


def test_path_ablation_drops_each_path_from_the_literal_sum(corpus):
    from mechbook.leading_terms.ablation import path_ablation, path_removals

    tokens, _ = corpus
    model, state = random_state(2, layers=2)
    model.load_checkpoint(state)
    inputs = torch.as_tensor(tokens[:, :-1])
    _, cache = model.run_with_cache(inputs)
    W_O = state["W_O"].numpy()
    paths = [cache["hook_embed"].numpy() @ W_O] + [cache[f"blocks.{l}.hook_attn_out"].numpy() @ W_O for l in range(2)]
    table = path_ablation(model, tokens, batch_size=7).set_index("removal")
    assert list(table.index) == list(path_removals(2))
    for name, dropped in path_removals(2).items():
        kept = sum(p for i, p in enumerate(paths) if i not in dropped)
        assert table.loc[name, "loss"] == pytest.approx(_literal_loss(kept, tokens), rel=1e-9)
    assert table.loc["full model", "loss"] == pytest.approx(evaluate_loss(model, tokens), rel=1e-9)
    assert table.loc["full model", "delta_loss"] == 0.0


def test_output_split_of_a_pure_term_and_of_a_pure_remainder(corpus):
    from mechbook.leading_terms.ablation import output_split

    tokens, stats = corpus
    model, state = random_state(3, layers=2)
    model.load_checkpoint({**state, "W_O": torch.as_tensor(4.0 * stats.B)})
    pure = output_split(model, stats.B, tokens)
    assert pure.loss_b_part == pytest.approx(pure.loss_full, rel=1e-9)
    assert pure.loss_remainder == pytest.approx(np.log(VOCAB), rel=1e-9) and pure.rms_remainder < 1e-12
    model.load_checkpoint(state)
    split = output_split(model, stats.B, tokens)
    assert -1.0 <= split.logit_cosine <= 1.0
    assert split.loss_zero == pytest.approx(np.log(VOCAB))
    whole = output_split(model, np.asarray(state["W_O"]), tokens)  # W_O as its own term: no remainder
    assert whole.loss_remainder == pytest.approx(np.log(VOCAB), abs=1e-6)
    assert whole.right_b_part == pytest.approx(split.right_b_part + split.right_remainder, rel=1e-6, abs=1e-9)

    W_O, B = state["W_O"].double(), torch.as_tensor(stats.B, dtype=torch.float64)
    b_part = (W_O * B).sum() / (B * B).sum() * B
    seqs = torch.as_tensor(tokens, dtype=torch.long)
    _, cache = model.run_with_cache(seqs[:, :-1], names_filter=["blocks.1.hook_resid_post"])
    resid = cache["blocks.1.hook_resid_post"].double()
    tops, hits = [], []
    for n in range(resid.shape[0]):
        for t in range(resid.shape[1]):
            logits = [float(resid[n, t] @ b_part[:, j]) for j in range(VOCAB)]
            mean = sum(logits) / VOCAB
            tops.append(max(logits) - mean)
            hits.append(logits.index(max(logits)) == int(seqs[n, t + 1]))
    assert split.top_b_part == pytest.approx(sum(tops) / len(tops), rel=1e-9)
    assert split.hit_b_part == pytest.approx(sum(hits) / len(hits))


def test_zeroed_loss_and_additivity(corpus):
    from mechbook.leading_terms.ablation import additivity, zeroed_loss

    tokens, _ = corpus
    model, state = random_state(4, layers=2)
    loss = zeroed_loss(model, state, ["blocks.0.attn.W", "blocks.1.attn.W"], tokens)
    model.load_checkpoint(
        {**state, "blocks.0.attn.W": state["blocks.0.attn.W"] * 0, "blocks.1.attn.W": state["blocks.1.attn.W"] * 0}
    )
    assert loss == pytest.approx(evaluate_loss(model, tokens), rel=1e-12)
    model.load_checkpoint(state)
    assert zeroed_loss(model, state, [], tokens) == pytest.approx(evaluate_loss(model, tokens), rel=1e-12)
    assert torch.equal(model.blocks[0].attn.W, state["blocks.0.attn.W"]), "restored afterwards"
    assert additivity([0.1, 0.2], 0.5) == (pytest.approx(0.3), 0.5)


def test_cooperation_readings_from_a_hand_made_table():
    import pandas as pd

    from mechbook.leading_terms.ablation import Cooperation

    rows = [
        ("full model", None, None, 5.0),
        ("remove leading term of W_O", "W_O", "W_O", 5.4),
        ("remove leading term of blocks.0.attn.V", "blocks.0.attn.V", "V", 5.1),
        ("remove leading term of blocks.0.attn.W", "blocks.0.attn.W", "W", 5.02),
        ("remove leading term of blocks.0.attn.P", "blocks.0.attn.P", "P", 5.0),
        ("remove every leading term", None, None, 5.45),
        ("zero model", None, None, 5.5),
    ]
    matrices = pd.DataFrame(rows, columns=["ablation", "matrix", "kind", "loss"])
    matrices["delta_loss"] = matrices["loss"] - 5.0
    paths = pd.DataFrame(
        {
            "removal": [
                "full model",
                "without the residual path",
                "without attention layer 0",
                "without every attention path",
            ],
            "delta_loss": [0.0, 0.3, 0.05, 0.05],
        }
    )
    e = Cooperation(matrices, paths, split=None, loss_w_zero=5.05)
    assert e.way_back == pytest.approx(0.45 / 0.5)
    assert e.idle_share == pytest.approx(0.05 / 0.5)
    assert e.costliest == ("W_O", pytest.approx(0.4))
    assert e.attention_shaping_gap == pytest.approx(0.02 - 0.1)
    assert e.matrix_additivity == (pytest.approx(0.52), pytest.approx(0.45))
    assert e.path_additivity == (pytest.approx(0.05), pytest.approx(0.05))
