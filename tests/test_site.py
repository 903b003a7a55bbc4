"""The built site (mechbook/site, mechbook/viz): it builds with Sphinx warnings as errors, every
toc page is there, and no page loads a script, stylesheet or font from the network."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from mechbook.book.toc import toc_files

pytestmark = pytest.mark.book
REMOTE = re.compile(r"^\s*(https?:)?//", re.I)
CSS_URL = re.compile(r"""@import\s+(?:url\()?\s*['"]?([^'")\s;]+)|url\(\s*['"]?([^'")]+)""", re.I)
FONT = re.compile(r"\.(woff2?|ttf|otf|eot)(\?|#|$)", re.I)


class _Refs(HTMLParser):
    """Collects what a page loads: script src, link href, inline <style> text."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[str] = []
        self.links: list[tuple[str, str]] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script" and a.get("src"):
            self.scripts.append(a["src"])
        if tag == "link" and a.get("href"):
            self.links.append((a.get("rel") or "", a["href"]))
        if tag == "style":
            self._in_style = True
        if a.get("style"):
            self.styles.append(a["style"])

    def handle_endtag(self, tag):
        if tag == "style":
            self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.styles.append(data)


def _remote_css(text: str) -> list[str]:
    return [u for pair in CSS_URL.findall(text) for u in pair if u and REMOTE.match(u)]


def test_every_toc_page_is_built(built_site, root):
    for entry in toc_files(root):
        assert (built_site / entry.with_suffix(".html")).is_file(), f"{entry} has no page"


def test_no_page_loads_anything_from_the_network(built_site):
    pages = sorted(built_site.rglob("*.html"))
    assert pages
    for page in pages:
        refs = _Refs()
        refs.feed(page.read_text(encoding="utf-8"))
        where = page.relative_to(built_site)
        assert not [s for s in refs.scripts if REMOTE.match(s)], f"{where} loads a remote script"
        loads = {"stylesheet", "preload", "modulepreload", "icon", "prefetch"}
        loaded = [h for rel, h in refs.links if set(rel.lower().split()) & loads]
        assert not [h for h in loaded if REMOTE.match(h)], f"{where} loads a remote stylesheet or asset"
        assert not _remote_css("\n".join(refs.styles)), f"{where} has inline CSS with a remote url()"


def test_no_stylesheet_imports_remote_css_or_fonts(built_site):
    for css in built_site.rglob("*.css"):
        text = css.read_text(encoding="utf-8", errors="replace")
        assert not _remote_css(text), f"{css.relative_to(built_site)} imports from the network"
    fonts = [u for css in built_site.rglob("*.css") for pair in CSS_URL.findall(css.read_text(errors="replace"))
             for u in pair if u and FONT.search(u)]
    assert all(not REMOTE.match(u) for u in fonts)


def test_assets_are_served_locally(built_site):
    static = built_site / "_static"
    assert (static / "mathjax" / "tex-mml-chtml.js").stat().st_size > 100_000
    assert list((static / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff"))
    bundle = (static / "mechbook-vega.js").read_text(encoding="utf-8")
    assert "window.vegaEmbed" in bundle and bundle.startswith("(function () {")
    intro = (built_site / "book" / "intro.html").read_text(encoding="utf-8")
    for asset in ("_static/mechbook-vega.js", "_static/mechbook-charts.js", "_static/mathjax/tex-mml-chtml.js"):
        assert asset in intro


def test_charts_carry_an_svg_fallback_and_their_spec(built_site):
    intro = (built_site / "book" / "intro.html").read_text(encoding="utf-8")
    charts = re.findall(r'<div class="mechbook-chart">(.*?)</script></div>', intro, re.S)
    assert len(charts) >= 2
    for chart in charts:
        assert '<div class="mechbook-fallback"><svg' in chart
        assert '<script type="application/json" class="mechbook-spec">' in chart
    assert "papermill.record" not in intro, "records must stay invisible on the page"


def test_a_sphinx_warning_fails_the_build(tmp_path, root):
    """The site is built with warnings as errors: a broken cross-reference must stop it."""
    from mechbook.book.config import ExecuteConfig
    from mechbook.book.site import build_site

    (tmp_path / "mechbook").mkdir()
    (tmp_path / "_config.yml").write_text((root / "_config.yml").read_text())
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/intro\n")
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "intro.md").write_text("# Intro\n\nSee {ref}`no-such-label`.\n")
    with pytest.raises(SystemExit, match="site build failed"):
        build_site(ExecuteConfig(profile="smoke", root=tmp_path))
    (tmp_path / "book" / "intro.md").write_text("# Intro\n\n$x^2$ is fine.\n")
    html = build_site(ExecuteConfig(profile="smoke", root=tmp_path))
    assert (html / "book" / "intro.html").exists()


def test_the_network_check_catches_remote_assets():
    refs = _Refs()
    refs.feed('<link rel="stylesheet" href="https://cdn.example/x.css"><script src="//cdn.example/a.js"></script>'
              '<style>@import url("https://fonts.example/f.css");</style><div style="background:url(http://x/y.png)">')
    assert [s for s in refs.scripts if REMOTE.match(s)] == ["//cdn.example/a.js"]
    assert [h for _, h in refs.links if REMOTE.match(h)] == ["https://cdn.example/x.css"]
    assert _remote_css("\n".join(refs.styles)) == ["https://fonts.example/f.css", "http://x/y.png"]
    assert _remote_css("src: url(../fonts/a.woff2) format('woff2')") == []
