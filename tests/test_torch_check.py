"""Tests for the one-line PyTorch cross-check."""

import contextlib
import io

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils import CrossCheckError, cross_check, softmax


def test_close_results_print_the_tolerance_met_not_the_difference(capsys):
    x = np.random.default_rng(0).normal(size=(4, 7))
    # The default float64 tolerance (rtol 1e-10) is far above both sides' rounding, 2·exponent_error(x) ≈ 3e-14.
    cross_check(softmax(x), torch.softmax(torch.from_numpy(x), -1), "softmax vs torch.softmax")
    assert capsys.readouterr().out == "✓ softmax vs torch.softmax: close (float64 tolerance: rtol 1e-10, atol 1e-12)\n"


def test_identical_results_print_the_same_line_as_close_ones(capsys):
    # Bitwise agreement on this machine is no promise for another: the line must not depend on it.
    cross_check([0.25, 0.75], torch.tensor([0.25, 0.75], dtype=torch.float64), "a")
    cross_check([0.25, 0.75], torch.tensor([0.25, 0.75 + 1e-16], dtype=torch.float64), "a")
    first, second = capsys.readouterr().out.splitlines()
    assert first == second == "✓ a: close (float64 tolerance: rtol 1e-10, atol 1e-12)"


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=20), st.integers(0, 40))
def test_the_printed_line_never_depends_on_last_bit_noise(values, ulps):
    """Perturbing a result by a few ulps, as another CPU would, never changes what is printed."""
    a = np.array(values)
    b = a.copy()
    for _ in range(ulps):
        b = np.nextafter(b, np.inf)
    lines = []
    for other in (a, b):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            cross_check(a, other, "x")
        lines.append(buffer.getvalue())
    assert lines[0] == lines[1]


def test_exact_prints_exact_when_identical(capsys):
    cross_check(np.array([0.25, 0.75]), torch.tensor([0.25, 0.75], dtype=torch.float64), "halves", exact=True)
    assert capsys.readouterr().out == "✓ halves: exact\n"


def test_exact_raises_on_a_one_ulp_difference():
    with pytest.raises(CrossCheckError, match=r"NOT exact: max abs diff 2\.22e-16 at index \(0,\)"):
        cross_check([1.0], [np.nextafter(1.0, 2.0)], "one ulp", exact=True)


def test_matching_nan_and_inf_are_exact(capsys):
    cross_check([np.nan, -np.inf], torch.tensor([float("nan"), float("-inf")]), "specials", exact=True)
    assert capsys.readouterr().out == "✓ specials: exact\n"


def test_a_real_mismatch_raises_and_says_where():
    with pytest.raises(CrossCheckError, match=r"NOT close: max abs diff 0\.1 at index \(1,\)"):
        cross_check([0.5, 0.5], [0.5, 0.6], "oops")


def test_a_shape_mismatch_raises():
    with pytest.raises(CrossCheckError, match="shapes differ"):
        cross_check(np.zeros(3), torch.zeros(3, 1), "shapes")


def test_nan_in_different_places_raises():
    with pytest.raises(CrossCheckError, match="NaN"):
        cross_check([np.nan, 1.0], [1.0, 1.0], "nan")
    with pytest.raises(CrossCheckError, match="NaN"):
        cross_check([np.nan, 1.0], [1.0, 1.0], "nan", exact=True)


def test_float32_gets_a_float32_tolerance(capsys):
    x = np.float32(1.0) + np.float32(3e-7)
    cross_check(np.array([x]), np.array([1.0]), "f32")
    assert capsys.readouterr().out == "✓ f32: close (float32 tolerance: rtol 1e-05, atol 1e-06)\n"
    with pytest.raises(CrossCheckError):
        cross_check(np.array([1.0 + 3e-7]), np.array([1.0]), "f64")


def test_bfloat16_tensors_are_compared_loosely_on_either_side(capsys):
    cross_check(np.array([0.3333]), torch.tensor([1 / 3], dtype=torch.bfloat16), "bf16")
    cross_check(torch.tensor([1 / 3], dtype=torch.bfloat16), torch.tensor([0.3333]), "bf16")
    assert capsys.readouterr().out == "✓ bf16: close (float16 tolerance: rtol 0.01, atol 0.001)\n" * 2


def test_explicit_tolerances_are_honoured_and_printed(capsys):
    with pytest.raises(CrossCheckError, match="rtol=0, atol=1e-20"):
        cross_check([1.0], [1.0 + 1e-15], "strict", rtol=0, atol=1e-20)
    cross_check([1.0], [1.0 + 1e-9], "loose", atol=1e-8)
    assert capsys.readouterr().out == "✓ loose: close (rtol 1e-10, atol 1e-08)\n"


def test_empty_arrays_are_close(capsys):
    cross_check(np.zeros((0, 3)), torch.zeros(0, 3, dtype=torch.float64), "empty")
    assert "close" in capsys.readouterr().out


@pytest.mark.parametrize(("kwargs", "error", "name"), [
    ({"rtol": -1.0}, ValueError, "rtol"),
    ({"atol": float("nan")}, ValueError, "atol"),
    ({"atol": "1e-6"}, ValueError, "atol"),
    ({"exact": True, "atol": 1e-6}, ValueError, "atol"),
    ({"exact": 1}, TypeError, "exact"),
    ({"label": 3}, TypeError, "label"),
])
def test_bad_arguments_name_themselves(kwargs, error, name):
    with pytest.raises(error, match=name):
        cross_check([1.0], [1.0], **kwargs)

