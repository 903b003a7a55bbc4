"""The whole book as one PDF (``make pdf``, ``python -m mechbook pdf``), printed offline from the
built site by the headless Chromium the browser tests use.

Every page of ``_toc.yml`` that the site holds is opened from a server on 127.0.0.1 (every other
request is refused), left to draw its charts (the live Vega views) and typeset its math (MathJax),
and printed by Chromium in its print style, A4, with the book's own print rules
(:data:`PRINT_CSS`: no navigation, no download note, no widgets). A cover page with the table of
contents (each page's title and first page number) goes first; the pages are joined with pypdf,
each page of the joined book gets its number, and the PDF's outline lists every page. A page
whose charts did not all draw is refused: the PDF never holds an empty chart box.

The PDF is written to ``_build/html/_downloads/mechbook.pdf``, and each chapter's download note
then links to it (:func:`link_pages`).
"""

from __future__ import annotations

import functools
import html
import http.server
import io
import re
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from mechbook.book.toc import ROOT, toc_files

PDF_NAME = "mechbook.pdf"
"""The PDF's file name, in the site's ``_downloads``."""
PDF_LINK = '<p class="mechbook-download-pdf" hidden></p>'
"""The placeholder each notebook page's download note carries (:mod:`mechbook.site`);
:func:`link_pages` replaces it with the link once the PDF exists."""
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
PRINT_CSS = """
.bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .bd-footer, .bd-footer-content,
.bd-footer-article, .prev-next-area, .header-article, .bd-header-article, .mechbook-downloads,
.toggle-details, details.hide, .cell_input.hide, .mechbook-explorer-controls, .vega-bindings,
.vega-actions, .headerlink, #pst-back-to-top { display: none !important; }
.bd-main, .bd-content, .bd-article-container, article.bd-article { max-width: none !important;
  width: auto !important; margin: 0 !important; padding: 0 !important; }
.mechbook-chart, figure, table, .math { break-inside: avoid; }
h1 { break-before: avoid; }
pre { white-space: pre-wrap !important; overflow-wrap: anywhere; }
"""
"""What a printed page leaves out or keeps together (the theme's print style does the rest)."""
SETTLED = "() => [...document.querySelectorAll('div.mechbook-chart')].every(d => d.dataset.rendered)"
CHARTS = """() => [...document.querySelectorAll('div.mechbook-chart')].map(d => {
  const svg = d.querySelector('.mechbook-live svg');
  const r = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  return svg !== null && r.width > 0 && r.height > 0 && svg.querySelectorAll('path, rect, circle, text').length > 0;
})"""
"""Per chart of a page: whether its live view drew an SVG with size and marks."""
FIT_MATH = """() => document.querySelectorAll('mjx-container[display="true"]').forEach(m => {
  const column = m.parentElement.clientWidth, wide = m.scrollWidth;
  if (wide > column) m.style.fontSize = `${Math.floor(100 * column / wide)}%`;
})"""
"""Shrink each display equation wider than its column to fit (MathJax 3 does not break lines)."""
PRINT_WIDTH = 690
"""The printed column in CSS pixels: A4's 210 mm less 14 mm margins each side, at 96 px an inch."""


@dataclass(frozen=True)
class PrintedPage:
    """One page of the book as printed: its site path, its title, how many PDF pages it took and
    how many charts it holds (all drawn, or the build stops)."""

    path: str
    title: str
    pages: int
    charts: int


@contextmanager
def serve(site: Path) -> Iterator[str]:
    """The folder ``site`` served read-only on 127.0.0.1 (a free port) while the block runs; yields
    its base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def site_pages(site: Path, root: Path = ROOT) -> tuple[list[str], list[str]]:
    """(the site paths of the pages of ``_toc.yml`` that ``site`` holds, in book order; the
    repo-relative sources it lacks: chapters not executed in a partial build)."""
    held, lacking = [], []
    for source in toc_files(root):
        rel = Path(source).with_suffix(".html").as_posix()
        (held if (site / rel).is_file() else lacking).append(rel if (site / rel).is_file() else str(source))
    return held, lacking


def chromium() -> str:
    """The Chromium executable (Debian's), or a :class:`FileNotFoundError` saying how to install it."""
    found = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if not found:
        raise FileNotFoundError("Chromium is missing: `apt-get install chromium` (the browser tests need it too)")
    return found


def _print_page(browser, base: str, path: str) -> tuple[bytes, str, int]:
    """Open ``path`` of the site served at ``base``, wait for its charts and math, and print it:
    (PDF bytes, its title, its chart count). A :class:`RuntimeError` when a chart did not draw."""
    page = browser.new_page(viewport={"width": PRINT_WIDTH, "height": 1000})
    refused: list[str] = []

    def local_only(route) -> None:
        url = route.request.url
        if url.startswith(("data:", "blob:")) or urlparse(url).hostname == "127.0.0.1":
            route.continue_()
        else:
            refused.append(url)
            route.abort()

    try:
        page.route("**/*", local_only)
        page.goto(f"{base}/{path}", wait_until="load")
        page.wait_for_load_state("networkidle")
        page.wait_for_function(SETTLED, timeout=60_000)
        if page.locator(".math").count():
            page.wait_for_function("() => document.querySelectorAll('mjx-container').length > 0", timeout=60_000)
        drawn = page.evaluate(CHARTS)
        if not all(drawn):
            raise RuntimeError(
                f"{path}: {drawn.count(False)} of {len(drawn)} charts did not draw; the PDF would show empty boxes "
                "(open the page in a browser to see why)"
            )
        page.add_style_tag(content=PRINT_CSS)
        page.emulate_media(media="print")
        page.evaluate(FIT_MATH)
        title = (
            page.locator("h1").first.inner_text().strip().rstrip("#").strip() if page.locator("h1").count() else path
        )
        data = page.pdf(
            format="A4",
            print_background=True,
            margin={"top": "16mm", "bottom": "18mm", "left": "14mm", "right": "14mm"},
        )
        return data, title, len(drawn)
    finally:
        page.close()


def _contents_html(entries: list[tuple[str, int]], label: str) -> str:
    """The cover and table of contents: each page's title and the PDF page it starts on."""
    rows = "".join(f"<tr><td>{html.escape(title)}</td><td class='n'>{number}</td></tr>" for title, number in entries)
    return (
        "<html><head><meta charset='utf-8'><style>body{font-family:sans-serif;margin:0 8mm}"
        "h1{font-size:28pt;margin-top:40mm}p{color:#555}table{width:100%;border-collapse:collapse;margin-top:12mm}"
        "td{padding:2mm 0;border-bottom:1px solid #ddd}td.n{text-align:right}</style></head><body>"
        f"<h1>mechbook</h1><p>{html.escape(label)}</p><h2>Contents</h2><table>{rows}</table></body></html>"
    )


def _numbers_html(count: int, first: int) -> str:
    """``count`` blank A4 pages, each with its number (``first``, ``first`` + 1, ...) at the foot:
    the layer stamped onto the joined book's pages."""
    pages = "".join(f"<div class='p'><span>{n}</span></div>" for n in range(first, first + count))
    return (
        "<html><head><style>@page{size:A4;margin:0}body{margin:0}"
        ".p{height:297mm;position:relative;break-after:page}"
        ".p span{position:absolute;bottom:8mm;width:100%;text-align:center;font:9pt sans-serif;color:#444}"
        f"</style></head><body>{pages}</body></html>"
    )


def build_pdf(site: Path, out: Path, label: str, root: Path = ROOT) -> list[PrintedPage]:
    """Print every page of the built ``site`` (book order) into one PDF at ``out``: a cover with
    the table of contents, then the pages, numbered, with an outline; written atomically. Returns
    what each page gave. A :class:`FileNotFoundError` when there is no site, and the
    :class:`RuntimeError` of a page whose charts did not draw."""
    from playwright.sync_api import sync_playwright
    from pypdf import PdfReader, PdfWriter

    from mechbook.cache import atomic_write_bytes
    from mechbook.progress import progress

    if not (site / "index.html").is_file():
        raise FileNotFoundError(f"no built site at {site}: run `make book` (any PROFILE) first, then `make pdf`")
    paths, _ = site_pages(site, root)
    printed: list[tuple[str, bytes, str, int]] = []
    with serve(site) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        try:
            for path in progress(paths, desc="printing the book's pages", unit="page"):
                printed.append((path, *_print_page(browser, base, path)))
            counts = [len(PdfReader(io.BytesIO(data)).pages) for _, data, _, _ in printed]
            page = browser.new_page()
            contents_pages, starts = 1, []
            for _ in range(3):  # the contents' own length shifts the numbers it prints
                starts = [contents_pages + 1 + sum(counts[:i]) for i in range(len(counts))]
                page.set_content(_contents_html([(t, s) for (_, _, t, _), s in zip(printed, starts)], label))
                contents = page.pdf(format="A4", margin={"top": "16mm", "bottom": "18mm"})
                length = len(PdfReader(io.BytesIO(contents)).pages)
                if length == contents_pages:
                    break
                contents_pages = length
            page.set_content(_numbers_html(sum(counts), contents_pages + 1))
            numbers = PdfReader(io.BytesIO(page.pdf(format="A4", margin={"top": "0", "bottom": "0"})))
        finally:
            browser.close()
    writer = PdfWriter()
    writer.append(PdfReader(io.BytesIO(contents)))
    stamp = iter(numbers.pages)
    for _, data, title, _ in printed:
        first = len(writer.pages)
        for sheet in PdfReader(io.BytesIO(data)).pages:
            writer.add_page(sheet).merge_page(next(stamp))
        writer.add_outline_item(title, first)
    writer.add_metadata({"/Title": f"mechbook ({label})"})
    buffer = io.BytesIO()
    writer.write(buffer)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, buffer.getvalue())
    return [PrintedPage(path, title, n, charts) for (path, _, title, charts), n in zip(printed, counts)]


def link_pages(site: Path) -> int:
    """Put the link to the PDF (``_downloads/mechbook.pdf``) into every page's download note in
    place of :data:`PDF_LINK`; returns how many pages link to it (those linked by an earlier run
    included)."""
    linked = 0
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        if PDF_LINK not in text:
            linked += '<p class="mechbook-download-pdf">The whole book: <a href="' in text
            continue
        up = "../" * (len(page.relative_to(site).parts) - 1)
        link = (
            f'<p class="mechbook-download-pdf">The whole book: <a href="{up}_downloads/{PDF_NAME}" download>'
            "one PDF</a>, charts and math as on the site.</p>"
        )
        page.write_text(text.replace(PDF_LINK, link), encoding="utf-8")
        linked += 1
    return linked


def site_profile(site: Path) -> str | None:
    """The profile the site's chapters ran with, as their download notes state it (None: no note)."""
    for page in sorted(site.glob("book/part*/*.html")):
        found = re.search(r"profile = &quot;(\w+)&quot;", page.read_text(encoding="utf-8"))
        if found:
            return found[1]
    return None


def main(root: Path = ROOT) -> int:
    """``python -m mechbook pdf``: the PDF of the site in ``_build/html``, then the links to it."""
    site = root / "_build" / "html"
    _, lacking = site_pages(site, root) if site.is_dir() else ([], [])
    profile = site_profile(site) if site.is_dir() else None
    label = f"The book executed in the {profile} profile" if profile else "The book as built"
    printed = build_pdf(site, site / "_downloads" / PDF_NAME, label, root)
    linked = link_pages(site)
    total = sum(p.pages for p in printed)
    print(
        f"wrote {site / '_downloads' / PDF_NAME}: {len(printed)} pages of the book, {total} PDF pages, "
        f"{sum(p.charts for p in printed)} charts; {linked} chapter pages link to it"
    )
    for source in lacking:
        print(f"  not in the site (not executed in this build): {source}")
    return 0
