"""Chapter 3's SGD loop: determinism, batches, the logged history, the cache."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from lt_markov import markov_tokens

from mechbook.leading_terms.leading import cosine
from mechbook.leading_terms.model import ModelConfig
from mechbook.leading_terms.stats import corpus_stats
from mechbook.leading_terms.train import RunConfig, TrainConfig, batch_indices, cached_train, resolve_steps, train

VOCAB, LENGTH = 9, 7


@pytest.fixture(scope="module")
def corpus():
    tokens = markov_tokens(n=24, length=LENGTH, vocab=VOCAB, seed=3)
    return tokens, corpus_stats(tokens, VOCAB)


MODEL = ModelConfig(VOCAB, LENGTH - 1, n_layers=2)


def test_same_seed_same_run_other_seed_other_run(corpus):
    tokens, stats = corpus
    cfg = TrainConfig(lr=0.5, steps=12, batch_size=8, seed=4, log_every=4)
    a, b = train(tokens, stats, MODEL, cfg, device="cpu"), train(tokens, stats, MODEL, cfg, device="cpu")
    c = train(tokens, stats, MODEL, TrainConfig(lr=0.5, steps=12, batch_size=8, seed=5, log_every=4), device="cpu")
    for k in a.state:
        assert torch.equal(a.state[k], b.state[k])
    assert not torch.equal(a.state["W_O"], c.state["W_O"])


def test_history_logs_loss_and_cosines_of_every_matrix(corpus):
    tokens, stats = corpus
    res = train(tokens, stats, MODEL, TrainConfig(lr=2.0, steps=30, log_every=10), device="cpu")
    hist = res.history
    assert sorted(hist["step"].unique()) == [0, 10, 20, 30]
    assert len(hist) == 4 * (1 + 3 * MODEL.n_layers)
    loss = hist.groupby("step")["loss"].first()
    assert loss[0] == pytest.approx(np.log(VOCAB), rel=1e-6)
    assert loss[30] < loss[0] - 0.05
    final = hist[hist["step"] == 30].set_index("matrix")
    assert final.loc["W_O", "cosine"] == pytest.approx(cosine(res.state["W_O"].numpy(), stats.B))
    assert final.loc["blocks.1.attn.W", "cosine"] == pytest.approx(
        cosine(res.state["blocks.1.attn.W"].numpy(), stats.Q)
    )
    assert final.loc["blocks.0.attn.P", "norm"] == pytest.approx(float(res.state["blocks.0.attn.P"].norm()), rel=1e-6)


@given(n=st.integers(1, 40), batch=st.integers(1, 40), seed=st.integers(0, 99))
def test_each_epoch_visits_distinct_sequences(n, batch, seed):
    cfg = TrainConfig(lr=0.1, steps=1, batch_size=batch, seed=seed)
    if batch > n:
        with pytest.raises(ValueError, match="exceeds"):
            next(batch_indices(n, cfg))
        return
    gen = batch_indices(n, cfg)
    per_epoch = n // batch
    for _ in range(2):
        epoch = [next(gen) for _ in range(per_epoch)]
        if batch == n:
            assert epoch == [None] * per_epoch
            continue
        seen = torch.cat(epoch)
        assert len(seen) == per_epoch * batch == len(set(seen.tolist()))
        assert int(seen.min()) >= 0 and int(seen.max()) < n


def test_cached_run_equals_fresh_run(corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    tokens, stats = corpus
    cfg = TrainConfig(lr=1.0, steps=5, batch_size=12)
    first = cached_train(tokens, stats, MODEL, cfg)
    assert len(list(tmp_path.rglob("*.pt"))) == 1
    again = cached_train(tokens, stats, MODEL, cfg)
    fresh = train(tokens, stats, MODEL, cfg, device="cpu")
    for k in fresh.state:
        assert torch.equal(first.state[k].cpu(), fresh.state[k]) and torch.equal(again.state[k].cpu(), fresh.state[k])
    assert again.history.equals(first.history)
    torch.testing.assert_close(
        again.model(device="cpu")(torch.as_tensor(tokens[:2, :-1])),
        fresh.model(device="cpu")(torch.as_tensor(tokens[:2, :-1])),
    )


def test_bad_train_inputs_say_what_to_do(corpus):
    tokens, stats = corpus
    with pytest.raises(ValueError, match="lr must be above 0"):
        TrainConfig(lr=0, steps=3)
    with pytest.raises(ValueError, match="batch_size must be"):
        TrainConfig(lr=0.1, steps=3, batch_size=0)
    with pytest.raises(ValueError, match="n_ctx\\+1"):
        train(tokens[:, :-1], stats, MODEL, TrainConfig(lr=0.1, steps=1), device="cpu")
    with pytest.raises(ValueError, match="stats do not match"):
        train(tokens, stats, ModelConfig(VOCAB + 1, LENGTH - 1), TrainConfig(lr=0.1, steps=1), device="cpu")


def test_divergence_raises_or_stops_as_asked(corpus):
    tokens, stats = corpus
    with pytest.raises(FloatingPointError, match="lower the learning rate"):
        train(tokens, stats, MODEL, TrainConfig(lr=1e6, steps=30), device="cpu")
    res = train(tokens, stats, MODEL, TrainConfig(lr=1e6, steps=30, stop_on_divergence=True), device="cpu")
    assert 0 < res.history["step"].max() < 30
    assert np.isfinite(res.history["loss"]).all()


def test_kept_checkpoints_are_the_weights_of_a_shorter_run(corpus):
    tokens, stats = corpus
    long = train(tokens, stats, MODEL, TrainConfig(lr=0.7, steps=9, batch_size=8, seed=2, keep=(4,)), device="cpu")
    short = train(tokens, stats, MODEL, TrainConfig(lr=0.7, steps=4, batch_size=8, seed=2), device="cpu")
    assert sorted(long.checkpoints) == [4]
    for name, tensor in short.model(device="cpu").state_dict().items():
        assert torch.equal(long.model(step=4, device="cpu").state_dict()[name], tensor)
    assert not torch.equal(long.model(device="cpu").W_O, short.model(device="cpu").W_O)
    with pytest.raises(KeyError, match="was not kept"):
        long.model(step=5)
    with pytest.raises(ValueError, match="keep must list steps"):
        TrainConfig(lr=0.1, steps=3, keep=(4,))


@given(n=st.integers(1, 5000), batch=st.integers(1, 3000), epochs=st.floats(0.5, 200))
def test_epochs_become_floor_of_epochs_times_n_over_batch(n, batch, epochs):
    if batch > n:
        with pytest.raises(ValueError, match="fewer than one batch"):
            resolve_steps(None, epochs, n, batch)
        return
    assert resolve_steps(None, epochs, n, batch) == int(epochs * n / batch)
    assert resolve_steps(17, None, n, batch) == 17


def test_run_config_takes_steps_or_epochs():
    from mechbook.leading_terms.corpus import CorpusConfig

    corpus = CorpusConfig(vocab_size=10, context=4)
    with pytest.raises(ValueError, match="exactly one of steps and epochs"):
        RunConfig(corpus, lr=0.1, batch_size=4, log_every=1)
    with pytest.raises(ValueError, match="exactly one of steps and epochs"):
        RunConfig(corpus, lr=0.1, batch_size=4, log_every=1, steps=3, epochs=2.0)
    assert RunConfig(corpus, lr=0.1, batch_size=4, log_every=1, epochs=2.0).train_cfg(10).steps == 5


def test_a_batch_this_machine_cannot_hold_is_refused_before_training(monkeypatch):
    """The model fits, one step's activations do not: one line, before any weight is allocated."""
    from mechbook import validation

    monkeypatch.setattr(validation, "physical_memory", lambda: 2**16)  # a 64 KiB machine
    tokens = markov_tokens(40, 17, vocab=8, seed=0)
    cfg = ModelConfig(8, 16)
    with pytest.raises(
        ValueError, match=r"^TrainConfig needs about [\d.]+ MiB for a step at \|V\| 8 .*lower batch_size"
    ):
        train(tokens, corpus_stats(tokens, 8), cfg, TrainConfig(lr=0.1, steps=2, batch_size=32), device="cpu")
