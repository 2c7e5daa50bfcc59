"""Tests for the one-line PyTorch cross-check."""

import numpy as np
import pytest
import torch

from course_utils import CrossCheckError, cross_check, softmax


def test_identical_results_print_exact(capsys):
    cross_check(np.array([0.25, 0.75]), torch.tensor([0.25, 0.75], dtype=torch.float64), "halves")
    assert capsys.readouterr().out == "✓ halves: exact\n"


def test_close_results_print_the_max_abs_diff_to_one_digit(capsys):
    x = np.random.default_rng(0).normal(size=(4, 7))
    cross_check(softmax(x), torch.softmax(torch.from_numpy(x), -1), "softmax vs torch.softmax")
    out = capsys.readouterr().out
    assert out.startswith("✓ softmax vs torch.softmax: ")
    assert out.count("\n") == 1
    if "close" in out:
        assert "max abs diff" in out and "e-" in out


def test_a_real_mismatch_raises_and_says_where():
    with pytest.raises(CrossCheckError, match=r"NOT close: max abs diff 0\.1 at index \(1,\)"):
        cross_check([0.5, 0.5], [0.5, 0.6], "oops")


def test_a_shape_mismatch_raises():
    with pytest.raises(CrossCheckError, match="shapes differ"):
        cross_check(np.zeros(3), torch.zeros(3, 1), "shapes")


def test_nan_in_different_places_raises():
    with pytest.raises(CrossCheckError, match="NaN"):
        cross_check([np.nan, 1.0], [1.0, 1.0], "nan")


def test_matching_nan_and_inf_are_exact(capsys):
    cross_check([np.nan, -np.inf], torch.tensor([float("nan"), float("-inf")]), "specials")
    assert "exact" in capsys.readouterr().out


def test_float32_gets_a_float32_tolerance(capsys):
    x = np.float32(1.0) + np.float32(3e-7)
    cross_check(np.array([x]), np.array([1.0]), "f32")
    assert "close" in capsys.readouterr().out
    with pytest.raises(CrossCheckError):
        cross_check(np.array([1.0 + 3e-7]), np.array([1.0]), "f64")


def test_bfloat16_tensors_are_compared_loosely(capsys):
    cross_check(np.array([0.3333]), torch.tensor([1 / 3], dtype=torch.bfloat16), "bf16")
    assert "close" in capsys.readouterr().out


def test_explicit_tolerances_are_honoured():
    with pytest.raises(CrossCheckError, match="rtol=0, atol=1e-20"):
        cross_check([1.0], [1.0 + 1e-15], "strict", rtol=0, atol=1e-20)
