"""The course's website and its handout (tools/site.py), built once and read in Chromium with no network.

Run with ``make site-check``, or alone with ``pytest -m browser tests/test_site.py``. Marked ``browser`` so that
``make test``'s unit stage leaves it out (its browser stage runs tests/test_browser.py alone). The site and the
handout are built once per session into a temporary folder, as ``make site`` and ``make handout`` build them, and
served on 127.0.0.1; Chromium (Debian's, never ``playwright install``) opens every page with every request outside
the site blocked, so that each check also shows the page needs nothing from the network. Every page: its formulas
rendered by MathJax, every picture with a specific alt, no link to a notebook but the download and launch ones, and
axe-core's WCAG 2.0 and 2.1 A and AA rules with no violation, in the theme's light and dark modes.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from test_browser import AXE_TAGS, CHROMIUM, CHROMIUM_ARGS, _need_browser, _screenshot_on_failure
from test_notebooks import PLACEHOLDERS

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: Every page: one per notebook, the start page, and Sphinx's search and index pages.
PAGES = [p.stem for p in NOTEBOOKS] + ["index", "search", "genindex"]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: The launch link of the README's badge, whose repository and branch the site's Binder links must share.
BADGE = re.compile(r"\(https://mybinder\.org/v2/gh/([^)]+?)\?urlpath=lab/tree/notebooks/00_start_here\.ipynb\)")


def _tool():
    """tools/site.py, loaded under a name of its own (``site`` is the standard library's)."""
    spec = importlib.util.spec_from_file_location("course_site", ROOT / "tools" / "site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> Path:
    """The site (site/) and the handout (handout/notebooks, handout/site), as make site and make handout build them."""
    folder = tmp_path_factory.mktemp("built")
    for command in (["site", folder / "site"], ["handout", folder / "handout"]):
        done = subprocess.run([sys.executable, "tools/site.py", *map(str, command)], cwd=ROOT, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, f"tools/site.py {command[0]} failed:\n{done.stdout}\n{done.stderr}"
    return folder


@pytest.fixture(scope="session")
def base(built) -> str:
    """The built folder served over HTTP on 127.0.0.1 (the search page loads its index with a request)."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(built)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()


class Offline:
    """One Chromium page that reaches only the site: every other request is aborted and remembered."""

    def __init__(self, page, base: str) -> None:
        self.page, self.base, self.outside = page, base, []
        page.route("**/*", self._route)

    def _route(self, route) -> None:
        if route.request.url.startswith(self.base):
            route.continue_()
        else:
            self.outside.append(route.request.url)
            route.abort()

    def open(self, path: str) -> None:
        self.outside.clear()
        self.page.goto(self.base + path, wait_until="load")
        # MathJax typesets after the load event; its promise settles once every formula is typeset.
        self.page.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise : null")


@pytest.fixture(scope="session")
def browser(base):
    _need_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield Offline(chromium.new_page(color_scheme="light"), base)  # the theme follows the system's mode at first
        chromium.close()


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


_AXE = """async (only) => (await axe.run(document, {runOnly: only, resultTypes: ['violations']}))
  .violations.flatMap(v => v.nodes.map(n => `${v.id} (${v.impact}): ${n.html.slice(0, 160)} -- ${n.failureSummary.slice(0, 240)}`))"""
# The theme's colours fade over a transition when its switch changes the mode: with transitions off, axe reads the
# colours the page ends with, not those in between.
_DARK = """() => {
  const still = document.createElement('style');
  still.textContent = '*, *::before, *::after { transition: none !important; }';
  document.head.append(still);
  document.documentElement.dataset.theme = 'dark';
  document.documentElement.dataset.mode = 'dark';
}"""
_IMAGES = "() => [...document.images].map(i => [i.getAttribute('src').slice(0, 60), i.getAttribute('alt')])"


@pytest.mark.parametrize("name", PAGES)
def test_every_page_renders_offline_with_its_maths_specific_alts_and_no_wcag_violation(name, browser):
    from axe_playwright_python.sync_playwright import Axe

    page = browser.page
    with _screenshot_on_failure(page, f"site-{name}"):
        browser.open(f"site/{name}.html")
        assert not browser.outside, f"the page asked the network for {browser.outside}"
        # Maths: every formula Sphinx marked is typeset by the site's own MathJax, with no TeX error.
        formulas, typeset, errors = page.evaluate(
            "() => [document.querySelectorAll('.math').length, document.querySelectorAll('.math mjx-container').length,"
            " document.querySelectorAll('mjx-merror').length]")
        assert typeset == formulas and not errors, f"{typeset} of {formulas} formulas typeset, {errors} TeX errors"
        for src, alt in page.evaluate(_IMAGES):
            assert alt and alt.strip() and not PLACEHOLDERS.search(alt.strip()), f"<img src={src}...>: alt {alt!r}"
            assert Path(src.split("?")[0]).stem.lower() not in alt.lower(), f"<img src={src}...>: alt is its file name"
        hrefs = page.evaluate("() => [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))")
        notebooks = [h for h in hrefs if ".ipynb" in h
                     and not h.startswith(("_sources/", "https://mybinder.org/v2/gh/"))]
        assert not notebooks, f"links to notebooks instead of pages: {notebooks}"
        page.evaluate(Axe().axe_script)
        found = {"light": page.evaluate(_AXE, {"type": "tag", "values": AXE_TAGS})}
        # The theme's dark mode, as its switch sets it: the same page, restyled, so only its colours can fail anew.
        page.evaluate(_DARK)
        assert page.evaluate("() => getComputedStyle(document.body).backgroundColor") != "rgb(255, 255, 255)"
        found["dark"] = page.evaluate(_AXE, {"type": "rule", "values": ["color-contrast"]})
    assert not found["light"] and not found["dark"], "\n".join(f"{mode}: {v}" for mode, vs in found.items() for v in vs)


def test_every_link_of_every_page_leads_to_a_file_of_the_site(built):
    """Links between lessons, which point to .ipynb files in the notebooks, point to their pages (MyST resolves them)."""
    from bs4 import BeautifulSoup

    site = built / "site"
    for path in sorted(site.glob("*.html")):
        for a in BeautifulSoup(_text(path), "html.parser").select("a[href]"):
            href = a["href"].split("#")[0].split("?")[0]
            if href and not re.match(r"^[a-z]+:", href):
                assert (site / href).is_file(), f"{path.name}: a link to {a['href']}, which the site does not have"


def test_every_lesson_links_to_the_lessons_it_names_as_pages(built):
    for notebook in NOTEBOOKS:
        nb = json.loads(_text(notebook))
        markdown = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
        named = set(re.findall(r"\]\((\d\d[a-z]?_\w+|sources)\.ipynb\)", markdown))
        page = _text(built / "site" / f"{notebook.stem}.html")
        for target in named:
            assert f'href="{target}.html"' in page, f"{notebook.name}: its link to {target}.ipynb is not a link to the page"


def test_the_start_page_shows_the_course_map_and_the_routes_with_a_link_to_every_lesson(built):
    from course_utils.course import PATHS

    page = _text(built / "site" / "index.html")
    assert "<table" in page and "Total:" in page
    for name, _, _ in PATHS:
        assert f"<strong>{name}</strong>" in page, f"the routes table lacks {name}"
    for notebook in NOTEBOOKS:
        assert f'href="{notebook.stem}.html"' in page, f"the start page does not link {notebook.stem}"


def test_each_lesson_has_a_binder_link_to_its_notebook_as_the_readme_badge_names_it(built):
    badge = BADGE.search(_text(ROOT / "README.md"))
    assert badge, "the README's Binder badge is gone, or its pattern changed"
    for notebook in NOTEBOOKS:
        url = f"https://mybinder.org/v2/gh/{badge.group(1)}?urlpath=lab/tree/notebooks/{notebook.name}"
        assert f'href="{url}"' in _text(built / "site" / f"{notebook.stem}.html"), f"{notebook.stem}: no {url}"
        assert "mybinder.org" not in _text(built / "handout" / "site" / f"{notebook.stem}.html"), (
            f"{notebook.stem}: the handout links Binder, whose notebooks hold the answers")


def test_the_explorers_show_their_still_picture_with_its_alt(built):
    """A widget view has no state in the notebook: the page shows the still stored beside it (text/html <img alt>)."""
    import html

    for notebook in NOTEBOOKS:
        outputs = [o for c in json.loads(_text(notebook))["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
        stills = [o["data"]["text/html"] for o in outputs if WIDGET_VIEW in o.get("data", {})]
        page = _text(built / "site" / f"{notebook.stem}.html")
        assert WIDGET_VIEW not in page, f"{notebook.stem}: a widget view the page cannot draw"
        for still in stills:
            alt = re.search(r'alt="([^"]+)"', "".join(still)).group(1)
            assert f'alt="{html.escape(html.unescape(alt))}"' in page, f"{notebook.stem}: no still with alt {alt[:60]!r}"


def test_search_finds_a_lesson_offline(browser):
    page = browser.page
    with _screenshot_on_failure(page, "site-search"):
        browser.open("site/search.html?q=sparsemax")
        page.wait_for_selector("#search-results li a", timeout=30_000)
        found = page.evaluate("() => [...document.querySelectorAll('#search-results li a')].map(a => a.getAttribute('href'))")
    assert not browser.outside, f"the search asked the network for {browser.outside}"
    assert any(h.startswith("06_sparsemax_and_entmax.html") for h in found), found


def test_search_results_pass_axe_in_light_and_dark_mode(browser):
    """The results page highlights the query: its colours are audited as every other page's."""
    from axe_playwright_python.sync_playwright import Axe

    page = browser.page
    with _screenshot_on_failure(page, "site-search-axe"):
        browser.open("site/search.html?q=softmax")
        page.wait_for_selector("#search-results li a", timeout=30_000)
        page.evaluate(Axe().axe_script)
        found = {"light": page.evaluate(_AXE, {"type": "tag", "values": AXE_TAGS})}
        page.evaluate(_DARK)
        found["dark"] = page.evaluate(_AXE, {"type": "rule", "values": ["color-contrast"]})
    assert not found["light"] and not found["dark"], "\n".join(f"{mode}: {v}" for mode, vs in found.items() for v in vs)


def test_output_tables_pad_their_cells(browser):
    page = browser.page
    browser.open("site/05_masking_and_attention.html")
    padding = page.evaluate("() => getComputedStyle(document.querySelector('div.cell_output table td')).paddingLeft")
    assert float(padding.removesuffix("px")) >= 4, f"table cells padded {padding}: numbers run together"


def _questions(html: str) -> dict[str, int]:
    """Per section "Questions to discuss" of a page: its questions (list items) and its <details> answers."""
    from bs4 import BeautifulSoup

    section = BeautifulSoup(html, "html.parser").select_one("section#questions-to-discuss")
    if section is None:
        return {"questions": 0, "answers": 0}
    return {"questions": len(section.select(":scope > ol > li, :scope > ul > li")), "answers": len(section.select("details"))}


def test_the_handout_keeps_every_question_and_no_answer(built):
    """In the notebooks and in the site's pages; the handout's notebooks folder carries the marker that course_utils
    reads to turn solution() and the hints off."""
    handout = built / "handout"
    assert (handout / "notebooks" / _tool().HANDOUT_MARKER).is_file()
    asked = 0
    for notebook in NOTEBOOKS:  # as the site was built from them (tools/site.py stages them in site.work/src)
        original = json.loads(_text(built / "site.work" / "src" / notebook.name))
        copy = json.loads(_text(handout / "notebooks" / notebook.name))
        assert [c["id"] for c in copy["cells"]] == [c["id"] for c in original["cells"]], "every cell is kept"
        assert [c.get("outputs") for c in copy["cells"]] == [c.get("outputs") for c in original["cells"]]
        first = next(c for c in copy["cells"] if c["cell_type"] == "code")
        assert "".join(first["source"]).startswith(_tool().HANDOUT_LINE + "\n"), "hints stay off wherever it goes"
        for before, after in zip(original["cells"], copy["cells"]):
            text = "".join(after["source"])
            assert "<details" not in text and "</details>" not in text, f"{notebook.name}: an answer is left"
            questions = re.findall(r"^(.*\S.*)\n[ \t]*<details>", "".join(before["source"]), re.M)  # the line before
            assert all(q in text for q in questions), f"{notebook.name}: a question is gone"
        site, page = _questions(_text(built / "site" / f"{notebook.stem}.html")), \
            _questions(_text(handout / "site" / f"{notebook.stem}.html"))
        assert page == {"questions": site["questions"], "answers": 0}, f"{notebook.stem}: {site} on the site, {page} in the handout"
        assert "<details" not in _text(handout / "site" / f"{notebook.stem}.html")
        asked += site["questions"]
    assert asked >= 30, f"only {asked} questions found: has the section's heading changed?"


def test_a_notebook_without_its_outputs_fails_the_build_and_is_named(tmp_path):
    """Checked before Sphinx runs: nothing is built, and the message names the notebook."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    shutil.copy2(NOTEBOOKS[1], folder / NOTEBOOKS[1].name)
    stripped = json.loads(_text(NOTEBOOKS[2]))
    for cell in stripped["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    (folder / NOTEBOOKS[2].name).write_text(json.dumps(stripped), encoding="utf-8")
    (folder / "broken.ipynb").write_text("{not json", encoding="utf-8")
    with pytest.raises(SystemExit) as failed:
        _tool().build_site(folder, tmp_path / "site")
    message = str(failed.value)
    assert NOTEBOOKS[2].name in message and "broken.ipynb" in message and NOTEBOOKS[1].name not in message
    assert not (tmp_path / "site").exists()


def test_ci_checks_the_site_after_make_solutions_and_make_test_leaves_it_out():
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.strip().startswith("make")]
    assert ci.index("make site-check") == ci.index("make solutions") + 1
    makefile = (ROOT / "Makefile").read_text()
    assert "tests/test_site.py" in makefile.split("\nsite-check:", 1)[1].split("\n\n", 1)[0]
    sys.path.insert(0, str(ROOT / "tools"))
    import run_checks

    unit = run_checks.stages([])["unit"][0]
    assert any(unit[i:i + 2] == ["-m", "not browser"] for i in range(len(unit))), "make test's unit stage runs it"
