"""Part I chapter 6: the leading-term features in a real LLM across training checkpoints.

- :mod:`~mechbook.pythia.checkpoints`: the Pythia checkpoint schedule, revision names, model ids,
  and the same log-then-linear schedule scaled to a miniature run.
- :mod:`~mechbook.pythia.hub`: a bounded Hub check, real Pythia checkpoints through
  TransformerLens ``TransformerBridge``, OpenWebText texts.
- :mod:`~mechbook.pythia.miniature`: "Pythia in miniature", a GPT-NeoX model trained from scratch
  on TinyStories with its own checkpoints, wrapped in the same ``TransformerBridge``.
- :mod:`~mechbook.pythia.features`: the leading-term features (B Phi)^T and Q on the top-k tokens
  of a corpus, every other token dropped (a budget choice of the book; the paper states no top-k).
- :mod:`~mechbook.pythia.similarity`: the two similarities, the paper's row-centred covariance
  and linear CKA (pure numpy).
- :mod:`~mechbook.pythia.analysis`: token representations and attention score matrices read from
  any ``TransformerBridge``, their similarity to the features per measure, layer, head and
  checkpoint, and the model-free offset and exactly-linear controls.
- :mod:`~mechbook.pythia.study`: the study's run configs per profile, the source it reads, the
  whole computation, and the readings each claim of chapter 6 rests on.

- :mod:`~mechbook.pythia.readings`: what chapter 6 reads off the study for its records and claims.
- :mod:`~mechbook.pythia.claims`: chapter 6's claims, one table.

The chapter's charts and prose are in :mod:`mechbook.chapters.ch06_pythia`.
"""
