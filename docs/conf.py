"""Sphinx configuration of the course's website: `make site` (tools/site.py) builds it from the stored notebooks.

Why Sphinx with myst-nb and the Sphinx Book theme:

- it installs from pip alone (constraints.txt pins it; requirements-ci.txt lists it), needs no Node, and fetches
  nothing at build time; Jupyter Book 2 (the MyST engine) needs Node, and a theme that is not fetched at build time;
- courses publish with it: the UvA deep-learning tutorials are Sphinx; Jupyter Book 1, which Neuromatch uses, is
  this same Sphinx, myst-nb and Sphinx Book theme stack;
- the theme is of the PyData theme family, which has had accessibility audits, and colours code with the
  accessible-pygments styles; tests/test_site.py runs axe-core on every page in Chromium, in light and dark mode.

myst-nb renders each notebook's stored outputs (``nb_execution_mode = "off"``: nothing is re-executed) and resolves
a Markdown link to another notebook to that lesson's page. tools/site.py stages the sources: the notebooks, and this
folder's index.md beside them; this folder holds the configuration, the start page and the theme's fixes
(_static/course.css).
"""

from __future__ import annotations

from pathlib import Path

from course_utils.course import course_map_markdown, paths_markdown, read_course

project = "Softmax in transformer attention"
author = "The softmax-attention-course authors"
copyright = "2026 The softmax-attention-course authors (MIT licence)"  # as LICENSE states it
language = "en"

extensions = ["myst_nb", "sphinx-mathjax-offline"]
# The notebooks as stored: their outputs are the site's content, made and checked by make outputs and make test.
nb_execution_mode = "off"
# The explorers' widget views have no stored state, so a static page cannot draw them; each stores a still picture
# (text/html: an <img> with its alt text) beside the view. Without the view in the list, that picture wins.
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
nb_ipywidgets_js = {}  # no widget script from a CDN on any page
# The course map of lesson 00 is a text/markdown output: MyST renders its table and its links to the lessons.
nb_render_markdown_format = "myst"
myst_enable_extensions = ["dollarmath", "amsmath", "substitution"]
# MathJax from the sphinx-mathjax-offline package, copied into the site: formulas render with no network.
mathjax_path = "mathjax/tex-chtml.js"

html_theme = "sphinx_book_theme"
html_title = project
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_show_sourcelink = False  # the download button gives the notebook
#: Where Binder finds the notebooks: the README's badge names the same repository (OWNER: the course's GitHub
#: owner, a placeholder until it is published) and branch; tests/test_site.py checks that the two agree.
REPOSITORY = "https://github.com/OWNER/softmax-attention-course"
html_theme_options = {
    "footer_content_items": ["copyright.html"],
    "repository_url": REPOSITORY,
    "repository_branch": "HEAD",
    "path_to_docs": "notebooks",
    "use_download_button": True,
    "home_page_in_toc": True,
    "show_toc_level": 2,
    # Code colours of 4.5:1 contrast or more on the theme's backgrounds (accessible-pygments, the theme's defaults).
    "pygments_light_style": "a11y-high-contrast-light",
    "pygments_dark_style": "a11y-high-contrast-dark",
}
# A handout (tools/site.py handout) links no Binder: the repository's notebooks hold the answers it leaves out.
if not tags.has("handout"):  # noqa: F821 (Sphinx defines `tags` in conf.py)
    html_theme_options["launch_buttons"] = {"binderhub_url": "https://mybinder.org", "notebook_interface": "jupyterlab"}


def _course_tables(app, config) -> None:
    """The start page's course map and routes, from the lessons' records (as lesson 00 and the README make them)."""
    course = read_course(Path(app.srcdir))
    config.myst_substitutions = {"course_map": course_map_markdown(course), "paths": paths_markdown(course)}


def setup(app):
    app.connect("config-inited", _course_tables)
