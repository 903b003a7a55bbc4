"""The paper profile of chapter 3 (mechbook/leading_terms) as a dry run on the whole TinyStories
sample: its arithmetic and the model at full size, nothing trained."""

import pytest
from test_lt_plan import SAMPLE

from mechbook.leading_terms.model import AttentionModel, ModelConfig
from mechbook.leading_terms.plan import (
    parameter_count,
    plan_training,
)


@pytest.mark.skipif(not SAMPLE.is_file(), reason="needs the offline TinyStories sample")
def test_paper_profile_dry_run_on_the_sample(monkeypatch, tmp_path):
    """Resolve the paper profile, check its arithmetic, build the model at full size, train nothing."""
    from mechbook.chapters import ch03_training as ch
    from mechbook.leading_terms.claim import paper_target
    from mechbook.leading_terms.corpus import load_corpus
    from mechbook.leading_terms.train import chapter_runs

    monkeypatch.setenv("MECHBOOK_TINYSTORIES", str(SAMPLE))
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    cfg = ch.resolve("paper")
    assert cfg.runs.corpus.split == "train" and cfg.runs.epochs == 100 and cfg.runs.batch_size == 2048
    tokenizer, sequences = load_corpus(cfg.runs.corpus)
    assert (tokenizer.vocab_size, sequences.context, sequences.policy) == (3000, 200, "drop")
    target = paper_target(cfg.claim)
    assert target.n_kept == sequences.n_kept and target.n_stories == sequences.n_stories
    assert target.steps == int(100 * target.n_sequences / 2048) and target.eta_s == pytest.approx(0.005 * target.steps)
    model_cfg = ModelConfig(d_vocab=3000, n_ctx=200, n_layers=3)
    model = AttentionModel(model_cfg, device="cpu")
    assert sum(p.numel() for p in model.parameters()) == parameter_count(model_cfg) == 7 * 3000**2 + 3 * 200
    assert all(not p.detach().any() for p in model.parameters())
    del model
    plan = plan_training(sequences.n_kept, model_cfg, 2048, 0.005, epochs=100)
    assert plan.steps == int(100 * sequences.n_kept / 2048)
    assert plan.fits == (sequences.n_kept >= 2048)
    if not plan.fits:  # the sample keeps too few sequences: training must stop before it starts
        with pytest.raises(ValueError, match="fewer than one batch"):
            chapter_runs(cfg.shared_runs())
        assert not list(tmp_path.glob("leading_terms_train/*.pt"))
