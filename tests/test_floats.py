"""exp_limits finds the exact edge of exp's range for each dtype."""

import math

import numpy as np
import pytest

from course_utils.floats import exp_limits


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_the_largest_safe_exponent_is_the_last_finite_one(dtype):
    x = np.array(exp_limits(dtype).largest, dtype=dtype)
    with np.errstate(over="ignore"):
        assert np.isfinite(np.exp(x))
        assert np.isinf(np.exp(np.nextafter(x, dtype(np.inf))))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_the_smallest_exponent_is_the_last_nonzero_one(dtype):
    x = np.array(exp_limits(dtype).smallest, dtype=dtype)
    with np.errstate(under="ignore"):
        assert np.exp(x) > 0
        assert np.exp(np.nextafter(x, dtype(-np.inf))) == 0


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_the_limits_are_near_the_logs_of_the_dtype_range(dtype):
    info = np.finfo(dtype)
    limits = exp_limits(dtype)
    # The edge can differ from log(max) by the spacing of the dtype near it.
    assert limits.largest == pytest.approx(math.log(float(info.max)), abs=float(np.spacing(dtype(limits.largest))) * 2)
    assert limits.smallest == pytest.approx(math.log(float(info.smallest_subnormal)), abs=1.0)


@pytest.mark.parametrize("dtype", [np.int32, np.complex128, np.longdouble, "text"])
def test_non_float_dtypes_are_rejected_by_name(dtype):
    with pytest.raises(TypeError, match="dtype"):
        exp_limits(dtype)
