"""Tokenizers and fixed-length training sequences for Part I (chapters 1-6).

- :class:`NaturalTokenizer`: the paper's "natural" tokenisation, as the book implements it. Text is
  lowercased; every maximal run of letters is a token, every maximal run of digits (a number) is a
  token, as in the paper (each word, punctuation mark or number is one token, section 5.1, App. C);
  every other non-space character (punctuation, quote, apostrophe) is a token of its own; spaces
  and newlines are dropped. The vocabulary is the ``vocab_size`` most frequent tokens of the
  fitting text, optionally with an ``<unk>`` token.
- :class:`BPETokenizer`: a byte-level byte-pair tokenizer trained locally with the ``tokenizers``
  package. Byte-level BPE can spell any text, so it has no ``<unk>``.
- :class:`CasedBPETokenizer`: the paper's BPE variant: text split on whitespace and punctuation
  first, case kept, merges learnt on the characters of the fitting text.
- :func:`make_sequences`: stories -> an ``(N, T+1)`` array of token ids under a vocabulary policy
  (the paper's ``"drop"``, or ``"unk"``), with the fraction of ``<unk>`` tokens it produced.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

UNK = "<unk>"
_TOKEN_RE = re.compile(r"[^\W\d_]+|\d+|\S")
_NO_SPACE_BEFORE = set(".,!?;:)]}%")
_NO_SPACE_AFTER = set("([{$")
_JOINERS = set("'-")


def natural_tokens(text: str) -> list[str]:
    """Split ``text`` into natural tokens: lowercase letter runs, digit runs (numbers), and single
    other non-space characters.

    >>> natural_tokens("Lily's dog ran, 12 times!")
    ['lily', "'", 's', 'dog', 'ran', ',', '12', 'times', '!']
    """
    return _TOKEN_RE.findall(text.lower())


def is_word(token: str) -> bool:
    """True for a natural token that is a run of letters (not punctuation, digits or ``<unk>``)."""
    return token.isalpha()


def join_natural(tokens: Iterable[str]) -> str:
    """Readable text from natural tokens: a space between tokens, except before closing punctuation,
    after opening brackets, around an apostrophe or hyphen inside a word, and on the inner side of
    double quotes (alternately opening and closing).

    Splitting the result with :func:`natural_tokens` gives the same tokens back (for any token
    list without ``<unk>``), because two letter runs, and two numbers, are always kept apart by a
    space.
    """
    out: list[str] = []
    prev = ""
    quote_open = False
    glued = False  # the previous token is an apostrophe or hyphen glued to the word before it
    for tok in tokens:
        space = bool(out)
        if tok == '"':
            space = space and not quote_open
            quote_open = not quote_open
        elif prev == '"' and quote_open:
            space = False
        if tok in _NO_SPACE_BEFORE or prev in _NO_SPACE_AFTER:
            space = False
        if glued and tok.isalpha():
            space = False
        glued = tok in _JOINERS and prev.isalpha()
        if glued:
            space = False
        out.append(" " + tok if space else tok)
        prev = tok
    return "".join(out)


class Tokenizer(Protocol):
    """What :func:`make_sequences` and the chapters need from a tokenizer."""

    id_to_token: list[str]
    token_to_id: dict[str, int]
    vocab_size: int
    unk_id: int | None

    def lookup(self, text: str) -> np.ndarray: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Iterable[int]) -> str: ...


def _check_corpus(stories: Sequence[str], what: str) -> None:
    if isinstance(stories, str):
        raise TypeError(f"{what} takes a list of stories, not one string; wrap it in a list")
    if len(stories) == 0 or not any(s.strip() for s in stories):
        raise ValueError(
            f"{what}: the corpus is empty; give at least one non-empty story (see mechbook.data.load_stories)"
        )


class NaturalTokenizer:
    """The natural tokenizer with a frequency-ranked vocabulary (chapters 1-5): the paper's (a word,
    a punctuation mark or a number is one token).

    Token ids are frequency ranks: id 0 is the most frequent token; ties are broken by the token
    string, so fitting is deterministic. With ``unk=True`` the last id is ``<unk>`` and counts
    towards ``vocab_size`` (so ``vocab_size - 1`` real tokens are kept).
    """

    def __init__(self, id_to_token: list[str], unk: bool, counts: list[int]):
        if len(set(id_to_token)) != len(id_to_token):
            raise ValueError("id_to_token has repeated tokens")
        self.id_to_token = list(id_to_token)
        self.token_to_id = {t: i for i, t in enumerate(self.id_to_token)}
        self.vocab_size = len(self.id_to_token)
        self.unk_id = self.token_to_id[UNK] if unk else None
        self.counts = np.asarray(counts, dtype=np.int64)

    @classmethod
    def fit(cls, stories: Sequence[str], vocab_size: int, unk: bool = True) -> NaturalTokenizer:
        """Keep the ``vocab_size`` most frequent natural tokens of ``stories`` (one slot for
        ``<unk>`` when ``unk``). ``counts[i]`` is token i's count in ``stories`` (for ``<unk>``:
        the count of every token left out)."""
        _check_corpus(stories, "NaturalTokenizer.fit")
        n_real = vocab_size - (1 if unk else 0)
        if n_real < 1:
            raise ValueError(f"vocab_size={vocab_size} leaves no room for real tokens; use at least {2 if unk else 1}")
        freq = Counter(tok for s in stories for tok in natural_tokens(s))
        if n_real > len(freq):
            raise ValueError(
                f"vocab_size={vocab_size} asks for {n_real} real tokens but the corpus has only {len(freq)} distinct "
                f"natural tokens; use vocab_size <= {len(freq) + (1 if unk else 0)} or a larger corpus"
            )
        ranked = sorted(freq.items(), key=lambda kv: (-kv[1], kv[0]))
        kept = ranked[:n_real]
        tokens = [t for t, _ in kept]
        counts = [c for _, c in kept]
        if unk:
            tokens.append(UNK)
            counts.append(sum(c for _, c in ranked[n_real:]))
        return cls(tokens, unk, counts)

    def lookup(self, text: str) -> np.ndarray:
        """Token ids of ``text`` (int64), with -1 for tokens outside the vocabulary."""
        get = self.token_to_id.get
        return np.fromiter((get(t, -1) for t in natural_tokens(text)), dtype=np.int64)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; out-of-vocabulary tokens become ``unk_id``. Without ``<unk>`` an
        out-of-vocabulary token raises ValueError (use :meth:`lookup` to see them as -1)."""
        ids = self.lookup(text)
        oov = ids < 0
        if oov.any():
            if self.unk_id is None:
                missing = sorted({t for t in natural_tokens(text) if t not in self.token_to_id})
                raise ValueError(
                    f"{len(missing)} token(s) not in the vocabulary (e.g. {missing[:5]}) and the tokenizer has no "
                    "<unk>; fit it with unk=True or use lookup(), which marks them -1"
                )
            ids[oov] = self.unk_id
        return ids.tolist()

    def decode(self, ids: Iterable[int]) -> str:
        """Readable text for token ids (see :func:`join_natural` for the spacing rules)."""
        return join_natural(self.id_to_token[int(i)] for i in ids)

    def __repr__(self) -> str:
        return f"NaturalTokenizer(vocab_size={self.vocab_size}, unk={self.unk_id is not None})"


class _TrainedBPE:
    """What the two BPE tokenizers share: a ``tokenizers.Tokenizer`` and its vocabulary as
    ``id_to_token`` / ``token_to_id`` / ``vocab_size``."""

    def __init__(self, tokenizer) -> None:
        self._tok = tokenizer
        vocab = tokenizer.get_vocab()
        self.id_to_token = [""] * len(vocab)
        for tok, i in vocab.items():
            self.id_to_token[i] = tok
        self.token_to_id = dict(vocab)
        self.vocab_size = len(self.id_to_token)

    def lookup(self, text: str) -> np.ndarray:
        """Token ids of ``text`` (int64); never -1 (byte-level BPE spells any text, the cased BPE
        maps unseen characters to ``[UNK]``)."""
        return np.asarray(self._tok.encode(text).ids, dtype=np.int64)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``."""
        return self._tok.encode(text).ids

    def decode(self, ids: Iterable[int]) -> str:
        """The text the ids spell: exact for byte-level BPE; the cased BPE joins its tokens with
        spaces (its pre-splitting drops where the spaces were)."""
        return self._tok.decode([int(i) for i in ids])


class BPETokenizer(_TrainedBPE):
    """Byte-level BPE trained locally with ``tokenizers`` (the paper's BPE variant, chapter 1).

    Text is lowercased first when ``lowercase`` (as the natural tokenizer does), so
    ``decode(encode(s)) == s.lower()`` exactly. Byte-level BPE spells any text with its 256 byte
    tokens, so there is no ``<unk>`` (``unk_id`` is None) and ``vocab_size`` must be at least 256.
    """

    def __init__(self, tokenizer, lowercase: bool):
        super().__init__(tokenizer)
        self.lowercase = lowercase
        self.unk_id = None

    @classmethod
    def fit(cls, stories: Sequence[str], vocab_size: int, unk: bool = False, lowercase: bool = True) -> BPETokenizer:
        """Train byte-level BPE merges on ``stories`` until ``vocab_size`` tokens (256 bytes included)."""
        from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

        _check_corpus(stories, "BPETokenizer.fit")
        if unk:
            raise ValueError(
                "byte-level BPE never meets an unknown token, so it has no <unk>; call fit(..., unk=False)"
            )
        alphabet = pre_tokenizers.ByteLevel.alphabet()
        if vocab_size < len(alphabet):
            raise ValueError(
                f"byte-level BPE needs vocab_size >= {len(alphabet)} (one token per byte), got {vocab_size}"
            )
        tok = Tokenizer(models.BPE())
        if lowercase:
            tok.normalizer = normalizers.Lowercase()
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, initial_alphabet=alphabet, show_progress=False, special_tokens=[]
        )
        tok.train_from_iterator(list(stories), trainer=trainer)
        got = tok.get_vocab_size()
        if got < vocab_size:
            raise ValueError(
                f"BPE stopped at {got} tokens: the corpus has no more pairs to merge for vocab_size={vocab_size}; "
                f"use vocab_size <= {got} or a larger corpus"
            )
        return cls(tok, lowercase)

    def __getstate__(self) -> dict:
        return {"json": self._tok.to_str(), "lowercase": self.lowercase}

    def __setstate__(self, state: dict) -> None:
        from tokenizers import Tokenizer

        self.__init__(Tokenizer.from_str(state["json"]), state["lowercase"])

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size}, lowercase={self.lowercase})"


class CasedBPETokenizer(_TrainedBPE):
    """The paper's BPE variant (chapter 3): case kept, text pre-split by ``tokenizers``'
    ``Whitespace`` pre-tokenizer (runs of word characters, runs of other non-space characters),
    merges learnt on the characters of the fitting text. ``vocab_size`` counts the characters, the
    merges and one ``[UNK]`` for characters the fitting text never showed (``unk_id``)."""

    UNK = "[UNK]"

    def __init__(self, tokenizer) -> None:
        super().__init__(tokenizer)
        self.unk_id = self.token_to_id[self.UNK]

    @classmethod
    def fit(cls, stories: Sequence[str], vocab_size: int, unk: bool = True) -> CasedBPETokenizer:
        """Learn merges on ``stories`` until ``vocab_size`` tokens (characters and ``[UNK]`` included)."""
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers

        _check_corpus(stories, "CasedBPETokenizer.fit")
        alphabet = {ch for s in stories for ch in s if not ch.isspace()}
        if vocab_size < len(alphabet) + 1:
            raise ValueError(
                f"the fitting text has {len(alphabet)} distinct characters, so vocab_size must be at least "
                f"{len(alphabet) + 1} (one per character and [UNK]), got {vocab_size}"
            )
        tok = Tokenizer(models.BPE(unk_token=cls.UNK))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False, special_tokens=[cls.UNK])
        tok.train_from_iterator(list(stories), trainer=trainer)
        got = tok.get_vocab_size()
        if got < vocab_size:
            raise ValueError(
                f"BPE stopped at {got} tokens: the corpus has no more pairs to merge for vocab_size={vocab_size}; "
                f"use vocab_size <= {got} or a larger corpus"
            )
        return cls(tok)

    def counts(self, stories: Sequence[str]) -> np.ndarray:
        """How often each token id occurs in ``stories`` (int64, length ``vocab_size``)."""
        ids = np.concatenate([np.asarray(e.ids, dtype=np.int64) for e in self._tok.encode_batch(list(stories))])
        return np.bincount(ids, minlength=self.vocab_size)

    def __getstate__(self) -> dict:
        return {"json": self._tok.to_str()}

    def __setstate__(self, state: dict) -> None:
        from tokenizers import Tokenizer

        self.__init__(Tokenizer.from_str(state["json"]))

    def __repr__(self) -> str:
        return f"CasedBPETokenizer(vocab_size={self.vocab_size})"


POLICIES = ("unk", "drop")


@dataclass
class SequenceSet:
    """Training sequences of Part I.

    ``tokens``: (N, T+1) int64, row n is ``x_0 .. x_T`` of one story (inputs ``x_0..x_{T-1}``,
    targets ``y_t = x_{t+1}``). ``unk_fraction``: share of ``<unk>`` among those N (T+1) tokens.
    ``n_stories``: stories given; ``n_long_enough``: those with at least T+1 tokens; ``n_kept``: N.
    """

    tokens: np.ndarray
    unk_fraction: float
    n_stories: int
    n_kept: int
    policy: str
    n_long_enough: int

    @property
    def context(self) -> int:
        """T, the number of predicted positions per sequence."""
        return self.tokens.shape[1] - 1


def make_sequences(
    stories: Sequence[str], tokenizer: Tokenizer, context: int, policy: str = "unk", limit: int | None = None
) -> SequenceSet:
    """Tokenise ``stories`` into sequences of ``context + 1`` tokens (first tokens of each story).

    ``policy="drop"`` (the paper's): keep only stories whose tokens are all in the vocabulary and
    that have at least T+1 tokens. ``policy="unk"``: out-of-vocabulary tokens become ``<unk>``
    (the tokenizer must have one); keep stories with at least T+1 tokens. Sequences are the first
    T+1 tokens of each kept story, in story order; ``limit`` keeps only the first ``limit`` of
    them (as the paper keeps 65,536 of its samples; None: all), and the counts stop there.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1 or None, got {limit}")
    _check_corpus(stories, "make_sequences")
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    if context < 1:
        raise ValueError(f"context T must be >= 1, got {context}")
    need = context + 1
    rows: list[np.ndarray] = []
    longest = 0
    n_long = 0
    for story in stories:
        ids = tokenizer.lookup(story)
        longest = max(longest, len(ids))
        if len(ids) < need:
            continue
        n_long += 1
        head = ids[:need]
        if policy == "drop":
            if (ids < 0).any():
                continue
        elif (head < 0).any():
            if tokenizer.unk_id is None:
                raise ValueError(
                    "policy 'unk' met an out-of-vocabulary token but the tokenizer has no <unk>: fit it with unk=True, or use policy='drop'"
                )
            head = np.where(head < 0, tokenizer.unk_id, head)
        rows.append(head)
        if len(rows) == limit:
            break
    if n_long == 0:
        raise ValueError(
            f"context T={context} needs stories of at least {need} tokens, but the longest of the {len(stories)} "
            f"stories has {longest}; use a smaller context"
        )
    if not rows:
        raise ValueError(
            f"nothing left after policy {policy!r} with |V|={tokenizer.vocab_size}, T={context}: {n_long} of "
            f"{len(stories)} stories have >= {need} tokens but none has all its tokens in the vocabulary; use "
            "policy='unk', a larger vocabulary or a smaller context"
        )
    tokens = np.stack(rows).astype(np.int64)
    unk_fraction = float((tokens == tokenizer.unk_id).mean()) if tokenizer.unk_id is not None else 0.0
    return SequenceSet(tokens, unk_fraction, len(stories), len(rows), policy, n_long)


def policy_survivors(stories: Sequence[str], tokenizer: Tokenizer, context: int) -> dict[str, int]:
    """How many stories each vocabulary policy keeps at context T (chapter 1).

    ``stories``: all; ``long_enough``: with at least T+1 tokens (what ``"unk"`` keeps);
    ``in_vocabulary``: long enough and with every token in the vocabulary's real tokens (what the
    paper's ``"drop"`` keeps).
    """
    _check_corpus(stories, "policy_survivors")
    long_enough = in_vocabulary = 0
    for story in stories:
        ids = tokenizer.lookup(story)
        if len(ids) >= context + 1:
            long_enough += 1
            in_vocabulary += bool((ids >= 0).all())
    return {"stories": len(stories), "long_enough": long_enough, "in_vocabulary": in_vocabulary}
