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
from dataclasses import dataclass
from typing import Any, Iterator, NamedTuple, Sequence

import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_real_array, check_int, check_positive_finite
from .gradients import softmax_jacobian
from .softmax import log_softmax, softmax

__all__ = [
    "Arm",
    "RowGradients",
    "RowStats",
    "attention_row_stats",
    "dot_product_tail",
    "dot_product_variance",
    "init_retrieval_params",
    "learning_rate_sweep",
    "retrieval_batches",
    "retrieval_forward",
    "sample_attention_gradients",
    "sample_dot_products",
    "sample_scores",
    "scale_arms",
    "train_retrieval",
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


# --- lesson 08: a tiny attention model trained with several choices of the score scale ---------


@dataclass(frozen=True)
class Arm:
    r"""One way of setting the score scale of the retrieval model, by powers of :math:`d_k`.

    The scores of model ``n`` are :math:`c \cdot (q \cdot k_j)` with
    :math:`c = d_k^{-\text{c\_power}}`; :math:`W_q` and :math:`W_k` start with
    entries :math:`N(0, 1/d_\text{in}) \cdot d_k^{-\text{init\_power}}` and are
    trained with the learning rate :math:`\text{lr} \cdot d_k^{-\text{lr\_power}}`.

    Attributes
    ----------
    name : str
        A label for tables and legends.
    c_power : float, default 0
        0: no scaling (c = 1); 0.5: the usual :math:`1/\sqrt{d_k}`.
    init_power, lr_power : float, default 0
        Shrink the initialization or the learning rate of W_q and W_k.
    learnable : bool, default False
        c = exp(tau) with tau trained (started at ``-c_power * ln d_k``).
    qk_norm : bool, default False
        Replace q and k by :math:`\sqrt{d_k}\, q/|q|` and :math:`\sqrt{d_k}\, k/|k|`
        (RMS normalization without a learned gain) before the dot product.
    key_norm : bool, default False
        Replace only k by :math:`\sqrt{d_k}\, k/|k|`: every key gets the same
        length, while q keeps its own, so the scores are not bounded.

    Raises
    ------
    ValueError
        If both `qk_norm` and `key_norm` are set.

    Examples
    --------
    >>> Arm("keys only", c_power=0.5, key_norm=True).key_norm
    True
    """

    name: str
    c_power: float = 0.0
    init_power: float = 0.0
    lr_power: float = 0.0
    learnable: bool = False
    qk_norm: bool = False
    key_norm: bool = False

    def __post_init__(self) -> None:
        if self.qk_norm and self.key_norm:
            raise ValueError("key_norm normalizes the keys alone; it cannot be combined with qk_norm (which normalizes both)")


def scale_arms() -> list[Arm]:
    r"""The seven arms of lessons 08 and 08b, (a) to (g), in their order.

    (a) unscaled, (b) scaled by :math:`1/\sqrt{d_k}`, (c) init matched,
    (d) init and learning rate matched, (e) learnable c, (f) QK-norm,
    (g) keys only: both lessons train the same arms from this one list.

    Returns
    -------
    list of Arm
        A fresh list, in the lessons' order.

    Examples
    --------
    >>> [arm.name for arm in scale_arms()][:2]
    ['(a) unscaled', '(b) scaled']
    """
    return [
        Arm("(a) unscaled"),
        Arm("(b) scaled", c_power=0.5),
        Arm("(c) init matched", init_power=0.25),
        Arm("(d) init+lr matched", init_power=0.25, lr_power=0.25),
        Arm("(e) learnable c", learnable=True),
        Arm("(f) QK-norm", c_power=0.5, qk_norm=True),
        Arm("(g) keys only", c_power=0.5, key_norm=True),
    ]


def retrieval_batches(
    seed: int, *, batch: int = 32, n_keys: int = 32, d_in: int = 16, n_labels: int = 8
) -> Iterator[tuple[Any, Any, Any, Any]]:
    r"""An endless, seeded stream of batches of the retrieval task, as float64 torch tensors.

    Each example has `n_keys` keys :math:`x_j` with N(0, 1) components, a
    random label :math:`y_j` per key, a target position t and the query
    :math:`(x_t + \varepsilon)/\sqrt 2`, a noisy copy of key t with unit-variance components.

    Parameters
    ----------
    seed : int
        Seeds a private ``torch.Generator``: the same seed gives the same stream.
    batch, n_keys, d_in, n_labels : int
        Examples per batch, keys per example, components per key, labels.

    Yields
    ------
    x : torch.Tensor, shape (batch, n_keys, d_in)
    y : torch.Tensor of int64, shape (batch, n_keys)
    t : torch.Tensor of int64, shape (batch,)
    query : torch.Tensor, shape (batch, d_in)

    Examples
    --------
    >>> x, y, t, query = next(retrieval_batches(0, batch=4))
    >>> tuple(x.shape), tuple(y.shape), tuple(t.shape), tuple(query.shape), x.dtype
    ((4, 32, 16), (4, 32), (4,), (4, 16), torch.float64)
    """
    import torch

    sizes = [check_int(v, name, 1) for v, name in ((batch, "batch"), (n_keys, "n_keys"), (d_in, "d_in"), (n_labels, "n_labels"))]
    batch, n_keys, d_in, n_labels = sizes
    gen = torch.Generator().manual_seed(check_int(seed, "seed", 0))
    while True:
        # Drawn in float32 (twice as fast) and widened exactly to float64.
        x = torch.randn(batch, n_keys, d_in, generator=gen).double()
        y = torch.randint(n_labels, (batch, n_keys), generator=gen)
        t = torch.randint(n_keys, (batch,), generator=gen)
        noise = torch.randn(batch, d_in, generator=gen).double()
        yield x, y, t, (x[torch.arange(batch), t] + noise) / math.sqrt(2)


def init_retrieval_params(d_k: int, seed: int, *, d_in: int = 16, n_labels: int = 8) -> tuple[Any, Any, Any]:
    """W_q, W_k (d_in, d_k), entries N(0, 1/d_in), and label embeddings (n_labels, d_in), float64, from `seed`.

    Examples
    --------
    >>> w_q, w_k, labels = init_retrieval_params(64, 0)
    >>> tuple(w_q.shape), tuple(labels.shape), round(float(w_q.var() * 16), 1)
    ((16, 64), (8, 16), 1.0)
    """
    import torch

    d, d_in, n_labels = check_int(d_k, "d_k", 1), check_int(d_in, "d_in", 1), check_int(n_labels, "n_labels", 1)
    gen = torch.Generator().manual_seed(check_int(seed, "seed", 0))
    w_q = torch.randn(d_in, d, generator=gen, dtype=torch.float64) / math.sqrt(d_in)
    w_k = torch.randn(d_in, d, generator=gen, dtype=torch.float64) / math.sqrt(d_in)
    labels = torch.randn(n_labels, d_in, generator=gen, dtype=torch.float64) / math.sqrt(d_in)
    return w_q, w_k, labels


def retrieval_forward(
    w_q: Any, w_k: Any, labels: Any, c: Any, qk_norm: Any, batch: tuple[Any, Any, Any, Any], *, key_norm: Any = None
) -> dict[str, Any]:
    r"""The retrieval model for a stack of n models: losses, attention weights and scores.

    Model n scores key j by :math:`c_n\,(\text{query}\,W_q)\cdot(x_j W_k)`, with q and
    k RMS-normalized first where ``qk_norm[n]``, and k alone where ``key_norm[n]``; it averages the label embeddings
    :math:`e_{y_j}` with the softmax weights, compares the result with every label
    embedding (the logits) and takes the cross-entropy with the target's label.

    Parameters
    ----------
    w_q, w_k : torch.Tensor, shape (n, d_in, d_k)
    labels : torch.Tensor, shape (n, n_labels, d_in)
    c : torch.Tensor, shape (n,)
        The factor multiplying each model's scores.
    qk_norm : torch.Tensor of bool, shape (n,)
    batch : tuple (x, y, t, query)
        Shapes (m, B, S, d_in), (m, B, S), (m, B), (m, B, d_in), where m divides n:
        model i sees batch ``i % m`` (m = n gives every model its own batch;
        sharing the batches of m seeds among n / m arms saves copying them).
    key_norm : torch.Tensor of bool, shape (n,), optional
        RMS-normalize the keys only (never together with `qk_norm`). None: no model does.

    Returns
    -------
    dict
        ``loss`` (n,), the mean cross-entropy per model; ``weights`` and
        ``scores`` (n, B, S); ``logits`` (n, B, n_labels); ``target`` (n, B).

    Raises
    ------
    ValueError
        If the batch's leading dimension does not divide n, or a model has both
        `qk_norm` and `key_norm`.

    Notes
    -----
    :math:`(\text{query}\,W_q)\cdot(x_j W_k) = (\text{query}\,W_q W_k^T)\cdot x_j`:
    the keys are never projected (:math:`W_q W_k^T` is only d_in x d_in), and
    :math:`|x_j W_k|^2 = x_j (W_k W_k^T) x_j^T` gives the norms QK-norm needs.
    Same numbers, far fewer multiplications.
    """
    import torch
    import torch.nn.functional as F

    x, y, t, query = batch
    n, m, b = w_q.shape[0], t.shape[0], t.shape[1]
    if m < 1 or n % m:
        raise ValueError(f"the batch's leading dimension ({m}) must divide the number of models ({n})")
    arms, n_keys, d_in = n // m, x.shape[-2], x.shape[-1]
    d_k = w_q.shape[-1]
    qa = query.repeat(arms, 1, 1) @ (w_q @ w_k.transpose(1, 2))  # (n, B, d_in): query W_q W_k^T, 16 x 16 per model
    # q . k_j = x_j . qa for every key, as one batched product per example, shared by the models that see it.
    by_example = qa.view(arms, m, b, d_in).permute(1, 2, 3, 0).reshape(m * b, d_in, arms)
    raw = (x.reshape(m * b, n_keys, d_in) @ by_example).view(m, b, n_keys, arms).permute(3, 0, 1, 2).reshape(n, b, n_keys)
    scores = raw

    if key_norm is None:
        key_norm = torch.zeros_like(qk_norm)
    elif bool((key_norm & qk_norm).any()):
        raise ValueError("key_norm and qk_norm must not both be set for a model")
    normed = qk_norm | key_norm
    if bool(normed.any()):  # only the normalized models pay for the norms
        idx = normed.nonzero()[:, 0]
        xs, qs = x[idx % m], query[idx % m]
        gram_q = w_q[idx] @ w_q[idx].transpose(1, 2)  # |q|^2 = query (W_q W_q^T) query^T
        gram_k = w_k[idx] @ w_k[idx].transpose(1, 2)
        q_sq = ((qs @ gram_q) * qs).sum(dim=-1)
        k_sq = ((xs.flatten(1, 2) @ gram_k).view(xs.shape) * xs).sum(dim=-1)
        # QK-norm: (sqrt(d_k) q / |q|) . (sqrt(d_k) k / |k|); keys only: q . (sqrt(d_k) k / |k|), |q|^2 -> d_k
        both = qk_norm[idx][:, None, None]
        normalized = raw[idx] * d_k / torch.where(both, q_sq[..., None] * k_sq, d_k * k_sq).sqrt()
        scores = raw.index_put((idx,), normalized)
    scores = scores * c[:, None, None]
    weights = torch.softmax(scores, dim=-1)
    label_weights = torch.zeros(n, b, labels.shape[1], dtype=weights.dtype).scatter_add(-1, y.repeat(arms, 1, 1), weights)
    logits = label_weights @ labels @ labels.transpose(1, 2)
    target = y[torch.arange(m)[:, None], torch.arange(b)[None, :], t].repeat(arms, 1)
    loss = F.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="none").view(n, b).mean(dim=1)
    return {"loss": loss, "weights": weights, "scores": scores, "logits": logits, "target": target}


def train_retrieval(
    arms: Sequence[Arm],
    d_k: int,
    seeds: Sequence[int],
    *,
    steps: int,
    lr: float = 3e-3,
    batch: int = 32,
    n_keys: int = 32,
    d_in: int = 16,
    n_labels: int = 8,
    eps: float = 1e-8,
    progress: Any = None,
) -> dict[str, np.ndarray]:
    """Train one retrieval model per (arm, seed), all at once, in float64, and record their curves.

    For a given seed every arm starts from the same weights (then shrunk by its
    `init_power`) and sees the same batches, so differences between arms on a
    seed come from the arm alone. Models are stacked on a leading axis; each
    model's loss depends only on its own slice, so the gradient of the summed
    loss gives every model its own gradient, and Adam (``torch.optim.Adam``,
    Kingma and Ba 2015, arXiv:1412.6980) treats every number apart. An arm's
    learning-rate factor multiplies its models' Adam steps of W_q and W_k.

    Parameters
    ----------
    arms : sequence of Arm
    d_k : int
        The length of queries and keys, >= 1.
    seeds : sequence of int
    steps : int
        Adam steps, >= 1.
    lr : float, default 3e-3
        The base learning rate (finite, > 0).
    batch, n_keys, d_in, n_labels : int
        The task's sizes (see :func:`retrieval_batches`).
    eps : float, default 1e-8
        Adam's epsilon (>= 0), as in ``torch.optim.Adam``.
    progress : object, optional
        Anything with an int attribute ``value`` (an ``ipywidgets.IntProgress``
        from 0 to 100): set to the percentage of the steps done, whenever that changes.

    Returns
    -------
    dict of numpy.ndarray, each of shape (steps, len(arms), len(seeds))
        ``loss``; ``entropy`` (mean over the batch, nats);
        ``spread``, the standard deviation over the keys of the scores that
        enter the softmax, averaged over the batch; ``c``, the factor on the
        scores.
        Recorded before each step's update.

    Raises
    ------
    TypeError, ValueError
        For a non-Arm, no arm or seed, or bad sizes, steps or learning rate.

    Examples
    --------
    >>> arms = [Arm("unscaled"), Arm("scaled", c_power=0.5)]
    >>> run = train_retrieval(arms, 64, [0], steps=3)
    >>> run["loss"].shape, run["c"][0, :, 0].round(4).tolist()
    ((3, 2, 1), [1.0, 0.125])
    """
    import torch

    if not arms or not all(isinstance(a, Arm) for a in arms):
        raise TypeError("arms must be a non-empty sequence of Arm")
    if not seeds:
        raise ValueError("seeds must not be empty")
    d, n_steps = check_int(d_k, "d_k", 1), check_int(steps, "steps", 1)
    base_lr = check_positive_finite(lr, "lr")
    adam_eps = 0.0 if eps == 0 else check_positive_finite(eps, "eps")
    sizes = {"batch": batch, "n_keys": n_keys, "d_in": d_in, "n_labels": n_labels}
    n_arms, n_seeds = len(arms), len(seeds)
    n = n_arms * n_seeds  # model i is arm i // n_seeds with seed i % n_seeds
    per_model = [arm for arm in arms for _ in seeds]
    inits = [init_retrieval_params(d, seed, d_in=d_in, n_labels=n_labels) for seed in seeds]
    gain = torch.tensor([d ** -arm.init_power for arm in per_model], dtype=torch.float64)[:, None, None]
    w_q = (torch.stack([inits[i % n_seeds][0] for i in range(n)]) * gain).requires_grad_()
    w_k = (torch.stack([inits[i % n_seeds][1] for i in range(n)]) * gain).requires_grad_()
    labels = torch.stack([inits[i % n_seeds][2] for i in range(n)]).requires_grad_()
    log_c = torch.tensor([-arm.c_power * math.log(d) for arm in per_model], dtype=torch.float64)
    learnable = torch.tensor([arm.learnable for arm in per_model]).nonzero()[:, 0]
    # Only the learnable factors are Adam parameters: a fixed one has gradient 0, and with eps = 0
    # Adam's step for it would be 0 / 0 = nan.
    tau = log_c[learnable].clone().requires_grad_()
    qk_norm = torch.tensor([arm.qk_norm for arm in per_model])
    key_norm = torch.tensor([arm.key_norm for arm in per_model])
    lr_gain = torch.tensor([d ** -arm.lr_power for arm in per_model], dtype=torch.float64)[:, None, None]
    slow = (lr_gain != 1).flatten().nonzero()[:, 0]  # the models whose W_q, W_k have their own learning rate
    rescale = len(slow) > 0
    params = [w_q, w_k, labels] + ([tau] if len(learnable) else [])
    optimizer = torch.optim.Adam(params, lr=base_lr, eps=adam_eps, fused=True)  # fused: one kernel, same algorithm
    streams = [retrieval_batches(seed, **sizes) for seed in seeds]
    keys = ("loss", "entropy", "spread", "c")
    history = {key: torch.zeros(n_steps, n, dtype=torch.float64) for key in keys}
    for step in range(n_steps):
        parts = [next(stream) for stream in streams]
        data = tuple(torch.stack([p[i] for p in parts]) for i in range(4))  # shared by the arms
        c = log_c.index_put((learnable,), tau).exp()
        out = retrieval_forward(w_q, w_k, labels, c, qk_norm, data, key_norm=key_norm)
        for p in params:
            p.grad = None
        out["loss"].sum().backward()
        with torch.no_grad():
            history["loss"][step] = out["loss"]
            history["entropy"][step] = torch.special.entr(out["weights"]).sum(dim=-1).mean(dim=1)
            history["spread"][step] = out["scores"].std(dim=-1).mean(dim=1)
            history["c"][step] = c
        before = [w_q.detach()[slow].clone(), w_k.detach()[slow].clone()] if rescale else []
        optimizer.step()
        with torch.no_grad():  # a learning rate per model for W_q, W_k: scale those models' Adam steps
            for w, old in zip((w_q, w_k), before):
                w[slow] = old + (w[slow] - old) * lr_gain[slow]
        done = (step + 1) * 100 // n_steps
        if progress is not None and done != progress.value:
            progress.value = done
    return {key: h.view(n_steps, n_arms, n_seeds).numpy() for key, h in history.items()}


class _Share:
    """Part `index` of `parts` equal parts of a progress bar: its value 0-100 maps into the bar's."""

    def __init__(self, bar: Any, index: int, parts: int) -> None:
        self.bar, self.index, self.parts, self.value_here = bar, index, parts, 0

    @property
    def value(self) -> int:
        return self.value_here

    @value.setter
    def value(self, percent: int) -> None:
        self.value_here = percent
        overall = (self.index * 100 + percent) // self.parts
        if overall != self.bar.value:
            self.bar.value = overall


def learning_rate_sweep(
    arms: Sequence[Arm],
    d_k: int,
    seeds: Sequence[int],
    lrs: Sequence[float],
    *,
    steps: int,
    final_steps: int | None = None,
    progress: Any = None,
) -> dict[str, np.ndarray]:
    """Train the same arms and seeds at several learning rates and keep each run's final loss and c.

    One :func:`train_retrieval` per rate, so at every rate each seed's arms share
    their weights and batches, and the runs at different rates share them too.

    Parameters
    ----------
    arms, d_k, seeds
        As in :func:`train_retrieval`.
    lrs : sequence of float
        The base learning rates, each finite and > 0 (at least one).
    steps : int
        Adam steps per run, >= 1.
    final_steps : int, optional
        The final loss is the mean over the last `final_steps` steps, 1 to
        `steps`; by default ``max(1, steps // 8)`` (50 of 400).
    progress : object, optional
        As in :func:`train_retrieval` (an ``ipywidgets.IntProgress`` from 0 to
        100), for all the runs together: set to the percentage done over every rate.

    Returns
    -------
    dict of numpy.ndarray
        ``lr``, shape (len(lrs),); ``final``, the final losses, and ``c``, the
        factor on the scores at the last step, both of shape
        (len(lrs), len(arms), len(seeds)).

    Raises
    ------
    TypeError, ValueError
        For the bad arguments of :func:`train_retrieval`, an empty `lrs`, a
        rate that is not finite and > 0, or `final_steps` outside 1 to `steps`.

    Examples
    --------
    >>> sweep = learning_rate_sweep([Arm("scaled", c_power=0.5)], 16, [0], [1e-3, 4e-3], steps=8)
    >>> sweep["final"].shape, sweep["lr"].tolist()
    ((2, 1, 1), [0.001, 0.004])
    """
    if isinstance(lrs, (str, bytes)) or not isinstance(lrs, Sequence) or not lrs:
        raise TypeError(f"lrs must be a non-empty sequence of learning rates; got {lrs!r}")
    rates = [check_positive_finite(lr, f"lrs[{i}]") for i, lr in enumerate(lrs)]
    n_steps = check_int(steps, "steps", 1)
    window = max(1, n_steps // 8) if final_steps is None else check_int(final_steps, "final_steps", 1)
    if window > n_steps:
        raise ValueError(f"final_steps must be <= steps ({n_steps}); got {window}")
    if progress is not None and not hasattr(progress, "value"):
        raise TypeError(f"progress must have an int attribute value (an ipywidgets.IntProgress); got {progress!r}")
    final, c_end = [], []
    for i, lr in enumerate(rates):
        part = None if progress is None else _Share(progress, i, len(rates))
        run = train_retrieval(arms, d_k, seeds, steps=n_steps, lr=lr, progress=part)
        final.append(run["loss"][-window:].mean(axis=0))
        c_end.append(run["c"][-1])
    return {"lr": np.array(rates), "final": np.stack(final), "c": np.stack(c_end)}
