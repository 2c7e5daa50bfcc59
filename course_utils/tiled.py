r"""Tiled attention that never forms the full score matrix: the FlashAttention recurrence in NumPy.

For each block of queries, the keys and values are read block by block. Each
query row keeps a running maximum ``m``, a running normalizer ``ell`` (the
papers' ℓ) and an *unnormalized* output accumulator ``acc``; when a block of
scores ``s`` arrives,

    m_new = max(m, max_j s_j)
    ell   = ell * exp(m - m_new) + sum_j exp(s_j - m_new)
    acc   = acc * exp(m - m_new) + sum_j exp(s_j - m_new) * v_j

and after the last block the output is ``acc / ell``. The ``(m, ell)`` half is
:func:`~course_utils.merge_softmax_states`; the accumulator is
rescaled by the same factor ``exp(m - m_new)``. This is the forward pass of
FlashAttention (Dao et al., 2022), in the form of FlashAttention-2 (Dao, 2023),
which divides by ``ell`` once at the end.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_real_array, check_int, compute_dtype
from .attention import apply_mask, attention_inputs, broadcast_mask
from .gradients import _sum_to_shape

__all__ = ["tiled_attention", "tiled_attention_backward"]

#: The arrays whose bytes ``tiled_attention(..., counts=...)`` tallies, in this order.
COUNTED_ARRAYS = ("q", "k", "v", "mask", "out", "lse")


def _stored_nbytes(a: np.ndarray) -> int:
    """Bytes of memory a slice covers: its ``nbytes``, with a broadcast (stride-0) axis counted once."""
    return a.itemsize * math.prod(n for n, stride in zip(a.shape, a.strides) if stride != 0) if a.size else 0


def _new_counts(counts: object) -> dict | None:
    """Check the `counts` argument and give it the keys it is missing, at zero."""
    if counts is None:
        return None
    if not isinstance(counts, dict):
        raise TypeError(f"counts must be a dict or None; got {type(counts).__name__}")
    for key in ("tiles", "tiles_skipped", "tiles_masked"):
        counts.setdefault(key, 0)
    for key in ("bytes_read", "bytes_written"):
        counts.setdefault(key, {})
        for name in COUNTED_ARRAYS:
            counts[key].setdefault(name, 0)
    return counts


def _update_block(
    m: np.ndarray, ell: np.ndarray, acc: np.ndarray, scores: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One step of the recurrence: fold a block of scores (..., bq, bk) and values (..., bk, Ev) into (m, ell, acc).

    `m` and `ell` have shape (..., bq), `acc` (..., bq, Ev). A block whose
    scores are all ``-inf`` leaves the state unchanged, also before any key
    has been allowed (state ``(-inf, 0, 0)``).
    """
    m_new = np.maximum(m, scores.max(axis=-1))
    # Where nothing has been allowed yet, m_new is -inf: shift by 0 instead, so that
    # exp(-inf - (-inf)) = exp(nan) never happens and every factor below is exactly 0.
    shift = np.where(np.isneginf(m_new), 0.0, m_new)
    alpha = np.exp(m - shift)  # <= 1: the old terms, re-expressed relative to the new maximum
    p = np.exp(scores - shift[..., None])  # every exponent <= 0: no overflow
    return m_new, ell * alpha + p.sum(axis=-1), acc * alpha[..., None] + p @ values


def _empty_lse(masked_lse: object) -> float:
    """The lse a row with no allowed key gets: -inf for merging, +inf for recomputing weights."""
    if not isinstance(masked_lse, str):
        raise TypeError(f"masked_lse must be the str '-inf' or '+inf'; got {type(masked_lse).__name__} {masked_lse!r}")
    if masked_lse not in ("-inf", "+inf"):
        raise ValueError(f"masked_lse must be '-inf' (for merging) or '+inf' (for recomputing P); got {masked_lse!r}")
    return -math.inf if masked_lse == "-inf" else math.inf


def _batch_shapes(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The batch shape of the scores (q with k) and of the output (with v too), or a ValueError naming the culprit."""
    try:
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    except ValueError:
        raise ValueError(f"the batch dimensions of q {q.shape} and k {k.shape} do not broadcast") from None
    try:
        return batch, np.broadcast_shapes(batch, v.shape[:-2])
    except ValueError:
        raise ValueError(f"the batch dimensions of v {v.shape} do not broadcast with those of q and k {batch}") from None


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
    counts: dict | None = None,
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
    counts : dict, optional
        If given, the function **adds** what it did into this dict (creating
        missing keys at 0), so that one dict can total several calls:
        ``"tiles"``, the tiles computed; ``"tiles_skipped"``, the causal tiles
        wholly above the diagonal, never read; ``"tiles_masked"``, the tiles
        that needed a mask (with `is_causal`, those that cross the diagonal;
        with `mask`, every tile computed); ``"bytes_read"`` and
        ``"bytes_written"``, dicts from ``"q"``, ``"k"``, ``"v"``, ``"mask"``,
        ``"out"`` and ``"lse"`` to the bytes of the tile slices actually read
        or written: the ``nbytes`` of each slice, in the dtype of the array as
        passed or returned. A tile is one (query block, key block) pair and
        spans every batch element; a broadcast batch axis (stride 0, as a
        2-D mask has over the heads) is counted once.

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
        not an int, a `masked_lse` that is not a str, or `counts` that is
        neither a dict nor None.
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
    Each row keeps ``(m, ell, acc)``. A new tile of scores ``s`` (one row
    shown) with values ``v`` updates them to

    .. math::

        m' = \max(m, \max_j s_j), \quad
        \ell' = \ell\, e^{m - m'} + \sum_j e^{s_j - m'}, \quad
        acc' = acc\, e^{m - m'} + \sum_j e^{s_j - m'} v_j .

    By induction, after any number of tiles ``ell`` is :math:`\sum e^{s_j - m}`
    and ``acc`` is :math:`\sum e^{s_j - m} v_j` over the keys seen, with ``m``
    their maximum: the factor :math:`e^{m - m'}` turns every old term
    :math:`e^{s_j - m}` into :math:`e^{s_j - m'}`. After the last tile,
    ``acc / ell`` is :math:`\sum_j \operatorname{softmax}(s)_j v_j`, the
    attention output. Only a tile of ``block_q * block_k`` scores exists at
    any time, instead of ``L * S``.

    The second result, :math:`\operatorname{lse} = m + \log \ell`, is what a
    backward pass needs: FlashAttention stores it (``L`` numbers per head)
    instead of the ``L * S`` weights, and recomputes any tile of weights
    from the tile of scores as :math:`P = \exp(S - \operatorname{lse})`,
    exactly normalized, without a second pass for the maximum or the
    normalizer (Dao et al., 2022). The same number merges the outputs of two
    halves of the keys computed apart (split-KV across the thread blocks of
    one GPU, as in Flash-Decoding, or ring attention across devices): the
    weight of each half is :math:`e^{\operatorname{lse}_i - \operatorname{lse}}`.

    With ``counts``, the reads follow the loop: each query tile is read
    once, and each key and value tile once per query tile, so K and V are
    read :math:`\lceil L / b_q \rceil` times; with `is_causal`, only up to
    the diagonal. That is FlashAttention-2's loop order. The I/O analysis of
    FlashAttention-1 (Dao et al., 2022, arXiv:2205.14135, Theorem 2) follows
    its Algorithm 1, the other order: K and V read once, Q and the output
    :math:`\lceil S / b_k \rceil` times; both total
    :math:`\Theta(L S d^2 / M)` for tiles sized to an SRAM of M numbers.

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

    Counting the tiles and the bytes moved (float64: 8 bytes a number):

    >>> counts = {}
    >>> _ = tiled_attention(q, k, v, is_causal=True, block_q=2, block_k=3, counts=counts)
    >>> counts["tiles"], counts["tiles_skipped"], counts["tiles_masked"]
    (5, 4, 2)
    >>> counts["bytes_read"]["k"] == 8 * 4 * (2 + 4 + 5)  # keys 0..1, 0..3, 0..4 for the three query tiles
    True
    """
    bq, bk = check_int(block_q, "block_q", 1), check_int(block_k, "block_k", 1)
    empty_lse = _empty_lse(masked_lse)
    # The same checks, in the same words, as scaled_dot_product_attention.
    qa, ka, va, factor = attention_inputs(q, k, v, mask, scale, is_causal)
    batch, out_batch = _batch_shapes(qa, ka, va)
    n_q, n_k, n_v = qa.shape[-2], ka.shape[-2], va.shape[-1]
    scores_shape = (*batch, n_q, n_k)
    # A broadcast view: tiles are sliced from it, nothing is copied.
    m_arr = None if mask is None else broadcast_mask(mask, scores_shape)

    tally = _new_counts(counts)
    dtype = compute_dtype(np.result_type(qa, ka, va))
    # Allocated in the returned dtype, so that the bytes written are those of the result.
    out = np.empty((*out_batch, n_q, n_v), np.result_type(qa, ka, va))
    lse = np.empty((*batch, n_q), out.dtype)
    n_k_tiles = -(-n_k // bk)
    with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
        for i0 in range(0, n_q, bq):
            i1 = min(i0 + bq, n_q)
            m = np.full((*batch, i1 - i0), -np.inf, dtype)
            ell = np.zeros((*batch, i1 - i0), dtype)
            acc = np.zeros((*out_batch, i1 - i0, n_v), dtype)
            read = [("q", qa[..., i0:i1, :])]
            q_tile = read[0][1].astype(dtype) * dtype.type(factor)  # scale bq queries, not bq * S scores
            # Causal: query i sees keys 0..i, so keys from i1 on are never seen by this tile.
            k_end = min(n_k, i1) if is_causal else n_k
            for j0 in range(0, k_end, bk):
                j1 = min(j0 + bk, k_end)
                k_tile, v_tile = ka[..., j0:j1, :], va[..., j0:j1, :]
                read += [("k", k_tile), ("v", v_tile)]
                s = q_tile @ np.swapaxes(k_tile, -1, -2).astype(dtype, copy=False)
                masked = True
                if is_causal and j1 - 1 > i0:  # only tiles that cross the diagonal need the mask
                    allowed = np.arange(j0, j1)[None, :] <= np.arange(i0, i1)[:, None]
                    s = np.where(allowed, s, -np.inf)
                elif m_arr is not None:
                    read.append(("mask", m_arr[..., i0:i1, j0:j1]))
                    s = apply_mask(s, read[-1][1])
                else:
                    masked = False
                m, ell, acc = _update_block(m, ell, acc, s, v_tile.astype(dtype, copy=False))
                if tally is not None:
                    tally["tiles"] += 1
                    tally["tiles_masked"] += masked
            # A row with no allowed key has ell = 0: output 0 (as SDPA) and lse = masked_lse.
            # `ell != 0`, not `ell > 0`: a NaN ell (a NaN score in the row) must give NaN, as the naive form does.
            seen = ell != 0
            out[..., i0:i1, :] = np.where(seen[..., None], acc / np.where(seen, ell, 1.0)[..., None], 0.0)
            lse[..., i0:i1] = np.where(seen, m + np.log(ell), empty_lse)
            if tally is not None:
                tally["tiles_skipped"] += n_k_tiles - len(range(0, k_end, bk))
                for name, part in read:
                    tally["bytes_read"][name] += _stored_nbytes(part)
                tally["bytes_written"]["out"] += _stored_nbytes(out[..., i0:i1, :])
                tally["bytes_written"]["lse"] += _stored_nbytes(lse[..., i0:i1])
    result_dtype = np.result_type(qa, ka, va)
    return out.astype(result_dtype, copy=False), lse.astype(result_dtype, copy=False)


# --- The backward pass, as FlashAttention computes it ------------------------------------


def tiled_attention_backward(
    q: ArrayLike,
    k: ArrayLike,
    v: ArrayLike,
    out: ArrayLike,
    lse: ArrayLike,
    d_out: ArrayLike,
    *,
    mask: ArrayLike | None = None,
    scale: float | None = None,
    is_causal: bool = False,
    block_q: int = 64,
    block_k: int = 64,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""The gradients of attention with respect to q, k and v, tile by tile, from the output and the logsumexp.

    The result equals :func:`~course_utils.attention_backward` (up to
    rounding), which forms the full (L, S) matrix of weights; this function
    never does. It loops as FlashAttention's backward pass does: over tiles
    of **keys and values in the outer loop**, so that the gradients of one
    tile of K and V are complete when its inner loop over the query tiles
    ends (on a GPU they stay on chip and are written once), while the
    gradient of Q is accumulated across the outer loop (on a GPU, with
    atomic adds to a float32 buffer).

    Parameters
    ----------
    q, k, v : array_like, shapes (..., L, E), (..., S, E), (..., S, Ev)
        The inputs of the forward pass.
    out, lse : array_like, shapes (..., L, Ev) and (..., L)
        The two results of :func:`tiled_attention` on the same inputs and
        arguments. For a row with no allowed key, `lse` may be ``-inf`` or
        ``+inf`` (either `masked_lse` convention): ``-inf`` is read as ``+inf``
        before the weights are recomputed, so that
        :math:`e^{-\infty - \operatorname{lse}} = 0` and not NaN.
    d_out : array_like, shape (..., L, Ev)
        :math:`dO = \partial \text{loss} / \partial O`.
    mask, scale, is_causal : optional
        As in :func:`tiled_attention`, and the same as in the forward pass.
    block_q, block_k : int, default 64
        Queries and keys per tile, each >= 1; they need not divide L or S.

    Returns
    -------
    dq, dk, dv : numpy.ndarray
        The shapes of `q`, `k` and `v` (batch dimensions that were broadcast
        are summed back). A fully masked query row passes no gradient: its
        ``dq`` row is 0 and it adds nothing to ``dk`` and ``dv``. With
        `is_causal`, key tiles that no query sees get zero gradients without
        being read. A NaN in any input reaches the gradients it touches.

    Raises
    ------
    TypeError, ValueError
        As :func:`tiled_attention`, and a ``ValueError`` naming `out`,
        `d_out` or `lse` if its shape is not that of the forward results.

    See Also
    --------
    tiled_attention : the forward pass whose results this function takes.
    attention_backward : the same gradients, from the full matrix of weights.

    Notes
    -----
    With :math:`P = \exp(S - \operatorname{lse})`, recomputed per tile from
    the tile of scores :math:`S = q k^T \cdot \text{scale}` (masked), and
    :math:`D = \operatorname{rowsum}(dO \odot O)`, computed once before the
    loops (it equals :math:`\operatorname{rowsum}(P \odot dP)` because
    :math:`O = P v`):

    .. math::

        dV_j \mathrel{+}= P_{ij}^T dO_i, \quad
        dP_{ij} = dO_i V_j^T, \quad
        dS_{ij} = P_{ij} \odot (dP_{ij} - D_i), \quad
        dQ_i \mathrel{+}= dS_{ij} K_j \cdot \text{scale}, \quad
        dK_j \mathrel{+}= dS_{ij}^T Q_i \cdot \text{scale} .

    for key tile :math:`j` (outer loop) and query tile :math:`i` (inner
    loop). FlashAttention-1 (Dao et al., 2022, arXiv:2205.14135, Algorithm 4)
    and FlashAttention-2 (Dao, 2023, arXiv:2307.08691, Algorithm 2) both loop
    this way. FlashAttention-1 recomputed P from the saved m and
    :math:`\ell`, and D inside the inner loop; FlashAttention-2 recomputes P
    from the lse alone, computes D in a separate pass first, and runs the
    key tiles in parallel, one thread block each.

    Examples
    --------
    >>> from course_utils import attention_backward
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(5, 4)), rng.normal(size=(7, 4)), rng.normal(size=(7, 3))
    >>> out, lse = tiled_attention(q, k, v, is_causal=True, block_q=2, block_k=3)
    >>> d_out = rng.normal(size=out.shape)
    >>> grads = tiled_attention_backward(q, k, v, out, lse, d_out, is_causal=True, block_q=2, block_k=3)
    >>> reference = attention_backward(q, k, v, d_out, is_causal=True)
    >>> [bool(np.allclose(g, r, rtol=0, atol=1e-12)) for g, r in zip(grads, reference)]
    [True, True, True]
    >>> bool((grads[1][5:] == 0).all())  # keys 5 and 6 lie beyond the last query: no query sees them
    True
    """
    bq, bk = check_int(block_q, "block_q", 1), check_int(block_k, "block_k", 1)
    qa, ka, va, factor = attention_inputs(q, k, v, mask, scale, is_causal)
    batch, out_batch = _batch_shapes(qa, ka, va)
    n_q, n_k = qa.shape[-2], ka.shape[-2]
    o, g, lse_in = as_real_array(out, "out"), as_real_array(d_out, "d_out"), as_real_array(lse, "lse")
    for name, arr, shape in (("out", o, (*out_batch, n_q, va.shape[-1])), ("d_out", g, (*out_batch, n_q, va.shape[-1])),
                             ("lse", lse_in, (*batch, n_q))):
        if arr.shape != shape:
            raise ValueError(f"{name} must have shape {shape}, as tiled_attention returns it for these inputs; got {arr.shape}")
    m_arr = None if mask is None else broadcast_mask(mask, (*batch, n_q, n_k))

    result_dtype = np.result_type(qa, ka, va, o, g)
    dtype = compute_dtype(result_dtype)
    qs = qa.astype(dtype) * dtype.type(factor)  # the scaled queries, as in the forward pass
    kw, vw, g = ka.astype(dtype, copy=False), va.astype(dtype, copy=False), g.astype(dtype, copy=False)
    # Either convention in, +inf used: a fully masked row then recomputes exp(-inf - inf) = 0, never NaN.
    lse_p = np.where(np.isneginf(lse_in), np.inf, lse_in).astype(dtype, copy=False)
    d_row = (g * o.astype(dtype, copy=False)).sum(axis=-1)  # D = rowsum(dO * O), one number per query row
    dq = np.zeros((*out_batch, n_q, qa.shape[-1]), dtype)
    dk = np.zeros((*out_batch, n_k, ka.shape[-1]), dtype)
    dv = np.zeros((*out_batch, n_k, va.shape[-1]), dtype)
    with np.errstate(invalid="ignore", under="ignore"):
        for j0 in range(0, n_k, bk):  # outer loop: one tile of keys and values
            j1 = min(j0 + bk, n_k)
            k_tile, v_tile = kw[..., j0:j1, :], vw[..., j0:j1, :]
            dk_tile = np.zeros((*out_batch, j1 - j0, ka.shape[-1]), dtype)  # on a GPU: on chip until the inner loop ends
            dv_tile = np.zeros((*out_batch, j1 - j0, va.shape[-1]), dtype)
            # Causal: query i sees keys 0..i, so the query tiles before the one holding query j0 never see this tile.
            for i0 in range((j0 // bq) * bq if is_causal else 0, n_q, bq):
                i1 = min(i0 + bq, n_q)
                s = qs[..., i0:i1, :] @ np.swapaxes(k_tile, -1, -2)
                if is_causal and j1 - 1 > i0:  # only tiles that cross the diagonal need the mask
                    s = np.where(np.arange(j0, j1)[None, :] <= np.arange(i0, i1)[:, None], s, -np.inf)
                elif m_arr is not None:
                    s = apply_mask(s, m_arr[..., i0:i1, j0:j1])
                p = np.exp(s - lse_p[..., i0:i1, None])  # the weights of this tile, recomputed
                g_tile = g[..., i0:i1, :]
                dv_tile += np.swapaxes(p, -1, -2) @ g_tile
                ds = p * (g_tile @ np.swapaxes(v_tile, -1, -2) - d_row[..., i0:i1, None])
                dq[..., i0:i1, :] += ds @ k_tile  # accumulated over the outer loop (atomic adds on a GPU)
                dk_tile += np.swapaxes(ds, -1, -2) @ qs[..., i0:i1, :]  # the scale is already in qs
            dk[..., j0:j1, :], dv[..., j0:j1, :] = dk_tile, dv_tile  # written once
    dq *= dtype.type(factor)
    return tuple(
        _sum_to_shape(grad, arr.shape).astype(result_dtype, copy=False) for grad, arr in ((dq, qa), (dk, ka), (dv, va))
    )
