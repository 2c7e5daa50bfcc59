"""Online softmax (Milakov & Gimelshein, 2018): the normalizer in one pass over the scores.

A block of scores is summarized by a :class:`SoftmaxState`: its maximum ``m`` and
its normalizer ``ell = sum(exp(x - m))`` (the papers' ℓ). Two states merge exactly,

    m = max(m1, m2),    ell = ell1 * exp(m1 - m) + ell2 * exp(m2 - m),

so the scores can be read block by block (or split across workers) and the
states merged in any order. FlashAttention runs the same recurrence over
blocks of keys (lesson 07, :mod:`course_utils.tiled`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_real_array, check_axis, check_int, compute_dtype

__all__ = ["SoftmaxState", "merge_softmax_states", "online_softmax", "softmax_state"]


class SoftmaxState(NamedTuple):
    """The running summary of the scores seen so far along one axis.

    Attributes
    ----------
    max : numpy.ndarray
        The largest score seen (``-inf`` before any).
    normalizer : numpy.ndarray
        ``sum(exp(x - max))`` over the scores seen (0 before any).
    """

    max: np.ndarray
    normalizer: np.ndarray


def softmax_state(x: ArrayLike, axis: int = -1) -> SoftmaxState:
    """Summarize one block of scores by its maximum and normalizer.

    Parameters
    ----------
    x : array_like
        A block of real scores.
    axis : int, default -1
        The axis being normalized; it is reduced with ``keepdims``.

    Returns
    -------
    SoftmaxState
        Arrays with `axis` of size 1. An empty block gives ``(-inf, 0)``,
        the identity of :func:`merge_softmax_states`. The state keeps the
        dtype of a float32 or float64 block; a float16 block gives a float32
        state, the one exception to the package's dtype rule: the state is an
        accumulator, and frameworks accumulate half precision in float32.

    Examples
    --------
    >>> state = softmax_state([0.0, 1.0, 2.0])
    >>> float(state.max[0]), round(float(state.normalizer[0]), 4)  # e^-2 + e^-1 + e^0
    (2.0, 1.5032)
    """
    arr = as_real_array(x, "x")
    ax = check_axis(axis, arr.ndim)
    work = np.atleast_1d(arr).astype(compute_dtype(arr.dtype), copy=False)
    m = work.max(axis=ax, keepdims=True, initial=-np.inf)
    with np.errstate(invalid="ignore"):
        # Same stability trick as softmax; a row of all -inf has normalizer 0, not NaN.
        shifted = work - np.where(np.isneginf(m), 0, m)
    ell = np.exp(shifted).sum(axis=ax, keepdims=True)
    return SoftmaxState(m, ell)


def merge_softmax_states(a: SoftmaxState, b: SoftmaxState) -> SoftmaxState:
    """Merge the states of two blocks into the state of their union.

    Each normalizer is rescaled to the common maximum, so the merge is exact
    (up to rounding), associative and commutative.

    Examples
    --------
    >>> left, right = softmax_state([0.0, 1.0]), softmax_state([2.0])
    >>> merged = merge_softmax_states(left, right)
    >>> bool(np.allclose(merged.normalizer, softmax_state([0.0, 1.0, 2.0]).normalizer))
    True
    """
    m = np.maximum(a.max, b.max)
    with np.errstate(invalid="ignore"):
        # Where both maxima are -inf nothing has been seen: keep the normalizer at 0.
        safe = np.where(np.isneginf(m), 0, m)
        ell = a.normalizer * np.exp(a.max - safe) + b.normalizer * np.exp(b.max - safe)
    return SoftmaxState(m, ell)


def online_softmax(x: ArrayLike, axis: int = -1, *, block_size: int | None = None) -> np.ndarray:
    """Softmax computed block by block along `axis` with a running max and normalizer.

    Parameters
    ----------
    x : array_like
        Real scores.
    axis : int, default -1
        The axis that sums to 1.
    block_size : int or None, default None
        How many scores each block holds (the last block may be shorter).
        ``None`` means one block, the whole axis.

    Returns
    -------
    numpy.ndarray
        Equal to :func:`course_utils.softmax` up to rounding, with the same
        dtype and conventions.

    Raises
    ------
    TypeError
        If `block_size` is not an int or None (or `x`, `axis` are bad, as in softmax).
    ValueError
        If `block_size` < 1.

    Notes
    -----
    The first pass reads each block once and merges its state into the
    running one; the second pass writes ``exp(x - m) / ell``. The textbook
    stable softmax needs three passes (max, sum, write). Proof of equality:
    after merging every block, ``m`` is the row maximum and ``ell`` equals
    ``sum(exp(x - m))`` exactly, because each rescaling multiplies an old
    normalizer by ``exp(m_old - m_new)``, which moves every term it holds
    from ``exp(x - m_old)`` to ``exp(x - m_new)``.

    Examples
    --------
    >>> online_softmax([1.0, 0.0, 1.0, 3.0], block_size=3).round(4)
    array([0.1025, 0.0377, 0.1025, 0.7573])
    """
    if block_size is not None:
        block_size = check_int(block_size, "block_size", 1)
    arr = as_real_array(x, "x")
    ax = check_axis(axis, arr.ndim)
    work = np.atleast_1d(arr).astype(compute_dtype(arr.dtype), copy=False)
    n = work.shape[ax]
    step = n if block_size is None else int(block_size)
    reduced = list(work.shape)
    reduced[ax] = 1
    state = SoftmaxState(np.full(reduced, -np.inf, work.dtype), np.zeros(reduced, work.dtype))
    for start in range(0, n, max(step, 1)):
        block = np.take(work, np.arange(start, min(start + step, n)), axis=ax)
        state = merge_softmax_states(state, softmax_state(block, axis=ax))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.exp(work - state.max) / state.normalizer
    return out.reshape(arr.shape).astype(arr.dtype, copy=False)
