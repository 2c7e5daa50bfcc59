"""Derivatives of softmax: the Jacobian, for looking at; the vector-Jacobian product, for computing."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_real_array, as_same_shape_pair
from .softmax import softmax

__all__ = ["cross_entropy_grad", "log_softmax_backward", "softmax_backward", "softmax_jacobian"]


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
