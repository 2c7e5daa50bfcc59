"""Sparse alternatives to softmax: sparsemax, 1.5-entmax, and α-entmax by bisection.

All three map scores to the probability simplex like softmax, but can give
weights of exactly 0. Each is a thresholded power of the shifted scores,

    p_i = [(α - 1) x_i - τ]_+ ^ (1 / (α - 1)),

with the threshold τ chosen so that the weights sum to 1: α = 2 is sparsemax
(Martins & Astudillo 2016), α = 1.5 is 1.5-entmax (Peters, Niculae & Martins
2019), and α → 1 is softmax.

Conventions (as for :mod:`course_utils.softmax`): float dtypes are kept
(float16 computed in float32); any axis works; the input is never modified;
positions padded with ``-inf`` get exactly 0 and leave the rest unchanged;
a row of all ``-inf`` or with a NaN gives NaN.

A fully masked row (all ``-inf``: nothing to attend to) is NaN on purpose, as
:func:`~course_utils.softmax` and ``torch.softmax`` give for it: the simplex
has no point that a row of ``-inf`` projects to, and a NaN cannot be mistaken
for weights. (The ``entmax`` package's sort-based ``sparsemax`` and
``entmax15`` raise an index error there instead; its ``entmax_bisect`` gives
NaN.) To give such a row zero weights, as attention does, set them afterwards,
e.g. ``np.where(np.isneginf(x).all(axis, keepdims=True), 0.0, sparsemax(x, axis))``.
"""

from __future__ import annotations

import math
import numbers
from typing import Callable

import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_real_array, as_same_shape_pair, check_axis, check_int, compute_dtype
from .softmax import softmax

__all__ = ["entmax15", "entmax15_backward", "entmax_bisect", "sparsemax", "sparsemax_backward"]

# Every score in the support lies within 1 of the row maximum after scaling by
# (α - 1): the largest weight alone is (x_max - τ)^(1/(α-1)) <= 1. Scores further
# down always get 0, so they are clipped to this floor first. That keeps -inf
# padding and spreads like 1e300 out of the arithmetic (no inf - inf, no
# overflowing squares) without changing any result.
_FLOOR = -2.0


def _along_last(x: ArrayLike, axis: int, scale: float, compute: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Shift, scale and clip the scores along `axis`, apply `compute` on the last axis, and restore."""
    arr = as_real_array(x, "x")
    ax = check_axis(axis, arr.ndim)
    work = np.moveaxis(np.atleast_1d(arr), ax, -1).astype(compute_dtype(arr.dtype), copy=True)
    if work.shape[-1] == 0 or work.size == 0:
        return np.empty(arr.shape, arr.dtype)
    with np.errstate(invalid="ignore"):  # a row of all -inf becomes NaN, as in softmax
        # Same numerical stability trick as for softmax: subtract the row max.
        work -= work.max(axis=-1, keepdims=True)
        work *= scale
        np.maximum(work, _FLOOR, out=work, where=~np.isnan(work))
        out = compute(work)
    return np.moveaxis(out, -1, ax).reshape(arr.shape).astype(arr.dtype, copy=False)


def _sparsemax_last(z: np.ndarray) -> np.ndarray:
    srt = -np.sort(-z, axis=-1)
    cumsum = np.cumsum(srt, axis=-1)
    k = np.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    support = (1 + k * srt > cumsum).sum(axis=-1, keepdims=True)
    tau = (np.take_along_axis(cumsum, support - 1, axis=-1) - 1) / support
    return np.maximum(z - tau, 0)


def sparsemax(x: ArrayLike, axis: int = -1) -> np.ndarray:
    r"""Sparsemax: the Euclidean projection of the scores onto the probability simplex.

    :math:`\operatorname{sparsemax}(x) = \arg\min_{p \in \Delta} \lVert p - x \rVert^2 = [x - \tau]_+`,
    computed exactly by sorting (Martins & Astudillo 2016, Algorithm 1).

    Parameters
    ----------
    x : array_like
        Real scores.
    axis : int, default -1
        The axis that sums to 1.

    Returns
    -------
    numpy.ndarray
        Non-negative weights summing to 1 along `axis`, often with exact zeros.

    Raises
    ------
    TypeError, ValueError
        For non-real `x` or a bad `axis`.

    Notes
    -----
    Sort the row descending, :math:`z_{(1)} \ge z_{(2)} \ge \dots`; the support size is the
    largest :math:`k` with :math:`1 + k z_{(k)} > \sum_{j \le k} z_{(j)}`, and
    :math:`\tau = (\sum_{j \le k} z_{(j)} - 1) / k`. Like softmax it is shift-invariant,
    so the row maximum is subtracted first.

    Examples
    --------
    >>> sparsemax([0.5, 0.0])
    array([0.75, 0.25])
    >>> sparsemax([2.0, 0.0, -1.0])  # a gap of 1 or more: one-hot
    array([1., 0., 0.])
    """
    return _along_last(x, axis, 1.0, _sparsemax_last)


def _entmax15_last(z: np.ndarray) -> np.ndarray:
    srt = -np.sort(-z, axis=-1)
    k = np.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    mean = np.cumsum(srt, axis=-1) / k
    mean_sq = np.cumsum(srt * srt, axis=-1) / k
    delta = (1 - k * (mean_sq - mean * mean)) / k
    tau = mean - np.sqrt(np.maximum(delta, 0))
    support = (tau <= srt).sum(axis=-1, keepdims=True)
    tau_star = np.take_along_axis(tau, support - 1, axis=-1)
    return np.maximum(z - tau_star, 0) ** 2


def entmax15(x: ArrayLike, axis: int = -1) -> np.ndarray:
    r"""1.5-entmax, computed exactly by sorting (Peters, Niculae & Martins 2019).

    :math:`p_i = [x_i / 2 - \tau]_+^2` with :math:`\tau` such that the weights sum to 1:
    between softmax (dense) and sparsemax (sparsest).

    Parameters
    ----------
    x : array_like
        Real scores.
    axis : int, default -1

    Returns
    -------
    numpy.ndarray
        Non-negative weights summing to 1 along `axis`.

    Raises
    ------
    TypeError, ValueError
        For non-real `x` or a bad `axis`.

    Notes
    -----
    With the halved, sorted scores :math:`z_{(j)}` and support size :math:`k`,
    :math:`\tau` solves :math:`\sum_{j \le k} (z_{(j)} - \tau)^2 = 1`:
    :math:`\tau_k = \bar z_k - \sqrt{(1 - k\,\sigma_k^2) / k}`, with :math:`\bar z_k`
    and :math:`\sigma_k^2` the mean and variance of the top :math:`k`.
    The support is the largest :math:`k` with :math:`\tau_k \le z_{(k)}`.

    Examples
    --------
    >>> entmax15([0.5, 0.0]).round(4)
    array([0.674, 0.326])
    >>> entmax15([3.0, 0.0, -1.0])
    array([1., 0., 0.])
    """
    return _along_last(x, axis, 0.5, _entmax15_last)


def _check_alpha_and_iterations(alpha: object, n_iter: object) -> tuple[float, int]:
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not math.isfinite(float(alpha)):
        raise TypeError(f"alpha must be a finite real number >= 1; got {alpha!r}")
    if alpha < 1:
        raise ValueError(f"alpha must be >= 1 (1 is softmax, 2 is sparsemax); got {alpha}")
    return float(alpha), check_int(n_iter, "n_iter", 1)


def entmax_bisect(x: ArrayLike, alpha: float = 1.5, axis: int = -1, n_iter: int = 50) -> np.ndarray:
    r""":math:`\alpha`-entmax for any :math:`\alpha \ge 1`, with the threshold found by bisection.

    :math:`p_i = [(\alpha - 1) x_i - \tau]_+^{1/(\alpha - 1)}`, with :math:`\tau` such that
    :math:`\sum_i p_i = 1` (Blondel et al. 2019; Peters et al. 2019).

    Parameters
    ----------
    x : array_like
        Real scores.
    alpha : float, default 1.5
        1 is softmax (computed as softmax), 1.5 is 1.5-entmax, 2 is sparsemax;
        larger values are sparser still.
    axis : int, default -1
    n_iter : int, default 50
        Bisection steps. Each halves the interval for :math:`\tau`, whose
        initial width is below 1; after 50 steps it is below 1e-15.

    Returns
    -------
    numpy.ndarray
        Non-negative weights, renormalized to sum to 1 along `axis`.

    Raises
    ------
    TypeError
        If `alpha` is not a finite real or `n_iter` not an int (or bad `x`, `axis`).
    ValueError
        If `alpha` < 1 or `n_iter` < 1, naming the argument.

    Notes
    -----
    With :math:`m` the row maximum of :math:`(\alpha - 1)x`, the largest weight alone is
    :math:`(m - \tau)^{1/(\alpha-1)}`, so :math:`\tau \in [m - 1,\ m - n^{1-\alpha}]`:
    at the left end the sum is at least 1, at the right end at most 1.

    Examples
    --------
    >>> entmax_bisect([0.5, 0.0], alpha=2.0).round(6)  # sparsemax
    array([0.75, 0.25])
    >>> bool(np.allclose(entmax_bisect([1.0, 2.0], alpha=1.0), softmax([1.0, 2.0])))
    True
    """
    a, steps = _check_alpha_and_iterations(alpha, n_iter)
    if a == 1.0:
        return softmax(x, axis=axis)
    power = 1.0 / (a - 1.0)

    def compute(z: np.ndarray) -> np.ndarray:
        n = z.shape[-1]
        lo = np.full(z.shape[:-1] + (1,), -1.0, dtype=z.dtype)  # the row max of z is 0
        width = 1.0 - n ** (1.0 - a)
        for _ in range(steps):
            width /= 2
            mid = lo + width
            total = (np.maximum(z - mid, 0) ** power).sum(axis=-1, keepdims=True)
            lo = np.where(total >= 1, mid, lo)
        p = np.maximum(z - (lo + width), 0) ** power
        return p / p.sum(axis=-1, keepdims=True)

    return _along_last(x, axis, a - 1.0, compute)


def sparsemax_backward(grad_output: ArrayLike, probs: ArrayLike, axis: int = -1) -> np.ndarray:
    r"""The gradient through sparsemax: :math:`J g` with :math:`J = \operatorname{Diag}(s) - s s^{\mathsf T} / |S|`.

    :math:`s` is the indicator of the support :math:`S = \{i : p_i > 0\}`, so
    :math:`(Jg)_i = s_i (g_i - \frac{1}{|S|}\sum_{j \in S} g_j)`: gradient flows only
    within the support.

    Parameters
    ----------
    grad_output : array_like
        The gradient with respect to the sparsemax output.
    probs : array_like
        The sparsemax output, same shape.
    axis : int, default -1

    Returns
    -------
    numpy.ndarray
        The gradient with respect to the scores.

    Raises
    ------
    TypeError, ValueError
        For non-real inputs, shapes that differ, or a bad axis.

    Examples
    --------
    >>> sparsemax_backward([1.0, 0.0, 5.0], [0.75, 0.25, 0.0])
    array([ 0.5, -0.5,  0. ])
    """
    g, p, ax = as_same_shape_pair(grad_output, probs, ("grad_output", "probs"), axis)
    support = (p > 0).astype(g.dtype)
    mean = (g * support).sum(axis=ax, keepdims=True) / support.sum(axis=ax, keepdims=True)
    return support * (g - mean)


def entmax15_backward(grad_output: ArrayLike, probs: ArrayLike, axis: int = -1) -> np.ndarray:
    r"""The gradient through 1.5-entmax: :math:`J g = s \odot g - \frac{\langle s, g\rangle}{\sum_j s_j} s`, :math:`s = \sqrt{p}`.

    Parameters
    ----------
    grad_output : array_like
        The gradient with respect to the 1.5-entmax output.
    probs : array_like
        The 1.5-entmax output, same shape.
    axis : int, default -1

    Returns
    -------
    numpy.ndarray
        The gradient with respect to the scores; 0 outside the support.

    Raises
    ------
    TypeError, ValueError
        For non-real inputs, shapes that differ, or a bad axis.

    Examples
    --------
    >>> entmax15_backward([1.0, 0.0, 5.0], [0.25, 0.25, 0.0])
    array([ 0.25, -0.25,  0.  ])
    """
    g, p, ax = as_same_shape_pair(grad_output, probs, ("grad_output", "probs"), axis)
    s = np.sqrt(np.maximum(p, 0))
    weighted = s * g
    return weighted - weighted.sum(axis=ax, keepdims=True) / s.sum(axis=ax, keepdims=True) * s


def entmax_alpha_backward(grad_output: ArrayLike, probs: ArrayLike, alpha: float, axis: int = -1) -> np.ndarray:
    r"""The gradient through α-entmax with respect to α itself, one number per row.

    Differentiating :math:`p_i = [(\alpha - 1) x_i - \tau]_+^{1/(\alpha - 1)}`, with
    :math:`\tau(\alpha)` fixed by :math:`\sum_i p_i = 1`, gives (Correia, Niculae & Martins
    2019, *Adaptively Sparse Transformers*, arXiv:1909.00015, Proposition 1)

    .. math::
        \frac{\partial p_i}{\partial \alpha}
        = \frac{p_i - \tilde s_i}{(\alpha - 1)^2}
        - \frac{p_i \ln p_i - \tilde s_i \sum_j p_j \ln p_j}{\alpha - 1},
        \qquad \tilde s = \frac{p^{2 - \alpha}}{\sum_j p_j^{2 - \alpha}} \text{ on the support},

    and the row's gradient is :math:`\sum_i g_i\, \partial p_i / \partial \alpha`. A
    learnable α shared by many rows (one per attention head) gets the sum over those rows.

    Parameters
    ----------
    grad_output : array_like
        The gradient with respect to the entmax output.
    probs : array_like
        The α-entmax output (e.g. from :func:`entmax_bisect`), same shape.
    alpha : float
        The α that produced `probs`; must be > 1 (at α = 1 the formula is a 0/0 limit).
    axis : int, default -1
        The axis along which `probs` sums to 1.

    Returns
    -------
    numpy.ndarray
        The gradient with respect to α of each row: the shape of `probs` without `axis`.

    Raises
    ------
    TypeError, ValueError
        For non-real inputs, shapes that differ, a bad axis, or alpha not > 1.

    Examples
    --------
    With α = 2 (sparsemax), :math:`\tilde s` is uniform on the support: for
    p = [0.75, 0.25], raising α moves weight to the first key.

    >>> p = entmax_bisect([0.5, 0.0], alpha=2.0)
    >>> round(float(entmax_alpha_backward([1.0, 0.0], p, alpha=2.0)), 4)
    0.1846
    """
    a, _ = _check_alpha_and_iterations(alpha, 1)
    if a == 1.0:
        raise ValueError("alpha must be > 1 for its gradient (at alpha = 1 the formula is a 0/0 limit)")
    g, p, ax = as_same_shape_pair(grad_output, probs, ("grad_output", "probs"), axis)
    positive = p > 0
    with np.errstate(divide="ignore", invalid="ignore"):  # 0 ln 0 and 0^(2 - α) are 0 off the support
        p_log_p = np.where(positive, p * np.log(np.where(positive, p, 1.0)), 0.0)
        s = np.where(positive, np.where(positive, p, 1.0) ** (2.0 - a), 0.0)
    s_hat = s / s.sum(axis=ax, keepdims=True)
    entropy_term = p_log_p - s_hat * p_log_p.sum(axis=ax, keepdims=True)
    dp_dalpha = (p - s_hat) / (a - 1.0) ** 2 - entropy_term / (a - 1.0)
    return (g * dp_dalpha).sum(axis=ax)


__all__ += ["entmax_alpha_backward"]
