"""Every built page in headless Chromium, served from 127.0.0.1 with all other requests blocked:
no console errors, every chart rendered live, the intro's slider changes its chart, math is
typeset. Full-page screenshots go to _build/screenshots/."""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

pytestmark = pytest.mark.book
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


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


def _open(browser, url: str):
    """A page of ``url`` with non-local requests blocked and console errors collected."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))

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


def test_every_page_renders_offline(browser, server, built_site, root):
    shots = root / "_build" / "screenshots"
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    pages = sorted(p for p in built_site.rglob("*.html")
                   if p.name not in {"genindex.html", "search.html"} and p.relative_to(built_site).parts[0] != "_static")
    for path in pages:
        rel = path.relative_to(built_site).as_posix()
        page, problems = _open(browser, f"{server}/{rel}")
        _settle(page)
        states = page.eval_on_selector_all("div.mechbook-chart", "ds => ds.map(d => [d.dataset.rendered, !!d.querySelector('.mechbook-live svg, .mechbook-live canvas')])")
        assert all(s == ["live", True] for s in states), f"{rel}: charts not rendered live: {states}"
        if page.locator(".math").count():
            assert page.locator("mjx-container").count() > 0, f"{rel}: math not typeset"
        page.screenshot(path=str(shots / (rel.replace("/", "_").removesuffix(".html") + ".png")), full_page=True)
        page.close()
        assert not problems, f"{rel}: {problems}"


def test_intro_slider_changes_its_chart(browser, server):
    page, problems = _open(browser, f"{server}/book/intro.html")
    _settle(page)
    chart = page.locator("div.mechbook-chart", has=page.locator("input[type=range]")).first
    slider = chart.locator("input[type=range]").first
    before = chart.locator(".mechbook-live svg").first.inner_html()
    slider.evaluate("el => { el.value = el.max; el.dispatchEvent(new Event('input', {bubbles: true})); }")
    page.wait_for_function(
        "([el, old]) => el.querySelector('.mechbook-live svg').innerHTML !== old",
        arg=[chart.element_handle(), before], timeout=10_000,
    )
    assert chart.locator(".mechbook-live svg").first.inner_html() != before
    page.close()
    assert not problems, problems


def test_intro_works_opened_from_disk(browser, built_site):
    """README says index.html can be opened straight from disk: charts and math work on file://."""
    page, problems = _open(browser, (built_site / "index.html").as_uri())
    page.wait_for_url("**/book/intro.html")
    _settle(page)
    states = page.eval_on_selector_all("div.mechbook-chart", "ds => ds.map(d => d.dataset.rendered)")
    assert states and all(s == "live" for s in states), states
    assert page.locator("mjx-container").count() > 0
    page.close()
    assert not problems, problems
