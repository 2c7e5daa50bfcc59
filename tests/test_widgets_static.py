"""Every explorer carries a still PNG of its starting state, for readers without a kernel (GitHub, nbviewer, nbconvert)."""

from __future__ import annotations

import base64
import contextlib
import inspect
import io
import json
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from PIL import Image

from course_utils import widgets as explorers
from course_utils.plotting import figure_html
from course_utils.controls import StepSlider
from course_utils.widgets import _Explorer

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
VIEW = "application/vnd.jupyter.widget-view+json"
STATE = "application/vnd.jupyter.widget-state+json"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: A value for each required argument an explorer may have; a new explorer with another one must add it here.
REQUIRED = {"scores": [2.0, 1.0, 0.0, -1.0]}


def _quiet(make, *args, **kwargs):
    """Build an explorer outside a notebook."""
    with contextlib.redirect_stdout(io.StringIO()):
        return make(*args, **kwargs)


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))


def _toy(start: int = 3) -> _Explorer:
    """An explorer over 1 to 6 bars with a title, starting at `start`."""

    def build(fig):
        ax = fig.subplots()
        ax.set(xlim=(-0.6, 5.6), ylim=(0, 6.5))

        def frame(n):
            ax.set_title(f"{n} bars")
            return n, [*ax.bar(range(n), np.arange(1, n + 1), color="C0"), ax.title]

        return frame

    return _quiet(_Explorer, build, figsize=(3.0, 2.0), n=StepSlider(range(1, 7), value=start, description="n"))


def test_the_still_is_the_first_frame():
    explorer = _toy()
    assert explorer.still.startswith(PNG_SIGNATURE) and explorer.still == explorer.image.value
    height, width = _pixels(explorer.still).shape[:2]
    assert (width, height) == tuple(round(inch * explorer.figure.dpi) for inch in (3.0, 2.0))


def test_the_bundle_holds_the_live_view_the_still_with_its_alt_and_one_short_line_of_text():
    explorer = _toy()
    bundle, metadata = explorer._repr_mimebundle_()
    assert set(bundle) == {VIEW, "text/html", "image/png", "text/plain"}
    assert bundle[VIEW]["model_id"] == explorer.model_id
    assert base64.b64decode(bundle["image/png"]) == explorer.still
    # The same still as an <img> with its alt (tests/test_widgets_a11y.py checks the words).
    assert bundle["text/html"] == figure_html(bundle["image/png"], explorer.still_text)
    assert metadata == {"image/png": {"alt": explorer.still_text}}
    text = bundle["text/plain"]
    assert text == "explorer with slider n: run the notebook to move it"
    assert "interactive(" not in text and "\n" not in text


def test_moving_the_slider_redraws_in_place_but_keeps_the_still_of_the_starting_state():
    explorer = _toy()
    first = explorer.still
    explorer.children[0].value = 5
    assert explorer.result == 5
    assert explorer.still == first and explorer.image.value != first
    assert base64.b64decode(explorer._repr_mimebundle_()[0]["image/png"]) == first
    assert len(explorer.figure.axes[0].patches) == 5, "the bars of the previous frame must be removed"


def test_a_frame_drawn_on_the_background_equals_the_same_frame_drawn_first():
    moved = _toy(start=3)
    for n in (6, 1, 5):
        moved.children[0].value = n
    np.testing.assert_array_equal(_pixels(moved.image.value), _pixels(_toy(start=5).still))


def test_without_blitting_every_frame_renders_the_whole_figure_in_the_same_pixels(monkeypatch):
    blitted, whole = _toy(), _toy()
    whole.blit = False  # on the instance; the browser test sets it on the class
    draws = []
    for explorer in (blitted, whole):
        draw = explorer.figure.canvas.draw
        monkeypatch.setattr(explorer.figure.canvas, "draw", lambda draw=draw, e=explorer: (draws.append(e), draw())[1])
    for n in (6, 1, 5):
        blitted.children[0].value = whole.children[0].value = n
        np.testing.assert_array_equal(_pixels(whole.image.value), _pixels(blitted.image.value), err_msg=f"at {n}")
    assert draws.count(whole) == 3 and draws.count(blitted) == 0
    assert _Explorer.blit, "explorers blit by default"


def _full_render(explorer: _Explorer) -> np.ndarray:
    """The explorer's figure drawn whole, every artist in its place, as a new figure would be."""
    animated = [artist for artist in explorer.figure.findobj() if artist.get_animated()]
    for artist in animated:
        artist.set_animated(False)
    explorer.figure.canvas.draw()
    for artist in animated:
        artist.set_animated(True)
    return np.asarray(explorer.figure.canvas.buffer_rgba()).copy()


def _moves(slider: StepSlider) -> list:
    """Three slider values to move to: near the top, the bottom, the middle."""
    values = slider.values
    return [values[-2], values[0], values[len(values) // 2]]


def _call(make):
    """Call an explorer with its defaults, filling required arguments from REQUIRED."""
    params = inspect.signature(make).parameters.values()
    required = [p.name for p in params if p.default is inspect.Parameter.empty and p.kind is not p.VAR_KEYWORD]
    missing = [name for name in required if name not in REQUIRED]
    assert not missing, f"{make.__name__} needs {missing}: add an example value to REQUIRED"
    return _quiet(make, **{name: REQUIRED[name] for name in required})


@pytest.mark.parametrize("name", explorers.__all__)
def test_every_explorer_carries_a_still_of_its_starting_state(name):
    explorer = _call(getattr(explorers, name))
    assert isinstance(explorer, _Explorer), f"{name} must return the shared _Explorer"
    bundle, _ = explorer._repr_mimebundle_()
    assert {VIEW, "text/html", "image/png", "text/plain"} <= set(bundle)
    start = _pixels(base64.b64decode(bundle["image/png"]))
    assert start.shape[0] >= 150 and start.shape[1] >= 250, f"{name}: the still is only {start.shape[:2]} pixels"
    assert len(np.unique(start.reshape(-1, 4), axis=0)) > 20, f"{name}: the still is nearly blank"


@pytest.mark.parametrize("name", explorers.__all__)
def test_every_explorer_frame_is_what_drawing_the_whole_figure_shows(name):
    explorer = _call(getattr(explorers, name))
    for value in _moves(explorer.children[0]):
        explorer.children[0].value = value
        # Drawn on top of the background, in zorder with the spines, a frame is pixel for pixel the whole figure.
        np.testing.assert_array_equal(_pixels(explorer.image.value), _full_render(explorer), err_msg=f"{name} at {value}")


def _stored_outputs(path: Path):
    nb = json.loads(path.read_text())
    for i, cell in enumerate(nb["cells"], 1):
        for output in cell.get("outputs", []):
            yield nb, i, cell, output


def _explorer_outputs():
    found = []
    for path in NOTEBOOKS:
        for nb, i, cell, output in _stored_outputs(path):
            if VIEW in output.get("data", {}):
                found.append(pytest.param(path, i, id=f"{path.stem}-cell{i}"))
    return found


def test_the_lessons_store_explorers():
    assert len(_explorer_outputs()) >= 6


@pytest.mark.parametrize("path,index", _explorer_outputs())
def test_every_stored_explorer_output_carries_a_png_of_its_starting_state(path, index):
    nb = json.loads(path.read_text())
    cell = nb["cells"][index - 1]
    assert "nbval-ignore-output" in cell["metadata"].get("tags", []), "an explorer cell must be tagged nbval-ignore-output"
    (output,) = [o for o in cell["outputs"] if VIEW in o.get("data", {})]
    data = output["data"]
    assert "image/png" in data, "re-execute the notebook: this explorer output has no still image"
    still = base64.b64decode("".join(data["image/png"]))
    assert still.startswith(PNG_SIGNATURE)
    text = "".join(data["text/plain"])
    assert not text.startswith("interactive("), f"a static reader would see {text!r}"
    # Where the notebook keeps the widgets' state, the still is the frame the explorer's image first showed.
    state = nb["metadata"].get("widgets", {}).get(STATE, {}).get("state", {})
    if state:
        box = state[data[VIEW]["model_id"]]["state"]
        ids = [child.removeprefix("IPY_MODEL_") for child in box["children"]]
        shown = [
            base64.b64decode(buffer["data"])
            for mid in ids
            if state[mid]["model_name"] == "ImageModel"
            for buffer in state[mid].get("buffers", [])
            if buffer["path"] == ["value"]
        ]
        assert shown == [still]
