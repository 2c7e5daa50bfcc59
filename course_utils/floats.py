"""Where exp() leaves the floating-point range, measured for each dtype."""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
from numpy.typing import DTypeLike

__all__ = ["ExpLimits", "exp_limits"]


class ExpLimits(NamedTuple):
    """The range of scores whose exponential a dtype can hold.

    Attributes
    ----------
    dtype : numpy.dtype
    largest : float
        The largest ``x`` of this dtype with ``exp(x)`` finite; the next one up gives inf.
    smallest : float
        The most negative ``x`` of this dtype with ``exp(x) > 0``; the next one down gives 0.
    """

    dtype: np.dtype
    largest: float
    smallest: float


def _edge(good: float, bad: float, ok: Callable[[np.ndarray], bool], dt: np.dtype) -> float:
    """Bisect between a value of `dt` where `ok` holds and one where it fails, down to adjacent values."""
    good_x, bad_x = np.array(good, dtype=dt), np.array(bad, dtype=dt)
    while True:
        mid = np.array((float(good_x) + float(bad_x)) / 2, dtype=dt)  # rounded to the dtype
        if mid == good_x or mid == bad_x:  # adjacent representable values: done
            return float(good_x)
        if ok(mid):
            good_x = mid
        else:
            bad_x = mid


def exp_limits(dtype: DTypeLike) -> ExpLimits:
    """Measure the largest and smallest scores whose ``np.exp`` is finite and non-zero.

    A bisection over values of the dtype itself, between 0 and a point safely
    past ``log`` of the dtype's largest value (or of its smallest subnormal),
    ends on two adjacent representable values: the result is what ``np.exp``
    does on this machine, not what a table says.

    Parameters
    ----------
    dtype : dtype-like
        float16, float32 or float64.

    Returns
    -------
    ExpLimits

    Raises
    ------
    TypeError
        If `dtype` is not a floating dtype.

    Examples
    --------
    >>> limits = exp_limits(np.float64)
    >>> round(limits.largest, 2), round(limits.smallest, 2)
    (709.78, -745.13)
    """
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be float16, float32 or float64; got {dtype!r}") from None
    if dt not in (np.float16, np.float32, np.float64):
        raise TypeError(f"dtype must be float16, float32 or float64; got {dt}")
    info = np.finfo(dt)
    with np.errstate(over="ignore", under="ignore"):
        largest = _edge(0.0, 1.1 * np.log(float(info.max)), lambda v: bool(np.isfinite(np.exp(v))), dt)
        smallest = _edge(
            0.0, 1.1 * np.log(float(info.smallest_subnormal)), lambda v: bool(np.exp(v) > 0), dt
        )
    return ExpLimits(dt, largest, smallest)
