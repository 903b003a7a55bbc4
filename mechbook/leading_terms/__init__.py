"""Part I: how attention models learn to associate tokens (gradient leading terms).

- :mod:`~mechbook.leading_terms.tokenize`: natural and BPE tokenizers, training sequences.
- :mod:`~mechbook.leading_terms.corpus`: the corpus settings per profile, ``load_corpus``.
- :mod:`~mechbook.leading_terms.stats`: B, Phi, Sigma_B, (B Phi)^T, G, Q, P (fast and literal).
- :mod:`~mechbook.leading_terms.associations`: ranked association tables and heatmap subsets.
"""
