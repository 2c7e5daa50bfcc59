"""The saturation explorer redraws softmax(c·z) and its Jacobian, which fades as c grows."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from course_utils.widgets import saturation_explorer

ROW = np.array([1.0, 0.8, 0.1, -0.5, 0.3])


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def expected(c, z):
    """softmax(c·z) and diag(p) - p pᵀ, written out here."""
    e = np.exp(c * z - (c * z).max())
    p = e / e.sum()
    return p, np.diag(p) - np.outer(p, p)


def test_the_slider_spans_c_from_0_1_to_100_on_a_log_scale_and_starts_at_1():
    slider = saturation_explorer(ROW).children[0]
    assert (slider.values[0], slider.values[-1], len(slider.values), slider.value) == (0.1, 100.0, 31, 1.0)


@pytest.mark.parametrize("c", [0.1, 1.0, 8.0, 100.0])
def test_moving_the_slider_redraws_the_weights_the_jacobian_and_its_norm(c):
    explorer = saturation_explorer(ROW, ["a", "b", "c", "d", "e"])
    explorer.children[0].value = c
    drawn = explorer.result
    p, jac = expected(drawn["c"], ROW)
    assert drawn["c"] == pytest.approx(c)
    np.testing.assert_allclose(drawn["weights"], p, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(drawn["jacobian"], jac, rtol=1e-12, atol=1e-300)
    assert drawn["norm"] == pytest.approx(np.sqrt((jac**2).sum()), rel=1e-12)


def test_stretching_the_scores_saturates_the_softmax_and_the_jacobian_fades():
    explorer = saturation_explorer(ROW)
    norms, tops = [], []
    for c in (0.1, 1.0, 10.0, 100.0):
        explorer.children[0].value = c
        norms.append(explorer.result["norm"])
        tops.append(explorer.result["weights"].max())
    assert tops == sorted(tops) and tops[-1] > 1 - 1e-8
    assert norms[-1] < 1e-7 < 0.1 < norms[1]


def test_the_default_row_is_8_fixed_standard_normal_scores_and_the_colour_range_is_fixed():
    explorer = saturation_explorer()
    explorer.children[0].value = 50.0
    default_row = np.random.default_rng(0).standard_normal(8)
    np.testing.assert_allclose(explorer.result["weights"], expected(50.0, default_row)[0], rtol=1e-12, atol=1e-300)
    (image,) = explorer.figure.axes[1].images
    assert image.get_clim() == (-0.25, 0.25)
    np.testing.assert_array_equal(image.get_array(), explorer.result["jacobian"])
