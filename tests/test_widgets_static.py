"""Every explorer carries a still PNG of its starting state, for readers without a kernel (GitHub, nbviewer, nbconvert)."""

from __future__ import annotations

import base64
import contextlib
import inspect
import io
import json
from pathlib import Path

import ipywidgets as widgets
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from PIL import Image

from course_utils import widgets as explorers
from course_utils.widgets import _Explorer

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
VIEW = "application/vnd.jupyter.widget-view+json"
STATE = "application/vnd.jupyter.widget-state+json"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: A value for each required argument an explorer may have; a new explorer with another one must add it here.
REQUIRED = {"scores": [2.0, 1.0, 0.0, -1.0]}


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _quiet(make, *args, **kwargs):
    """Build an explorer outside a notebook, where clearing its output prints a terminal code."""
    with contextlib.redirect_stdout(io.StringIO()):
        return make(*args, **kwargs)


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))


def _bars(n: int) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(3.0, 2.0))
    ax.bar(range(n), np.arange(1, n + 1))
    ax.set_title(f"{n} bars")
    return fig


def _saved(fig: plt.Figure) -> bytes:
    """The PNG the inline backend would show: tight box, the figure's own dpi and colours."""
    buffer = io.BytesIO()
    fig.canvas.print_figure(buffer, format="png", bbox_inches="tight", dpi=fig.dpi,
                            facecolor=fig.get_facecolor(), edgecolor=fig.get_edgecolor())
    return buffer.getvalue()


def _toy(close: bool = False, **kwargs) -> _Explorer:
    """An explorer over 1 to 6 bars starting at 3; with close=True it closes its figure as the inline backend's show does."""

    def draw(n: int) -> int:
        fig = _bars(n)
        if close:
            plt.close(fig)
        return n

    return _quiet(_Explorer, draw, n=widgets.IntSlider(value=3, min=1, max=6, description="n"), **kwargs)


@pytest.mark.parametrize("close", [False, True], ids=["figure-left-open", "figure-closed-by-show"])
def test_the_still_is_the_first_frame_as_the_inline_backend_saves_it(close):
    explorer = _toy(close=close)
    assert explorer.still is not None and explorer.still.startswith(PNG_SIGNATURE)
    expected = _saved(_bars(3))
    np.testing.assert_array_equal(_pixels(explorer.still), _pixels(expected))


def test_the_bundle_holds_the_live_view_the_still_and_one_short_line_of_text():
    explorer = _toy()
    bundle = explorer._repr_mimebundle_()
    assert set(bundle) == {VIEW, "image/png", "text/plain"}
    assert bundle[VIEW]["model_id"] == explorer.model_id
    assert base64.b64decode(bundle["image/png"]) == explorer.still
    text = bundle["text/plain"]
    assert text == "explorer with slider n: run the notebook to move it"
    assert "interactive(" not in text and "\n" not in text


def test_moving_the_slider_redraws_but_keeps_the_still_of_the_starting_state():
    explorer = _toy()
    first = explorer.still
    explorer.children[0].value = 5
    assert explorer.result == 5
    assert explorer.still == first
    assert base64.b64decode(explorer._repr_mimebundle_()["image/png"]) == first
    moved = _saved(_bars(5))
    assert not np.array_equal(_pixels(first), _pixels(moved)), "the toy's frames must differ, or this proves nothing"


def test_a_draw_without_a_figure_gives_no_still_and_no_image():
    explorer = _quiet(_Explorer, lambda n: n * 2, n=widgets.IntSlider(value=2, description="n"))
    assert explorer.result == 4
    assert explorer.still is None
    assert set(explorer._repr_mimebundle_()) == {VIEW, "text/plain"}


def test_only_the_first_frame_is_watched_and_the_figure_hook_is_removed():
    hooks = list(matplotlib.rcParams["figure.hooks"])
    explorer = _toy()
    assert matplotlib.rcParams["figure.hooks"] == hooks
    assert explorers._FIRST_FRAME == []
    explorer.children[0].value = 6
    plt.figure()
    assert explorers._FIRST_FRAME == []


class _Publisher:
    """Stands in for ipykernel's display publisher: runs each message through the registered hooks."""

    def __init__(self):
        self.hooks, self.sent = [], []

    def register_hook(self, hook):
        self.hooks.append(hook)

    def unregister_hook(self, hook):
        self.hooks.remove(hook)

    def publish(self, data):
        message = {"msg_type": "display_data", "content": {"data": data, "metadata": {}}}
        for hook in self.hooks:
            message = hook(message)
        self.sent.append(message)


@pytest.mark.parametrize("encode", [lambda png: base64.b64encode(png).decode("ascii"), bytes], ids=["base64", "bytes"])
def test_in_a_kernel_the_still_is_the_png_the_live_view_first_showed(monkeypatch, encode):
    publisher = _Publisher()
    monkeypatch.setattr(explorers, "get_ipython", lambda: type("Shell", (), {"display_pub": publisher})())
    frames = {n: _saved(_bars(n)) for n in (3, 4)}

    def draw(n):
        publisher.publish({"text/plain": "<Figure>"})
        publisher.publish({"image/png": encode(frames[n]), "text/plain": "<Figure>"})
        return n

    explorer = _quiet(_Explorer, draw, n=widgets.IntSlider(value=3, min=1, max=6, description="n"))
    assert explorer.still == frames[3]
    assert publisher.hooks == [], "the hook must be removed after the first frame"
    assert len(publisher.sent) == 2, "every message still goes to the live view"
    explorer.children[0].value = 4
    assert explorer.still == frames[3]


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
    bundle = explorer._repr_mimebundle_()
    assert {VIEW, "image/png", "text/plain"} <= set(bundle)
    start = _pixels(base64.b64decode(bundle["image/png"]))
    assert start.shape[0] >= 150 and start.shape[1] >= 250, f"{name}: the still is only {start.shape[:2]} pixels"
    assert len(np.unique(start.reshape(-1, 4), axis=0)) > 20, f"{name}: the still is nearly blank"


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
    # Where the notebook keeps the widgets' state, the still is the frame the explorer's output first showed.
    state = nb["metadata"].get("widgets", {}).get(STATE, {}).get("state", {})
    if state:
        box = state[data[VIEW]["model_id"]]["state"]
        out_ids = [child.removeprefix("IPY_MODEL_") for child in box["children"]]
        shown = [
            "".join(o["data"]["image/png"])
            for mid in out_ids
            if state[mid]["model_name"] == "OutputModel"
            for o in state[mid]["state"]["outputs"]
            if "image/png" in o.get("data", {})
        ]
        assert shown == ["".join(data["image/png"])]
