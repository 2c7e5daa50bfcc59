"""The α explorer morphs one attention row from softmax (α = 1) to sparsemax (α = 2) and beyond."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from course_utils import entmax15, entmax_bisect, softmax, sparsemax
from course_utils.widgets import alpha_explorer

ROW = np.array([1.0, 0.8, 0.1, -0.5, 0.3])


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_the_slider_spans_alpha_from_1_to_3_in_20_keyboard_steps_and_starts_at_softmax():
    slider = alpha_explorer(ROW).children[0]
    assert (slider.values[0], slider.values[-1], len(slider.values), slider.value) == (1.0, 3.0, 21, 1.0)
    np.testing.assert_allclose(np.diff(slider.values), 0.1, rtol=1e-12)


def test_alpha_1_is_softmax_exactly():
    np.testing.assert_array_equal(alpha_explorer(ROW).result, softmax(ROW))


def test_alpha_2_is_sparsemax_exactly_and_1_5_is_entmax15():
    explorer = alpha_explorer(ROW)
    explorer.children[0].value = 2.0
    np.testing.assert_array_equal(explorer.result, sparsemax(ROW))
    explorer.children[0].value = 1.5
    np.testing.assert_array_equal(explorer.result, entmax15(ROW))


def test_moving_the_slider_redraws_the_weights_and_sharpens_them():
    explorer = alpha_explorer(ROW, ["a", "b", "c", "d", "e"])
    dense = explorer.result
    assert (dense > 0).all()
    explorer.children[0].value = 2.55
    np.testing.assert_allclose(explorer.result, entmax_bisect(ROW, alpha=2.55), rtol=1e-12, atol=1e-15)
    assert np.count_nonzero(explorer.result) == 2
    assert explorer.result.max() > sparsemax(ROW).max() > dense.max()


def test_a_top_gap_of_at_least_1_over_alpha_minus_1_gives_one_hot():
    explorer = alpha_explorer([1.0, 0.4, -0.2])  # gap 0.6: one-hot from alpha = 1 + 1/0.6 = 2.67 on
    explorer.children[0].value = 2.6
    assert np.count_nonzero(explorer.result) == 2
    explorer.children[0].value = 2.7
    np.testing.assert_array_equal(explorer.result, [1.0, 0.0, 0.0])


def test_the_title_names_the_mapping_and_the_support_size(monkeypatch):
    titles = []
    monkeypatch.setattr(plt.Axes, "set_title", lambda self, text, *a, **k: titles.append(text))
    explorer = alpha_explorer(ROW)
    explorer.children[0].value = 2.0
    assert titles[0] == "α = 1.00 (softmax): support 5 of 5"
    assert titles[-1] == f"α = 2.00 (sparsemax): support {np.count_nonzero(sparsemax(ROW))} of 5"
