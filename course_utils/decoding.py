r"""Split-KV attention (Flash-Decoding): partial results over chunks of keys, merged with their logsumexps.

Attention over keys split into chunks :math:`s = 1 \dots n` can be computed
one chunk at a time, independently: each chunk gives a partial output
:math:`O_s` (normalized over its own keys) and the logsumexp
:math:`\operatorname{lse}_s` of its scores. The exact output over all keys is

.. math::

    \operatorname{lse} = \log \sum_s e^{\operatorname{lse}_s}, \qquad
    O = \sum_s e^{\operatorname{lse}_s - \operatorname{lse}}\, O_s ,

because :math:`e^{\operatorname{lse}_s - \operatorname{lse}}` is the share of
the softmax mass that falls on chunk :math:`s`. A chunk with no allowed key
has :math:`\operatorname{lse}_s = -\infty` and weight 0.

Flash-Decoding (Dao, Haziza, Massa and Sizov, 2023) uses this to decode: one
new query against a long KV cache is a single tile of queries, too little
work for a GPU's many processors, so the cache is split into chunks, each
handled by its own thread block **on the same GPU**, and a second small
kernel merges the parts. Ring attention (Liu, Zaharia and Abbeel, 2023,
arXiv:2310.01889) uses the same merge across devices.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_real_array, check_int, compute_dtype
from .attention import attention_inputs, broadcast_mask
from .tiled import _batch_shapes, _empty_lse, tiled_attention

__all__ = ["merge_attention_parts", "split_kv_attention"]


def merge_attention_parts(
    outputs: ArrayLike, lses: ArrayLike, *, masked_lse: str = "-inf"
) -> tuple[np.ndarray, np.ndarray]:
    r"""Merge the attention outputs of disjoint chunks of keys into the output over all of them.

    Parameters
    ----------
    outputs : array_like, shape (n, ..., L, Ev)
        The partial outputs, one per chunk along the first axis, each
        normalized over its own keys (as :func:`~course_utils.tiled_attention`
        returns it); a chunk with no allowed key for a row has zeros there.
    lses : array_like, shape (n, ..., L)
        The logsumexp of each chunk's scaled, masked scores per row, ``-inf``
        where the chunk has no allowed key for the row. Its batch dimensions
        must broadcast to those of `outputs`.
    masked_lse : {"-inf", "+inf"}, default "-inf"
        The merged lse of a row that no chunk allows: ``-inf`` to merge it
        again later, ``"+inf"`` to recompute weights from it, as
        FlashAttention-2's merge kernel stores.

    Returns
    -------
    output : numpy.ndarray, shape (..., L, Ev)
        :math:`\sum_s e^{\operatorname{lse}_s - \operatorname{lse}} O_s`; zeros
        for a row that no chunk allows. A chunk of weight 0 contributes
        exactly 0, whatever its output holds.
    lse : numpy.ndarray, shape (..., L)
        :math:`\log \sum_s e^{\operatorname{lse}_s}`, the shape of `lses`
        without its first axis.

    Raises
    ------
    TypeError
        For non-real inputs or a `masked_lse` that is not a str.
    ValueError
        If the shapes do not fit (naming `outputs` or `lses`), if `lses`
        holds ``+inf`` (the convention for recomputing weights, which a merge
        cannot use: :math:`e^{+\infty - (+\infty)}` is NaN), or for an unknown
        `masked_lse`.

    Notes
    -----
    The weights are computed relative to the largest :math:`\operatorname{lse}_s`
    of each row, as in a stable softmax over the chunks: every exponent is
    :math:`\le 0`, so nothing overflows however far apart the chunks' lses
    lie. Merging is associative and the order of the chunks does not
    matter, which is what lets them run in parallel.

    Examples
    --------
    >>> from course_utils import scaled_dot_product_attention, tiled_attention
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(10, 4)), rng.normal(size=(10, 2))
    >>> parts = [tiled_attention(q, k[a:b], v[a:b]) for a, b in [(0, 4), (4, 10)]]
    >>> out, lse = merge_attention_parts([o for o, _ in parts], [l for _, l in parts])
    >>> bool(np.allclose(out, scaled_dot_product_attention(q, k, v)[0]))
    True
    >>> empty = (np.zeros((3, 2)), np.full(3, -np.inf))  # a chunk with no allowed key changes nothing
    >>> bool(np.allclose(merge_attention_parts([out, empty[0]], [lse, empty[1]])[0], out))
    True
    """
    empty = _empty_lse(masked_lse)
    outs, ls = as_real_array(outputs, "outputs"), as_real_array(lses, "lses")
    if outs.ndim < 2 or outs.shape[0] == 0:
        raise ValueError(f"outputs must have shape (n, ..., L, Ev) with n >= 1 chunks; got {outs.shape}")
    if ls.ndim != outs.ndim - 1 or ls.shape[0] != outs.shape[0]:
        raise ValueError(f"lses must have shape (n, ..., L) for outputs of shape {outs.shape}; got {ls.shape}")
    try:
        fits = np.broadcast_shapes(ls.shape, outs.shape[:-1]) == outs.shape[:-1]
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"lses of shape {ls.shape} do not broadcast to the rows of outputs {outs.shape[:-1]}")
    if np.isposinf(ls).any():
        raise ValueError(
            "lses holds +inf, the convention for recomputing weights; a chunk with no allowed key must have "
            "lse -inf to be merged (tiled_attention(..., masked_lse='-inf'))"
        )
    result_dtype = np.result_type(outs, ls)
    dtype = compute_dtype(result_dtype)
    outs, ls = outs.astype(dtype, copy=False), ls.astype(dtype, copy=False)
    top = ls.max(axis=0)
    # Where every chunk is empty the maximum is -inf: shift by 0, so that exp(-inf - (-inf)) = NaN never happens.
    shift = np.where(np.isneginf(top), 0.0, top)
    with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
        mass = np.exp(ls - shift)  # <= 1 each, the largest exactly 1 (unless all are 0)
        total = mass.sum(axis=0)
        share = np.where(total != 0, mass / np.where(total != 0, total, 1.0), 0.0)  # e^(lse_s - lse)
        # A chunk of weight 0 adds exactly 0, even if its output is not finite.
        out = np.where(share[..., None] != 0, share[..., None] * outs, 0.0).sum(axis=0)
        lse = np.where(total != 0, shift + np.log(total), empty)
    return out.astype(result_dtype, copy=False), lse.astype(result_dtype, copy=False)


def split_kv_attention(
    q: ArrayLike,
    k: ArrayLike,
    v: ArrayLike,
    mask: ArrayLike | None = None,
    *,
    n_splits: int | None = None,
    chunk: int | None = None,
    scale: float | None = None,
    is_causal: bool = False,
    block_q: int = 64,
    block_k: int = 64,
    masked_lse: str = "-inf",
) -> tuple[np.ndarray, np.ndarray]:
    r"""Attention with the keys split into chunks, each computed on its own and merged by its logsumexp.

    The result equals :func:`~course_utils.scaled_dot_product_attention` and
    :func:`~course_utils.tiled_attention` (up to rounding), with the same
    arguments and conventions.

    Parameters
    ----------
    q, k, v : array_like, shapes (..., L, E), (..., S, E), (..., S, Ev)
        Queries, keys and values.
    mask : array_like, optional
        Bool (True = attend) or real (added to the scores), broadcastable to
        (..., L, S). For decoding against a KV cache use
        ``causal_mask(L, S, align="lower-right")``.
    n_splits, chunk : int
        Give exactly one. `n_splits` >= 1: that many chunks of
        ``ceil(S / n_splits)`` keys, the last ones possibly empty (as
        Flash-Decoding splits). `chunk` >= 1: chunks of that many keys, the
        last one possibly shorter.
    scale : float, optional
        Finite and > 0; defaults to :math:`1/\sqrt{E}`.
    is_causal : bool, default False
        Upper-left causal mask, as in :func:`~course_utils.tiled_attention`
        (query ``i`` sees keys ``0..i``); cannot be combined with `mask`.
    block_q, block_k : int, default 64
        The tile sizes inside each chunk.
    masked_lse : {"-inf", "+inf"}, default "-inf"
        The lse returned for a row with no allowed key.

    Returns
    -------
    output : numpy.ndarray, shape (..., L, Ev)
        Zeros for a row with no allowed key.
    lse : numpy.ndarray, shape (..., L)
        The logsumexp of each row of the scaled, masked scores.

    Raises
    ------
    TypeError, ValueError
        As :func:`~course_utils.tiled_attention`; and if not exactly one of
        `n_splits` and `chunk` is given, or it is not an int >= 1.

    See Also
    --------
    merge_attention_parts : the merge, on its own.

    Examples
    --------
    >>> from course_utils import causal_mask, scaled_dot_product_attention
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(1, 8)), rng.normal(size=(100, 8)), rng.normal(size=(100, 8))
    >>> mask = causal_mask(1, 100, align="lower-right")  # the newest token sees the whole cache
    >>> out, lse = split_kv_attention(q, k, v, mask, n_splits=8)  # 8 chunks of 13 keys, the last of 9
    >>> bool(np.allclose(out, scaled_dot_product_attention(q, k, v, mask)[0]))
    True
    """
    if (n_splits is None) == (chunk is None):
        raise ValueError(f"give exactly one of n_splits and chunk; got n_splits={n_splits!r}, chunk={chunk!r}")
    _empty_lse(masked_lse)
    qa, ka, va, factor = attention_inputs(q, k, v, mask, scale, is_causal)
    n_q, n_k = qa.shape[-2], ka.shape[-2]
    if n_splits is not None:
        parts = check_int(n_splits, "n_splits", 1)
        size = max(1, -(-n_k // parts))
    else:
        size = check_int(chunk, "chunk", 1)
        parts = max(1, -(-n_k // size))
    batch, _ = _batch_shapes(qa, ka, va)
    m_arr = None if mask is None else broadcast_mask(mask, (*batch, n_q, n_k))
    outputs, lses = [], []
    for s in range(parts):
        a, b = min(s * size, n_k), min((s + 1) * size, n_k)
        if is_causal:  # upper-left: query i sees key j when j <= i, with j counted from the start of k
            part_mask = np.arange(a, b)[None, :] <= np.arange(n_q)[:, None]
        else:
            part_mask = None if m_arr is None else m_arr[..., a:b]
        # -inf for an empty row of a chunk: the merge gives it weight 0.
        out, lse = tiled_attention(qa, ka[..., a:b, :], va[..., a:b, :], part_mask, scale=factor,
                                   block_q=block_q, block_k=block_k, masked_lse="-inf")
        outputs.append(out)
        lses.append(lse)
    out_shape, lse_shape = outputs[0].shape, lses[0].shape
    # The lse has the batch shape of q and k; v may add batch dimensions to the output. Align them for the merge.
    lse_view = np.stack(lses).reshape((parts, *(1,) * (len(out_shape) - 1 - len(lse_shape)), *lse_shape))
    out, lse = merge_attention_parts(np.stack(outputs), lse_view, masked_lse=masked_lse)
    return out, lse.reshape(lse_shape)
