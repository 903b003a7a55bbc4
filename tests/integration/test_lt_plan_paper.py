"""The paper profile of chapter 3 (mechbook/leading_terms) without the text it needs: it resolves,
plans the paper's runs from their configs, builds the model at full size, and stops with one clear
line when it loads the corpus, before anything trains or is cached."""

import pytest
from test_lt_plan import SAMPLE

from mechbook.leading_terms.model import AttentionModel, ModelConfig
from mechbook.leading_terms.plan import parameter_count, step_flops


@pytest.mark.skipif(not SAMPLE.is_file(), reason="needs the offline TinyStories sample")
def test_the_paper_profile_plans_then_fails_clearly_on_the_sample(monkeypatch, tmp_path):
    from mechbook.chapters import ch03_training as ch
    from mechbook.leading_terms.runs import gpu_hours, run_plan
    from mechbook.leading_terms.train import chapter_runs

    monkeypatch.setenv("MECHBOOK_TINYSTORIES", str(SAMPLE))
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    cfg = ch.resolve("paper")
    runs = cfg.shared_runs()
    assert runs.corpus.split == "train" and runs.corpus.n_sequences == 65_536 and runs.batch_size == 2048
    model_cfg = ModelConfig(d_vocab=3000, n_ctx=200, n_layers=3)
    for lr, eta_s in ((0.005, 16), (0.05, 160)):
        plan = run_plan(runs.run(lr))
        assert (plan.steps, plan.eta_s) == (3200, pytest.approx(eta_s))
        assert plan.flops == 3200 * step_flops(model_cfg, 2048) and gpu_hours(plan) > 1
    bpe = cfg.bpe_run()
    assert bpe.train_cfg(bpe.corpus.n_sequences).steps == 320 and bpe.corpus.vocab_size == 10_000
    model = AttentionModel(model_cfg, device="cpu")
    assert sum(p.numel() for p in model.parameters()) == parameter_count(model_cfg) == 7 * 3000**2 + 3 * 200
    del model
    with pytest.raises(
        ValueError, match=r"fewer than the 65,536 it asks for: give more text \(set MECHBOOK_TINYSTORIES"
    ):
        chapter_runs(runs)
    assert not list(tmp_path.rglob("*leading_terms_train*"))
