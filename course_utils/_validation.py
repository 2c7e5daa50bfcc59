"""Argument checks shared by the public functions.

Every public function validates its arguments here first, so a learner who
passes a string, a complex number or a bad axis gets a message that names the
argument instead of a traceback from deep inside NumPy.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["as_real_array", "as_same_shape_pair", "check_axis", "check_int", "check_positive_finite", "compute_dtype"]


def as_real_array(x: ArrayLike, name: str = "x") -> np.ndarray:
    """Return `x` as a real floating NumPy array, never a copy of a float array.

    Float arrays keep their dtype; integer, bool and nested-list inputs become
    float64. Strings, complex numbers and objects raise ``TypeError``.
    """
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError, RuntimeError) as exc:  # ragged lists, tensors with grad
        raise ValueError(f"{name} must be a rectangular array of real numbers: {exc}") from None
    kind = arr.dtype.kind
    if kind == "f":
        return arr
    if kind in "biu":
        return arr.astype(np.float64)
    raise TypeError(
        f"{name} must hold real numbers (float, int or bool); got dtype {arr.dtype}"
    )


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype to compute in: float16 is widened to float32, as frameworks do."""
    return np.dtype(np.float32) if dtype.itemsize < 4 else dtype


def check_axis(axis: object, ndim: int, name: str = "axis") -> int:
    """Return `axis` as a non-negative int, or raise a clear error.

    A 0-d input accepts axis 0 and -1 (as torch does) and is treated as one
    element; the caller reshapes it.
    """
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"{name} must be an int or None; got {type(axis).__name__} {axis!r}")
    size = max(ndim, 1)
    if not -size <= axis < size:
        raise ValueError(f"{name}={axis} is out of range for an input with {ndim} dimension(s)")
    return int(axis) % size


def check_int(value: object, name: str, low: int) -> int:
    """Return `value` as an int if it is an integer (not a bool) >= `low`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int; got {type(value).__name__} {value!r}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}; got {value}")
    return int(value)


def check_positive_finite(value: object, name: str) -> float:
    """Return `value` as a float if it is a finite real number > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be finite and > 0; got {value!r}")
    return value


def as_same_shape_pair(a: ArrayLike, b: ArrayLike, names: tuple[str, str], axis: object) -> tuple[np.ndarray, np.ndarray, int]:
    """Two real arrays of the same shape (at least 1-d) and a checked axis, for backward passes."""
    x, y = as_real_array(a, names[0]), as_real_array(b, names[1])
    if x.shape != y.shape:
        raise ValueError(f"{names[0]} and {names[1]} must have the same shape; got {x.shape} and {y.shape}")
    if x.ndim == 0:
        raise ValueError(f"{names[0]} must have at least one dimension")
    return x, y, check_axis(axis, x.ndim)
