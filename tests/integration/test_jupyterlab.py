"""The live explorer in a real JupyterLab: start JupyterLab from .venv on 127.0.0.1 (a free port,
a token, no browser), open a copy of the introduction set to the smoke profile in headless
Chromium, run all cells, move the explorer's slider from the keyboard and check that the chart
below it is redrawn differently. Screenshots before and after go to _build/screenshots/."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.book
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
NOTEBOOK = Path("book") / "intro.ipynb"  # its explore() has a slider over the vocabulary size
START_TIMEOUT_S = 90
RUN_TIMEOUT_MS = 150_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _smoke_copy(source: Path, target: Path) -> Path:
    """``source`` with its parameters cell set to the smoke profile."""
    nb = nbformat.read(source, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", []))
    cell.source = cell.source.replace('profile = "cpu"', 'profile = "smoke"')
    assert 'profile = "smoke"' in cell.source, f'{source}: its parameters cell has no profile = "cpu"'
    nbformat.write(nb, target)
    return target


@pytest.fixture
def lab(tmp_path, root):
    """A JupyterLab server over a folder holding the smoke copy; killed (its whole process group)
    however the test ends."""
    _smoke_copy(root / NOTEBOOK, tmp_path / NOTEBOOK.name)
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
        "MECHBOOK_STATIC": "0",
        "JUPYTER_CONFIG_DIR": str(tmp_path / ".jupyter"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / ".runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / ".settings"),
    }
    news = tmp_path / ".settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text('{"fetchNews": "false", "checkForUpdates": false}')  # no news toast over the chart
    env.setdefault(
        "MECHBOOK_TINYSTORIES", str(root.parent / "shared" / "data" / "tinystories" / "tinystories-sample.txt")
    )
    jupyter = Path(sys.executable).with_name("jupyter")
    log = open(tmp_path / "lab.log", "wb")  # noqa: SIM115 (open for the server's whole life, closed in the finally below)
    proc = subprocess.Popen(
        [
            str(jupyter),
            "lab",
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--port-retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={tmp_path}",
            "--LabApp.expose_app_in_browser=True",
            "--ServerApp.disable_check_xsrf=True",
        ],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        f"JupyterLab did not start: {(tmp_path / 'lab.log').read_text(errors='replace')[-2000:]}"
                    )
                time.sleep(0.5)
        yield base, token, tmp_path
    finally:
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
            if proc.poll() is not None:
                break
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=wait)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        log.close()


def test_explorer_slider_redraws_the_chart_in_jupyterlab(lab, root):
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is missing: apt-get install chromium chromium-driver (.ci/run does it)")
    from playwright.sync_api import sync_playwright

    base, token, _folder = lab
    shots = root / "_build" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(f"{base}/lab/tree/{NOTEBOOK.name}?token={token}&reset")
            page.wait_for_function(
                "() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
                " && window.jupyterapp.shell.currentWidget.sessionContext"
                " && window.jupyterapp.shell.currentWidget.sessionContext.session",
                timeout=90_000,
            )
            page.wait_for_function(
                "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'",
                timeout=90_000,
            )
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
            slider = page.locator(
                ".jp-OutputArea .widget-hslider .noUi-handle, .jp-OutputArea .widget-hslider .slider-handle"
            ).first
            slider.wait_for(state="visible", timeout=RUN_TIMEOUT_MS)
            box = slider.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]")
            chart = box.locator(".jp-RenderedVegaCommon5, .vega-embed").first
            chart.wait_for(state="visible", timeout=RUN_TIMEOUT_MS)
            chart.scroll_into_view_if_needed()
            page.wait_for_timeout(1_000)
            readout = box.locator(".widget-readout").first.inner_text()
            before = chart.screenshot(path=str(shots / "jupyterlab_intro_before.png"))
            slider.focus()
            page.keyboard.press("End")
            page.wait_for_function(
                "([el, old]) => el.innerText !== old",
                arg=[box.locator(".widget-readout").first.element_handle(), readout],
                timeout=30_000,
            )
            page.wait_for_timeout(3_000)
            chart = box.locator(".jp-RenderedVegaCommon5, .vega-embed").first
            chart.wait_for(state="visible", timeout=60_000)
            after = chart.screenshot(path=str(shots / "jupyterlab_intro_after.png"))
            new_readout = box.locator(".widget-readout").first.inner_text()
            errors = page.locator(
                ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
            ).all_inner_texts()
            page.screenshot(path=str(shots / "jupyterlab_intro.png"))
        finally:
            browser.close()
    assert new_readout != readout, f"the slider did not move from {readout}"
    assert before != after, f"the chart looks the same at {readout} and at {new_readout}"
    assert not [e for e in errors if "Traceback" in e or "Error" in e], errors
