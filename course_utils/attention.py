"""Scaled dot-product attention in NumPy, with masks and two statistics of attention rows.

Mask convention, as in ``torch.nn.functional.scaled_dot_product_attention``:
a **bool** mask says where a query *may* attend (True = attend); a **float**
mask is *added* to the scores (0 keeps a score, ``-inf`` removes it).
A query that may attend to nothing gets zero weights and a zero output, as
SDPA returns in torch 2.13 (``torch.softmax`` and ``nn.MultiheadAttention``
give NaN there instead).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_real_array, check_int, check_positive_finite
from .softmax import softmax

__all__ = [
    "attention_distance",
    "attention_entropy",
    "causal_mask",
    "padding_mask",
    "scaled_dot_product_attention",
]


def causal_mask(n_q: int, n_k: int | None = None, *, align: str = "upper-left") -> np.ndarray:
    """A bool mask letting query ``i`` attend to keys ``0..i`` (True = attend).

    Parameters
    ----------
    n_q : int
        Number of queries (rows), >= 0.
    n_k : int, optional
        Number of keys (columns), >= 0; defaults to `n_q`.
    align : {"upper-left", "lower-right"}, default "upper-left"
        Which corner the diagonal starts from when ``n_q != n_k``.
        ``"upper-left"`` is torch's ``is_causal=True``: query ``i`` sees keys
        ``0..i``. ``"lower-right"`` is the KV-cache convention of
        FlashAttention >= 2.1: the last query sees every key, query ``i`` sees
        keys ``0..i + n_k - n_q``, as when ``n_q`` new tokens follow
        ``n_k - n_q`` cached ones.

    Returns
    -------
    numpy.ndarray of bool, shape (n_q, n_k)
        Lower-triangular. Upper-left: for ``n_q > n_k`` the last rows see every
        key, for ``n_q < n_k`` the last keys are seen by nobody. Lower-right:
        for ``n_q > n_k`` the first ``n_q - n_k`` queries see **nothing**
        (fully masked rows), for ``n_q < n_k`` every query sees the first
        ``n_k - n_q + 1`` keys at least.

    Raises
    ------
    TypeError, ValueError
        If a size is not an int or is negative, or `align` is unknown.

    Examples
    --------
    >>> causal_mask(3).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    >>> causal_mask(2, 4, align="lower-right").astype(int)  # 2 new tokens after 2 cached ones
    array([[1, 1, 1, 0],
           [1, 1, 1, 1]])
    """
    rows = check_int(n_q, "n_q", 0)
    cols = rows if n_k is None else check_int(n_k, "n_k", 0)
    return np.tri(rows, cols, k=_causal_offset(rows, cols, align), dtype=bool)


def _causal_offset(n_q: int, n_k: int, align: str) -> int:
    """How far right of the main diagonal query 0's last visible key lies, for an `align` convention."""
    if align not in ("upper-left", "lower-right"):
        raise ValueError(f"align must be 'upper-left' or 'lower-right'; got {align!r}")
    return n_k - n_q if align == "lower-right" else 0


def padding_mask(lengths: ArrayLike, max_len: int) -> np.ndarray:
    """A bool mask that is True on the first ``lengths[b]`` positions of each sequence.

    Parameters
    ----------
    lengths : array_like of int, shape (B,)
        The true length of each padded sequence, each in ``[0, max_len]``.
    max_len : int
        The padded length, >= 0.

    Returns
    -------
    numpy.ndarray of bool, shape (B, max_len)
        Use ``mask[:, None, :]`` as the key mask of attention, shape (B, 1, S).

    Raises
    ------
    TypeError
        If `lengths` are not integers or `max_len` is not an int.
    ValueError
        If a length lies outside ``[0, max_len]`` or `lengths` is not 1-D.

    Examples
    --------
    >>> padding_mask([2, 3], 4).astype(int)
    array([[1, 1, 0, 0],
           [1, 1, 1, 0]])
    """
    size = check_int(max_len, "max_len", 0)
    arr = np.asarray(lengths)
    if arr.dtype.kind not in "iu" or arr.dtype == bool:
        raise TypeError(f"lengths must be integers; got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"lengths must be 1-D (one length per sequence); got shape {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() > size):
        raise ValueError(f"lengths must lie in [0, max_len={size}]; got {arr.tolist()}")
    return np.arange(size)[None, :] < arr[:, None]


def attention_inputs(
    q: ArrayLike, k: ArrayLike, v: ArrayLike, mask: object, scale: float | None, is_causal: object
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Check the arguments shared by every attention function; return q, k, v as arrays and the scale.

    Raises the ``TypeError``/``ValueError`` documented in :func:`scaled_dot_product_attention`.
    """
    qa, ka, va = as_real_array(q, "q"), as_real_array(k, "k"), as_real_array(v, "v")
    for name, arr in (("q", qa), ("k", ka), ("v", va)):
        if arr.ndim < 2:
            raise ValueError(f"{name} must have shape (..., length, features); got shape {arr.shape}")
    if qa.shape[-1] != ka.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension E; got q {qa.shape} and k {ka.shape}")
    if ka.shape[-2] != va.shape[-2]:
        raise ValueError(f"k and v must have the same length S (axis -2); got k {ka.shape} and v {va.shape}")
    if not isinstance(is_causal, (bool, np.bool_)):
        raise TypeError(f"is_causal must be a bool; got {type(is_causal).__name__} {is_causal!r}")
    if is_causal and mask is not None:
        raise ValueError("give either mask or is_causal=True, not both")
    # A Python float, not a NumPy float64 scalar: NumPy 2 would promote float32 scores to float64 with the latter.
    factor = 1.0 / math.sqrt(qa.shape[-1]) if scale is None else check_positive_finite(scale, "scale")
    return qa, ka, va, factor


def broadcast_mask(mask: ArrayLike, scores_shape: tuple[int, ...]) -> np.ndarray:
    """Check a bool or real mask and return it broadcast (as a view) to the scores' shape (..., L, S)."""
    m = np.asarray(mask)
    if m.dtype.kind not in "bfiu":
        raise TypeError(f"mask must be bool (True = attend) or real (added to the scores); got dtype {m.dtype}")
    try:
        shape = np.broadcast_shapes(m.shape, scores_shape)
    except ValueError:
        shape = None
    if shape != tuple(scores_shape):
        raise ValueError(f"mask of shape {m.shape} does not broadcast to the scores' shape {tuple(scores_shape)}")
    return np.broadcast_to(m, scores_shape)


def apply_mask(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Scores with a bool mask applied (False -> -inf) or a real mask added."""
    return np.where(mask, scores, -np.inf) if mask.dtype == bool else scores + mask


def scaled_dot_product_attention(
    q: ArrayLike,
    k: ArrayLike,
    v: ArrayLike,
    mask: ArrayLike | None = None,
    *,
    scale: float | None = None,
    is_causal: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Attention :math:`\operatorname{softmax}(q k^T \cdot \text{scale} + M)\, v`, returning output and weights.

    Parameters
    ----------
    q : array_like, shape (..., L, E)
        Queries.
    k : array_like, shape (..., S, E)
        Keys.
    v : array_like, shape (..., S, Ev)
        Values.
    mask : array_like, optional
        Broadcastable to the scores' shape (..., L, S). Bool: True where a
        query may attend. Float: added to the scaled scores (use ``-inf`` to
        forbid a position).
    scale : float, optional
        Finite and > 0; defaults to :math:`1/\sqrt{E}`.
    is_causal : bool, default False
        Apply :func:`causal_mask` (upper-left aligned, also for L != S).
        Cannot be combined with `mask`.

    Returns
    -------
    output : numpy.ndarray, shape (..., L, Ev)
    weights : numpy.ndarray, shape (..., L, S)
        Each row sums to 1 where at least one key is allowed; a fully masked
        row is all zeros, and so is its output (as torch's SDPA in 2.13).

    Raises
    ------
    TypeError
        For non-real inputs, a mask that is neither bool nor real, a
        non-bool `is_causal` or a non-real `scale`.
    ValueError
        If shapes do not match (naming `q`, `k` or `v`), the mask does not
        broadcast to (..., L, S), both `mask` and `is_causal` are given, or
        `scale` is not finite and > 0.

    Examples
    --------
    >>> q = np.array([[1.0, 0.0]])
    >>> k = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> v = np.array([[10.0], [20.0]])
    >>> out, w = scaled_dot_product_attention(q, k, v, scale=1.0)
    >>> w.round(4), out.round(4)
    (array([[0.7311, 0.2689]]), array([[12.6894]]))
    """
    qa, ka, va, factor = attention_inputs(q, k, v, mask, scale, is_causal)
    try:
        scores = np.matmul(qa, np.swapaxes(ka, -1, -2))
    except ValueError:
        raise ValueError(f"the batch dimensions of q {qa.shape} and k {ka.shape} do not broadcast") from None
    scores *= factor  # in place: the same values as `scores * factor`, without a second (L, S) array
    if is_causal:
        mask = causal_mask(qa.shape[-2], ka.shape[-2])
    if mask is not None:
        scores = apply_mask(scores, broadcast_mask(mask, scores.shape))
    weights = softmax(scores, axis=-1)
    # A query with no allowed key: zero weights (softmax alone would give NaN). Without a mask,
    # a row of scores is all -inf only if q or k holds an infinity: skip two passes otherwise.
    if mask is not None or not (np.isfinite(qa).all() and np.isfinite(ka).all()):
        nothing_allowed = np.isneginf(scores).all(axis=-1, keepdims=True)
        weights = np.where(nothing_allowed, 0.0, weights).astype(weights.dtype, copy=False)
    return np.matmul(weights, va), weights


def attention_entropy(weights: ArrayLike, axis: int = -1) -> np.ndarray:
    r"""The entropy :math:`-\sum_j p_j \ln p_j` of each attention row, in nats.

    Uses :math:`0 \ln 0 = 0` exactly (no ``+ 1e-12`` inside the log), so a
    one-hot row has entropy 0 and a uniform row over n keys has ``ln n``.
    A fully masked row (all zeros) has entropy 0.

    Parameters
    ----------
    weights : array_like
        Non-negative weights summing to 1 (or 0 for a masked row) along `axis`.
    axis : int, default -1

    Returns
    -------
    numpy.ndarray
        The shape of `weights` without `axis`.

    Raises
    ------
    TypeError, ValueError
        For non-real weights, negative weights or a bad axis.

    Examples
    --------
    >>> attention_entropy([[0.5, 0.5], [1.0, 0.0]]).round(4)
    array([0.6931, 0.    ])
    """
    p = as_real_array(weights, "weights")
    if p.ndim == 0:
        raise ValueError("weights must have at least one dimension")
    if (p < 0).any():
        raise ValueError("weights must be non-negative")
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, -p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    try:
        return terms.sum(axis=axis)
    except np.exceptions.AxisError:
        raise ValueError(f"axis={axis} is out of range for weights with {p.ndim} dimension(s)") from None


def attention_distance(weights: ArrayLike, *, align: str = "upper-left") -> np.ndarray:
    r"""The average distance :math:`\sum_j p_{ij} |\text{pos}(i) - j|` from each query to the keys it attends to.

    Parameters
    ----------
    weights : array_like, shape (..., L, S)
    align : {"upper-left", "lower-right"}, default "upper-left"
        Where query ``i`` sits among the keys. ``"upper-left"`` puts it at
        position ``i``, as :func:`causal_mask` and self-attention do.
        ``"lower-right"`` puts it at ``S - L + i``: the last ``L`` positions,
        as when a decoder processes ``L`` new tokens after ``S - L`` cached ones.

    Returns
    -------
    numpy.ndarray, shape (..., L)
        In positions. A fully masked row (all zeros) gives 0.

    Raises
    ------
    ValueError
        If `weights` has fewer than 2 dimensions or `align` is unknown.

    Examples
    --------
    >>> attention_distance([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    array([0. , 0.5, 0. ])
    >>> attention_distance([[0.5, 0.0, 0.5]], align="lower-right")  # one new token at position 2
    array([1.])
    """
    p = as_real_array(weights, "weights")
    if p.ndim < 2:
        raise ValueError(f"weights must have shape (..., L, S); got shape {p.shape}")
    n_q, n_k = p.shape[-2:]
    offset = _causal_offset(n_q, n_k, align)
    distance = np.abs(np.arange(n_q)[:, None] + offset - np.arange(n_k)[None, :]).astype(p.dtype)  # int would promote
    return (p * distance).sum(axis=-1)
