"""Part I: how attention models learn to associate tokens (gradient leading terms).

- :mod:`~mechbook.leading_terms.overview`: the introduction's word counts of TinyStories.
- :mod:`~mechbook.leading_terms.readings`: what the chapters read off their runs for their records and claims.
- :mod:`~mechbook.leading_terms.claims`: the claims of the introduction and chapters 1-5, one table per chapter.
- :mod:`~mechbook.leading_terms.tokenize`: natural, byte-level BPE and cased BPE tokenizers, training sequences.
- :mod:`~mechbook.leading_terms.corpus`: the corpus settings per profile, ``load_corpus``.
- :mod:`~mechbook.leading_terms.stats`: B, Phi, Sigma_B, (B Phi)^T, G, Q, P (fast and literal).
- :mod:`~mechbook.leading_terms.model`: the attention-only model (``ModelConfig``: d_vocab, n_ctx, n_layers).
- :mod:`~mechbook.leading_terms.leading`: the closed-form leading terms and the cosine.
- :mod:`~mechbook.leading_terms.check`: their check by autograd, where they stop holding, the learned rule.
- :mod:`~mechbook.leading_terms.plan`: what a run costs (steps, eta*s, memory) before it starts.
- :mod:`~mechbook.leading_terms.train`: SGD from zero, ``load_or_train(RunConfig) -> TrainResult``.
- :mod:`~mechbook.leading_terms.runs`: every Part I run configuration, per profile.
- :mod:`~mechbook.leading_terms.maps`: chapter 1's corpus, its three maps and what they hold.
- :mod:`~mechbook.leading_terms.claim`: the paper's 100-epoch claim, its theory-setting runs, the cause rule.
- :mod:`~mechbook.leading_terms.associations`: ranked association tables and heatmap subsets.
- :mod:`~mechbook.leading_terms.ablation`: removing each leading term from a trained model.
- :mod:`~mechbook.leading_terms.labels`: the names of chapters 3-5's two runs and matrices in records and charts.
"""
