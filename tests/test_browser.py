"""Every notebook in JupyterLab 4, in a real headless Chromium: Run All, outputs, figures, widgets, sliders, dark theme.

Run alone with ``pytest -m browser``. The browser is Debian's Chromium at
/usr/bin/chromium, driven by Playwright (never ``playwright install``). Where
it is missing, the tests skip with one line saying so, except in CI
(``CI`` set), where a missing browser is a failure. On a failure, a
screenshot is saved under ``test-artifacts/`` (git-ignored).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
# Chromium in a closed sandbox: without the background-networking flags it keeps
# trying to reach the network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "course-browser-test"


def _need_browser() -> None:
    missing = []
    if not CHROMIUM.exists():
        missing.append(f"no Chromium at {CHROMIUM} (Debian package 'chromium')")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("no Python package 'playwright'")
    if missing:
        reason = "browser tests need " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(reason + "; in CI they must run (make test installs both)")
        pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:  # loopback only
        return response.read()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on loopback, serving a copy of the notebooks (so autosave cannot touch them)."""
    _need_browser()
    root = tmp_path_factory.mktemp("lab")
    for name in NOTEBOOKS:
        shutil.copy(ROOT / "notebooks" / name, root / name)
    port = _free_port()
    env = dict(os.environ, JUPYTER_PREFER_ENV_PATH="1", PYDEVD_DISABLE_FILE_VALIDATION="1")
    env.pop("MPLBACKEND", None)
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}",
        "--ip=127.0.0.1", f"--ServerApp.token={TOKEN}", f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    log = open(root / "server.log", "w")  # noqa: SIM115
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    base = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            _get(f"{base}/api/status?token={TOKEN}")
            break
        except OSError:
            if server.poll() is not None:
                pytest.fail("JupyterLab exited: " + (root / "server.log").read_text()[-2000:])
            time.sleep(0.5)
    else:
        pytest.fail("JupyterLab did not start within 60 s")
    yield base
    server.terminate()
    server.wait(timeout=20)
    log.close()


@pytest.fixture(scope="module")
def browser(lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@contextlib.contextmanager
def _screenshot_on_failure(page, name: str):
    try:
        yield
    except BaseException:
        ARTIFACTS.mkdir(exist_ok=True)
        with contextlib.suppress(Exception):
            page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        raise


def _shutdown_kernels(base: str) -> None:
    kernels = json.loads(_get(f"{base}/api/kernels?token={TOKEN}"))
    for kernel in kernels:
        request = urllib.request.Request(f"{base}/api/kernels/{kernel['id']}?token={TOKEN}", method="DELETE")
        with contextlib.suppress(OSError):
            urllib.request.urlopen(request, timeout=10)


_KERNEL_IDLE = """() => {
    const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
    return !!k && k.status === 'idle';
}"""
_RUN_FINISHED = """() => {
    const busy = [...document.querySelectorAll('.jp-InputPrompt')].some(e => e.textContent.includes('*'));
    const w = window.jupyterapp.shell.currentWidget;
    return !busy && w.sessionContext.session.kernel.status === 'idle';
}"""


def _open(page, base: str, name: str) -> None:
    # A workspace of its own, reset: JupyterLab must not reopen other notebooks from an earlier page.
    workspace = "test-" + name.replace(".", "-")
    page.goto(f"{base}/lab/workspaces/{workspace}/tree/{name}?reset&token={TOKEN}")
    page.wait_for_function("() => document.querySelector('.jp-Notebook .jp-Cell') !== null", timeout=90_000)
    page.wait_for_function(_KERNEL_IDLE, timeout=90_000)


def _stored(name: str) -> dict:
    nb = json.loads((ROOT / "notebooks" / name).read_text())
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    return {
        "images": sum("image/png" in o.get("data", {}) for o in outputs),
        "widgets": sum("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs),
    }


def _widget_image(page) -> str:
    return page.locator(".widget-interact img").first.get_attribute("src") or ""


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_run_all_in_jupyterlab(name, lab, browser):
    expected = _stored(name)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(60_000)
    with _screenshot_on_failure(page, f"run-all-{name}"):
        _open(page, lab, name)
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        page.wait_for_timeout(500)
        page.wait_for_function(_RUN_FINISHED, timeout=180_000)

        stderr = page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
        assert stderr.count() == 0, f"error or stderr output: {stderr.first.inner_text()[:500]}"
        prompts = page.locator(".jp-InputPrompt").all_inner_texts()
        assert not any("*" in p for p in prompts), "a cell is still running"

        images = page.locator(".jp-OutputArea-output img")
        assert images.count() >= expected["images"], "not every figure rendered as an image"
        for i in range(images.count()):
            assert images.nth(i).evaluate("img => img.complete && img.naturalWidth > 0"), f"image {i} is broken"

        controls = page.locator(".widget-interact")
        assert controls.count() >= expected["widgets"], "not every ipywidgets control rendered"
        if expected["widgets"]:
            assert page.locator(".widget-interact .widget-slider, .widget-interact .widget-hslider").count() >= 1
            page.wait_for_function("() => document.querySelector('.widget-interact img') !== null", timeout=60_000)
            before = _widget_image(page)
            handle = page.locator(".widget-interact .noUi-handle").first
            handle.scroll_into_view_if_needed()
            handle.focus()
            for _ in range(8):
                page.keyboard.press("ArrowRight")
            page.wait_for_function(
                "(before) => { const img = document.querySelector('.widget-interact img');"
                " return img && img.getAttribute('src') !== before; }",
                arg=before,
                timeout=60_000,
            )
            assert _widget_image(page) != before, "moving the slider did not redraw the figure"
    page.close()
    _shutdown_kernels(lab)


def _luminance(rgb) -> np.ndarray:
    """WCAG relative luminance of sRGB colours (0-255), over the last axis."""
    c = np.asarray(rgb, dtype=float)[..., :3] / 255
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return linear @ np.array([0.2126, 0.7152, 0.0722])


def _contrast(a: float, b: float) -> float:
    hi, lo = max(a, b), min(a, b)
    return (hi + 0.05) / (lo + 0.05)


def test_figures_read_on_the_dark_theme(lab, browser):
    from PIL import Image

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    with _screenshot_on_failure(page, "dark-theme"):
        _open(page, lab, "01_softmax_basics.ipynb")
        page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=30_000)
        figure = page.locator(".jp-OutputArea-output img").first
        figure.evaluate("img => img.scrollIntoView({block: 'center'})")
        page.wait_for_timeout(500)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dark-theme-01.png"))

        background = page.evaluate(
            "() => getComputedStyle(document.querySelector('.jp-NotebookPanel-notebook')).backgroundColor"
        )
        page_rgb = [int(v) for v in background[background.index("(") + 1 : background.index(")")].split(",")[:3]]
        picture = Image.open(io.BytesIO(figure.screenshot())).convert("RGB")
        lum = _luminance(np.asarray(picture)).ravel()
        figure_background = float(np.median(lum))  # most of a figure is its face colour
        ink = float(np.quantile(lum, 0.005))  # the darkest 0.5%: text, axes, lines

        assert _luminance(page_rgb) < 0.1, f"the dark theme did not apply (page background {background})"
        assert _contrast(figure_background, ink) >= 7, "text and axes must contrast with the figure's background"
        assert _contrast(figure_background, _luminance(page_rgb)) >= 3, "the figure must stand out from the dark page"
    page.close()
    _shutdown_kernels(lab)
