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
- sphinx-thebe's scripts (a launcher for remote kernels) are left out of the pages.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ExtensionError

STATIC = Path(__file__).parent / "static"
ROOT = Path(__file__).resolve().parents[2]
MATHJAX_ENTRY = "tex-mml-chtml.js"
MATHJAX_PARTS = (MATHJAX_ENTRY, "input", "output", "ui", "a11y", "adaptors")


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
    """Vega + Vega-Lite + vega-embed in one classic script that defines only window globals."""
    import vl_convert

    return "(function () {\n" + vl_convert.javascript_bundle() + "\n})();\n"


def _configure(app: Sphinx, config: Config) -> None:
    """Point MathJax at the local copy; give pages an icon (else browsers ask for /favicon.ico)."""
    config.mathjax_path = f"mathjax/{MATHJAX_ENTRY}"
    if not config.html_favicon:
        config.html_favicon = str(STATIC / "favicon.svg")


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


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the asset hooks."""
    app.connect("config-inited", _configure)
    app.connect("builder-inited", _write_assets)
    app.connect("html-page-context", _drop_thebe, priority=900)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
