"""The softmax family in NumPy: softmax, the naive textbook form, log-softmax and logsumexp.

Conventions shared by every function here, chosen to agree with PyTorch:

* Float inputs keep their dtype; integer, bool and list inputs become float64.
  float16 is computed in float32 and rounded back once, as frameworks do.
* ``axis=None`` means over all elements.
* NaN and +-inf follow IEEE arithmetic and ``torch``: a row of all ``-inf``
  gives NaN from :func:`softmax` and :func:`log_softmax` and ``-inf`` from
  :func:`logsumexp`; a NaN anywhere in a row makes the whole row NaN.
* Empty input gives empty output; :func:`logsumexp` over an empty axis is ``-inf``.
* A 0-d input gives a NumPy scalar, as NumPy's and SciPy's functions do
  (``softmax(1000.0)`` is ``np.float64(1.0)``).
* ``where=`` (:func:`softmax`, :func:`log_softmax`) keeps the entries where it
  is True, with the semantics of ``jax.nn.softmax``: a left-out entry gets
  weight 0 (log-weight ``-inf``), and a row with nothing kept is all zeros
  (all ``-inf``), not NaN.
* The input is never modified.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_real_array, check_axis, check_positive_finite, compute_dtype

__all__ = ["softmax", "naive_softmax", "log_softmax", "logsumexp"]


class _Prepared(NamedTuple):
    """An input laid out for a reduction along one axis, and how to restore it."""

    work: np.ndarray  # at least 1-d; the reduction runs along `axis`
    axis: int
    dtype: np.dtype  # the dtype of the result
    shape: tuple[int, ...]  # the shape of the input


def _prepare(x: ArrayLike, axis: int | None) -> _Prepared:
    arr = as_real_array(x, "x")
    if axis is None:
        return _Prepared(arr.reshape(-1), 0, arr.dtype, arr.shape)
    ax = check_axis(axis, arr.ndim)
    return _Prepared(arr.reshape(1) if arr.ndim == 0 else arr, ax, arr.dtype, arr.shape)


def _apply_where(x: ArrayLike, where: ArrayLike | None) -> tuple[ArrayLike, np.ndarray | None]:
    """`x` with the entries `where` leaves out set to -inf, and `where` broadcast to its shape."""
    if where is None:
        return x, None
    arr = as_real_array(x, "x")
    w = np.asarray(where)
    if w.dtype != bool:
        raise TypeError(f"where must be a bool array (True = keep); got dtype {w.dtype}")
    try:
        shape = np.broadcast_shapes(w.shape, arr.shape)
    except ValueError:
        shape = None
    if shape != arr.shape:
        raise ValueError(f"where of shape {w.shape} does not broadcast to the shape of x, {arr.shape}")
    w = np.broadcast_to(w, arr.shape)
    return np.where(w, arr, arr.dtype.type(-np.inf)), w


def _shifted(p: _Prepared, shift: np.ndarray, temperature: float, out: np.ndarray | None = None) -> np.ndarray:
    """``z = (x - c) / T`` in the compute dtype, into `out` if given."""
    z = np.subtract(p.work, shift, out=out, dtype=shift.dtype)
    if temperature != 1.0:
        z /= temperature
    return z


def _shifted_and_log_normalizer(
    p: _Prepared, temperature: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return a work buffer, ``log(sum(exp(z)))`` and the shift ``c``, with ``z = (x - c) / T`` along ``p.axis``.

    ``c`` is the row maximum where it is finite and 0 elsewhere; the last two
    results keep the reduced axis with size 1. The buffer (the size of the
    input, in the compute dtype) holds ``exp(z)``; callers that need ``z``
    recompute it into the buffer with :func:`_shifted`, which gives the same
    values and costs less than allocating a second array of that size.

    The row maximum contributes exactly ``exp(0) = 1`` to the sum. Where the
    other terms, the tail ``s``, add up to 1 or more, ``log(1 + s)`` is as
    accurate as the sum. Where they add up to less, ``1 + s`` has rounded
    digits of ``s`` away (all of them once ``s`` is below machine epsilon:
    ``logsumexp([0, -40])`` is 4.2e-18, not 0), so only those rows are
    summed again with the maximum left out, and ``log1p(s)`` keeps the tail.
    Rows with a large tail, the usual case, never pay for that second pass.
    """
    ct = compute_dtype(p.dtype)
    row_max = p.work.max(axis=p.axis, keepdims=True)
    finite = np.isfinite(row_max)
    # Same numerical stability trick as for softmax; a non-finite max is not
    # subtracted (inf - inf would turn a whole row into NaN), see below.
    shift = np.where(finite, row_max, 0).astype(ct)
    buffer = _shifted(p, shift, temperature)
    np.exp(buffer, out=buffer)
    total = buffer.sum(axis=p.axis, keepdims=True)  # 1 (the maximum) + the tail
    with np.errstate(divide="ignore"):  # a row of all -inf sums to 0; it is handled below
        log_norm = np.log(total)
    small = total < 2  # a tail below 1 lost digits in 1 + tail: redo those rows with log1p
    if small.any():
        rows = np.moveaxis(small, p.axis, -1)[..., 0]
        few = np.moveaxis(p.work, p.axis, -1)[rows] - np.moveaxis(shift, p.axis, -1)[rows]  # (k, n): only those rows
        if temperature != 1.0:
            few /= temperature
        tail = np.exp(few)
        np.put_along_axis(tail, np.argmax(few, axis=-1, keepdims=True), 0, axis=-1)
        np.moveaxis(log_norm, p.axis, -1)[rows] = np.log1p(tail.sum(axis=-1, keepdims=True))
    # A row whose max is +inf, -inf or NaN has that max as its log-normalizer, as in torch.
    log_norm = np.where(finite, log_norm, row_max.astype(ct))
    return buffer, log_norm, shift


def softmax(
    x: ArrayLike, axis: int | None = -1, *, temperature: float = 1.0, where: ArrayLike | None = None
) -> np.ndarray:
    r"""Numerically stable softmax, :math:`\exp(x_i / T) / \sum_j \exp(x_j / T)`.

    Parameters
    ----------
    x : array_like
        Real scores (logits).
    axis : int or None, default -1
        The axis that sums to 1. ``None`` normalizes over all elements.
    temperature : float, default 1.0
        Finite and > 0. Below 1 sharpens the distribution towards the argmax
        (ties share it equally); above 1 flattens it towards uniform.
    where : array_like of bool, optional
        Broadcastable to the shape of `x`; True keeps an entry. Left-out
        entries get weight exactly 0 and the kept ones sum to 1; a row with
        nothing kept is all zeros, not NaN (as ``jax.nn.softmax``).

    Returns
    -------
    numpy.ndarray or numpy scalar
        Probabilities with the shape of `x`, non-negative and summing to 1
        along `axis`. Float dtypes are kept; other inputs give float64.
        A 0-d input gives a NumPy scalar (always 1.0, or NaN for NaN/inf).

    Raises
    ------
    TypeError
        If `x` is not real (strings, complex, objects), `axis` is not an int
        or None, `temperature` is not a real number, or `where` is not bool.
    ValueError
        If `axis` is out of range, `temperature` is not finite and > 0, or
        `where` does not broadcast to the shape of `x`.

    See Also
    --------
    naive_softmax : the textbook formula, which overflows.
    log_softmax : the logarithm, accurate where softmax underflows to 0.

    Notes
    -----
    Softmax is shift-invariant, ``softmax(x - c) == softmax(x)``, so the row
    maximum is subtracted first: the largest exponent is then ``exp(0) = 1``,
    nothing overflows and the denominator is at least 1. The work happens in
    one output array, with no temporaries of the input's size, in five passes:
    max, subtract, exponentiate, sum, divide.

    A row of all ``-inf`` (nothing to attend to) gives NaN, as
    ``torch.softmax`` does; a row containing NaN is all NaN.

    Examples
    --------
    >>> softmax([1.0, 0.0, 1.0]).round(4)
    array([0.4223, 0.1554, 0.4223])
    >>> softmax([1000.0, 0.0])  # the textbook formula gives nan here
    array([1., 0.])
    >>> softmax([2.0, 5.0, 5.0], temperature=1e-3)  # T -> 0: argmax, ties split
    array([0. , 0.5, 0.5])
    >>> softmax([[1.0, 0.0, 1.0], [3.0, 4.0, 5.0]], where=[[True, True, False], [False, False, False]]).round(4)
    array([[0.7311, 0.2689, 0.    ],
           [0.    , 0.    , 0.    ]])
    """
    t = check_positive_finite(temperature, "temperature")
    x, keep = _apply_where(x, where)
    if keep is not None:
        with np.errstate(invalid="ignore"):
            out = np.asarray(softmax(x, axis, temperature=t))
        # Left out: exactly 0. A row with nothing kept gave 0/0 = NaN above: zeros, as in JAX.
        return np.where(keep, out, out.dtype.type(0))[()]
    p = _prepare(x, axis)
    if p.work.size == 0:
        return np.empty(p.shape, p.dtype)
    with np.errstate(invalid="ignore", under="ignore"):  # -inf - -inf is NaN by IEEE, as in torch
        out = np.subtract(p.work, p.work.max(axis=p.axis, keepdims=True), dtype=compute_dtype(p.dtype))
        if t != 1.0:
            out /= t
        np.exp(out, out=out)
        out /= out.sum(axis=p.axis, keepdims=True)
    return out.reshape(p.shape).astype(p.dtype, copy=False)[()]


def naive_softmax(x: ArrayLike, axis: int | None = -1) -> np.ndarray:
    r"""The textbook softmax, :math:`\exp(x_i) / \sum_j \exp(x_j)`, with no max subtracted.

    Use it to *see* overflow: ``exp(1000)`` is ``inf`` and ``inf / inf`` is
    NaN. It never raises for such inputs, and NumPy's floating-point warnings
    are silenced because the inf and NaN in the result are the lesson.
    It computes in the input's own dtype (float16 stays float16).

    Parameters
    ----------
    x : array_like
        Real scores.
    axis : int or None, default -1
        The axis that sums to 1; ``None`` means all elements.

    Returns
    -------
    numpy.ndarray
        The same shape and float dtype as `x`; may contain inf or NaN.

    Raises
    ------
    TypeError, ValueError
        For the same bad arguments as :func:`softmax`.

    Examples
    --------
    >>> naive_softmax([1.0, 0.0, 1.0]).round(4)
    array([0.4223, 0.1554, 0.4223])
    >>> naive_softmax([1000.0, 0.0])
    array([nan,  0.])
    """
    p = _prepare(x, axis)
    with np.errstate(all="ignore"):
        e = np.exp(p.work)
        out = e / e.sum(axis=p.axis, keepdims=True)
    return out.reshape(p.shape)


def log_softmax(
    x: ArrayLike, axis: int | None = -1, *, temperature: float = 1.0, where: ArrayLike | None = None
) -> np.ndarray:
    r"""Log of the softmax, :math:`x_i/T - \log \sum_j \exp(x_j/T)`, accurate in the tails.

    Parameters
    ----------
    x : array_like
        Real scores.
    axis : int or None, default -1
        The axis to normalize over; ``None`` means all elements.
    temperature : float, default 1.0
        Finite and > 0, as in :func:`softmax`.
    where : array_like of bool, optional
        As in :func:`softmax`: left-out entries get log-weight ``-inf``, and a
        row with nothing kept is all ``-inf`` (the log of its zero weights).

    Returns
    -------
    numpy.ndarray or numpy scalar
        Log-probabilities (all <= 0) with the shape of `x`; a NumPy scalar
        for a 0-d input.

    Raises
    ------
    TypeError, ValueError
        For the same bad arguments as :func:`softmax`.

    Notes
    -----
    ``np.log(softmax(x))`` gives ``-inf`` once a probability underflows to 0;
    this function never forms the probabilities, so it returns the exact
    ``-1000`` for the second entry of ``[0, -1000]``. The log-normalizer uses
    ``log1p`` of the sum without the maximum (see :func:`logsumexp`).
    Rows of all ``-inf`` give NaN, as ``torch.log_softmax`` does.

    Examples
    --------
    >>> log_softmax([0.0, -1000.0])
    array([    0., -1000.])
    >>> with np.errstate(divide="ignore"):  # what log_softmax avoids: log(0)
    ...     np.log(softmax([0.0, -1000.0]))
    array([  0., -inf])
    >>> log_softmax([0.0, 5.0], where=[True, False])
    array([  0., -inf])
    """
    t = check_positive_finite(temperature, "temperature")
    x, keep = _apply_where(x, where)
    if keep is not None:
        out = np.asarray(log_softmax(x, axis, temperature=t))
        return np.where(keep, out, out.dtype.type(-np.inf))[()]
    p = _prepare(x, axis)
    if p.work.size == 0:
        return np.empty(p.shape, p.dtype)
    with np.errstate(invalid="ignore", under="ignore", over="ignore"):
        buffer, log_norm, shift = _shifted_and_log_normalizer(p, t)
        z = _shifted(p, shift, t, out=buffer)
        z -= log_norm
        # A row with a +inf, NaN or only -inf has no finite log-probabilities: all NaN, as in torch.
        bad = ~np.isfinite(log_norm)
        if bad.any():
            np.copyto(z, np.nan, where=bad)
    return z.reshape(p.shape).astype(p.dtype, copy=False)[()]


def logsumexp(x: ArrayLike, axis: int | None = -1, keepdims: bool = False) -> np.ndarray:
    r"""Accurate :math:`\log \sum_j \exp(x_j)`, with no overflow and no lost tail.

    Parameters
    ----------
    x : array_like
        Real values.
    axis : int or None, default -1
        The axis to reduce; ``None`` reduces over all elements.
    keepdims : bool, default False
        Keep the reduced axis (or all axes, with ``axis=None``) with size 1.

    Returns
    -------
    numpy.ndarray or numpy scalar
        The reduced values in the float dtype of `x` (float64 for other
        inputs); a NumPy scalar when the result has no dimensions.

    Raises
    ------
    TypeError, ValueError
        For a non-real `x`, a bad `axis` or a non-bool `keepdims`.

    Notes
    -----
    With :math:`m = \max_j x_j`,
    :math:`\operatorname{lse}(x) = m + \operatorname{log1p}(\sum_{j \ne j^*} e^{x_j - m})`,
    where :math:`j^*` is one position of the maximum. ``log1p(s)`` is exact
    for tiny ``s``, where ``log(1 + s)`` rounds to 0. The same idea is used
    by ``scipy.special.logsumexp``.
    An empty axis gives ``-inf`` (the log of an empty sum, 0). A row whose
    maximum is ``+inf`` gives ``+inf``, all ``-inf`` gives ``-inf``, and NaN
    gives NaN, matching ``torch.logsumexp``.

    Examples
    --------
    >>> float(logsumexp([0.0, -40.0]))  # log(1 + e^-40), not 0
    4.248354255291589e-18
    >>> float(logsumexp([1000.0, 1000.0]))  # 1000 + log 2; naive exp overflows
    1000.6931471805599
    >>> float(logsumexp([]))
    -inf
    """
    if not isinstance(keepdims, (bool, np.bool_)):
        raise TypeError(f"keepdims must be a bool; got {type(keepdims).__name__} {keepdims!r}")
    p = _prepare(x, axis)
    reduced = list(p.work.shape)
    reduced[p.axis] = 1
    if p.work.shape[p.axis] == 0:
        lse = np.full(reduced, -np.inf, dtype=p.dtype)
    elif p.work.size == 0:
        lse = np.empty(reduced, dtype=p.dtype)
    else:
        with np.errstate(invalid="ignore", under="ignore", over="ignore"):
            _, log_norm, shift = _shifted_and_log_normalizer(p, 1.0)
            lse = (shift + log_norm).astype(p.dtype, copy=False)
    if len(p.shape) == 0:
        shape: tuple[int, ...] = ()
    elif axis is None:
        shape = (1,) * len(p.shape) if keepdims else ()
    else:
        shape = tuple(reduced) if keepdims else tuple(n for i, n in enumerate(reduced) if i != p.axis)
    return lse.reshape(shape)[()]
