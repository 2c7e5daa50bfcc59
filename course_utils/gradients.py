"""Derivatives of softmax: the Jacobian, for looking at; the vector-Jacobian product, for computing; and attention's backward pass."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_real_array, as_same_shape_pair
from .attention import attention_inputs, scaled_dot_product_attention
from .softmax import softmax

__all__ = ["attention_backward", "cross_entropy_grad", "log_softmax_backward", "softmax_backward", "softmax_jacobian"]


def softmax_jacobian(p: ArrayLike) -> np.ndarray:
    r"""The Jacobian of softmax, :math:`J_{ik} = \partial p_i / \partial x_k = p_i(\delta_{ik} - p_k)`.

    Parameters
    ----------
    p : array_like, shape (..., n)
        Softmax outputs (probabilities) along the last axis.

    Returns
    -------
    numpy.ndarray, shape (..., n, n)
        ``diag(p) - p p^T`` for every row: symmetric, positive semi-definite,
        with rows summing to 0 (rank n - 1 when every p_i > 0).

    Raises
    ------
    TypeError
        If `p` is not real.
    ValueError
        If `p` has no dimensions.

    Notes
    -----
    The Jacobian has n² entries per row. Training never forms it; the
    vector-Jacobian product ``p * (g - <g, p>)`` gives the same gradient
    in O(n) (lesson 04).

    Examples
    --------
    >>> softmax_jacobian([0.5, 0.5])
    array([[ 0.25, -0.25],
           [-0.25,  0.25]])
    """
    probs = as_real_array(p, "p")
    if probs.ndim == 0:
        raise ValueError("p must have at least one dimension (the probabilities along the last axis)")
    outer = probs[..., :, None] * probs[..., None, :]
    jac = -outer
    diagonal = np.einsum("...ii->...i", jac)  # a writable view of the diagonal
    diagonal += probs
    return jac


def softmax_backward(grad_output: ArrayLike, probs: ArrayLike, axis: int = -1) -> np.ndarray:
    r"""The gradient through softmax, :math:`p \odot (g - \langle g, p \rangle)`, without the Jacobian.

    Parameters
    ----------
    grad_output : array_like
        :math:`g = \partial L / \partial p`, the gradient of the loss with respect to the softmax output.
    probs : array_like
        The softmax output :math:`p`, same shape.
    axis : int, default -1
        The softmax axis.

    Returns
    -------
    numpy.ndarray
        :math:`\partial L / \partial x = J^T g = J g` (the Jacobian is symmetric), same shape.

    Raises
    ------
    TypeError, ValueError
        For non-real inputs, shapes that differ (naming both) or a bad axis.

    Notes
    -----
    :math:`(Jg)_k = \sum_i p_i(\delta_{ik} - p_k) g_i = p_k (g_k - \sum_i p_i g_i)`:
    O(n) time and memory per row instead of the O(n²) of forming :math:`J`.

    Examples
    --------
    >>> softmax_backward([1.0, 0.0], [0.5, 0.5])
    array([ 0.25, -0.25])
    """
    g, p, ax = as_same_shape_pair(grad_output, probs, ("grad_output", "probs"), axis)
    return p * (g - (g * p).sum(axis=ax, keepdims=True))


def log_softmax_backward(grad_output: ArrayLike, log_probs: ArrayLike, axis: int = -1) -> np.ndarray:
    r"""The gradient through log-softmax, :math:`g - p \sum_i g_i` with :math:`p = e^{\text{log\_probs}}`.

    Parameters
    ----------
    grad_output : array_like
        :math:`\partial L / \partial \log p`.
    log_probs : array_like
        The log-softmax output, same shape.
    axis : int, default -1

    Returns
    -------
    numpy.ndarray
        :math:`\partial L / \partial x`, same shape.

    Raises
    ------
    TypeError, ValueError
        For non-real inputs, shapes that differ or a bad axis.

    Examples
    --------
    >>> log_softmax_backward([0.0, -1.0], np.log([0.5, 0.5]))
    array([ 0.5, -0.5])
    """
    g, logp, ax = as_same_shape_pair(grad_output, log_probs, ("grad_output", "log_probs"), axis)
    return g - np.exp(logp) * g.sum(axis=ax, keepdims=True)


def cross_entropy_grad(logits: ArrayLike, targets: ArrayLike, axis: int = -1) -> np.ndarray:
    r"""The gradient of :math:`-\sum_i y_i \log \operatorname{softmax}(x)_i` with respect to the logits: :math:`p - y`.

    Parameters
    ----------
    logits : array_like
        Scores :math:`x`.
    targets : array_like
        A target distribution :math:`y` (one-hot or soft), same shape, summing to 1 along `axis`.
    axis : int, default -1

    Returns
    -------
    numpy.ndarray
        ``softmax(logits) - targets``.

    Raises
    ------
    TypeError, ValueError
        For non-real inputs, shapes that differ, targets that do not sum to 1, or a bad axis.

    Examples
    --------
    >>> cross_entropy_grad([0.0, 0.0], [1.0, 0.0])
    array([-0.5,  0.5])
    """
    x, y, ax = as_same_shape_pair(logits, targets, ("logits", "targets"), axis)
    if y.size and not np.allclose(y.sum(axis=ax), 1.0, atol=1e-6):
        raise ValueError("targets must sum to 1 along axis (a one-hot or soft target distribution)")
    return softmax(x, axis=ax) - y


def _sum_to_shape(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum a broadcast gradient back to the shape of the input it belongs to."""
    lead = grad.ndim - len(shape)
    grad = grad.sum(axis=tuple(range(lead))) if lead else grad
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=axes, keepdims=True) if axes else grad


def attention_backward(
    q: ArrayLike,
    k: ArrayLike,
    v: ArrayLike,
    grad_out: ArrayLike,
    *,
    mask: ArrayLike | None = None,
    is_causal: bool = False,
    scale: float | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""The gradients of a loss with respect to q, k and v, given its gradient with respect to attention's output.

    With :math:`S = q k^T \cdot \text{scale} + M`, :math:`P = \operatorname{softmax}(S)`
    and :math:`O = P v` (see :func:`~course_utils.scaled_dot_product_attention`),
    and :math:`dO = \partial L / \partial O`:

    .. math::

        dP = dO\, v^T, \quad
        dS = P \odot (dP - \operatorname{rowsum}(dP \odot P)), \quad
        dq = dS\, k \cdot \text{scale}, \quad
        dk = dS^T q \cdot \text{scale}, \quad
        dv = P^T dO .

    Parameters
    ----------
    q : array_like, shape (..., L, E)
    k : array_like, shape (..., S, E)
    v : array_like, shape (..., S, Ev)
    grad_out : array_like, shape (..., L, Ev)
        :math:`\partial L / \partial O`, the shape of attention's output.
    mask : array_like, optional
        As in :func:`~course_utils.scaled_dot_product_attention`: bool (True =
        attend) or real (added to the scores), broadcastable to (..., L, S).
    is_causal : bool, default False
        Apply the upper-left aligned causal mask. Cannot be combined with `mask`.
    scale : float, optional
        Finite and > 0; defaults to :math:`1/\sqrt{E}`.

    Returns
    -------
    dq, dk, dv : numpy.ndarray
        The shapes of `q`, `k` and `v` (batch dimensions that were broadcast
        are summed back). A fully masked query row passes no gradient: its
        ``dq`` row is 0 and it adds nothing to ``dk`` and ``dv``, as torch's
        SDPA in 2.13. A NaN in any input propagates as NaN.

    Raises
    ------
    TypeError, ValueError
        As :func:`~course_utils.scaled_dot_product_attention`, and a
        ``ValueError`` naming `grad_out` if it does not have the output's shape.

    Notes
    -----
    :math:`dS` is softmax's vector-Jacobian product (:func:`softmax_backward`)
    applied to every row. The factor `scale` appears twice: once in the
    forward pass (it sets how peaked P is) and once here, as the chain-rule
    factor :math:`\partial S / \partial q = \text{scale} \cdot k`.

    Examples
    --------
    >>> q = np.array([[1.0, 0.0]])
    >>> k = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> v = np.array([[1.0], [0.0]])
    >>> dq, dk, dv = attention_backward(q, k, v, [[1.0]], scale=1.0)
    >>> dq.round(4), dv.round(4)
    (array([[ 0.1966, -0.1966]]), array([[0.7311],
           [0.2689]]))
    """
    qa, ka, va, factor = attention_inputs(q, k, v, mask, scale, is_causal)
    out, p = scaled_dot_product_attention(qa, ka, va, mask, scale=factor, is_causal=is_causal)
    g = as_real_array(grad_out, "grad_out")
    if g.shape != out.shape:
        raise ValueError(f"grad_out must have the shape of attention's output {out.shape}; got {g.shape}")
    # A float32 input gives float32 gradients (the default scale is a NumPy float64, which would promote).
    dtype = np.result_type(qa, ka, va, g)
    factor = float(factor)
    p = p.astype(dtype, copy=False)
    dp = np.matmul(g, np.swapaxes(va, -1, -2))
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    dq = np.matmul(ds, ka) * factor
    dk = np.matmul(np.swapaxes(ds, -1, -2), qa) * factor
    dv = np.matmul(np.swapaxes(p, -1, -2), g)
    return _sum_to_shape(dq, qa.shape), _sum_to_shape(dk, ka.shape), _sum_to_shape(dv, va.shape)
