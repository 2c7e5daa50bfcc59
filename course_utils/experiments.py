"""The √d_k experiment: random queries and keys, their dot products, and what softmax makes of them.

Vaswani et al. (2017, footnote 4) motivate dividing attention scores by
:math:`\\sqrt{d_k}`: if the components of a query ``q`` and a key ``k`` are
independent with mean 0 and variance 1, then ``q·k`` has mean 0 and variance
``d_k``. The functions here generate the data that lets lesson 03 measure
this instead of taking it on trust:

* :func:`sample_dot_products` and :func:`dot_product_variance` draw ``q·k``
  for vectors with N(0, 1) components, or for the same vectors scaled to
  unit norm;
* :func:`dot_product_tail` gives the exact probability of a large ``|q·k|``,
  for events too rare to sample;
* :func:`sample_scores` draws rows of attention scores and
  :func:`attention_row_stats` summarizes what softmax does to them.

Every random number comes from the ``numpy.random.Generator`` passed in, so a
seeded generator gives the same data on every machine.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_real_array, check_int, check_positive_finite
from .gradients import softmax_jacobian
from .softmax import log_softmax, softmax

__all__ = [
    "RowGradients",
    "RowStats",
    "attention_row_stats",
    "dot_product_tail",
    "dot_product_variance",
    "sample_attention_gradients",
    "sample_dot_products",
    "sample_scores",
]

# Vectors are drawn in blocks of at most this many numbers (8 MB of float64),
# so a million samples in d_k = 1024 never need gigabytes at once.
_BLOCK = 2**20


def _check_rng(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"rng must be a numpy.random.Generator (e.g. from course_utils.setup()); got {type(rng).__name__}"
        )
    return rng


def sample_dot_products(
    d_k: int, n_samples: int, rng: np.random.Generator, *, unit_norm: bool = False
) -> np.ndarray:
    """Draw `n_samples` dot products ``q·k`` of independent random vectors of length `d_k`.

    Parameters
    ----------
    d_k : int
        The length of each query and key, >= 1.
    n_samples : int
        How many independent pairs (q, k) to draw, >= 1.
    rng : numpy.random.Generator
        The source of every random number.
    unit_norm : bool, default False
        False: the components of q and k are independent N(0, 1).
        True: each vector is then divided by its length, so q and k are
        uniformly random directions with ``|q| = |k| = 1``.

    Returns
    -------
    numpy.ndarray, shape (n_samples,)
        The dot products, float64.

    Raises
    ------
    TypeError
        If `d_k` or `n_samples` is not an int, or `rng` is not a Generator.
    ValueError
        If `d_k` or `n_samples` is < 1.

    Notes
    -----
    Pairs are drawn in blocks; within a block, all queries are drawn first,
    then all keys. With N(0, 1) components ``q·k`` has mean 0 and variance
    `d_k`; for unit vectors it has mean 0 and variance ``1 / d_k``, and
    ``|q·k| <= 1`` always (Cauchy-Schwarz).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = sample_dot_products(64, 20_000, rng)
    >>> round(float(x.var()) / 64, 1)  # Var(q·k) = d_k
    1.0
    >>> u = sample_dot_products(64, 20_000, rng, unit_norm=True)
    >>> round(float(u.var()) * 64, 1), bool(np.abs(u).max() <= 1)  # Var = 1/d_k
    (1.0, True)
    """
    d = check_int(d_k, "d_k", 1)
    n = check_int(n_samples, "n_samples", 1)
    rng = _check_rng(rng)
    if not isinstance(unit_norm, (bool, np.bool_)):
        raise TypeError(f"unit_norm must be a bool; got {type(unit_norm).__name__} {unit_norm!r}")
    out = np.empty(n)
    rows = max(1, _BLOCK // d)
    for start in range(0, n, rows):
        m = min(rows, n - start)
        q = rng.standard_normal((m, d))
        k = rng.standard_normal((m, d))
        if unit_norm:
            q /= np.linalg.norm(q, axis=-1, keepdims=True)
            k /= np.linalg.norm(k, axis=-1, keepdims=True)
        # einsum's own loop, not BLAS: the same sums whatever the number of threads.
        out[start : start + m] = np.einsum("ij,ij->i", q, k)
    return out


def dot_product_variance(
    d_k: int,
    n_samples: int,
    rng: np.random.Generator,
    *,
    unit_norm: bool = False,
    scale: float | None = None,
) -> float:
    r"""The sample variance of ``q·k`` (or of ``q·k / scale``) over `n_samples` random pairs.

    Parameters
    ----------
    d_k : int
        The length of each vector, >= 1.
    n_samples : int
        How many pairs to draw, >= 2.
    rng : numpy.random.Generator
        The source of every random number.
    unit_norm : bool, default False
        Normalize q and k to length 1 (see :func:`sample_dot_products`).
    scale : float, optional
        If given (finite, > 0), each dot product is divided by it first,
        e.g. ``scale=np.sqrt(d_k)`` as in attention.

    Returns
    -------
    float
        The sample variance (``ddof=1``) of the dot products.

    Raises
    ------
    TypeError, ValueError
        For the bad arguments of :func:`sample_dot_products`, ``n_samples < 2``,
        or a `scale` that is not finite and > 0.

    Notes
    -----
    For independent components with mean 0 and variance 1,
    :math:`\operatorname{Var}(q \cdot k) = \sum_i E[q_i^2]\,E[k_i^2] = d_k`, so
    :math:`\operatorname{Var}(q \cdot k / \sqrt{d_k}) = 1` (Vaswani et al. 2017,
    footnote 4). The relative sampling error of the estimate is about
    :math:`\sqrt{2 / n}`: 3% for 2,000 samples.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> round(dot_product_variance(256, 20_000, rng, scale=16.0), 1)  # 256 / 16**2
    1.0
    """
    check_int(n_samples, "n_samples", 2)
    divisor = None if scale is None else check_positive_finite(scale, "scale")
    x = sample_dot_products(d_k, n_samples, rng, unit_norm=unit_norm)
    if divisor is not None:
        x /= divisor
    return float(x.var(ddof=1))


def dot_product_tail(d_k: int, threshold: float) -> float:
    r"""The exact probability that ``|q·k| >= threshold`` for q, k with independent N(0, 1) components.

    Parameters
    ----------
    d_k : int
        The length of each vector, >= 1.
    threshold : float
        Finite and >= 0.

    Returns
    -------
    float
        :math:`P(|q \cdot k| \ge t)`, accurate to about 10 significant digits,
        also far in the tail where sampling would see nothing.

    Raises
    ------
    TypeError
        If `d_k` is not an int or `threshold` is not a real number.
    ValueError
        If `d_k` < 1 or `threshold` is negative or not finite.

    Notes
    -----
    Rotate the coordinates so that k points along the first axis: q keeps
    independent N(0, 1) components, and ``q·k = |k| q_1``. So, given
    ``|k| = r``, ``q·k`` is normal with standard deviation r, and

    .. math:: P(|q \cdot k| \ge t) = E_r\left[\operatorname{erfc}\left(\frac{t}{\sqrt{2}\,r}\right)\right],

    where r has the chi distribution with d_k degrees of freedom. The
    expectation is a smooth one-dimensional integral, computed with the
    trapezoidal rule on a fine grid. It is not a Gaussian approximation: the
    tails of ``q·k`` are much heavier than those of a normal with the same
    variance (for ``d_k = 2``, ``q·k`` is Laplace: ``P = exp(-t)``).

    Examples
    --------
    >>> round(dot_product_tail(2, 1.0), 6), round(float(np.exp(-1.0)), 6)
    (0.367879, 0.367879)
    >>> f"{dot_product_tail(64, 50.0):.2e}"  # |q·k| >= 50 when d_k = 64: rare
    '1.25e-08'
    """
    d = check_int(d_k, "d_k", 1)
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
        raise TypeError(f"threshold must be a real number; got {type(threshold).__name__} {threshold!r}")
    t = float(threshold)
    if not math.isfinite(t) or t < 0:
        raise ValueError(f"threshold must be finite and >= 0; got {t!r}")
    if t == 0:
        return 1.0
    # The chi density is negligible beyond sqrt(d) + 40 (its spread is below 1).
    r = np.linspace(0.0, math.sqrt(d) + 40.0, 20_001)[1:]
    log_density = (d - 1) * np.log(r) - r**2 / 2 - (d / 2 - 1) * math.log(2) - math.lgamma(d / 2)
    erfc = np.array([math.erfc(v) for v in t / (math.sqrt(2) * r)])
    integrand = erfc * np.exp(log_density)
    step = r[1] - r[0]
    # The integrand vanishes at r = 0 (erfc(inf) = 0), which the grid leaves out.
    return float(min(1.0, step * (integrand.sum() - integrand[-1] / 2)))


def sample_scores(
    d_k: int, n_keys: int, n_rows: int, rng: np.random.Generator, *, scaled: bool = False
) -> np.ndarray:
    """Draw `n_rows` rows of attention scores: one query against `n_keys` keys per row.

    Parameters
    ----------
    d_k : int
        The length of each query and key, >= 1.
    n_keys : int
        Keys per row (the length of the row softmax normalizes), >= 1.
    n_rows : int
        Rows, each with its own query and its own keys, >= 1.
    rng : numpy.random.Generator
        The source of every random number.
    scaled : bool, default False
        Divide the scores by ``sqrt(d_k)``, as scaled dot-product attention does.

    Returns
    -------
    numpy.ndarray, shape (n_rows, n_keys)
        ``scores[r, j] = q_r · k_{r,j}`` (divided by ``sqrt(d_k)`` if `scaled`).

    Raises
    ------
    TypeError
        If a count is not an int, `rng` is not a Generator or `scaled` is not a bool.
    ValueError
        If a count is < 1.

    Notes
    -----
    Every component is N(0, 1). All queries, shape ``(n_rows, d_k)``, are
    drawn first, then all keys, shape ``(n_rows, n_keys, d_k)``; the rows are
    independent. Memory: ``n_rows * n_keys * d_k`` floats.

    Examples
    --------
    >>> scores = sample_scores(1024, 16, 200, np.random.default_rng(0))
    >>> scores.shape, round(float(scores.std()))  # about sqrt(1024) = 32
    ((200, 16), 32)
    >>> scaled = sample_scores(1024, 16, 200, np.random.default_rng(0), scaled=True)
    >>> bool(np.allclose(scaled, scores / 32))
    True
    """
    d = check_int(d_k, "d_k", 1)
    n_k = check_int(n_keys, "n_keys", 1)
    n_r = check_int(n_rows, "n_rows", 1)
    rng = _check_rng(rng)
    if not isinstance(scaled, (bool, np.bool_)):
        raise TypeError(f"scaled must be a bool; got {type(scaled).__name__} {scaled!r}")
    queries = rng.standard_normal((n_r, d))
    keys = rng.standard_normal((n_r, n_k, d))
    scores = np.einsum("rd,rkd->rk", queries, keys)
    if scaled:
        scores /= math.sqrt(d)
    return scores


class RowStats(NamedTuple):
    """How peaked a batch of attention rows is, averaged over the rows.

    Attributes
    ----------
    max_weight : float
        The mean of each row's largest weight: 1/n for uniform rows, 1 for one-hot.
    entropy : float
        The mean entropy in nats, ``-sum(p log p)``: ln n for uniform rows, 0 for one-hot.
    jacobian_norm : float
        The mean Frobenius norm of each row's softmax Jacobian
        ``diag(p) - p p^T``: ``sqrt(n - 1) / n`` for uniform rows, 0 for one-hot.
    """

    max_weight: float
    entropy: float
    jacobian_norm: float


def attention_row_stats(scores: ArrayLike) -> RowStats:
    """Apply softmax along the last axis of `scores` and summarize how peaked the rows are.

    Parameters
    ----------
    scores : array_like, shape (..., n)
        Finite real scores; every leading index is one row.

    Returns
    -------
    RowStats
        The mean largest weight, mean entropy (nats) and mean Frobenius norm
        of the softmax Jacobian over all rows, as floats.

    Raises
    ------
    TypeError
        If `scores` is not real.
    ValueError
        If `scores` has no dimensions, an empty last axis, or a value that is not finite.

    Notes
    -----
    The entropy uses :func:`~course_utils.log_softmax`, so a weight that
    underflows to 0 contributes exactly ``0 * (large negative) = 0`` rather
    than ``0 * log(0) = nan``. The Jacobian is the factor by which softmax
    passes on every gradient that flows back through it; when a row saturates
    (one weight near 1), all its entries are near 0.

    Examples
    --------
    >>> stats = attention_row_stats(np.zeros((3, 4)))  # uniform rows
    >>> [round(v, 4) for v in stats]  # 1/4, ln 4, sqrt(3)/4
    [0.25, 1.3863, 0.433]
    >>> [round(v, 4) for v in attention_row_stats([[100.0, 0.0, 0.0, 0.0]])]  # saturated
    [1.0, 0.0, 0.0]
    """
    x = as_real_array(scores, "scores").astype(np.float64, copy=False)
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"scores must have a non-empty last axis (the keys); got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("scores must be finite; a masked (-inf) score has no place in these statistics")
    rows = x.reshape(-1, x.shape[-1])
    p = softmax(rows, axis=-1)
    with np.errstate(under="ignore"):
        entropy = -(p * log_softmax(rows, axis=-1)).sum(axis=-1)
    jac_norm = np.linalg.norm(softmax_jacobian(p), ord="fro", axis=(-2, -1))
    return RowStats(float(p.max(axis=-1).mean()), float(entropy.mean()), float(jac_norm.mean()))


class RowGradients(NamedTuple):
    """The size of the gradient that reaches the query and the keys of each attention row.

    Attributes
    ----------
    query : numpy.ndarray, shape (n_rows,)
        The length of :math:`\\partial L / \\partial q`, one per row.
    keys : numpy.ndarray, shape (n_rows,)
        The length of :math:`\\partial L / \\partial K`, all ``n_keys * d_k`` entries taken as one vector.
    """

    query: np.ndarray
    keys: np.ndarray


def sample_attention_gradients(
    d_k: int, n_keys: int, n_rows: int, rng: np.random.Generator, *, scaled: bool, d_v: int = 16
) -> RowGradients:
    r"""Draw the gradient sizes :math:`|\partial L/\partial q|` and :math:`|\partial L/\partial K|` of random attention rows.

    Each row has a query q and `n_keys` keys with independent N(0, 1)
    components, values :math:`v_j` with `d_v` N(0, 1) components, and an
    upstream gradient :math:`g = \partial L / \partial o` with N(0, 1/d_v)
    components (so that :math:`g \cdot v_j` has variance 1). The scores are
    :math:`s_j = c\, q \cdot k_j` with :math:`c = 1/\sqrt{d_k}` if `scaled`, else 1.

    Parameters
    ----------
    d_k, n_keys, n_rows : int
        >= 1 (``d_k >= 2``).
    rng : numpy.random.Generator
    scaled : bool
    d_v : int, default 16

    Returns
    -------
    RowGradients
        The two lengths for every row, float64.

    Notes
    -----
    The result has exactly the distribution of the norms of
    :func:`~course_utils.attention_backward` on such rows (the tests check
    it), but it draws ``2 * n_keys + 3`` numbers per row instead of the
    ``(n_keys + 1)(d_k + d_v)`` of q, K, V and g, so any d_k costs the same.
    Rotate the axes so
    that q points along the first one (a rotation changes no dot product and
    no length): :math:`q = |q| e_1` with :math:`|q|^2 \sim \chi^2_{d_k}`, and
    :math:`s_j = c |q| a_j` with :math:`a_j = k_{j1} \sim N(0, 1)`. Given g,
    the :math:`dp_j = g \cdot v_j` are independent :math:`N(0, |g|^2)`, and
    :math:`ds = p \odot (dp - \langle p, dp \rangle)`. Then

    .. math::

        \partial L / \partial k_j = c\, ds_j\, q, \qquad
        |\partial L / \partial K|^2 = c^2 |q|^2 \sum_j ds_j^2, \\
        \partial L / \partial q = c \sum_j ds_j k_j, \qquad
        |\partial L / \partial q|^2 = c^2 \Big[\big(\sum_j ds_j a_j\big)^2 + \chi^2_{d_k - 1} \sum_j ds_j^2\Big],

    because the other :math:`d_k - 1` components of the keys are independent
    N(0, 1), independent of everything else, so that :math:`\sum_j ds_j k_{j\perp}`
    is normal with variance :math:`\sum_j ds_j^2` in each of its :math:`d_k - 1` directions.

    Examples
    --------
    >>> g = sample_attention_gradients(64, 16, 1000, np.random.default_rng(0), scaled=True)
    >>> g.query.shape, bool((g.query > 0).all())
    ((1000,), True)
    """
    d = check_int(d_k, "d_k", 2)
    n_k, n_r, dv = check_int(n_keys, "n_keys", 1), check_int(n_rows, "n_rows", 1), check_int(d_v, "d_v", 1)
    rng = _check_rng(rng)
    if not isinstance(scaled, (bool, np.bool_)):
        raise TypeError(f"scaled must be a bool; got {type(scaled).__name__} {scaled!r}")
    c = 1 / math.sqrt(d) if scaled else 1.0
    q_len = np.sqrt(rng.chisquare(d, n_r))
    a = rng.standard_normal((n_r, n_k))
    g_len = np.sqrt(rng.chisquare(dv, n_r) / dv)
    dp = g_len[:, None] * rng.standard_normal((n_r, n_k))
    p = softmax(c * q_len[:, None] * a, axis=-1)
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
    ds_sq = (ds * ds).sum(axis=-1)
    along = (ds * a).sum(axis=-1)
    across = rng.chisquare(d - 1, n_r) * ds_sq
    return RowGradients(c * np.sqrt(along**2 + across), c * q_len * np.sqrt(ds_sq))
