"""plot_exp_overflow draws all three crossings of e^x with the float16, float32 and float64 ceilings."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from course_utils import exp_limits, plot_exp_overflow  # noqa: E402


@pytest.fixture
def ax():
    fig, ax = plt.subplots()
    yield plot_exp_overflow(ax)
    plt.close(fig)


def test_it_draws_on_the_axes_it_is_given_with_a_title_and_labelled_axes(ax):
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    assert len(ax.lines) == 7  # e^x, then a ceiling and a crossing dot per dtype


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_each_crossing_is_drawn_at_the_measured_limit_and_inside_the_axes(ax, dtype):
    dots = [line for line in ax.lines if line.get_marker() == "o"]
    x, y = exp_limits(dtype).largest, np.log10(float(np.finfo(dtype).max))
    assert any(np.allclose(d.get_xdata(), [x]) and np.allclose(d.get_ydata(), [y]) for d in dots)
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    assert x0 < x < x1 and y0 < y < y1


def test_both_axes_are_logarithmic_so_the_float16_crossing_is_not_squashed(ax):
    assert ax.get_xscale() == ax.get_yscale() == "log"
    # The float16 ceiling sits at least a tenth of the plot's height above its bottom.
    y0, y1 = np.log10(ax.get_ylim())
    assert (np.log10(np.log10(65504.0)) - y0) / (y1 - y0) > 0.1


def test_it_makes_its_own_figure_without_axes():
    ax = plot_exp_overflow()
    assert ax.figure is not None and len(ax.lines) == 7
    plt.close(ax.figure)
