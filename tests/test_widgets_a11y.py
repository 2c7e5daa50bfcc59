"""Every explorer says in words what its picture shows, still and live, and its slider crosses its range in few keys.

WCAG 2.1 AA: 1.1.1 (a text alternative for each picture: the still's ``alt``, the live picture's name), 4.1.3 (a
status message a screen reader announces when a slider moves), 2.1.1 (a keyboard user crosses a slider in a few
dozen arrow keys at most). What the browser does with them (the ``<img>``'s ``title`` as its name, the live region,
the stored ``text/html`` picked in an untrusted notebook) was checked in JupyterLab by hand; these tests hold the
Python side to it.
"""

from __future__ import annotations

import base64
import math
import re
from html.parser import HTMLParser

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest

from course_utils import widgets as explorers
from course_utils.floats import exp_limits
from course_utils.plotting import figure_html
from course_utils.controls import _LIVE_ESM, _SLIDER_ESM, LiveText, StepSlider
from course_utils.widgets import _Explorer, _NamedImage
from test_widgets_static import VIEW, _call, _moves, _toy

#: Text that says nothing about a picture (as tests/test_notebooks.py judges the stored ones).
PLACEHOLDERS = re.compile(r"no description|^(a |the )?(figure|plot|image|chart|graph)\.?$|^alt$|lorem", re.IGNORECASE)

#: For each explorer, numbers its picture draws, as its labels and titles write them: its sentence must say them.
DRAWN = {
    "temperature_explorer": lambda r: [f"{w:.3f}" for w in r],
    "alpha_explorer": lambda r: [f"{w:.3f}" for w in r if w >= 0.0005],
    "dk_explorer": lambda r: [f"{r['raw'].max():.3f}", f"{r['scaled'].max():.3f}", f"{np.sqrt(r['d_k']):.1f}"],
    "overflow_explorer": lambda r: [f"{exp_limits(name).largest:.2f}" for name in r["naive"]],
    "saturation_explorer": lambda r: [f"{r['weights'].max():.3f}", f"{r['norm']:.3g}"],
    "mask_explorer": lambda r: [f"{w.max():.2f}" for w in r["weights"] if w.any()]
    + [f"{int((~r['mask'].any(axis=-1)).sum())} fully masked" if (~r["mask"].any(axis=-1)).any() else "no fully masked"],
    "fading_explorer": lambda r: [f"{w:.4f}" for w in r["weights"].values()],
}


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _slider(explorer: _Explorer) -> StepSlider:
    (slider,) = explorer._sliders.values()
    return slider


def _specific(text: str, explorer: _Explorer, name: str) -> None:
    """`text` describes `explorer`'s last frame: its slider's readout first, then numbers the picture draws."""
    readout = _slider(explorer).readout
    assert text.startswith("At ") and readout in text[:40], f"{name}: the sentence must open on the value {readout}: {text!r}"
    numbers = DRAWN[name](explorer.result)
    assert numbers and all(number in text for number in numbers), f"{name}: {numbers} missing from {text!r}"
    assert not PLACEHOLDERS.search(text) and len(text) >= 80, f"{name}: say what the picture shows: {text!r}"
    titles = [ax.get_title() for ax in explorer.figure.axes] + [explorer.figure.get_suptitle()]
    assert text.rstrip(".") not in titles, f"{name}: the sentence is only a title"


class _Img(HTMLParser):
    def handle_starttag(self, tag, attrs):
        self.tag, self.attrs = tag, dict(attrs)


def test_every_explorer_is_covered():
    assert set(DRAWN) == set(explorers.__all__)


@pytest.mark.parametrize("name", explorers.__all__)
def test_every_explorers_still_has_an_alt_written_from_its_data(name):
    explorer = _call(getattr(explorers, name))
    data, metadata = explorer._repr_mimebundle_()
    alt = explorer.still_text
    _specific(alt, explorer, name)
    # The alt travels twice: in the image/png output's metadata and as the alt of the <img> in text/html, which
    # JupyterLab (trusted or not) and nbconvert show before image/png. The live view stays first for a kernel.
    assert metadata == {"image/png": {"alt": alt}}
    assert data["text/html"] == figure_html(data["image/png"], alt)
    img = _Img()
    img.feed(data["text/html"])
    assert img.tag == "img" and img.attrs["alt"] == alt
    assert base64.b64decode(img.attrs["src"].removeprefix("data:image/png;base64,")) == explorer.still
    assert data[VIEW]["model_id"] == explorer.model_id


@pytest.mark.parametrize("name", explorers.__all__)
def test_the_live_text_and_the_pictures_name_follow_the_slider(name):
    explorer = _call(getattr(explorers, name))
    first, seen = explorer.still_text, [explorer.text]
    assert explorer.text == first and explorer.live.text == first
    assert explorer.image.tooltip.startswith("Figure at ") and explorer.image.tooltip.endswith("described in the text below it")
    slider = _slider(explorer)
    for value in _moves(slider):
        slider.value = value
        text = explorer.text
        _specific(text, explorer, name)
        assert _slider(explorer).readout in explorer.image.tooltip, "the picture's name says the value it shows"
        assert explorer.live.text == text, "the live region says the frame's sentence"
        assert text != seen[-1], f"{name}: moving to {value} left the sentence as it was: {text!r}"
        seen.append(text)
    assert explorer.still_text == first, "the still's alt stays that of the still"


def test_the_live_region_is_a_polite_status_right_under_the_picture_made_once():
    explorer = _toy()
    children = list(explorer.children)
    assert isinstance(explorer.live, LiveText)
    assert children.index(explorer.live) == children.index(explorer.image) + 1 == len(children) - 1
    assert explorer.live.layout.width == explorer.image.layout.width
    # The region is made once per view, with its roles, and a change sets only its text: screen readers announce
    # changes inside a region already in the page, not a region put in anew (the browser test hears it).
    for attribute in ('"role", "status"', '"aria-live", "polite"', '"aria-atomic", "true"'):
        assert f"region.setAttribute({attribute})" in _LIVE_ESM
    assert _LIVE_ESM.count("document.createElement") == 1 and "region.textContent = model.get(\"text\")" in _LIVE_ESM


def test_the_picture_is_an_image_widget_whose_tooltip_the_browser_can_show():
    # ipywidgets' DOMWidgetView.updateTooltip reads model.get('description').length, which an Image lacks: a plain
    # Image with a tooltip fails to render. The explorer's image syncs an empty description with the same model.
    explorer = _toy()
    assert isinstance(explorer.image, _NamedImage) and isinstance(explorer.image, widgets.Image)
    state = explorer.image.get_state()
    assert state["description"] == "" and state["tooltip"] == explorer.image.tooltip != ""
    assert (state["_model_name"], state["_view_name"]) == ("ImageModel", "ImageView")


def test_an_explorer_without_its_own_sentence_says_its_readouts_and_titles():
    explorer = _toy()
    assert explorer.text == "At n = 3, the figure shows 3 bars."
    explorer.children[0].value = 5
    assert explorer.text == "At n = 5, the figure shows 5 bars." and explorer.still_text.startswith("At n = 3")


def test_the_sentence_shows_each_value_as_the_readout_next_to_the_slider_does():
    # The browser shows the step's label at once and then the kernel's readout: the same text, for every step.
    for name in explorers.__all__:
        shown = _slider(_call(getattr(explorers, name)))
        slider = StepSlider(shown.values, value=shown.value, description=shown.description, readout=shown._format)
        for index in range(len(slider.values)):  # on a copy: the same steps and format, no figure redrawn
            slider.index = index
            assert slider.readout == slider.labels[index] == shown.labels[index], f"{name}: step {index}"
    assert 'input.setAttribute("aria-valuetext", text)' in _SLIDER_ESM and "output.textContent = text" in _SLIDER_ESM


def test_the_slider_is_a_labelled_native_range_input():
    assert 'input.type = "range"' in _SLIDER_ESM and "label.htmlFor = id" in _SLIDER_ESM and "input.id = id" in _SLIDER_ESM


@pytest.mark.parametrize("name", explorers.__all__)
def test_a_keyboard_user_crosses_every_slider_in_at_most_30_arrow_keys_from_a_start_on_its_steps(name):
    slider = _slider(_call(getattr(explorers, name)))
    assert len(slider.values) - 1 <= 30, f"{name}: {len(slider.values) - 1} arrow keys from end to end"
    assert slider.value in slider.values, f"{name}: its start {slider.value} is not a step; the browser would move it"


def test_the_lessons_values_are_steps_of_their_sliders():
    # Lesson 01 asks about T = 0.1 and T = 10; lesson 06b finds the support shrink between α = 1.5 and 1.6.
    steps = _slider(explorers.temperature_explorer([2.0, 2.0, 3.0])).values
    assert any(math.isclose(t, 0.1) for t in steps) and any(math.isclose(t, 10.0) for t in steps)
    grid = _slider(explorers.alpha_explorer([1.0, 0.5])).values
    assert any(math.isclose(a, 1.5) for a in grid) and any(math.isclose(a, 1.6) for a in grid)
    assert any(math.isclose(a, 2.0) for a in grid), "sparsemax"
    # Lesson 02: each dtype's limit lies strictly between two steps, so one key press shows it break.
    exponents = [math.log10(x) for x in _slider(explorers.overflow_explorer()).values]
    for dtype in ("float16", "float32", "float64"):
        limit = math.log10(exp_limits(dtype).largest)
        assert not any(math.isclose(e, limit, abs_tol=1e-3) for e in exponents)
        assert min(exponents) < limit < max(exponents)


@pytest.mark.parametrize("start,max_n", [(256, 10**6), (10**4, 10**6), (2, 10**6), (3, 10**6), (100, 10_000)])
def test_the_fading_slider_about_doubles_n_per_key_and_starts_where_the_still_does(start, max_n):
    slider = _slider(explorers.fading_explorer(start=start, max_n=max_n))
    values = slider.values
    assert slider.value == start and start in values and (values[0], values[-1]) == (2, max_n)
    assert all(isinstance(n, int) for n in values) and len(values) - 1 <= 33
    factors = [b / a for a, b in zip(values, values[1:]) if a >= 20]  # below 20, whole numbers round the factor
    assert all(1.4 < f < 2.9 for f in factors), factors
    if start == 256:  # a power of two: the steps are the powers of two, 256 (lesson 09b's pivot) among them
        assert all(f == 2.0 for f in factors[:-1])
