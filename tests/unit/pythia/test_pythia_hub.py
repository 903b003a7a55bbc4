"""Token sequences of downloaded texts (mechbook.pythia.hub)."""

from __future__ import annotations

import numpy as np
import pytest


def test_hf_sequences_keeps_the_first_tokens_of_long_texts():
    from mechbook.pythia.hub import hf_sequences

    class Words:
        def __call__(self, text, add_special_tokens):
            return {"input_ids": [len(w) for w in text.split()]}

    got = hf_sequences(["a bb ccc dddd", "a b", "aaaaa bb c"], Words(), 2)
    assert got.tolist() == [[1, 2, 3], [5, 2, 1]] and got.dtype == np.int64
    with pytest.raises(ValueError, match="shorter context"):
        hf_sequences(["a b"], Words(), 5)
