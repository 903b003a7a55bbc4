"""Names shared by Part I's chapters 3, 4 and 5 (they train and read the same two runs) in records, tables and charts.

The chapters train the paper's two runs, at its learning rate 0.005 and at its larger rate 0.05,
where the features evolve further; records and tables name the two runs ``paper_lr`` and
``large_lr``. Chart labels use the text's notation in Unicode (Vega-Lite cannot typeset math).
"""

from __future__ import annotations

from collections.abc import Sequence

RUN_NAMES = ("paper_lr", "large_lr")
"""Record-name suffixes of the two runs, in the order of ``RunsConfig.lrs``."""

TERM_LABELS = {"W_O": "B", "V": "(BΦ)ᵀ", "W": "Q", "P": "P-term"}
"""The leading term of each kind of matrix, as chart labels write it."""


def run_labels(lrs: Sequence[float]) -> dict[float, str]:
    """``{lr: "paper_lr" | "large_lr"}`` for the two learning rates of a Part I runs config."""
    lrs = tuple(lrs)
    if len(lrs) != len(RUN_NAMES) or len(set(lrs)) != len(lrs):
        raise ValueError(
            f"Part I's chapters compare exactly two distinct learning rates (the paper's 0.005, then its larger 0.05), got {lrs}"
        )
    return dict(zip(lrs, RUN_NAMES))


def matrix_label(name: str) -> str:
    """A trained matrix's parameter name in the text's notation: ``W_O``, ``blocks.1.attn.V`` ->
    ``V⁽¹⁾``, ``blocks.0.attn.W`` -> ``W⁽⁰⁾``, ``blocks.2.attn.P`` -> ``P⁽²⁾``."""
    if name == "W_O":
        return "W_O"
    parts = name.split(".")
    if (
        len(parts) != 4
        or parts[0] != "blocks"
        or parts[2] != "attn"
        or not parts[1].isdigit()
        or parts[3] not in TERM_LABELS
    ):
        raise ValueError(f"{name!r} is not a parameter of the attention model (W_O or blocks.<layer>.attn.<V|W|P>)")
    return f"{parts[3]}{_superscript(f'({parts[1]})')}"


_SUPERSCRIPT = str.maketrans("0123456789()", "⁰¹²³⁴⁵⁶⁷⁸⁹⁽⁾")


def _superscript(text: str) -> str:
    return text.translate(_SUPERSCRIPT)
