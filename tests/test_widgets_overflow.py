"""The overflow explorer redraws the naive and the stable softmax of [x, 0] in each dtype as its slider moves."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from course_utils.floats import exp_limits
from course_utils.widgets import overflow_explorer

DTYPES = ("float16", "float32", "float64")


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def textbook(x, dtype):
    """exp, sum and divide in the dtype itself, written out here."""
    row = np.array([x, 0.0], dtype=dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(row)
        return e / e.sum()


def exact(x):
    """The true weights of [x, 0], from exp(-x) in float64 (finite for every slider position)."""
    tail = np.exp(-x)
    return np.array([1.0 / (1.0 + tail), tail / (1.0 + tail)])


def test_the_slider_spans_x_from_1_to_1000_on_a_log_scale_and_starts_at_10():
    slider = overflow_explorer().children[0]
    assert (slider.values[0], slider.values[-1], len(slider.values), slider.value) == (1.0, 1000.0, 31, 10.0)


@pytest.mark.parametrize(
    "x,broken", [(10.0, set()), (12.0, {"float16"}), (100.0, {"float16", "float32"}), (800.0, set(DTYPES))]
)
def test_moving_the_slider_breaks_each_dtype_at_its_own_limit(x, broken):
    explorer = overflow_explorer()
    explorer.children[0].value = x
    drawn = explorer.result
    assert drawn["x"] == pytest.approx(x)
    assert set(drawn["naive"]) == set(drawn["stable"]) == set(DTYPES)
    for name in DTYPES:
        naive, stable = drawn["naive"][name], drawn["stable"][name]
        assert naive.dtype == stable.dtype == np.dtype(name)
        np.testing.assert_array_equal(naive, textbook(drawn["x"], name))  # NaN where the textbook formula breaks
        assert bool(np.isnan(naive).any()) == (name in broken)
        assert (name in broken) == (drawn["x"] > exp_limits(name).largest)
        # The stable weights are right to the dtype's precision, whatever x is.
        tiny = float(np.finfo(name).smallest_subnormal)
        x_in_dtype = float(np.array(drawn["x"], dtype=name))
        np.testing.assert_allclose(stable, exact(x_in_dtype), rtol=4 * np.finfo(name).eps, atol=tiny)


def test_a_subset_of_dtypes_draws_one_panel_each():
    explorer = overflow_explorer(x=50.0, dtypes=[np.float32])
    assert list(explorer.result["naive"]) == ["float32"]
    assert len(explorer.figure.axes) == 1


@pytest.mark.parametrize(
    "kwargs,error,name",
    [
        ({"x": 0.5}, ValueError, "x"),
        ({"x": 2000.0}, ValueError, "x"),
        ({"x": "10"}, TypeError, "x"),
        ({"x": float("nan")}, ValueError, "x"),
        ({"dtypes": ()}, ValueError, "dtypes"),
        ({"dtypes": ("float32", np.float32)}, ValueError, "dtypes"),
        ({"dtypes": ("int32",)}, TypeError, "dtypes"),
        ({"dtypes": "float16"}, TypeError, "dtypes"),
    ],
)
def test_bad_arguments_are_rejected_by_name(kwargs, error, name):
    with pytest.raises(error, match=name):
        overflow_explorer(**kwargs)
