"""Reading the maps: ranked association tables and readable token subsets (chapters 1, 4, 6).

A |V| x |V| map M (B, Phi, Sigma_B, G, Q or a trained weight matrix) is read row by row: for a row
token a, the column tokens c with the largest M[a, c] are its strongest associations.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from mechbook.leading_terms.tokenize import UNK, Tokenizer, is_word

FUNCTION_WORDS = frozenset(
    """a an the and or but so if then than that this these those there here to of in on at by for with
    from into onto up down out over under about after before again all any some no not very too also
    just only more most much many each every other such own same can could will would shall should may
    might must do does did done be is am are was were been being have has had having i me my mine myself
    you your yours he him his himself she her hers herself it its itself we us our ours they them their
    theirs themselves what which who whom whose when where why how s t d ll m re ve said says one""".split()
)


def _ids(tokenizer: Tokenizer, tokens: Iterable[str], what: str) -> list[int]:
    tokens = list(tokens)
    missing = [t for t in tokens if t not in tokenizer.token_to_id]
    if missing:
        raise ValueError(f"{what}: token(s) {missing} are not in the vocabulary of {tokenizer}; pick others or a larger vocabulary")
    return [tokenizer.token_to_id[t] for t in tokens]


def content_words(tokenizer: Tokenizer, n: int = 10) -> list[str]:
    """The ``n`` most frequent vocabulary tokens that are words and not function words.

    Needs a tokenizer whose ids are in frequency order (:class:`NaturalTokenizer`).
    """
    if not hasattr(tokenizer, "counts"):
        raise TypeError(f"content_words needs token counts (a NaturalTokenizer), got {tokenizer}")
    order = np.argsort(-np.asarray(tokenizer.counts), kind="stable")
    words = [tokenizer.id_to_token[i] for i in order]
    return [w for w in words if is_word(w) and w not in FUNCTION_WORDS][:n]


def top_k(
    matrix: np.ndarray,
    tokenizer: Tokenizer,
    k: int = 10,
    rows: Sequence[str] | None = None,
    exclude: Iterable[str] = (UNK,),
    exclude_self: bool = False,
) -> pd.DataFrame:
    """For each row token, its ``k`` highest-scoring column tokens.

    ``rows`` defaults to the ten most frequent content words (:func:`content_words`). Columns
    named in ``exclude`` (default ``<unk>``) and, with ``exclude_self``, the row token itself are
    skipped. Returns a tidy frame with columns ``row``, ``rank`` (1 = strongest), ``token``,
    ``score``; ties are broken by token id.
    """
    matrix = np.asarray(matrix)
    V = tokenizer.vocab_size
    if matrix.shape != (V, V):
        raise ValueError(f"matrix has shape {matrix.shape} but the tokenizer has |V| = {V}; expected ({V}, {V})")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    rows = list(rows) if rows is not None else content_words(tokenizer)
    row_ids = _ids(tokenizer, rows, "top_k rows")
    banned = [tokenizer.token_to_id[t] for t in exclude if t in tokenizer.token_to_id]
    records = []
    for name, a in zip(rows, row_ids):
        score = matrix[a].astype(np.float64)
        allowed = np.ones(V, dtype=bool)
        allowed[banned] = False
        if exclude_self:
            allowed[a] = False
        cand = np.flatnonzero(allowed)
        best = cand[np.lexsort((cand, -score[cand]))][:k]
        records += [{"row": name, "rank": r + 1, "token": tokenizer.id_to_token[c], "score": float(score[c])} for r, c in enumerate(best)]
    return pd.DataFrame.from_records(records, columns=["row", "rank", "token", "score"])


def rank_of(matrix: np.ndarray, tokenizer: Tokenizer, row: str, column: str, exclude: Iterable[str] = (UNK,), exclude_self: bool = False) -> int:
    """Rank (1 = strongest) of ``column`` in the row of ``row``, with :func:`top_k`'s exclusions."""
    ranked = top_k(matrix, tokenizer, k=tokenizer.vocab_size, rows=[row], exclude=exclude, exclude_self=exclude_self)
    hit = ranked.loc[ranked["token"] == column, "rank"]
    if hit.empty:
        raise ValueError(f"{column!r} is excluded from the ranking of {row!r}")
    return int(hit.iloc[0])


def matrix_frame(matrix: np.ndarray, tokenizer: Tokenizer, rows: Sequence[str], columns: Sequence[str], name: str = "score") -> pd.DataFrame:
    """Tidy frame (``row``, ``column``, ``name``) of ``matrix`` restricted to the given tokens, for
    Altair heatmaps; rows and columns keep the order given."""
    r_ids = _ids(tokenizer, rows, "matrix_frame rows")
    c_ids = _ids(tokenizer, columns, "matrix_frame columns")
    sub = np.asarray(matrix)[np.ix_(r_ids, c_ids)]
    return pd.DataFrame(
        {"row": np.repeat(list(rows), len(columns)), "column": np.tile(list(columns), len(rows)), name: sub.ravel().astype(float)}
    )
