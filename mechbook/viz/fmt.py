"""Text for charts and computed prose: the book's math notation in Unicode (Vega-Lite cannot
typeset TeX, so chart titles, axes and legends use these strings), and escaping for text that
comes from code or from the corpus (special tokens such as ``<unk>`` or ``<|endoftext|>``).
"""

from __future__ import annotations

import html
import string

# Notation of the text, as chart labels. Part I: corpus statistics and weights; Part II: circuits.
NOTATION: dict[str, str] = {
    "eta": "η",
    "eta_s": "η·s",
    "B": "B",
    "Phi": "Φ",
    "Phi_T": "Φᵀ",
    "B_Phi": "BΦ",
    "B_Phi_T": "(BΦ)ᵀ",
    "Sigma_B": "Σ_B",
    "G": "G",
    "Q": "Q",
    "W": "W",
    "W_O": "W_O",
    "V": "V",
    "V_W_O": "V W_O",
    "W_U": "W_U",
    "W_out": "W_out",
    "W_out_W_U": "W_out W_U",
    "QK1": "QK₁",
    "QK2": "QK₂",
    "OV2": "OV₂",
    "MLP1": "MLP₁",
    "MLP2": "MLP₂",
    "P_QK1_PT": "P QK₁ Pᵀ",
    "U_QK2_UT": "U QK₂ Uᵀ",
    "UUT_sq": "(UUᵀ)²",
    "ge": "≥",
    "le": "≤",
    "times": "×",
}

_MARKDOWN_SPECIAL = frozenset(string.punctuation)


def label(*names: str, sep: str = " ") -> str:
    """The notation for ``names`` joined by ``sep``: ``label("eta_s")`` is ``"η·s"``; a name that
    is not in :data:`NOTATION` is an error listing the known names."""
    unknown = [n for n in names if n not in NOTATION]
    if unknown:
        raise KeyError(f"no notation for {unknown}; known: {', '.join(sorted(NOTATION))}")
    return sep.join(NOTATION[n] for n in names)


def escape_markdown(text: object) -> str:
    """``text`` as literal Markdown/MyST: every ASCII punctuation character is backslash-escaped
    (CommonMark's rule), so ``<unk>`` stays visible instead of being read as an HTML tag and
    ``*``, ``_``, ``$``, ``{`` or a leading ``#`` keep their plain meaning. Use it for any corpus
    text or token that goes into a computed Markdown sentence (not inside a code span, where text
    is already literal)."""
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIAL else ch for ch in str(text))


def escape_html(text: object) -> str:
    """``text`` safe inside HTML (``&``, ``<``, ``>``, quotes escaped)."""
    return html.escape(str(text), quote=True)
