"""Escaping corpus text for Markdown (mechbook.viz.fmt.escape_markdown), rendered back by markdown-it."""

from __future__ import annotations

import html
import re

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin

from mechbook.viz.fmt import escape_markdown as markdown_text

RENDER = MarkdownIt("commonmark").use(dollarmath_plugin)


def _rendered_text(markdown: str) -> str:
    out = RENDER.render(markdown)
    assert "<em>" not in out and "<strong>" not in out and "<a " not in out and "math" not in out, out
    return html.unescape(re.sub(r"</?p>|\n", "", out))


@given(st.text(alphabet=st.sampled_from(list("abc XYZ<>&*_`$[]()#+-.!|~\\{}'\"=;:/")), min_size=1, max_size=40))
@settings(max_examples=300, deadline=None)
def test_markdown_text_renders_back_to_the_text(text):
    text = re.sub(r" +", " ", text).strip()
    if not text:
        return
    assert _rendered_text(markdown_text(text)) == text


def test_special_tokens_survive_markdown():
    for token in ("<unk>", "<|endoftext|>"):
        assert token in _rendered_text(f'said, "{markdown_text(token)}, your car"')
    assert "&lt;unk&gt;" in RENDER.render(markdown_text('said, "<unk>, your car"'))
    assert "<unk>" in RENDER.render('said, "<unk>, your car"')  # unescaped, a tag the browser drops
