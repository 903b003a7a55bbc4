"""Part I's chapter readings (mechbook.leading_terms.readings)."""

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.leading_terms.readings import attention_first


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.one_of(st.none(), st.integers(1, 5)), min_size=4, max_size=4), min_size=1, max_size=6))
def test_attention_first_against_its_definition(rows):
    """W and P both leave, and both before either of W_O and V leaves (one that never leaves is last)."""
    order = pd.DataFrame(rows, columns=["W", "P", "W_O", "V"], dtype=float)
    got = attention_first(order).tolist()
    never = float("inf")

    def literal(w, p, wo, v):
        if w is None or p is None:
            return False
        return max(w, p) < min(never if wo is None else wo, never if v is None else v)

    assert got == [literal(*r) for r in rows]
