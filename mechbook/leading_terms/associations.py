"""Reading the maps: ranked association tables and readable token subsets (chapters 1, 4, 6).

A |V| x |V| map M (B, Phi, Sigma_B, G, Q or a trained weight matrix) is read row by row: for a row
token a, the column tokens c with the largest M[a, c] are its strongest associations.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechbook.leading_terms.tokenize import UNK, Tokenizer, is_word

FUNCTION_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "so",
        "if",
        "then",
        "than",
        "that",
        "this",
        "these",
        "those",
        "there",
        "here",
        "to",
        "of",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "into",
        "onto",
        "up",
        "down",
        "out",
        "over",
        "under",
        "about",
        "after",
        "before",
        "again",
        "all",
        "any",
        "some",
        "no",
        "not",
        "very",
        "too",
        "also",
        "just",
        "only",
        "more",
        "most",
        "much",
        "many",
        "each",
        "every",
        "other",
        "such",
        "own",
        "same",
        "can",
        "could",
        "will",
        "would",
        "shall",
        "should",
        "may",
        "might",
        "must",
        "do",
        "does",
        "did",
        "done",
        "be",
        "is",
        "am",
        "are",
        "was",
        "were",
        "been",
        "being",
        "have",
        "has",
        "had",
        "having",
        "i",
        "me",
        "my",
        "mine",
        "myself",
        "you",
        "your",
        "yours",
        "he",
        "him",
        "his",
        "himself",
        "she",
        "her",
        "hers",
        "herself",
        "it",
        "its",
        "itself",
        "we",
        "us",
        "our",
        "ours",
        "they",
        "them",
        "their",
        "theirs",
        "themselves",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "s",
        "t",
        "d",
        "ll",
        "m",
        "re",
        "ve",
        "said",
        "says",
        "one",
    ]
)


def _ids(tokenizer: Tokenizer, tokens: Iterable[str], what: str) -> list[int]:
    tokens = list(tokens)
    missing = [t for t in tokens if t not in tokenizer.token_to_id]
    if missing:
        raise ValueError(
            f"{what}: token(s) {missing} are not in the vocabulary of {tokenizer}; pick others or a larger vocabulary"
        )
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
    positive: bool = False,
) -> pd.DataFrame:
    """For each row token, its ``k`` highest-scoring column tokens.

    ``rows`` defaults to the ten most frequent content words (:func:`content_words`). Columns
    named in ``exclude`` (default ``<unk>``) and, with ``exclude_self``, the row token itself are
    skipped; with ``positive`` only scores > 0 are kept (for the centred maps B and Phi: above the
    uniform baseline 1/|V|), so a row may have fewer than ``k``. Returns a tidy frame with columns ``row``, ``rank`` (1 = strongest), ``token``,
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
        if positive:
            allowed &= score > 0
        cand = np.flatnonzero(allowed)
        best = cand[np.lexsort((cand, -score[cand]))][:k]
        records += [
            {"row": name, "rank": r + 1, "token": tokenizer.id_to_token[c], "score": float(score[c])}
            for r, c in enumerate(best)
        ]
    return pd.DataFrame.from_records(records, columns=["row", "rank", "token", "score"])


def rank_of(
    matrix: np.ndarray,
    tokenizer: Tokenizer,
    row: str,
    column: str,
    exclude: Iterable[str] = (UNK,),
    exclude_self: bool = False,
) -> int:
    """Rank (1 = strongest) of ``column`` in the row of ``row``, with :func:`top_k`'s exclusions."""
    ranked = top_k(matrix, tokenizer, k=tokenizer.vocab_size, rows=[row], exclude=exclude, exclude_self=exclude_self)
    hit = ranked.loc[ranked["token"] == column, "rank"]
    if hit.empty:
        raise ValueError(f"{column!r} is excluded from the ranking of {row!r}")
    return int(hit.iloc[0])


def matrix_frame(
    matrix: np.ndarray, tokenizer: Tokenizer, rows: Sequence[str], columns: Sequence[str], name: str = "score"
) -> pd.DataFrame:
    """Tidy frame of ``matrix`` restricted to the given tokens, for Altair heatmaps: columns
    ``row``, ``column``, ``name``, ``relative`` (the entry over the largest entry of its row in the
    block, clipped to [-1, 1]; over the largest |entry| for a row with no positive entry: each
    row's strongest association is 1 whatever the token's frequency, and maps of different scales
    share one colour scale) and ``row_order`` / ``column_order`` (positions in the lists given, to
    sort the axes)."""
    r_ids = _ids(tokenizer, rows, "matrix_frame rows")
    c_ids = _ids(tokenizer, columns, "matrix_frame columns")
    sub = np.asarray(matrix, dtype=np.float64)[np.ix_(r_ids, c_ids)]
    top = sub.max(axis=1, keepdims=True)
    peak = np.where(top > 0, top, np.abs(sub).max(axis=1, keepdims=True))
    relative = np.clip(np.divide(sub, peak, out=np.zeros_like(sub), where=peak > 0), -1.0, 1.0)
    return pd.DataFrame(
        {
            "row": np.repeat(list(rows), len(columns)),
            "column": np.tile(list(columns), len(rows)),
            name: sub.ravel(),
            "relative": relative.ravel(),
            "row_order": np.repeat(np.arange(len(rows)), len(columns)),
            "column_order": np.tile(np.arange(len(columns)), len(rows)),
        }
    )


def ranked_words(table: pd.DataFrame) -> pd.DataFrame:
    """A :func:`top_k` table as one line per row token, its ranked tokens in columns 1..k
    (empty where a row has fewer), rows in their original order."""
    wide = table.pivot(index="row", columns="rank", values="token").reindex(pd.unique(table["row"]))
    wide.columns = [str(c) for c in wide.columns]
    wide.index.name = None
    return wide.fillna("")


def recurring_words(wide: pd.DataFrame, min_rows: int = 2) -> dict[str, int]:
    """The words of a :func:`ranked_words` table that stand in at least ``min_rows`` of its rows,
    with in how many, most first (ties in the order they first appear): words of many rows, such
    as a story's opening words in Φ, are not any one row's association. Chapter 1 counts them
    under its Φ table."""
    rows_of: dict[str, int] = {}
    for _, row in wide.iterrows():
        for word in dict.fromkeys(w for w in row if w):
            rows_of[word] = rows_of.get(word, 0) + 1
    kept = {w: n for w, n in rows_of.items() if n >= min_rows}
    return dict(sorted(kept.items(), key=lambda item: -item[1]))


def recurring_cells(wide: pd.DataFrame, min_rows: int = 2) -> tuple[int, int, dict[str, int]]:
    """``(cells, filled, words)``: how many filled cells of a :func:`ranked_words` table hold a word
    of :func:`recurring_words`, of how many filled cells, and those words. Chapters 1 (Φ) and 4 (the
    theory maps and trained matrices) say with it how much of a table is a profile shared by every
    row rather than each row's own association."""
    words = recurring_words(wide, min_rows)
    cells = int(wide.isin(list(words)).to_numpy().sum())
    return cells, int((wide != "").to_numpy().sum()), words


WORD_CLASSES: dict[str, tuple[str, ...]] = {
    "noun": tuple(
        [
            "dog",
            "cat",
            "bird",
            "ball",
            "car",
            "tree",
            "house",
            "box",
            "park",
            "toy",
            "room",
            "garden",
            "sky",
            "sun",
            "fish",
            "boat",
            "cake",
            "door",
            "mom",
            "dad",
            "girl",
            "boy",
            "man",
            "friend",
            "water",
            "flower",
            "book",
        ]
    ),
    "verb": tuple(
        [
            "saw",
            "went",
            "ran",
            "looked",
            "found",
            "played",
            "took",
            "gave",
            "told",
            "heard",
            "jumped",
            "smiled",
            "laughed",
            "asked",
            "wanted",
            "loved",
            "liked",
            "decided",
            "tried",
            "started",
            "came",
            "made",
            "felt",
            "thought",
        ]
    ),
    "adjective": tuple(
        [
            "big",
            "little",
            "happy",
            "sad",
            "good",
            "new",
            "old",
            "pretty",
            "scared",
            "excited",
            "small",
            "red",
            "blue",
            "green",
            "beautiful",
            "shiny",
            "kind",
            "brave",
            "funny",
            "angry",
            "hungry",
            "tired",
        ]
    ),
}
"""A small hand-labelled lexicon of frequent TinyStories words (verbs in the past tense, as the
stories are told), to check that the interchangeability map groups words of one class (chapter 1)."""

CONTEXT_PAIRS: tuple[tuple[str, str], ...] = (
    ("fish", "pond"),
    ("fish", "water"),
    ("duck", "pond"),
    ("boat", "water"),
    ("bird", "sky"),
    ("bird", "tree"),
    ("cake", "birthday"),
    ("ball", "play"),
    ("park", "play"),
    ("toy", "play"),
    ("sun", "sky"),
    ("tree", "climb"),
    ("flower", "garden"),
    ("book", "read"),
    ("snow", "cold"),
    ("bed", "sleep"),
    ("sand", "beach"),
)
"""(entity, surrounding) pairs: words that share a scene without being neighbours in the text, the
paper's "fish" -> "pond" kind of association (chapter 1)."""


def readable_exclusions(tokenizer: Tokenizer) -> list[str]:
    """Vocabulary tokens left out of readable tables: punctuation, digits, ``<unk>`` and
    :data:`FUNCTION_WORDS`."""
    return [t for t in tokenizer.id_to_token if not is_word(t) or t in FUNCTION_WORDS]


def cosine_normalise(gram: np.ndarray) -> np.ndarray:
    """M[a, b] / sqrt(M[a, a] M[b, b]) for a Gram matrix such as Sigma_B = B^T B: the cosine of the
    columns of B, which removes the weight of frequent tokens (0 where a diagonal entry is 0)."""
    gram = np.asarray(gram, dtype=np.float64)
    if gram.ndim != 2 or gram.shape[0] != gram.shape[1]:
        raise ValueError(f"expected a square Gram matrix, got shape {gram.shape}")
    d = np.sqrt(np.clip(np.diag(gram), 0.0, None))
    scale = np.outer(d, d)
    return np.divide(gram, scale, out=np.zeros_like(gram), where=scale > 0)


def labelled_words(tokenizer: Tokenizer, classes: dict[str, Sequence[str]] = WORD_CLASSES) -> pd.DataFrame:
    """The words of ``classes`` that are in the vocabulary: columns ``word``, ``class``."""
    rows = [(w, c) for c, words in classes.items() for w in words if w in tokenizer.token_to_id]
    return pd.DataFrame(rows, columns=["word", "class"])


def class_purity(
    similarity: np.ndarray, tokenizer: Tokenizer, k: int = 3, classes: dict[str, Sequence[str]] = WORD_CLASSES
) -> tuple[float, float]:
    """(purity, chance) of a similarity map over the labelled words in the vocabulary.

    For each labelled word, take its ``k`` most similar other labelled words; purity is the share
    of them in the word's own class. Chance is the expected share when the k neighbours are drawn
    at random: the mean over words of (n_class - 1) / (n - 1).
    """
    words = labelled_words(tokenizer, classes)
    n = len(words)
    if n <= k or words["class"].nunique() < 2:
        raise ValueError(
            f"only {n} labelled words of {words['class'].nunique()} class(es) are in the vocabulary; use a larger vocabulary"
        )
    ids = [tokenizer.token_to_id[w] for w in words["word"]]
    labels = words["class"].to_numpy()
    sub = np.asarray(similarity, dtype=np.float64)[np.ix_(ids, ids)]
    np.fill_diagonal(sub, -np.inf)
    order = np.lexsort((np.broadcast_to(np.arange(n), sub.shape), -sub), axis=1)[:, :k]
    purity = float((labels[order] == labels[:, None]).mean())
    sizes = words["class"].map(words["class"].value_counts()).to_numpy()
    return purity, float(np.mean((sizes - 1) / (n - 1)))


def pair_ranks(
    maps: dict[str, np.ndarray], tokenizer: Tokenizer, pairs: Sequence[tuple[str, str]] = CONTEXT_PAIRS
) -> pd.DataFrame:
    """Rank of each pair's second word in the row of its first word, for every map in ``maps``,
    among readable tokens (:func:`readable_exclusions`, the row word itself excluded); pairs with a
    word outside the vocabulary are skipped. Columns: ``row``, ``column``, one rank per map."""
    exclude = readable_exclusions(tokenizer)
    present = [(a, b) for a, b in pairs if a in tokenizer.token_to_id and b in tokenizer.token_to_id]
    records = [
        {
            "row": a,
            "column": b,
            **{name: rank_of(m, tokenizer, a, b, exclude=exclude, exclude_self=True) for name, m in maps.items()},
        }
        for a, b in present
    ]
    return pd.DataFrame.from_records(records, columns=["row", "column", *maps])


def mismatched_pair_ranks(
    matrix: np.ndarray, tokenizer: Tokenizer, pairs: Sequence[tuple[str, str]] = CONTEXT_PAIRS
) -> pd.DataFrame:
    """The mismatched-row control of :func:`pair_ranks` (chapter 1): for each pair, the median rank
    of its second word in the rows of the pairs' other first words (those not paired with it), among
    readable tokens. A surrounding that ranks high only because it is frequent ranks as high in
    another entity's row. Columns: ``row``, ``column``, ``rank in other rows``."""
    exclude = readable_exclusions(tokenizer)
    present = [(a, b) for a, b in pairs if a in tokenizer.token_to_id and b in tokenizer.token_to_id]
    rows = list(dict.fromkeys(a for a, _ in present))
    records = []
    for a, b in present:
        others = [o for o in rows if o != a and o != b and (o, b) not in present]
        if others:
            ranks = [rank_of(matrix, tokenizer, o, b, exclude=exclude, exclude_self=True) for o in others]
            records.append({"row": a, "column": b, "rank in other rows": float(np.median(ranks))})
    return pd.DataFrame.from_records(records, columns=["row", "column", "rank in other rows"])


def trained_maps(state: dict) -> dict[str, np.ndarray]:
    """The trained maps chapter 4 reads from one run's final weights, as float64 arrays: ``W_O``,
    ``V W_O`` (layer 0's value matrix times W_O, the product taken in the weights' dtype) and ``W``
    of layer 0 (at leading order every layer has the same terms)."""
    return {
        "W_O": state["W_O"].double().numpy(),
        "V W_O": (state["blocks.0.attn.V"] @ state["W_O"]).double().numpy(),
        "W": state["blocks.0.attn.W"].double().numpy(),
    }


def row_centred(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` minus its mean row: what is left of each row once the profile every row shares
    (for G and V W_O, the next-token frequency) is taken out (chapter 4's harder control)."""
    matrix = np.asarray(matrix, dtype=np.float64)
    return matrix - matrix.mean(axis=0, keepdims=True)


def _top(scores: np.ndarray, keep: np.ndarray, k: int) -> set[int]:
    return set(keep[np.argsort(-scores[keep], kind="stable")[:k]])


def pair_overlaps(
    theory: np.ndarray,
    trained: np.ndarray,
    rows: Sequence[int],
    k: int = 10,
    exclude: Sequence[int] = (),
    positive: bool = False,
) -> tuple[float, float]:
    """(matched, mismatched) overlap@k of two maps over ``rows`` (chapter 4).

    matched: mean over rows a of |top-k(theory[a]) ∩ top-k(trained[a])| / k, as
    :func:`mechbook.leading_terms.leading.ranking_overlap`; mismatched: the same with the trained
    row of another word, mean over every ordered pair a ≠ b of ``rows``. A matched overlap no higher
    than the mismatched one says the two maps share a profile common to every row, not each word's
    own associations. ``positive`` cuts a row's k to its number of positive theory entries (for B)
    and skips rows with none."""
    theory, trained = np.asarray(theory, dtype=np.float64), np.asarray(trained, dtype=np.float64)
    if theory.shape != trained.shape:
        raise ValueError(f"pair_overlaps needs equal shapes, got {theory.shape} and {trained.shape}")
    rows = list(rows)
    if len(rows) < 2:
        raise ValueError(f"pair_overlaps needs at least two rows to mismatch, got {len(rows)}")
    keep = np.setdiff1d(np.arange(theory.shape[1]), np.asarray(exclude, dtype=int))
    if not 1 <= k <= len(keep):
        raise ValueError(f"k must be between 1 and the {len(keep)} columns left after the exclusions, got {k}")
    cut = {a: (min(k, int((theory[a, keep] > 0).sum())) if positive else k) for a in rows}
    rows = [a for a in rows if cut[a] > 0]
    if len(rows) < 2:
        raise ValueError("fewer than two rows have a positive theory entry; use positive=False")
    matched, mismatched = [], []
    for a in rows:
        top_theory = _top(theory[a], keep, cut[a])
        for b in rows:
            share = len(top_theory & _top(trained[b], keep, cut[a])) / cut[a]
            (matched if a == b else mismatched).append(share)
    return float(np.mean(matched)), float(np.mean(mismatched))


@dataclass(frozen=True)
class OverlapReading:
    """overlap@k of one leading term and its trained map over the content words, with its controls
    (chapter 4): ``matched`` (row a against row a), ``mismatched`` (row a against another word's
    row), the same two for the row-centred maps (:func:`row_centred`), and ``chance`` = k / |V|
    for a random ranking. ``excess`` is matched minus the harder of the two baselines."""

    matched: float
    mismatched: float
    centred: float
    centred_mismatched: float
    chance: float

    @property
    def baseline(self) -> float:
        """The harder baseline: the larger of chance and the mismatched-row overlap."""
        return max(self.chance, self.mismatched)

    @property
    def excess(self) -> float:
        """Matched overlap minus :attr:`baseline`: what the trained row shares with its own term's
        row beyond what any row shares."""
        return self.matched - self.baseline


def overlap_reading(
    theory: np.ndarray,
    trained: np.ndarray,
    rows: Sequence[int],
    k: int = 10,
    exclude: Sequence[int] = (),
    positive: bool = False,
) -> OverlapReading:
    """:class:`OverlapReading` of one term and its trained map (chapter 4). For ``positive`` maps (B,
    whose row profile is already centred by construction) the row-centred pair is read without the
    positive cut, since centring moves the zero."""
    matched, mismatched = pair_overlaps(theory, trained, rows, k, exclude, positive)
    centred, centred_mismatched = pair_overlaps(row_centred(theory), row_centred(trained), rows, k, exclude)
    n_cols = np.asarray(theory).shape[1] - len(set(exclude))
    return OverlapReading(matched, mismatched, centred, centred_mismatched, k / n_cols)


TRAINED_TERMS = {"W_O": "B", "V W_O": "G", "W": "Q"}
"""The trained maps chapter 4 reads, in the order of its tables, and the leading term of each."""


@dataclass(frozen=True)
class RunMaps:
    """Chapter 3's runs read as maps (chapter 4): ``maps`` {lr: {trained map: matrix}} (see
    :func:`trained_maps`), ``exclude`` the tokens left out of rankings (:func:`readable_exclusions`)
    and ``words`` the ``n_words`` most frequent content words the rankings are read for."""

    runs: object
    maps: dict[float, dict[str, np.ndarray]]
    exclude: tuple[str, ...]
    words: tuple[str, ...]

    @property
    def theory(self) -> dict[str, np.ndarray]:
        """The leading term of each trained map: B, G, Q of the runs' corpus."""
        s = self.runs.stats
        return {"W_O": s.B, "V W_O": s.G, "W": s.Q}

    @property
    def lrs(self) -> tuple[float, ...]:
        return tuple(self.maps)


def run_maps(runs: object, n_words: int) -> RunMaps:
    """:class:`RunMaps` of trained (or cached) runs (:class:`mechbook.leading_terms.train.Runs`)."""
    tok = runs.tokenizer
    maps = {lr: trained_maps(r.state) for lr, r in runs.results.items()}
    return RunMaps(runs, maps, tuple(readable_exclusions(tok)), tuple(content_words(tok, n_words)))


def overlap_readings(rm: RunMaps, k: int) -> dict[float, dict[str, OverlapReading]]:
    """{lr: {trained map: :class:`OverlapReading` against its leading term}} over ``rm.words``
    (chapter 4). For B a row's k is cut to its number of successors above the uniform baseline."""
    tok = rm.runs.tokenizer
    keep_out = [tok.token_to_id[t] for t in rm.exclude if t in tok.token_to_id]
    rows = [tok.token_to_id[w] for w in rm.words]
    return {
        lr: {
            name: overlap_reading(rm.theory[name], rm.maps[lr][name], rows, k, keep_out, positive=name == "W_O")
            for name in TRAINED_TERMS
        }
        for lr in rm.lrs
    }
