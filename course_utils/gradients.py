"""Derivatives of softmax: the Jacobian, for looking at; the vector-Jacobian product, for computing."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_real_array

__all__ = ["softmax_jacobian"]


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
