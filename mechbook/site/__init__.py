"""Sphinx extension of the book's site (listed in ``_config.yml`` ``sphinx.extra_extensions``).

Makes every page work with no network:

- Vega, Vega-Lite and vega-embed come from ``vl_convert.javascript_bundle()``, wrapped in a
  function so its top-level names stay private, and are served as ``_static/mechbook-vega.js``;
- ``_static/mechbook-charts.js`` turns each ``<div class="mechbook-chart">`` written by
  :func:`mechbook.viz.chart_html` into a live ``vegaEmbed`` view (the SVG fallback stays if that
  fails, and the failure is logged to the console);
- MathJax 3 is copied from the npm package (``node_modules/mathjax/es5``, installed by
  ``make venv`` from package-lock.json, or ``$MECHBOOK_MATHJAX``) into ``_static/mathjax`` and
  ``mathjax_path`` points there;
- sphinx-thebe's scripts (a launcher for remote kernels) are left out of the pages;
- each chart's inline SVG fallback (kept in the executed notebook) moves out of the page into
  ``_images/mechbook-chart-<hash>.svg``, shown by a ``<noscript>`` image, so a page carries only
  the specs that the loader draws (chapter 9: 3.8 MB of HTML, two thirds of it SVG, before);
- ``_static/mechbook-search.js`` keeps code cells, outputs and TeX out of search snippets;
- an exercise's folded solution opens on "Show the solution";
- each notebook page starts with a note offering the notebook (``_downloads/<page>.ipynb``, as
  committed: no outputs), its exercise form (``_downloads/<page>.exercises.ipynb``: solutions
  replaced by stubs, :mod:`mechbook.exercises.notebooks`) and the executed one
  (``_downloads/<page>.executed.ipynb``), with one line on how to run it locally, and (once
  ``make pdf`` has printed it, :mod:`mechbook.book.pdf`) the whole book as one PDF;
- the footer shows the book's version, ``git describe --always --dirty`` of the checkout.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ExtensionError

from mechbook.book.pdf import PDF_LINK

STATIC = Path(__file__).parent / "static"
ROOT = Path(__file__).resolve().parents[2]
MATHJAX_ENTRY = "tex-mml-chtml.js"
MATHJAX_PARTS = (MATHJAX_ENTRY, "input", "output", "ui", "a11y", "adaptors")
FALLBACK = re.compile(
    r'<div class="mechbook-fallback">(<svg\b.*?</svg>)</div>(<script type="application/json" class="mechbook-spec">(.*?)</script>)',
    re.S,
)
CHART_IMAGES = "_images"
DOWNLOADS = "_downloads"
RUN_LOCALLY = "<code>make venv</code>, then <code>.venv/bin/jupyter lab</code> and open <code>{path}</code>"


def mathjax_source() -> Path:
    """The MathJax ``es5`` folder: ``$MECHBOOK_MATHJAX`` or ``node_modules/mathjax/es5``."""
    found = Path(os.environ.get("MECHBOOK_MATHJAX") or ROOT / "node_modules" / "mathjax" / "es5")
    if not (found / MATHJAX_ENTRY).is_file():
        raise ExtensionError(
            f"MathJax is missing ({found / MATHJAX_ENTRY}): run `npm ci` in the repository (or `make venv`), "
            "or set MECHBOOK_MATHJAX to a MathJax 3 es5 folder"
        )
    return found


def vega_bundle() -> str:
    """Vega + Vega-Lite + vega-embed in one classic script that defines only window globals, with
    the Vega-Lite version the charts' specs declare (:data:`mechbook.viz.VL_VERSION`), not
    vl-convert's latest."""
    import vl_convert

    from mechbook.viz import VL_VERSION

    return "(function () {\n" + vl_convert.javascript_bundle(vl_version=VL_VERSION) + "\n})();\n"


def book_version(root: Path | None = None) -> str:
    """``git describe --always --dirty`` of the checkout at ``root`` (default: the one holding
    this package); "unknown" outside git."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root or ROOT), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def _configure(app: Sphinx, config: Config) -> None:
    """Point MathJax at the local copy; give pages an icon (else browsers ask for /favicon.ico);
    put the version in the footer."""
    config.mathjax_path = f"mathjax/{MATHJAX_ENTRY}"
    if not config.html_favicon:
        config.html_favicon = str(STATIC / "favicon.svg")
    version = html.escape(book_version())
    footer = f'<p class="mechbook-version">mechbook version <code>{version}</code></p>'
    config.html_theme_options = {**(config.html_theme_options or {}), "extra_footer": footer}


def _write_assets(app: Sphinx) -> None:
    if app.builder.format != "html":
        return
    staged = Path(app.doctreedir) / "mechbook_static"
    if staged.exists():
        shutil.rmtree(staged)
    (staged / "mathjax").mkdir(parents=True)
    (staged / "mechbook-vega.js").write_text(vega_bundle(), encoding="utf-8")
    source = mathjax_source()
    for part in MATHJAX_PARTS:
        src = source / part
        if src.is_dir():
            shutil.copytree(src, staged / "mathjax" / part)
        elif src.is_file():
            shutil.copy2(src, staged / "mathjax" / part)
    app.config.html_static_path.extend([str(staged), str(STATIC)])
    app.add_js_file("mechbook-vega.js")
    app.add_js_file("mechbook-charts.js")
    app.add_js_file("mechbook-search.js")
    app.add_css_file("mechbook.css")


def _is_thebe(asset: Any) -> bool:
    return "thebe" in (getattr(asset, "filename", None) or "") or "THEBE_JS_URL" in (
        getattr(asset, "attributes", {}).get("body") or ""
    )


def _drop_thebe(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    """Remove sphinx-thebe's assets from every page: a static offline site has no kernel to
    launch, and Jupyter Book adds its inline config twice (a SyntaxError in the console)."""
    for key in ("script_files", "css_files"):
        if key in context:
            context[key] = [a for a in context[key] if not _is_thebe(a)]


def chart_image_name(svg: str) -> str:
    """The file name of a chart's fallback image: its content hash, so equal charts share one."""
    return f"mechbook-chart-{hashlib.sha256(svg.encode('utf-8')).hexdigest()[:16]}.svg"


def light_fallbacks(body: str, write: Any, url: Any) -> str:
    """``body`` with each inline chart SVG replaced by a ``<noscript>`` image of it:
    ``write(name, svg)`` stores the SVG, ``url(name)`` is its address from the page. The image
    is fetched only when scripts are off; the live chart needs none of it."""

    def swap(match: re.Match[str]) -> str:
        svg = match.group(1)
        name = chart_image_name(svg)
        write(name, svg)
        try:
            alt = json.loads(match.group(3)).get("description") or "chart"
        except ValueError:
            alt = "chart"
        return (
            f'<div class="mechbook-fallback"><noscript><img src="{html.escape(url(name))}" '
            f'alt="{html.escape(alt)}" loading="lazy"></noscript></div>{match.group(2)}'
        )

    return FALLBACK.sub(swap, body)


def _light_page(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    """Move chart fallbacks out of the page (see :func:`light_fallbacks`)."""
    body = context.get("body")
    if not body or "mechbook-fallback" not in body:
        return
    images = Path(app.outdir) / CHART_IMAGES
    images.mkdir(parents=True, exist_ok=True)

    def write(name: str, svg: str) -> None:
        target = images / name
        if not target.exists():
            target.write_text(svg, encoding="utf-8")

    context["body"] = light_fallbacks(body, write, lambda name: context["pathto"](f"{CHART_IMAGES}/{name}", 1))


def source_notebook(executed: Any) -> Any:
    """The notebook as committed, from its executed copy: outputs, execution counts, papermill's
    injected parameters cell, the staged cost note (:mod:`mechbook.book.pages`) and their
    metadata removed."""
    import copy

    from mechbook.book.pages import NOTE_MARK

    nb = copy.deepcopy(executed)
    nb.cells = [
        c
        for c in nb.cells
        if "injected-parameters" not in c.get("metadata", {}).get("tags", [])
        and c.get("metadata", {}).get("mechbook") != NOTE_MARK
    ]
    for cell in nb.cells:
        cell.get("metadata", {}).pop("papermill", None)
        cell.get("metadata", {}).pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb.metadata.pop("papermill", None)
    return nb


def _python_literal(value: Any) -> str:
    """``value`` as the notebook's parameters cell writes it (strings in double quotes)."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def downloads_note(
    source_url: str, exercises_url: str, executed_url: str, parameters: dict[str, Any], path: str
) -> str:
    """The note at the top of a notebook page: the parameters the page ran with (papermill's,
    whose cell is left off the page), the three downloads (the notebook, its exercise form, the
    executed notebook), how to run it locally, and the place of the link to the whole book's PDF
    (hidden until ``make pdf`` fills it, :func:`mechbook.book.pdf.link_pages`)."""
    ran = ""
    if parameters:
        shown = ", ".join(f"<code>{html.escape(f'{k} = {_python_literal(v)}')}</code>" for k, v in parameters.items())
        ran = f"<p>This page ran with {shown}; the notebook's first cell holds its defaults.</p>"
    return (
        f'<div class="mechbook-downloads" role="note">{ran}<p>Download this page: '
        f'<a class="mechbook-download-source" href="{html.escape(source_url)}" download>notebook (.ipynb)</a> · '
        f'<a class="mechbook-download-exercises" href="{html.escape(exercises_url)}" download>exercises '
        "(solutions left for you to write)</a> · "
        f'<a class="mechbook-download-executed" href="{html.escape(executed_url)}" download>executed notebook'
        f"</a>.</p><p>Run it yourself: {RUN_LOCALLY.format(path=html.escape(path))}.</p>{PDF_LINK}</div>"
    )


def _drop_injected_parameters(app: Sphinx, doctree: Any) -> None:
    """Leave papermill's injected parameters cell off the page (the note above says what ran)."""
    from docutils import nodes

    for node in list(doctree.findall(nodes.container)):
        if "tag_injected-parameters" in node.get("classes", []):
            node.parent.remove(node)


SOLUTION_PROMPTS = ("Show the solution", "Hide the solution")


def _solution_prompts(app: Sphinx, doctree: Any) -> None:
    """An exercise's folded solution (a code cell tagged ``solution`` and ``hide-input``) opens on
    "Show the solution" instead of myst-nb's "Show code cell source"."""
    from docutils import nodes

    for node in doctree.findall(nodes.container):
        if "tag_solution" in node.get("classes", []) and node.get("hide_mode"):
            node["prompt_show"], node["prompt_hide"] = SOLUTION_PROMPTS


def _downloads_page(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    """Write a notebook page's three downloads and put :func:`downloads_note` under its title."""
    import nbformat

    from mechbook.exercises.notebooks import exercise_form

    if doctree is None or "body" not in context:
        return
    source = Path(app.env.doc2path(pagename))
    if source.suffix != ".ipynb":
        return
    executed = nbformat.read(source, as_version=4)
    folder = Path(app.outdir) / DOWNLOADS / Path(pagename).parent
    folder.mkdir(parents=True, exist_ok=True)
    stem = Path(pagename).name
    committed = source_notebook(executed)
    nbformat.write(committed, folder / f"{stem}.ipynb")
    nbformat.write(exercise_form(committed, pagename), folder / f"{stem}.exercises.ipynb")
    shutil.copy2(source, folder / f"{stem}.executed.ipynb")
    parameters = dict(executed.metadata.get("papermill", {}).get("parameters", {}))
    url = context["pathto"]
    note = downloads_note(
        url(f"{DOWNLOADS}/{pagename}.ipynb", 1),
        url(f"{DOWNLOADS}/{pagename}.exercises.ipynb", 1),
        url(f"{DOWNLOADS}/{pagename}.executed.ipynb", 1),
        parameters,
        f"{pagename}.ipynb",
    )
    body = context["body"]
    end = body.find("</h1>")
    context["body"] = body[: end + 5] + note + body[end + 5 :] if end >= 0 else note + body


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the asset and page hooks."""
    app.connect("config-inited", _configure)
    app.connect("builder-inited", _write_assets)
    app.connect("doctree-read", _drop_injected_parameters)
    app.connect("doctree-read", _solution_prompts)
    app.connect("html-page-context", _drop_thebe, priority=900)
    app.connect("html-page-context", _light_page, priority=910)
    app.connect("html-page-context", _downloads_page, priority=920)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
