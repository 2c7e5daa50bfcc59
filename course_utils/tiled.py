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

    Returns
    -------
    output : numpy.ndarray, shape (..., L, Ev)
        A fully masked row gives zeros, as ``scaled_dot_product_attention``
        and torch's SDPA (2.13) do.
    lse : numpy.ndarray, shape (..., L)
        The logsumexp of each row of the scaled, masked scores, with the
        batch shape of the scores; ``-inf`` for a fully masked row.

    Raises
    ------
    TypeError
        For non-real inputs, a mask that is neither bool nor real, a
        non-bool `is_causal`, a non-real `scale`, or a block size that is
        not an int.
    ValueError
        If shapes do not match (naming `q`, `k` or `v`), the mask does not
        broadcast to (..., L, S), both `mask` and `is_causal` are given,
        `scale` is not finite and > 0, or `block_q` or `block_k` is < 1.

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
    """
    bq, bk = check_int(block_q, "block_q", 1), check_int(block_k, "block_k", 1)
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
            # A row with no allowed key has l = 0: output 0 (as SDPA) and lse = log 0 = -inf.
            seen = l > 0
            out[..., i0:i1, :] = np.where(seen[..., None], acc / np.where(seen, l, 1.0)[..., None], 0.0)
            lse[..., i0:i1] = np.where(seen, m + np.log(l), -np.inf)
    result_dtype = np.result_type(qa, ka, va)
    return out.astype(result_dtype, copy=False), lse.astype(result_dtype, copy=False)
