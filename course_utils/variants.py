r"""Softmax at the frontier: the variants of 2023-2026 that change where attention's mass may go.

Three families, one problem each:

* **Mass that must go somewhere.** Softmax weights sum to 1, so a query with
  nothing relevant to read still spreads all its mass over the keys.
  :func:`softmax_with_sink` adds a sink logit ``s`` to the denominator,
  ``e^{x_i} / (e^s + sum_j e^{x_j})`` (softmax₁, :func:`softmax_one`, is
  ``s = 0``); :func:`sink_attention` runs it inside the tiled recurrence of
  :mod:`course_utils.tiled`, starting from the state ``(m, l, acc) = (s, 1, 0)``.
  :func:`softpick` and :func:`sigmoid_attention` drop the sum-to-one rule.
* **Attention that fades with length.** With ``n`` keys the softmax weight of
  one relevant key falls like ``1/n``. :func:`scalable_softmax` multiplies the
  logits by ``s log n``; :func:`yarn_logit_scale` and :func:`llama4_query_scale`
  are the length-dependent factors that YaRN and Llama 4 ship.
* **Logits that grow.** :func:`softcap` bounds them smoothly by ``cap``;
  :func:`qk_norm` normalizes queries and keys so their size cannot grow.

Conventions follow :mod:`course_utils.softmax`: float dtypes are kept (float16
is computed in float32), other inputs become float64, and inputs are never
modified.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_real_array, check_axis, check_int, check_positive_finite, compute_dtype
from .attention import attention_inputs
from .online import SoftmaxState, merge_softmax_states, softmax_state
from .softmax import softmax
from .tiled import _update_block

__all__ = [
    "llama4_query_scale",
    "qk_norm",
    "scalable_softmax",
    "sigmoid_attention",
    "sink_attention",
    "softcap",
    "softmax_one",
    "softmax_with_sink",
    "softpick",
    "yarn_logit_scale",
]


def _work(x: ArrayLike, axis: int) -> tuple[np.ndarray, np.ndarray, int]:
    """`x` as an array, the (at least 1-d) array to compute in, and the checked axis."""
    arr = as_real_array(x, "x")
    ax = check_axis(axis, arr.ndim)
    return arr, np.atleast_1d(arr).astype(compute_dtype(arr.dtype), copy=False), ax


def _finish(out: np.ndarray, arr: np.ndarray) -> np.ndarray:
    return out.reshape(arr.shape).astype(arr.dtype, copy=False)


def _per_row(value: ArrayLike, name: str, reduced: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A real array broadcast to the shape of the reduced rows (the normalized axis kept with size 1)."""
    arr = as_real_array(value, name)
    try:
        return np.broadcast_to(arr, reduced).astype(dtype)
    except ValueError:
        raise ValueError(
            f"{name} of shape {arr.shape} does not broadcast to one value per row, shape {reduced} "
            "(the normalized axis kept with size 1)"
        ) from None


def _sigmoid(z: np.ndarray) -> np.ndarray:
    """The logistic function without overflow: only ``exp(-|z|) <= 1`` is ever formed."""
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def softmax_with_sink(x: ArrayLike, sink: ArrayLike = 0.0, axis: int = -1) -> np.ndarray:
    r"""Softmax with a sink logit in the denominator, :math:`e^{x_i} / (e^{s} + \sum_j e^{x_j})`.

    The sink is one more logit that takes part in the softmax and is then
    dropped: the result equals ``softmax(concat([x, s]))[..., :-1]``, which
    is how the gpt-oss reference implementation applies its learned
    per-head sinks. With ``s = 0`` it is softmax₁ (Miller, 2023), see
    :func:`softmax_one`.

    Parameters
    ----------
    x : array_like
        Real scores.
    sink : float or array_like, default 0.0
        The sink logit ``s``: finite, one value for all rows or an array that
        broadcasts to the rows (the shape of `x` with `axis` of size 1), e.g.
        shape ``(H, 1, 1)`` for one sink per head of scores ``(H, L, S)``.
    axis : int, default -1
        The axis of the keys.

    Returns
    -------
    numpy.ndarray
        Weights with the shape of `x`, each below the softmax weight, summing
        to ``1 - e^s / (e^s + sum_j e^{x_j}) < 1`` along `axis`. A row of all
        ``-inf`` (every key masked) gives zeros, not NaN: the whole mass goes
        to the sink.

    Raises
    ------
    ValueError
        If `sink` is not finite (NaN or ±inf), does not broadcast to the
        rows, or `axis` is out of range.
    TypeError
        If `x` or `sink` does not hold real numbers, or `axis` is not an int.

    Notes
    -----
    The sink is just a different starting state of the online softmax
    (:mod:`course_utils.online`): instead of the empty state
    ``(max, normalizer) = (-inf, 0)`` the running state starts at ``(s, 1)``,
    the state of a block that holds only the sink. Merging the scores into
    it gives the maximum ``m`` and the normalizer ``e^{s-m} + sum_j e^{x_j - m}``;
    no exponent is positive, so nothing overflows.

    Examples
    --------
    >>> softmax_with_sink([0.0, 0.0], sink=0.0).round(4)  # softmax₁: 1 / (1 + 2)
    array([0.3333, 0.3333])
    >>> softmax_with_sink([1000.0, 1000.0], sink=-3.0).round(4)  # no overflow
    array([0.5, 0.5])
    >>> softmax_with_sink([-np.inf, -np.inf], sink=2.0)  # nothing to attend to
    array([0., 0.])
    """
    arr, work, ax = _work(x, axis)
    reduced = tuple(1 if i == ax else n for i, n in enumerate(work.shape))
    s = _per_row(sink, "sink", reduced, work.dtype)
    if not np.isfinite(s).all():
        raise ValueError(f"sink must be finite (a real logit); got {np.asarray(sink)!r}")
    state = merge_softmax_states(SoftmaxState(s, np.ones_like(s)), softmax_state(work, axis=ax))
    with np.errstate(invalid="ignore", under="ignore"):  # +inf or NaN scores give NaN, as in torch
        out = np.exp(work - state.max) / state.normalizer
    return _finish(out, arr)


def softmax_one(x: ArrayLike, axis: int = -1) -> np.ndarray:
    r"""Softmax₁ (Miller, 2023): :math:`e^{x_i} / (1 + \sum_j e^{x_j})`, the sink logit 0.

    Equal to attention with one extra key whose score is 0 and whose value is
    the zero vector, e.g. an all-zero key. See :func:`softmax_with_sink`.

    Examples
    --------
    >>> softmax_one([0.0, np.log(3.0)]).round(4)  # 1/5 and 3/5: the sink keeps 1/5
    array([0.2, 0.6])
    """
    return softmax_with_sink(x, 0.0, axis)


def sink_attention(
    q: ArrayLike,
    k: ArrayLike,
    v: ArrayLike,
    sink: ArrayLike = 0.0,
    *,
    scale: float | None = None,
    block_k: int | None = None,
) -> np.ndarray:
    r"""Attention with a sink logit, computed block by block with the FlashAttention recurrence.

    Equal to ``softmax_with_sink(q kᵀ · scale, sink) @ v``, but it runs the
    recurrence of :func:`~course_utils.tiled.tiled_attention` over blocks of
    keys, starting each query row from the state

    .. math:: (m, \ell, \mathrm{acc}) = (s, 1, 0)

    instead of the empty state ``(-inf, 0, 0)``: the sink is a key with
    score ``s`` and a zero value. Nothing else in the kernel changes.

    Parameters
    ----------
    q : array_like, shape (..., L, E)
    k : array_like, shape (..., S, E)
    v : array_like, shape (..., S, Ev)
    sink : float or array_like, default 0.0
        Finite; one value, or an array broadcasting to ``(..., L)`` (one per
        query row), e.g. shape ``(H, 1)`` for one sink per head.
    scale : float, optional
        Finite and > 0; defaults to :math:`1/\sqrt{E}`.
    block_k : int, optional
        Keys per block (>= 1); by default all keys in one block.

    Returns
    -------
    numpy.ndarray, shape (..., L, Ev)
        The output; its rows are weighted sums of the values with weights
        summing to less than 1.

    Raises
    ------
    ValueError, TypeError
        For shapes that do not fit, a bad `scale` or `block_k`, or a sink
        that is not finite or does not broadcast.

    Examples
    --------
    >>> q = k = np.zeros((1, 2)); v = np.array([[6.0, 3.0]])
    >>> sink_attention(q, k, v, sink=0.0)  # weight 1/2 on the only key, 1/2 on the sink
    array([[3. , 1.5]])
    """
    qa, ka, va, factor = attention_inputs(q, k, v, None, scale, False)
    result_dtype = np.result_type(qa, ka, va)
    dtype = compute_dtype(result_dtype)  # float16 accumulates in float32, as tiled_attention does
    qa, ka, va = qa.astype(dtype, copy=False), ka.astype(dtype, copy=False), va.astype(dtype, copy=False)
    n_keys = ka.shape[-2]
    step = n_keys if block_k is None else check_int(block_k, "block_k", 1)
    batch = np.broadcast_shapes(qa.shape[:-2], ka.shape[:-2], va.shape[:-2])
    rows = (*batch, qa.shape[-2])
    s = _per_row(sink, "sink", rows, dtype)
    if not np.isfinite(s).all():
        raise ValueError(f"sink must be finite (a real logit); got {np.asarray(sink)!r}")
    m, l, acc = s.copy(), np.ones(rows, dtype), np.zeros((*rows, va.shape[-1]), dtype)
    for start in range(0, n_keys, max(step, 1)):
        kb, vb = ka[..., start : start + step, :], va[..., start : start + step, :]
        m, l, acc = _update_block(m, l, acc, (qa @ np.swapaxes(kb, -1, -2)) * dtype.type(factor), vb)
    return (acc / l[..., None]).astype(result_dtype, copy=False)


def sigmoid_attention(x: ArrayLike, *, bias: ArrayLike = 0.0) -> np.ndarray:
    r"""Sigmoid attention weights (Ramapuram et al., 2024): :math:`\sigma(x_{ij} + b)`, elementwise.

    No normalizer: each weight depends on its own score only, so a row's
    total weight is not fixed. For ``n`` keys whose scores are all 0 it is
    ``n σ(b)``: it grows with ``n`` for ``b = 0`` and stays below 1 with the
    paper's ``b = -log n``, since ``n σ(-log n) = n / (n + 1)``.

    Parameters
    ----------
    x : array_like
        Real scores (already scaled, e.g. by :math:`1/\sqrt{d}`); ``-inf``
        marks a masked key, whose weight is exactly 0.
    bias : float or array_like, default 0.0
        Added to every score; broadcasts against `x`.

    Returns
    -------
    numpy.ndarray
        Weights in [0, 1] with the broadcast shape of `x` and `bias`.

    Raises
    ------
    TypeError
        If `x` or `bias` is not real.

    Examples
    --------
    >>> sigmoid_attention(np.zeros(4)).sum()  # 4 σ(0): the total grows with n
    np.float64(2.0)
    >>> round(float(sigmoid_attention(np.zeros(4), bias=-np.log(4)).sum()), 4)  # 4/5
    0.8
    """
    arr = as_real_array(x, "x")
    b = as_real_array(bias, "bias")
    # A scalar bias keeps the dtype of x (as a Python number does in torch); an array bias promotes.
    dtype = arr.dtype if b.ndim == 0 else np.result_type(arr.dtype, b.dtype)
    work = compute_dtype(dtype)
    with np.errstate(invalid="ignore"):
        out = _sigmoid(arr.astype(work, copy=False) + b.astype(work))
    return out.astype(dtype, copy=False)


def softpick(x: ArrayLike, axis: int = -1) -> np.ndarray:
    r"""Softpick (Zuhri et al., 2025): :math:`\mathrm{ReLU}(e^{x_i} - 1) / \sum_j |e^{x_j} - 1|`.

    A score below 0 gets exactly 0, and a score of 0 counts as "nothing":
    the weights are non-negative and sum to at most 1, and to exactly 0 when
    every score is <= 0.

    Parameters
    ----------
    x : array_like
        Real scores; ``-inf`` marks a masked key, which is left out of the
        denominator (as in the paper's reference code) and gets weight 0.
    axis : int, default -1
        The axis of the keys.

    Returns
    -------
    numpy.ndarray
        Weights with the shape of `x`. A row whose denominator is 0 (all
        scores exactly 0, or all masked) gives zeros.

    Raises
    ------
    TypeError, ValueError
        For a non-real `x` or a bad `axis`.

    Notes
    -----
    Both sums are multiplied by :math:`e^{-c}` with
    :math:`c = \max(0, \max_j x_j)`, so nothing overflows:
    :math:`e^{-c}(e^{x_i} - 1) = e^{x_i - c} - e^{-c}`, computed as
    :math:`e^{-c}\,\mathrm{expm1}(x_i)` so that a tiny positive score keeps
    its tiny positive weight.
    Softpick is not shift-invariant: adding the same constant to every
    score changes which scores are above 0. The paper's code adds
    :math:`\varepsilon = 10^{-8}` to the denominator to avoid 0/0; this
    function returns the exact formula and handles 0/0 as stated.

    Examples
    --------
    >>> softpick([np.log(3.0), 0.0, -1.0]).round(4)  # (3-1) / (2 + 0 + (1 - 1/e))
    array([0.7598, 0.    , 0.    ])
    >>> softpick([-1.0, -2.0])  # nothing relevant: exactly nothing
    array([0., 0.])
    """
    arr, work, ax = _work(x, axis)
    with np.errstate(invalid="ignore", over="ignore"):
        top = work.max(axis=ax, keepdims=True, initial=-np.inf)
        c = np.where(top > 0, top, 0.0)  # shift only down: e^{-c} <= 1 cannot overflow
        # e^{-c} (e^x - 1), with expm1 so that a tiny positive score keeps its tiny positive weight;
        # only a score above 700 (whose expm1 could overflow) takes the shifted difference.
        diff = np.where(work < 700, np.exp(-c) * np.expm1(np.minimum(work, 700)), np.exp(work - c) - np.exp(-c))
        den = np.where(np.isneginf(work), 0.0, np.abs(diff)).sum(axis=ax, keepdims=True)
        # 0/0 (every score exactly 0, or all masked) is defined as 0; a NaN denominator stays NaN.
        out = np.maximum(diff, 0.0) / np.where(den == 0, 1.0, den)
    return _finish(out, arr)


def scalable_softmax(
    x: ArrayLike, s: float = 1.0, *, n: ArrayLike | None = None, axis: int = -1
) -> np.ndarray:
    r"""Scalable-Softmax (Nakanishi, 2025): :math:`\mathrm{softmax}(s \log(n) \, x)`.

    The logits are multiplied by :math:`s \log n`, where ``n`` is the number
    of keys, so a score gap that picks out one key keeps doing so as ``n``
    grows: the weight of one key with a gap ``a`` over ``n - 1`` equal ones
    is :math:`n^{sa} / (n^{sa} + n - 1)`. With ``s = 1`` it is the
    :math:`\log n` scaling of Chiang and Cholak (2022). It equals plain
    softmax where :math:`s \log n = 1`, at :math:`n = e^{1/s}`.

    Parameters
    ----------
    x : array_like
        Real scores.
    s : float, default 1.0
        The scaling parameter (learned per head in the paper): finite and > 0.
    n : float or array_like, optional
        The number of keys each row attends over, >= 1; by default the length
        of `axis`. Give an array broadcasting to the rows (the shape of `x`
        with `axis` of size 1) when rows see different numbers of keys, as
        under a causal mask.
    axis : int, default -1
        The axis of the keys.

    Returns
    -------
    numpy.ndarray
        Probabilities with the shape of `x`, summing to 1 along `axis`.

    Raises
    ------
    ValueError
        If `n` < 1 or is not finite, `s` is not finite and > 0, or `axis`
        is out of range.
    TypeError
        For non-real `x`, `s` or `n`.

    Examples
    --------
    >>> x = np.array([1.0, 0.0, 0.0])
    >>> bool(np.allclose(scalable_softmax(x, s=1 / np.log(3)), softmax(x)))  # n = e^{1/s}
    True
    >>> scalable_softmax(x, s=1.0).round(4)  # 3^1 / (3 + 2)
    array([0.6, 0.2, 0.2])
    """
    s = check_positive_finite(s, "s")
    arr, work, ax = _work(x, axis)
    reduced = tuple(1 if i == ax else m for i, m in enumerate(work.shape))
    if n is None and work.shape[ax] == 0:  # no keys: nothing to normalize, as in softmax
        return np.empty(arr.shape, arr.dtype)
    counts = _per_row(work.shape[ax] if n is None else n, "n", reduced, work.dtype)
    if not (np.isfinite(counts) & (counts >= 1)).all():
        raise ValueError(f"n (the number of keys) must be finite and >= 1; got {np.asarray(n)!r}")
    with np.errstate(invalid="ignore"):  # 0 * -inf for a masked key when n = 1: keep it masked
        scaled = np.where(np.isneginf(work), -np.inf, work * (s * np.log(counts)))
    return _finish(softmax(scaled, axis=ax), arr)


def yarn_logit_scale(factor: float) -> float:
    r"""The factor YaRN (Peng et al., 2023) multiplies attention logits by: :math:`1/t = (0.1 \ln s + 1)^2`.

    YaRN stretches a model's context by a factor ``s`` (e.g. 4k to 32k is
    ``s = 8``) and sharpens its attention with the temperature
    :math:`\sqrt{1/t} = 0.1 \ln s + 1`, applied to both queries and keys, so
    the logits are multiplied by its square.

    Parameters
    ----------
    factor : float
        The context extension factor ``s``: finite and >= 1 (1 = no extension).

    Returns
    -------
    float
        :math:`(0.1 \ln s + 1)^2`, equal to 1 at ``s = 1``.

    Raises
    ------
    ValueError
        If `factor` < 1 or not finite.

    Examples
    --------
    >>> round(yarn_logit_scale(8.0), 4)  # (0.1 ln 8 + 1)^2
    1.4591
    """
    s = check_positive_finite(factor, "factor")
    if s < 1:
        raise ValueError(f"factor (the context extension) must be >= 1; got {s!r}")
    return (0.1 * math.log(s) + 1.0) ** 2


def llama4_query_scale(position: ArrayLike, *, floor_scale: int = 8192, attn_scale: float = 0.1) -> np.ndarray:
    r"""The length-dependent query scale of Llama 4's NoPE layers: :math:`1 + a \ln(\lfloor (p + 1) / F \rfloor + 1)`.

    Llama 4 multiplies the query at position ``p`` (counted from 0) in its
    layers without positional encoding by this factor, so logits grow
    with the log of the position in steps of ``F`` tokens, as in
    :func:`scalable_softmax`. The defaults are the published configuration
    (``floor_scale`` F = 8192, ``attn_scale`` a = 0.1) and the formula is that
    of the Hugging Face ``transformers`` implementation.

    Parameters
    ----------
    position : int or array_like of int
        Token positions, >= 0.
    floor_scale : int, default 8192
        F, >= 1: the scale steps up once every F positions.
    attn_scale : float, default 0.1
        a, finite and > 0.

    Returns
    -------
    numpy.ndarray
        Float64 factors >= 1 with the shape of `position`.

    Raises
    ------
    ValueError
        If a position is negative, `floor_scale` < 1 or `attn_scale` is not
        finite and > 0.
    TypeError
        If `position` does not hold integers.

    Examples
    --------
    >>> llama4_query_scale([0, 8190, 8191, 10**6]).round(4)
    array([1.    , 1.    , 1.0693, 1.4812])
    """
    pos = np.asarray(position)
    if pos.dtype.kind not in "iu":
        raise TypeError(f"position must hold integers (token positions); got dtype {pos.dtype}")
    if (pos < 0).any():
        raise ValueError(f"position must be >= 0; got a minimum of {int(pos.min())}")
    f = check_int(floor_scale, "floor_scale", 1)
    a = check_positive_finite(attn_scale, "attn_scale")
    return 1.0 + a * np.log(np.floor((pos.astype(np.float64) + 1.0) / f) + 1.0)


def softcap(x: ArrayLike, cap: float) -> np.ndarray:
    r"""Soft-capping, :math:`c \tanh(x / c)`: logits bounded by ``cap``, nearly unchanged near 0.

    Gemma 2 applies it to attention logits with ``cap = 50`` (and to the
    final logits with 30). For :math:`|x| \ll c` it is the identity, with an
    error of about :math:`x^3 / (3c^2)`; every output lies in
    :math:`(-c, c)` (or equals ``±c`` once ``tanh`` rounds to 1).

    Parameters
    ----------
    x : array_like
        Real logits; ``±inf`` become ``±cap``.
    cap : float
        The bound ``c``: finite and > 0.

    Returns
    -------
    numpy.ndarray
        The shape and float dtype of `x`.

    Raises
    ------
    ValueError
        If `cap` <= 0 or is not finite.
    TypeError
        If `x` or `cap` is not real.

    Examples
    --------
    >>> softcap([0.5, 50.0, 1e6], cap=50.0).round(4)
    array([ 0.5   , 38.0797, 50.    ])
    """
    c = check_positive_finite(cap, "cap")
    arr = as_real_array(x, "x")
    work = arr.astype(compute_dtype(arr.dtype), copy=False)
    return (c * np.tanh(work / c)).astype(arr.dtype, copy=False)


def qk_norm(x: ArrayLike, *, kind: str = "rms", eps: float = 1e-6, axis: int = -1) -> np.ndarray:
    r"""Normalize queries or keys along their feature axis: RMSNorm or LayerNorm, without a learned gain.

    ``"rms"``: :math:`x / \sqrt{\mathrm{mean}(x^2) + \varepsilon}` (Gemma 3,
    Llama 4, OLMo 2). ``"layer"``: :math:`(x - \bar x) / \sqrt{\mathrm{var}(x) + \varepsilon}`
    (ViT-22B, Dehghani et al. 2023). Either way a normalized vector of
    ``d`` features has norm about :math:`\sqrt d` whatever the size of `x`,
    so the dot product of a normalized query and key lies in
    :math:`[-d, d]` and the scaled logit :math:`\hat q \cdot \hat k / \sqrt d`
    in :math:`[-\sqrt d, \sqrt d]`. Real models multiply by a learned gain
    afterwards, which can still grow.

    Parameters
    ----------
    x : array_like
        Queries or keys, features along `axis`.
    kind : {"rms", "layer"}, default "rms"
    eps : float, default 1e-6
        Added to the mean square (or variance); finite and >= 0. With 0, an
        all-zero vector gives NaN (0/0), as ``torch.nn.functional.rms_norm`` does.
    axis : int, default -1
        The feature axis.

    Returns
    -------
    numpy.ndarray
        The shape and float dtype of `x`.

    Raises
    ------
    ValueError
        If `kind` is not "rms" or "layer", `eps` is negative or not finite,
        or `axis` is out of range.
    TypeError
        For a non-real `x` or `eps`.

    Examples
    --------
    >>> qk_norm([3.0, 4.0], eps=0.0).round(4)  # divided by sqrt((9 + 16) / 2)
    array([0.8485, 1.1314])
    >>> qk_norm([[30.0, 40.0]], eps=0.0).round(4)  # the same: the size is gone
    array([[0.8485, 1.1314]])
    """
    if kind not in ("rms", "layer"):
        raise ValueError(f"kind must be 'rms' or 'layer'; got {kind!r}")
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise TypeError(f"eps must be a real number; got {type(eps).__name__} {eps!r}")
    if not math.isfinite(eps) or eps < 0:
        raise ValueError(f"eps must be finite and >= 0; got {eps!r}")
    arr, work, ax = _work(x, axis)
    if kind == "layer":
        work = work - work.mean(axis=ax, keepdims=True)
    with np.errstate(invalid="ignore"):  # a zero vector with eps = 0 is 0/0: NaN, as in torch
        out = work / np.sqrt((work * work).mean(axis=ax, keepdims=True) + eps)
    return _finish(out, arr)
