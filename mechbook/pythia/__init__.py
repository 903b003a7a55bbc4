"""Part I chapter 6: the leading-term features in a real LLM across training checkpoints.

- :mod:`~mechbook.pythia.checkpoints`: the Pythia checkpoint schedule, revision names, model ids,
  and the same log-then-linear schedule scaled to a miniature run.
- :mod:`~mechbook.pythia.hub`: a bounded Hub check, real Pythia checkpoints through
  TransformerLens ``TransformerBridge``, OpenWebText texts.
- :mod:`~mechbook.pythia.miniature`: "Pythia in miniature", a GPT-NeoX model trained from scratch
  on TinyStories with its own checkpoints, wrapped in the same ``TransformerBridge``.
- :mod:`~mechbook.pythia.features`: the leading-term features (B Phi)^T and Q restricted to the
  top-k tokens of a corpus.
- :mod:`~mechbook.pythia.similarity`: the covariance similarity (pure numpy).
- :mod:`~mechbook.pythia.analysis`: token representations and attention score matrices read from
  any ``TransformerBridge``, and their similarity to the features, per layer, head and checkpoint.
"""
