r"""Tiled attention that never forms the full score matrix: the FlashAttention recurrence in NumPy.

For each block of queries, the keys and values are read block by block. Each
query row keeps a running maximum ``m``, a running normalizer ``l`` and an
*unnormalized* output accumulator ``acc``; when a block of scores ``s``
arrives,

    m_new = max(m, max_j s_j)
    l     = l   * exp(m - m_new) + sum_j exp(s_j - m_new)
    acc   = acc * exp(m - m_new) + sum_j exp(s_j - m_new) * v_j

and after the last block the output is ``acc / l``. The ``(m, l)`` half is
lesson 02's :func:`~course_utils.merge_softmax_states`; the accumulator is
rescaled by the same factor ``exp(m - m_new)``. This is the forward pass of
FlashAttention (Dao et al., 2022), in the form of FlashAttention-2 (Dao, 2023),
which divides by ``l`` once at the end.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ._validation import check_int, compute_dtype
from .attention import apply_mask, attention_inputs, broadcast_mask

__all__ = ["tiled_attention"]


def _update_block(
    m: np.ndarray, l: np.ndarray, acc: np.ndarray, scores: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One step of the recurrence: fold a block of scores (..., bq, bk) and values (..., bk, Ev) into (m, l, acc).

    `m` and `l` have shape (..., bq), `acc` (..., bq, Ev). A block whose
    scores are all ``-inf`` leaves the state unchanged, also before any key
    has been allowed (state ``(-inf, 0, 0)``).
    """
    m_new = np.maximum(m, scores.max(axis=-1))
    # Where nothing has been allowed yet, m_new is -inf: shift by 0 instead, so that
    # exp(-inf - (-inf)) = exp(nan) never happens and every factor below is exactly 0.
    shift = np.where(np.isneginf(m_new), 0.0, m_new)
    alpha = np.exp(m - shift)  # <= 1: the old terms, re-expressed relative to the new maximum
    p = np.exp(scores - shift[..., None])  # every exponent <= 0: no overflow
    return m_new, l * alpha + p.sum(axis=-1), acc * alpha[..., None] + p @ values


def tiled_attention(
    q: ArrayLike,
    k: ArrayLike,
    v: ArrayLike,
    mask: ArrayLike | None = None,
    *,
    scale: float | None = None,
    is_causal: bool = False,
    block_q: int = 64,
    block_k: int = 64,
    masked_lse: str = "-inf",
) -> tuple[np.ndarray, np.ndarray]:
    r"""Attention computed tile by tile, without forming the (L, S) score matrix; returns output and logsumexp.

    The result equals :func:`~course_utils.scaled_dot_product_attention`
    (up to rounding), with the same arguments and conventions.

    Parameters
    ----------
    q : array_like, shape (..., L, E)
        Queries.
    k : array_like, shape (..., S, E)
        Keys.
    v : array_like, shape (..., S, Ev)
        Values.
    mask : array_like, optional
        Broadcastable to the scores' shape (..., L, S); only the tile in use
        is read. Bool: True where a query may attend. Float: added to the
        scaled scores (use ``-inf`` to forbid a position).
    scale : float, optional
        Finite and > 0; defaults to :math:`1/\sqrt{E}`.
    is_causal : bool, default False
        Let query ``i`` attend to keys ``0..i`` (upper-left aligned, like
        :func:`~course_utils.causal_mask`, also for L != S). Tiles that lie
        wholly above the diagonal are skipped. Cannot be combined with `mask`.
    block_q, block_k : int, default 64
        Queries and keys per tile, each >= 1. They need not divide L or S:
        the last tile is smaller.
    masked_lse : {"-inf", "+inf"}, default "-inf"
        The lse of a row with no allowed key. ``"-inf"``, the log of an
        empty sum, is right for **merging** partial results: such a part gets
        weight :math:`e^{-\infty - \operatorname{lse}} = 0`. ``"+inf"`` is
        right for **recomputing** weights as :math:`P = \exp(S - \operatorname{lse})`:
        the row's scores are all ``-inf``, and :math:`e^{-\infty - (+\infty)} = 0`
        where :math:`e^{-\infty - (-\infty)}` would be NaN. FlashAttention
        stores ``-inf`` when it splits the keys (split-KV, to be merged) and
        ``+inf`` otherwise (for its backward pass).

    Returns
    -------
    output : numpy.ndarray, shape (..., L, Ev)
        A fully masked row gives zeros, as ``scaled_dot_product_attention``
        and torch's SDPA (2.13) do.
    lse : numpy.ndarray, shape (..., L)
        The logsumexp of each row of the scaled, masked scores, with the
        batch shape of the scores; for a fully masked row, `masked_lse`.
        NaN propagates as in the naive form: a NaN in a query row, or in a
        key that a row attends to, makes that row's output and lse NaN; rows
        that may not attend to it are unaffected. (torch's math backend adds
        the mask, NaN + -inf = NaN, and so turns even those rows NaN.) A NaN
        in a value reaches the output rows that attend to it; in the naive
        form also rows with weight exactly 0 for it (0 * NaN = NaN), except
        that tiles skipped by `is_causal` are never read.

    Raises
    ------
    TypeError
        For non-real inputs, a mask that is neither bool nor real, a
        non-bool `is_causal`, a non-real `scale`, or a block size that is
        not an int, or a `masked_lse` that is not a str.
    ValueError
        If shapes do not match (naming `q`, `k` or `v`), the mask does not
        broadcast to (..., L, S), both `mask` and `is_causal` are given,
        `scale` is not finite and > 0, `block_q` or `block_k` is < 1, or
        `masked_lse` is neither ``"-inf"`` nor ``"+inf"``.

    See Also
    --------
    scaled_dot_product_attention : the same attention, with the full matrix of weights.
    merge_softmax_states : the (max, normalizer) half of the recurrence.

    Notes
    -----
    Each row keeps ``(m, l, acc)``. A new tile of scores ``s`` (one row
    shown) with values ``v`` updates them to

    .. math::

        m' = \max(m, \max_j s_j), \quad
        l' = l\, e^{m - m'} + \sum_j e^{s_j - m'}, \quad
        acc' = acc\, e^{m - m'} + \sum_j e^{s_j - m'} v_j .

    By induction, after any number of tiles ``l`` is :math:`\sum e^{s_j - m}`
    and ``acc`` is :math:`\sum e^{s_j - m} v_j` over the keys seen, with ``m``
    their maximum: the factor :math:`e^{m - m'}` turns every old term
    :math:`e^{s_j - m}` into :math:`e^{s_j - m'}`. After the last tile,
    ``acc / l`` is :math:`\sum_j \operatorname{softmax}(s)_j v_j`, the
    attention output. Only a tile of ``block_q * block_k`` scores exists at
    any time, instead of ``L * S``.

    The second result, :math:`\operatorname{lse} = m + \log l`, is what a
    backward pass needs: FlashAttention stores it (``L`` numbers per head)
    instead of the ``L * S`` weights, and recomputes any tile of weights
    from the tile of scores as :math:`P = \exp(S - \operatorname{lse})`,
    exactly normalized, without a second pass for the maximum or the
    normalizer (Dao et al., 2022). The same number merges the outputs of two
    halves of the keys computed apart (split-K or ring attention): the
    weight of each half is :math:`e^{\operatorname{lse}_i - \operatorname{lse}}`.

    Examples
    --------
    >>> from course_utils import scaled_dot_product_attention
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(5, 4)), rng.normal(size=(7, 4)), rng.normal(size=(7, 3))
    >>> out, lse = tiled_attention(q, k, v, is_causal=True, block_q=2, block_k=3)
    >>> ref, _ = scaled_dot_product_attention(q, k, v, is_causal=True)
    >>> bool(np.allclose(out, ref)), lse.shape
    (True, (5,))
    >>> tiled_attention(q[:1], k, v, mask=np.zeros((1, 7), bool))  # nothing allowed: zeros and -inf
    (array([[0., 0., 0.]]), array([-inf]))
    >>> tiled_attention(q[:1], k, v, mask=np.zeros((1, 7), bool), masked_lse="+inf")[1]  # for P = exp(S - lse)
    array([inf])
    """
    bq, bk = check_int(block_q, "block_q", 1), check_int(block_k, "block_k", 1)
    if not isinstance(masked_lse, str):
        raise TypeError(f"masked_lse must be the str '-inf' or '+inf'; got {type(masked_lse).__name__} {masked_lse!r}")
    if masked_lse not in ("-inf", "+inf"):
        raise ValueError(f"masked_lse must be '-inf' (for merging) or '+inf' (for recomputing P); got {masked_lse!r}")
    empty_lse = -np.inf if masked_lse == "-inf" else np.inf
    # The same checks, in the same words, as scaled_dot_product_attention.
    qa, ka, va, factor = attention_inputs(q, k, v, mask, scale, is_causal)
    try:
        batch = np.broadcast_shapes(qa.shape[:-2], ka.shape[:-2])
    except ValueError:
        raise ValueError(f"the batch dimensions of q {qa.shape} and k {ka.shape} do not broadcast") from None
    try:
        out_batch = np.broadcast_shapes(batch, va.shape[:-2])
    except ValueError:
        raise ValueError(f"the batch dimensions of v {va.shape} do not broadcast with those of q and k {batch}") from None
    n_q, n_k, n_v = qa.shape[-2], ka.shape[-2], va.shape[-1]
    scores_shape = (*batch, n_q, n_k)
    # A broadcast view: tiles are sliced from it, nothing is copied.
    m_arr = None if mask is None else broadcast_mask(mask, scores_shape)

    dtype = compute_dtype(np.result_type(qa, ka, va))
    kt = np.swapaxes(ka, -1, -2).astype(dtype, copy=False)
    vw = va.astype(dtype, copy=False)
    out = np.empty((*out_batch, n_q, n_v), dtype)
    lse = np.empty((*batch, n_q), dtype)
    with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
        for i0 in range(0, n_q, bq):
            i1 = min(i0 + bq, n_q)
            m = np.full((*batch, i1 - i0), -np.inf, dtype)
            l = np.zeros((*batch, i1 - i0), dtype)
            acc = np.zeros((*out_batch, i1 - i0, n_v), dtype)
            q_tile = qa[..., i0:i1, :].astype(dtype) * dtype.type(factor)  # scale bq queries, not bq * S scores
            # Causal: query i sees keys 0..i, so keys from i1 on are never seen by this tile.
            k_end = min(n_k, i1) if is_causal else n_k
            for j0 in range(0, k_end, bk):
                j1 = min(j0 + bk, k_end)
                s = q_tile @ kt[..., j0:j1]
                if is_causal and j1 - 1 > i0:  # only tiles that cross the diagonal need the mask
                    allowed = np.arange(j0, j1)[None, :] <= np.arange(i0, i1)[:, None]
                    s = np.where(allowed, s, -np.inf)
                elif m_arr is not None:
                    s = apply_mask(s, m_arr[..., i0:i1, j0:j1])
                m, l, acc = _update_block(m, l, acc, s, vw[..., j0:j1, :])
            # A row with no allowed key has l = 0: output 0 (as SDPA) and lse = masked_lse.
            # `l != 0`, not `l > 0`: a NaN l (a NaN score in the row) must give NaN, as the naive form does.
            seen = l != 0
            out[..., i0:i1, :] = np.where(seen[..., None], acc / np.where(seen, l, 1.0)[..., None], 0.0)
            lse[..., i0:i1] = np.where(seen, m + np.log(l), empty_lse)
    result_dtype = np.result_type(qa, ka, va)
    return out.astype(result_dtype, copy=False), lse.astype(result_dtype, copy=False)
