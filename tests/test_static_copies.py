"""A static copy (nbconvert's HTML export, which nbviewer uses) shows every stored figure, slider stills included.

With a widget state in a notebook's metadata, the exporter shows the live widget view instead, which needs a
script from the internet and shows nothing without it (issue 26); the notebooks store no widget state
(tests/test_notebooks.py), and this test checks what the exporter makes of them, with no network.
"""

from __future__ import annotations

import base64
from pathlib import Path

import nbformat
import pytest
from nbconvert import HTMLExporter

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
VIEW = "application/vnd.jupyter.widget-view+json"


def _export(nb: nbformat.NotebookNode) -> str:
    # The default (lab) template, as `jupyter nbconvert --to html` uses it; input and Markdown left out to save
    # time: which of an output's formats is shown does not depend on them.
    body, _ = HTMLExporter(exclude_input=True, exclude_markdown=True).from_notebook_node(nb)
    return body


def _pictures(nb: nbformat.NotebookNode) -> list[tuple[int, bool, str]]:
    """(cell index, whether it is a slider's output, base64 PNG) of every stored picture."""
    return [(i, VIEW in out.get("data", {}), out["data"]["image/png"].strip())
            for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
            for out in cell.outputs if "image/png" in out.get("data", {})]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_the_html_export_shows_every_stored_figure_and_every_sliders_still(path):
    nb = nbformat.read(path, as_version=4)
    html = _export(nb)
    pictures = _pictures(nb)
    assert html.count('src="data:image/png;base64,') == len(pictures)
    for cell, slider, png in pictures:
        assert f'src="data:image/png;base64,{png}' in html, f"cell {cell}: {'slider still' if slider else 'figure'} missing"
    assert VIEW not in html and "widget-state" not in html, "the export would wait for a live widget"


def test_a_slider_with_its_widget_state_stored_would_show_no_picture():
    # The failure this guards against, reproduced: the same notebook with a widget state in its metadata.
    path = next(p for p in NOTEBOOKS if any(slider for _, slider, _ in _pictures(nbformat.read(p, as_version=4))))
    nb = nbformat.read(path, as_version=4)
    assert base64.b64decode(_pictures(nb)[0][2])  # a real picture is stored
    view = next(out["data"][VIEW] for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs
                if VIEW in out.get("data", {}))
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "version_major": 2, "version_minor": 0, "state": {view["model_id"]: {
            "model_name": "VBoxModel", "model_module": "@jupyter-widgets/controls", "model_module_version": "2.0.0",
            "state": {}}}}}
    html = _export(nb)
    sliders = [png for _, slider, png in _pictures(nb) if slider]
    assert not all(f'src="data:image/png;base64,{png}' in html for png in sliders)
