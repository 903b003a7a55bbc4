"""Helpers every chapter module may use: recording a chapter's headline numbers in one call, and
putting text that came from the corpus or a tokenizer into computed Markdown safely."""

from __future__ import annotations

import html
import re
from typing import Any, Mapping

_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]{}()#+\-.!|~$])")


def record_all(numbers: Mapping[str, Any]) -> dict[str, Any]:
    """``mechbook.record`` every ``name: value`` of ``numbers`` (hidden outputs the tests and
    ``python -m mechbook check`` read back); returns the recorded values."""
    from mechbook import record

    return {name: record(name, value) for name, value in numbers.items()}


def markdown_text(text: str) -> str:
    """``text`` as literal Markdown: HTML special characters become entities, so ``<unk>`` or
    ``<|endoftext|>`` is shown rather than read as a tag, and Markdown and math punctuation
    (``* _ ` $ [ ] # ...``) is backslash-escaped, so corpus text is never emphasis, a link or math."""
    return html.escape(_MARKDOWN_PUNCTUATION.sub(r"\\\1", text), quote=False)
