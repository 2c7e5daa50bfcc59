"""The interactive explorers respond to their sliders."""

import numpy as np
import pytest

from course_utils import softmax
from course_utils.widgets import alpha_explorer, saturation_explorer, temperature_explorer


def test_moving_the_temperature_slider_redraws_the_weights(capsys):
    explorer = temperature_explorer([2.0, 1.0, 0.0], ["a", "b", "c"])
    np.testing.assert_allclose(explorer.result, softmax([2.0, 1.0, 0.0]))
    explorer.children[0].value = 100.0
    np.testing.assert_allclose(explorer.result, softmax([2.0, 1.0, 0.0], temperature=100.0))
    explorer.children[0].value = 0.01
    np.testing.assert_allclose(explorer.result, [1.0, 0.0, 0.0], atol=1e-30)


def test_the_slider_spans_cold_to_hot():
    slider = temperature_explorer([1.0, 0.0]).children[0]
    assert (slider.values[0], slider.values[-1], len(slider.values)) == (0.01, 100.0, 21)
    np.testing.assert_allclose(np.diff(np.log10(slider.values)), 0.2, rtol=1e-12)  # even steps on a log scale


@pytest.mark.parametrize("explorer", [temperature_explorer, alpha_explorer, saturation_explorer])
@pytest.mark.parametrize(
    "scores,labels,error,match",
    [
        ([[1.0, 2.0]], None, ValueError, "scores"),
        ([], None, ValueError, "scores"),
        (["a", "b"], None, TypeError, "scores"),
        ([1.0, 2.0], ["only one"], ValueError, "labels"),
    ],
)
def test_a_row_explorer_rejects_bad_arguments_by_name(explorer, scores, labels, error, match):
    with pytest.raises(error, match=match):
        explorer(scores, labels)


def test_a_log_slider_names_its_range_and_scale_and_the_figure_keeps_its_natural_size():
    import io

    import PIL.Image

    explorer = temperature_explorer([2.0, 1.0, 0.1])
    (slider,) = explorer._sliders.values()
    assert slider.description == "T (0.01 to 100, log scale)"
    png_width = PIL.Image.open(io.BytesIO(explorer.image.value)).width
    assert explorer.image.layout.width == f"{png_width}px" and explorer.image.layout.max_width == "100%"
