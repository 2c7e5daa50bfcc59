"""One-line cross-checks of a NumPy result against PyTorch.

Every notebook compares what it computed with ``course_utils`` against the
same computation in PyTorch, through :func:`cross_check`. The line it prints
always has the same shape, so a learner learns to read it once::

    ✓ softmax vs torch.softmax: close (float64 tolerance: rtol 1e-10, atol 1e-12)

and a mismatch raises, so a wrong result can never scroll past unnoticed.

The line names the tolerance that was met, never the size of the difference:
two correct float computations differ in their last bits, and those bits
change with the CPU's instruction set, the BLAS library and the number of
threads. The verdict does not, so a stored notebook reproduces on any machine.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

__all__ = ["TOLERANCES", "CrossCheckError", "cross_check", "to_numpy"]

#: (rtol, atol) by dtype: cross_check uses those of the lower precision of the two results it compares.
#: Two correct computations of a softmax or attention row each round within the standard forward bound,
#: about (n + 3|s|)·u relative for n keys and scores of size |s|, plus γ_E·|q||k| for scores from dot
#: products of length E, with u = 2^-53, 2^-24 and 2^-11 (tests/rounding_bounds.py). float64: rtol 1e-10
#: is 9e5·u, room for both sides on any row of the lessons (n and |s| up to a few thousand), yet 1e7
#: times finer than any mistake the lessons show. float32: rtol 1e-5 is 170·u, enough for the lessons'
#: short rows of O(1) scores computed the same way, but below the worst case where torch's kernels take
#: a 20-ulp exp (flash attention) or rows grow long: pass rtol and atol for those. float16 and bfloat16:
#: 1e-2 is 20·u of float16, room for a short row, but only 2.5·u of bfloat16 (u = 2^-8), about one
#: rounding on each side: compare bfloat16 results of more than one operation with a wider rtol.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-10, 1e-12),
    "float32": (1e-5, 1e-6),
    "float16": (1e-2, 1e-3),
}


class CrossCheckError(AssertionError):
    """Raised by :func:`cross_check` when two results are not close."""


def to_numpy(value: Any) -> np.ndarray:
    """Return a NumPy array for a NumPy array, a Python number or a torch tensor.

    Examples
    --------
    >>> to_numpy([1, 2]).dtype
    dtype('int64')
    """
    if type(value).__module__.startswith("torch"):
        tensor = value.detach().cpu()
        if str(tensor.dtype) == "torch.bfloat16":  # NumPy has no bfloat16
            tensor = tensor.float()
        return tensor.numpy()
    return np.asarray(value)


def _precision(arr: np.ndarray) -> str:
    if arr.dtype.kind != "f":
        return "float64"
    return {2: "float16", 4: "float32"}.get(arr.dtype.itemsize, "float64")


def cross_check(
    ours: Any,
    reference: Any,
    label: str = "result",
    *,
    rtol: float | None = None,
    atol: float | None = None,
    exact: bool = False,
) -> None:
    """Print one line comparing `ours` with `reference`; raise if they are not close.

    Parameters
    ----------
    ours : array_like
        The result computed with NumPy / ``course_utils``.
    reference : array_like or torch.Tensor
        The same quantity computed independently, usually by PyTorch.
    label : str
        What is compared, e.g. ``"softmax vs torch.softmax"``.
    rtol, atol : float, optional
        Tolerances of :func:`numpy.allclose`. By default they follow the
        lower precision of the two inputs: (1e-10, 1e-12) for float64,
        (1e-5, 1e-6) for float32 and (1e-2, 1e-3) for float16 and bfloat16.
    exact : bool, default False
        Require every element to be identical (NaN equal to NaN), bit for
        bit. Ask for it only where both sides do the very same arithmetic, so
        that equality holds on every machine; two different computations that
        happen to agree to the last bit on one CPU may not on another.

    Raises
    ------
    CrossCheckError
        If the shapes differ, NaN appears in different places, or the values
        are not close (not identical, with `exact`). It is an
        ``AssertionError``, so tests can catch it too.
    TypeError
        If `exact` is not a bool, or `label` not a str.
    ValueError
        If `rtol` or `atol` is negative or not finite, or is given with `exact`.

    Notes
    -----
    The line reads ``close`` followed by the tolerance met, or ``exact`` when
    `exact` was asked for. It never prints the largest difference: that lives
    in the last bits, which vary across CPUs, BLAS builds and thread counts,
    so the printed line is the same on every machine.

    Examples
    --------
    >>> cross_check([0.1 + 0.2], [0.3], "float sum")
    ✓ float sum: close (float64 tolerance: rtol 1e-10, atol 1e-12)
    >>> cross_check([0.5, 0.5], [0.5, 0.5], "halves", exact=True)
    ✓ halves: exact
    >>> cross_check([1.0], [1.0 + 1e-7], "loosely", rtol=1e-6, atol=0)
    ✓ loosely: close (rtol 1e-06, atol 0)
    """
    if not isinstance(exact, bool):
        raise TypeError(f"exact must be True or False; got {exact!r}")
    if not isinstance(label, str):
        raise TypeError(f"label must be a str; got {type(label).__name__}")
    for name, value in (("rtol", rtol), ("atol", atol)):
        if value is not None and not (isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")
        if value is not None and exact:
            raise ValueError(f"{name} cannot be combined with exact=True, which allows no difference at all")
    a, b = to_numpy(ours), to_numpy(reference)
    if a.shape != b.shape:
        raise CrossCheckError(f"✗ {label}: shapes differ, {a.shape} vs {b.shape}")
    precisions = [_precision(a), _precision(b)]
    worst = "float16" if "float16" in precisions else "float32" if "float32" in precisions else "float64"
    if any(str(getattr(value, "dtype", "")) == "torch.bfloat16" for value in (ours, reference)):
        worst = "float16"  # NumPy has no bfloat16: to_numpy widened it to float32
    default_rtol, default_atol = TOLERANCES[worst]
    tolerance = f"{worst} tolerance: " if rtol is None and atol is None else ""
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if not np.array_equal(np.isnan(a64), np.isnan(b64)):
        raise CrossCheckError(f"✗ {label}: NaN in different places")
    with np.errstate(invalid="ignore"):
        diff = np.where(a64 == b64, 0.0, np.abs(a64 - b64))  # equal infinities differ by 0
    diff = np.nan_to_num(diff, nan=0.0, posinf=np.inf)
    max_diff = float(diff.max()) if diff.size else 0.0
    where = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.ndim and diff.size else ()
    if exact:
        if not np.array_equal(a64, b64, equal_nan=True):
            raise CrossCheckError(
                f"✗ {label}: NOT exact: max abs diff {max_diff:.3g} at index {tuple(map(int, where))}"
            )
        print(f"✓ {label}: exact")
        return
    if not np.allclose(a64, b64, rtol=rtol, atol=atol, equal_nan=True):
        raise CrossCheckError(
            f"✗ {label}: NOT close: max abs diff {max_diff:.3g} at index {tuple(map(int, where))} "
            f"(rtol={rtol:g}, atol={atol:g})"
        )
    print(f"✓ {label}: close ({tolerance}rtol {rtol:g}, atol {atol:g})")
