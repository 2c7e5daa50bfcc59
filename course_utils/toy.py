"""The toy sentence of lessons 05, 06 and 06b: "the cat sat on the mat", its queries, keys and values."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._validation import check_int, check_positive_finite

__all__ = ["ToySentence", "toy_sentence", "VOCAB", "TOKENS"]

#: Every word with an embedding; "<pad>" is lesson 05's padding token.
VOCAB = ("the", "cat", "sat", "on", "mat", "a", "dog", "ran", "<pad>")
#: The sentence: six tokens, "the" twice with the same embedding (no positional encoding).
TOKENS = ("the", "cat", "sat", "on", "the", "mat")


class ToySentence(NamedTuple):
    """The toy sentence's data, as :func:`toy_sentence` draws them."""

    labels: list[str]
    embedding: dict[str, np.ndarray]
    X: np.ndarray
    W_q: np.ndarray
    W_k: np.ndarray
    W_v: np.ndarray
    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    scaled: np.ndarray


def toy_sentence(seed: int = 1, *, sigma: float | None = None, d_model: int = 8, d_k: int = 4,
                 d_v: int = 4) -> ToySentence:
    """Draw the toy sentence's embeddings and weights from one seed, and project them.

    One generator, seeded with `seed`, draws a standard normal embedding of
    `d_model` numbers for each word of :data:`VOCAB` in turn, then ``W_q``,
    ``W_k`` and ``W_v`` with entries of standard deviation `sigma`. Then
    ``Q = X W_q``, ``K = X W_k``, ``V = X W_v`` for the rows ``X`` of
    :data:`TOKENS`, and the scaled scores ``Q K^T / sqrt(d_k)``.

    Parameters
    ----------
    seed : int, default 1
        The seed (lesson 05 chooses 1: the first whose spread of scores is typical).
    sigma : float, optional
        The weights' standard deviation; by default ``1 / sqrt(d_model)``, which
        gives the scaled scores variance 1 by lesson 03's formula.
    d_model, d_k, d_v : int, default 8, 4, 4
        The embedding, query-and-key and value lengths.

    Returns
    -------
    ToySentence
        ``labels`` ("0 the", "1 cat", ...), ``embedding`` (word -> vector), ``X``,
        the three weight matrices, ``Q``, ``K``, ``V`` and ``scaled``.

    Raises
    ------
    TypeError, ValueError
        If `seed` is not a non-negative int, a length not a positive int, or
        `sigma` not a positive finite number.

    Examples
    --------
    >>> toy = toy_sentence()
    >>> toy.labels[:3], toy.Q.shape, toy.scaled.shape
    (['0 the', '1 cat', '2 sat'], (6, 4), (6, 6))
    >>> bool(np.array_equal(toy.scaled[0], toy.scaled[4]))  # the two "the"s
    True
    """
    seed = check_int(seed, "seed", 0)
    d_model, d_k, d_v = (check_int(value, name, 1) for value, name in ((d_model, "d_model"), (d_k, "d_k"), (d_v, "d_v")))
    sigma = 1 / np.sqrt(d_model) if sigma is None else check_positive_finite(sigma, "sigma")
    draw = np.random.default_rng(seed)
    embedding = {word: draw.normal(size=d_model) for word in VOCAB}
    W_q, W_k, W_v = (draw.normal(scale=sigma, size=(d_model, d)) for d in (d_k, d_k, d_v))
    X = np.stack([embedding[t] for t in TOKENS])
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    labels = [f"{i} {t}" for i, t in enumerate(TOKENS)]
    return ToySentence(labels, embedding, X, W_q, W_k, W_v, Q, K, V, Q @ K.T / np.sqrt(d_k))
