"""The built site (mechbook/site, mechbook/viz): it builds with Sphinx warnings as errors, every
toc page is there, no page loads a script, stylesheet or font from the network, chart fallbacks
live outside the pages, notebook pages offer their downloads, and a glued chart is a numbered
figure. The page hooks are also tested alone (no build)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from html.parser import HTMLParser

import nbformat
import pytest

from mechbook import site
from mechbook.book.toc import toc_files
from mechbook.exercises.notebooks import exercise_form

book = pytest.mark.book
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


@book
def test_every_toc_page_is_built(built_site, root):
    for entry in toc_files(root):
        assert (built_site / entry.with_suffix(".html")).is_file(), f"{entry} has no page"


@book
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


@book
def test_no_stylesheet_imports_remote_css_or_fonts(built_site):
    for css in built_site.rglob("*.css"):
        text = css.read_text(encoding="utf-8", errors="replace")
        assert not _remote_css(text), f"{css.relative_to(built_site)} imports from the network"
    fonts = [
        u
        for css in built_site.rglob("*.css")
        for pair in CSS_URL.findall(css.read_text(errors="replace"))
        for u in pair
        if u and FONT.search(u)
    ]
    assert all(not REMOTE.match(u) for u in fonts)


@book
def test_assets_are_served_locally(built_site):
    static = built_site / "_static"
    assert (static / "mathjax" / "tex-mml-chtml.js").stat().st_size > 100_000
    assert list((static / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff"))
    bundle = (static / "mechbook-vega.js").read_text(encoding="utf-8")
    assert "window.vegaEmbed" in bundle and bundle.startswith("(function () {")
    intro = (built_site / "book" / "intro.html").read_text(encoding="utf-8")
    for asset in ("_static/mechbook-vega.js", "_static/mechbook-charts.js", "_static/mathjax/tex-mml-chtml.js"):
        assert asset in intro


@book
def test_charts_carry_their_spec_and_a_noscript_image_outside_the_page(built_site):
    intro = (built_site / "book" / "intro.html").read_text(encoding="utf-8")
    charts = re.findall(r'<div class="mechbook-chart">(.*?)</script></div>', intro, re.S)
    assert len(charts) >= 2
    for chart in charts:
        assert "<svg" not in chart, "the inline SVG must leave the page"
        image = re.search(r'<noscript><img src="([^"]+)" alt="([^"]+)"', chart)
        assert image and (built_site / "book" / image.group(1)).resolve().is_file()
        assert image.group(1).startswith("../_images/mechbook-chart-") and image.group(2) != "chart"
        spec = json.loads(chart.split('class="mechbook-spec">', 1)[1])
        assert spec["description"] == image.group(2).replace("&#x27;", "'").replace("&quot;", '"').replace("&amp;", "&")
    assert "papermill.record" not in intro, "records must stay invisible on the page"


@book
def test_notebook_pages_offer_both_notebooks_and_hide_the_injected_cell(built_site, root):
    for entry in toc_files(root):
        if entry.suffix != ".ipynb":
            continue
        page = built_site / entry.with_suffix(".html")
        text = page.read_text(encoding="utf-8")
        assert "tag_injected-parameters" not in text, f"{entry}: papermill's cell is on the page"
        assert "This page ran with <code>profile = &quot;smoke&quot;</code>" in text, entry
        assert f"open <code>{entry.as_posix()}</code>" in text and "<code>make venv</code>" in text
        links = dict(re.findall(r'class="mechbook-download-(source|exercises|executed)" href="([^"]+)"', text))
        source = nbformat.read(page.parent / links["source"], as_version=4)
        executed = nbformat.read(page.parent / links["executed"], as_version=4)
        assert all(
            not c.get("outputs") and c.get("execution_count") is None for c in source.cells if c.cell_type == "code"
        )
        assert any(c.get("outputs") for c in executed.cells if c.cell_type == "code"), (
            f"{entry}: executed has no outputs"
        )
        committed = nbformat.read(root / entry, as_version=4)
        assert [c.source for c in source.cells] == [c.source for c in committed.cells]
        exercises = nbformat.read(page.parent / links["exercises"], as_version=4)
        assert [c.source for c in exercises.cells] == [c.source for c in exercise_form(committed).cells]


@book
def test_footer_shows_the_version(built_site, root):
    described = subprocess.run(
        ["git", "-C", str(root), "describe", "--always", "--dirty"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert f"mechbook version <code>{described}</code>" in (built_site / "book" / "intro.html").read_text(
        encoding="utf-8"
    )


@book
def test_a_glued_chart_is_a_numbered_figure(tmp_path, root):
    """The recipe of DEVELOPING.md: glue a chart, show it with {glue:figure} and a :name:, cite
    it with {numref}; the page has "Fig. 1" in the caption and the text, and the live chart."""
    import nbclient
    from conftest import make_notebook

    from mechbook.book.config import ExecuteConfig
    from mechbook.book.site import build_site

    (tmp_path / "mechbook").mkdir()
    (tmp_path / "_config.yml").write_text((root / "_config.yml").read_text())
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/fig\n")
    path = make_notebook(
        tmp_path / "book" / "fig.ipynb",
        [
            ("md", "# Figures\n\nAs {numref}`fig-demo` shows, the line rises."),
            (
                "code",
                "import altair as alt, pandas as pd, mechbook.viz\nfrom myst_nb import glue\n"
                "chart = alt.Chart(pd.DataFrame({'x': [0, 1, 2], 'y': [0, 1, 4]})).mark_line()"
                ".encode(x='x:Q', y='y:Q').properties(title='The line rises')\n"
                "glue('fig-demo', chart, display=False)",
            ),
            (
                "md",
                "```{glue:figure} fig-demo\n:name: fig-demo\n\nA rising line.\n```\n\n"
                "Again: {numref}`Figure {number} <fig-demo>`.",
            ),
        ],
    )
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(tmp_path)}}
    ).execute(env={**os.environ, "MECHBOOK_STATIC": "1"})
    nbformat.write(nb, path)
    html = (build_site(ExecuteConfig(profile="smoke", root=tmp_path)) / "book" / "fig.html").read_text(encoding="utf-8")
    figure = re.search(r'<figure[^>]*id="fig-demo">(.*?)</figure>', html, re.S)
    assert figure, "no figure with the name fig-demo"
    assert '<span class="caption-number">Fig. 1 </span><span class="caption-text">A rising line.' in figure.group(1)
    spec = json.loads(re.search(r'class="mechbook-spec">(.*?)</script>', figure.group(1), re.S).group(1))
    assert spec["description"] == "The line rises" and spec["mark"]["type"] == "line"
    assert html.count('href="#fig-demo"><span class="std std-numref">') == 2
    assert "Fig. 1</span></a> shows" in html and "Figure 1</span></a>." in html


@book
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
    refs.feed(
        '<link rel="stylesheet" href="https://cdn.example/x.css"><script src="//cdn.example/a.js"></script>'
        '<style>@import url("https://fonts.example/f.css");</style><div style="background:url(http://x/y.png)">'
    )
    assert [s for s in refs.scripts if REMOTE.match(s)] == ["//cdn.example/a.js"]
    assert [h for _, h in refs.links if REMOTE.match(h)] == ["https://cdn.example/x.css"]
    assert _remote_css("\n".join(refs.styles)) == ["https://fonts.example/f.css", "http://x/y.png"]
    assert _remote_css("src: url(../fonts/a.woff2) format('woff2')") == []


# --- the page hooks alone -------------------------------------------------------------------------


def _chart_html(description: str, svg: str = "<svg><rect/></svg>") -> str:
    spec = json.dumps({"mark": "point", "description": description}).replace("</", "<\\/")
    return (
        f'<div class="mechbook-chart"><div class="mechbook-fallback">{svg}</div>'
        f'<script type="application/json" class="mechbook-spec">{spec}</script></div>'
    )


def test_light_fallbacks_moves_each_svg_to_one_file_per_content():
    written = {}
    body = "<p>x</p>" + _chart_html("A <b> & 'c'") + _chart_html("again") + _chart_html("other", "<svg><circle/></svg>")
    out = site.light_fallbacks(body, written.__setitem__, lambda name: f"../_images/{name}")
    assert "<svg" not in out and len(written) == 2, "equal SVGs share one file"
    assert set(written.values()) == {"<svg><rect/></svg>", "<svg><circle/></svg>"}
    assert all(name == site.chart_image_name(svg) for name, svg in written.items())
    assert out.count('class="mechbook-spec"') == 3 and out.startswith("<p>x</p>")
    assert 'alt="A &lt;b&gt; &amp; &#x27;c&#x27;"' in out
    assert site.light_fallbacks("<p>no charts</p>", written.__setitem__, str) == "<p>no charts</p>"


def test_source_notebook_is_the_executed_one_without_outputs(tmp_path):
    from conftest import make_notebook

    from mechbook.book.pages import add_cost_note

    path = make_notebook(tmp_path / "a.ipynb", [("md", "# A"), ("code", "print(1)")])
    committed = nbformat.read(path, as_version=4)
    executed = nbformat.read(path, as_version=4)
    injected = nbformat.v4.new_code_cell('profile = "smoke"', metadata={"tags": ["injected-parameters"]})
    executed.cells.insert(1, injected)
    add_cost_note(executed, "**What this page costs.** staged, not committed")
    executed.cells[-1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    executed.cells[-1].execution_count = 3
    executed.cells[-1].metadata["papermill"] = {"duration": 0.1}
    executed.metadata["papermill"] = {"parameters": {"profile": "smoke"}}
    stripped = site.source_notebook(executed)
    assert [(c.cell_type, c.source, c.get("outputs", []), c.get("execution_count")) for c in stripped.cells] == [
        (c.cell_type, c.source, c.get("outputs", []), c.get("execution_count")) for c in committed.cells
    ]
    assert "papermill" not in stripped.metadata and executed.cells[-1].outputs, "the input is left as it was"


def test_downloads_note_escapes_and_names_the_parameters():
    note = site.downloads_note(
        "a.ipynb", "a.exercises.ipynb", "a.executed.ipynb", {"profile": "smoke", "steps": 5}, "book/<x>.ipynb"
    )
    assert "<code>profile = &quot;smoke&quot;</code>, <code>steps = 5</code>" in note
    assert all(f'href="a.{kind}ipynb" download' in note for kind in ("", "exercises.", "executed."))
    assert "<code>book/&lt;x&gt;.ipynb</code>" in note
    assert "This page ran" not in site.downloads_note("a", "b", "c", {}, "p")


def test_book_version_is_git_describe_or_unknown(tmp_path, root):
    described = subprocess.run(
        ["git", "-C", str(root), "describe", "--always", "--dirty"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert site.book_version(root) == described
    assert site.book_version(tmp_path) == "unknown"


def test_a_folded_solution_opens_on_show_the_solution():
    from docutils import nodes

    doc = nodes.document(None, None)
    solution = nodes.container(classes=["cell", "tag_exercise", "tag_solution"], hide_mode="input")
    other = nodes.container(classes=["cell", "tag_hide-input"], hide_mode="input")
    for node in (solution, other):
        node["prompt_show"], node["prompt_hide"] = "Show code cell {type}", "Hide code cell {type}"
        doc += node
    site._solution_prompts(None, doc)
    assert (solution["prompt_show"], solution["prompt_hide"]) == site.SOLUTION_PROMPTS
    assert other["prompt_show"] == "Show code cell {type}"
