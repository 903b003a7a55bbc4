"""Every built page in headless Chromium, served from 127.0.0.1 with all other requests blocked,
at a 1280 px and a 390 px wide screen: no console errors, every chart rendered live and no wider
than the text column (nor any display equation), no stderr output, no local path, no corpus token
read as an HTML tag, each chart labelled by its title, a bounded first-load weight, and the
three downloads resolving offline. An exercise's hint and solution open on a click and stay in
the column. The intro's slider changes its chart, its charts follow dark mode, search snippets
show prose, and the intro works from file://. Full-page screenshots go to _build/screenshots/
(``<page>.png`` at 1280 px, ``<page>-390.png`` at 390 px; ``<stem>-exercise[-390].png``: an
exercise opened)"""

from __future__ import annotations

import functools
import http.server
import json
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

pytestmark = pytest.mark.book
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WIDTHS = (1280, 390)
# First load of a page with an empty cache, smoke profile. Measured: chapter 9 8.36 MB (3.85 MB of
# it HTML, 2.4 MB inline SVG) before the fallbacks left the pages, 5.9 MB (1.4 MB HTML) after;
# ~4.4 MB of every page is the theme, MathJax and Vega.
MAX_PAGE_BYTES = 7_000_000
MAX_HTML_BYTES = 2_000_000
LOCAL_PATH = re.compile(r"/work/|/root/|/home/|/tmp/|[\w.-]+/\.venv/|site-packages")
TEX_OR_CODE = re.compile(r"\\\(|\\\[|\\frac|\\mathrm|\$\$|mechbook\.record\(|import mechbook")

MEASURE = """() => {
  const column = document.querySelector('article.bd-article') || document.querySelector('main');
  const c = column.getBoundingClientRect();
  const over = (el, what) => {
    const r = el.getBoundingClientRect();
    return (r.width > c.width + 1 || r.right > c.right + 1) ? [`${what} ${Math.round(r.width)} px`] : [];
  };
  const charts = [...document.querySelectorAll('div.mechbook-chart')].flatMap(d => {
    const svg = d.querySelector('.mechbook-live svg');
    const name = JSON.parse(d.querySelector('script.mechbook-spec').textContent).description || '';
    // the drawing itself (title, legends), which can overflow its <svg> box and be cut off
    const drawing = svg && svg.querySelector('g');
    return [...over(d, 'chart box'), ...(svg ? over(svg, 'chart ' + name) : []),
            ...(drawing ? over(drawing, 'drawing of chart ' + name) : [])];
  });
  const maths = [...document.querySelectorAll('div.math')].flatMap(m => over(m, 'equation'));
  return {column: Math.round(c.width), over: [...charts, ...maths]};
}"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server(built_site):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(built_site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is missing: apt-get install chromium chromium-driver (.ci/run does it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _open(browser, url: str, width: int = 1280, sizes: dict[str, int] | None = None):
    """A page of ``url`` (its own empty cache) with non-local requests blocked, console errors
    collected and, when ``sizes`` is given, each response's body size recorded there."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    if sizes is not None:
        page.on("requestfinished", lambda r: sizes.__setitem__(r.url, r.sizes()["responseBodySize"]))

    def guard(route):
        host = urlparse(route.request.url).hostname
        if route.request.url.startswith(("data:", "blob:", "file:")) or host == "127.0.0.1":
            route.continue_()
        else:
            problems.append(f"blocked network request: {route.request.url}")
            route.abort()

    page.route("**/*", guard)
    page.goto(url, wait_until="load")
    return page, problems


def _settle(page) -> None:
    page.wait_for_load_state("networkidle")
    page.wait_for_function(
        "() => [...document.querySelectorAll('div.mechbook-chart')].every(d => d.dataset.rendered)", timeout=30_000
    )
    if page.locator(".math").count():
        page.wait_for_function("() => document.querySelectorAll('mjx-container').length > 0", timeout=30_000)


def _pages(built_site: Path) -> list[str]:
    return [
        p.relative_to(built_site).as_posix()
        for p in sorted(built_site.rglob("*.html"))
        if p.name not in {"genindex.html", "search.html", "py-modindex.html"}
        and p.relative_to(built_site).parts[0] not in {"_static", "_sources", "_downloads", "_images"}
    ]


def _check_page(page, rel: str, built_site: Path) -> list[str]:
    """What a reader would trip over on one rendered page (empty when fine)."""
    found = []
    states = page.eval_on_selector_all(
        "div.mechbook-chart", "ds => ds.map(d => [d.dataset.rendered, !!d.querySelector('.mechbook-live svg')])"
    )
    if not all(s == ["live", True] for s in states):
        found.append(f"charts not rendered live: {states}")
    labels = page.eval_on_selector_all(
        "div.mechbook-chart",
        "ds => ds.map(d => [d.querySelector('.mechbook-live svg')?.getAttribute('aria-label'),"
        " JSON.parse(d.querySelector('script.mechbook-spec').textContent).description])",
    )
    found += [f"chart labelled {a!r}, title {d!r}" for a, d in labels if not a or a == "Vega visualization" or a != d]
    if page.locator(".math").count() and not page.locator("mjx-container").count():
        found.append("math not typeset")
    stderr = page.locator("div.output.stderr").all_inner_texts()
    found += [f"stderr output cell: {t[:200]!r}" for t in stderr]
    tags = page.evaluate(
        "() => [...document.querySelectorAll('article *')]"
        ".filter(e => e instanceof HTMLUnknownElement).map(e => e.outerHTML.slice(0, 80))"
    )
    found += [f"text read as an HTML tag (escape it): {t}" for t in tags]
    source = (built_site / rel).read_text(encoding="utf-8")
    found += [
        f"local path on the page: ...{source[max(m.start() - 60, 0) : m.end() + 20]!r}"
        for m in list(LOCAL_PATH.finditer(source))[:3]
    ]
    return found


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_reads_well_offline(browser, server, built_site, root, width):
    shots = root / "_build" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    suffix = "" if width == 1280 else f"-{width}"
    failures = {}
    for rel in _pages(built_site):
        sizes: dict[str, int] = {}
        page, problems = _open(browser, f"{server}/{rel}", width, sizes)
        _settle(page)
        found = _check_page(page, rel, built_site) + problems
        fit = page.evaluate(MEASURE)
        found += [f"wider than the {fit['column']} px column: {o}" for o in fit["over"]]
        total, html = sum(sizes.values()), sizes.get(f"{server}/{rel}", 0)
        if total > MAX_PAGE_BYTES or html > MAX_HTML_BYTES:
            found.append(f"first load {total:,} bytes (HTML {html:,}); bounds {MAX_PAGE_BYTES:,} ({MAX_HTML_BYTES:,})")
        page.screenshot(
            path=str(shots / (rel.replace("/", "_").removesuffix(".html") + suffix + ".png")), full_page=True
        )
        page.close()
        if found:
            failures[rel] = found
    assert not failures, json.dumps(failures, indent=1, ensure_ascii=False)


def test_downloads_resolve_offline(browser, server, built_site, root):
    from mechbook.book.toc import toc_files

    notebooks = [e for e in toc_files(root) if e.suffix == ".ipynb"]
    assert notebooks
    for entry in notebooks:
        rel = entry.with_suffix(".html").as_posix()
        page, problems = _open(browser, f"{server}/{rel}")
        links = page.eval_on_selector_all(
            "div.mechbook-downloads a, .dropdown-download-buttons a", "as => as.map(a => a.href)"
        )
        ipynb = [u for u in links if u.endswith(".ipynb")]
        assert len(ipynb) >= 4, f"{rel}: expected the note's three links and the download button, got {links}"
        assert any(u.endswith(".exercises.ipynb") for u in ipynb), f"{rel}: no exercise form among {links}"
        for url in ipynb:
            response = page.request.get(url)
            assert response.ok, f"{rel}: {url} answers {response.status}"
            assert json.loads(response.body())["nbformat"] == 4
        page.close()
        assert not problems, problems


FOLD = """(d) => {
  const column = document.querySelector('article.bd-article') || document.querySelector('main');
  const c = column.getBoundingClientRect();
  const r = d.getBoundingClientRect();
  const body = d.querySelector(':scope > :not(summary)');
  return {open: d.open, shown: !!body && body.getBoundingClientRect().height > 0,
          inside: r.left >= c.left - 1 && r.right <= c.right + 1, width: Math.round(r.width),
          column: Math.round(c.width), page: document.documentElement.scrollWidth, screen: window.innerWidth};
}"""


def _exercise_page(built_site: Path, root: Path) -> str:
    """The first notebook page with an exercise (a cell tagged ``solution``)."""
    from mechbook.book.toc import toc_files

    for entry in toc_files(root):
        rel = entry.with_suffix(".html").as_posix()
        if entry.suffix == ".ipynb" and "tag_solution" in (built_site / rel).read_text(encoding="utf-8"):
            return rel
    pytest.fail("no page shows an exercise (a code cell tagged solution)")


@pytest.mark.parametrize("width", WIDTHS)
def test_exercise_hint_and_solution_open_on_a_click_within_the_column(browser, server, built_site, root, width):
    """An exercise's hint (a dropdown) and its solution (the folded code cell) are closed, open on a
    click, show their content, and stay within the text column without widening the page."""
    rel = _exercise_page(built_site, root)
    page, problems = _open(browser, f"{server}/{rel}", width)
    _settle(page)
    solution = page.locator("div.cell.tag_solution details").first
    section = solution.locator("xpath=ancestor::section[1]")
    hint = section.locator("details.sd-dropdown", has_text="Hint").first
    for what, fold in (("hint", hint), ("solution", solution)):
        assert fold.evaluate("d => d.open") is False, f"{rel}: the {what} is open before a click"
        fold.locator("summary").first.click()
        page.wait_for_function("d => d.open", arg=fold.element_handle(), timeout=5_000)
        box = fold.evaluate(FOLD)
        assert box["shown"], f"{rel} at {width} px: the {what} opened but shows nothing: {box}"
        assert box["inside"] and box["page"] <= box["screen"], f"{rel} at {width} px: the {what} overflows: {box}"
    assert "def " in solution.inner_text(), f"{rel}: the opened solution shows no code"
    assert solution.locator("summary").first.inner_text().strip() == "Hide the solution"
    suffix = "" if width == 1280 else f"-{width}"
    page.evaluate("() => window.scrollTo(0, 0)")  # page coordinates, and the sticky header stays at the top
    page.screenshot(
        path=str(root / "_build" / "screenshots" / f"{Path(rel).stem}-exercise{suffix}.png"),
        full_page=True,
        clip=section.bounding_box(),
    )
    page.close()
    assert not problems, problems


def test_intro_slider_changes_its_chart(browser, server):
    page, problems = _open(browser, f"{server}/book/intro.html")
    _settle(page)
    chart = page.locator("div.mechbook-chart", has=page.locator("input[type=range]")).first
    slider = chart.locator("input[type=range]").first
    before = chart.locator(".mechbook-live svg").first.inner_html()
    slider.evaluate("el => { el.value = el.max; el.dispatchEvent(new Event('input', {bubbles: true})); }")
    page.wait_for_function(
        "([el, old]) => el.querySelector('.mechbook-live svg').innerHTML !== old",
        arg=[chart.element_handle(), before],
        timeout=10_000,
    )
    assert chart.locator(".mechbook-live svg").first.inner_html() != before
    page.close()
    assert not problems, problems


def test_charts_follow_dark_mode(browser, server, root):
    page, problems = _open(browser, f"{server}/book/intro.html")
    _settle(page)
    label = page.locator("div.mechbook-chart .mechbook-live svg text").first
    light = label.evaluate("t => getComputedStyle(t).fill || t.getAttribute('fill')")
    page.evaluate("() => { document.documentElement.dataset.theme = 'dark'; }")
    page.wait_for_function(
        "() => [...document.querySelectorAll('div.mechbook-chart')]"
        ".every(d => d.dataset.theme === 'dark' && d.dataset.rendered === 'live')",
        timeout=30_000,
    )
    dark = page.locator("div.mechbook-chart .mechbook-live svg text").first.evaluate(
        "t => getComputedStyle(t).fill || t.getAttribute('fill')"
    )
    assert dark != light, f"chart text stays {light} in dark mode"
    page.screenshot(path=str(root / "_build" / "screenshots" / "book_intro-dark.png"), full_page=False)
    page.close()
    assert not problems, problems


def test_search_snippets_show_prose(browser, server):
    page, problems = _open(browser, f"{server}/search.html?q=softmax")
    page.wait_for_function("() => document.querySelectorAll('#search-results li p.context').length > 0", timeout=60_000)
    page.wait_for_timeout(2_000)
    snippets = page.locator("#search-results li p.context").all_inner_texts()
    assert snippets
    bad = [s for s in snippets if TEX_OR_CODE.search(s)]
    page.close()
    assert not bad, bad
    assert not problems, problems


def test_intro_works_opened_from_disk(browser, built_site):
    """README says index.html can be opened straight from disk: charts, math and downloads work on file://."""
    page, problems = _open(browser, (built_site / "index.html").as_uri())
    page.wait_for_url("**/book/intro.html")
    _settle(page)
    states = page.eval_on_selector_all("div.mechbook-chart", "ds => ds.map(d => d.dataset.rendered)")
    assert states and all(s == "live" for s in states), states
    assert page.locator("mjx-container").count() > 0
    links = page.eval_on_selector_all("div.mechbook-downloads a", "as => as.map(a => a.href)")
    assert len(links) == 3 and all(Path(urlparse(u).path).is_file() for u in links), links
    page.close()
    assert not problems, problems
