"""Interactive explorers built with ipywidgets, one per lesson idea."""

from __future__ import annotations

from typing import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_real_array, check_int
from .experiments import sample_scores
from .plotting import PALETTE
from .softmax import softmax
from .sparse import entmax15, entmax_bisect, sparsemax

__all__ = ["alpha_explorer", "dk_explorer", "temperature_explorer"]


def temperature_explorer(scores: ArrayLike, labels: Sequence[str] | None = None) -> widgets.interactive:
    """A temperature slider that redraws ``softmax(scores / T)`` as a bar chart.

    Parameters
    ----------
    scores : array_like
        One 1-D row of scores.
    labels : sequence of str, optional
        One name per score (tokens, say); by default the positions.

    Returns
    -------
    ipywidgets.interactive
        Display it in a notebook. Its ``children[0]`` is the slider (a
        ``FloatLogSlider`` from T = 0.01 to 100) and its ``result`` holds the
        weights last drawn.

    Raises
    ------
    ValueError
        If `scores` is not 1-D and non-empty, or `labels` has another length.

    Examples
    --------
    In a notebook (outside one, the widget has nowhere to draw):

    >>> explorer = temperature_explorer([2.0, 1.0, 0.0], ["a", "b", "c"])  # doctest: +SKIP
    >>> explorer  # shows the slider and the bars  # doctest: +SKIP
    >>> explorer.children[0].value = 100.0  # hot: nearly uniform  # doctest: +SKIP
    >>> explorer.result.round(2)  # doctest: +SKIP
    array([0.34, 0.33, 0.33])
    """
    row = as_real_array(scores, "scores")
    if row.ndim != 1 or row.size == 0:
        raise ValueError(f"scores must be one non-empty row (1-D); got shape {row.shape}")
    names = [str(i) for i in range(row.size)] if labels is None else [str(label) for label in labels]
    if len(names) != row.size:
        raise ValueError(f"labels must have one name per score: {len(names)} labels for {row.size} scores")

    def draw(temperature: float) -> np.ndarray:
        weights = softmax(row, temperature=temperature)
        fig, ax = plt.subplots(figsize=(5.6, 3.0))
        bars = ax.bar(names, weights, color=PALETTE[0])
        ax.bar_label(bars, labels=[f"{w:.3f}" for w in weights], padding=2)
        ax.set_ylim(0, 1.12)
        ax.set_xlabel("position (token)")
        ax.set_ylabel("attention weight")
        ax.set_title(f"softmax(scores / T) at T = {temperature:.2f}")
        plt.show()
        return weights

    slider = widgets.FloatLogSlider(
        value=1.0, base=10, min=-2, max=2, step=0.01, description="T", readout_format=".2f", continuous_update=True
    )
    return widgets.interactive(draw, temperature=slider)


def dk_explorer(*, n_keys: int = 16, n_rows: int = 200, seed: int = 0) -> widgets.interactive:
    """A d_k slider that redraws random attention scores with and without the 1/sqrt(d_k) scaling.

    Left: the histogram of the raw scores ``q·k`` and of the scaled scores
    ``q·k / sqrt(d_k)``, on one fixed axis, so the raw ones visibly spread as
    d_k grows while the scaled ones stay put. Right: the softmax of one row
    of those scores, raw and scaled, as bars.

    Parameters
    ----------
    n_keys : int, default 16
        Keys per row (bars in the right panel), >= 1.
    n_rows : int, default 200
        Rows in the histogram (``n_rows * n_keys`` scores), >= 1.
    seed : int, default 0
        Each slider position draws its scores with
        ``sample_scores(d_k, n_keys, n_rows, numpy.random.default_rng([seed, d_k]))``,
        so returning to a position shows the same sample.

    Returns
    -------
    ipywidgets.interactive
        Display it in a notebook. Its ``children[0]`` is the slider (a
        ``SelectionSlider`` over d_k = 1, 2, 4, ..., 1024, starting at 64) and
        its ``result`` is a dict with the row last drawn: ``"d_k"``,
        ``"scores"`` (the raw scores of the row), ``"raw"`` (their softmax)
        and ``"scaled"`` (the softmax of ``scores / sqrt(d_k)``).

    Raises
    ------
    TypeError, ValueError
        If `n_keys`, `n_rows` or `seed` is not an int, or `n_keys` or `n_rows` < 1, or `seed` < 0.

    Examples
    --------
    In a notebook (outside one, the widget has nowhere to draw):

    >>> explorer = dk_explorer()  # doctest: +SKIP
    >>> explorer  # shows the slider, the histograms and the bars  # doctest: +SKIP
    >>> explorer.children[0].value = 1024  # doctest: +SKIP
    >>> explorer.result["raw"].max() > explorer.result["scaled"].max()  # doctest: +SKIP
    True
    """
    n_k = check_int(n_keys, "n_keys", 1)
    n_r = check_int(n_rows, "n_rows", 1)
    base_seed = check_int(seed, "seed", 0)
    options = [2**i for i in range(11)]
    # One x-range for every position: 4 standard deviations of the raw scores at the largest d_k.
    bins = np.linspace(-4 * np.sqrt(options[-1]), 4 * np.sqrt(options[-1]), 129)

    def draw(d_k: int) -> dict[str, object]:
        raw = sample_scores(d_k, n_k, n_r, np.random.default_rng([base_seed, d_k]))
        scaled = raw / np.sqrt(d_k)
        row = {"d_k": d_k, "scores": raw[0], "raw": softmax(raw[0]), "scaled": softmax(scaled[0])}
        fig, (ax_hist, ax_row) = plt.subplots(1, 2, figsize=(10.0, 3.4))
        ax_hist.hist(raw.ravel(), bins=bins, histtype="stepfilled", color=PALETTE[0], alpha=0.7, label="raw q·k")
        ax_hist.hist(scaled.ravel(), bins=bins, histtype="stepfilled", color=PALETTE[1], alpha=0.7, label="q·k / √d_k")
        ax_hist.set_xlabel("attention score")
        ax_hist.set_ylabel(f"count (of {raw.size} scores)")
        ax_hist.set_title(f"Scores at d_k = {d_k} (raw std ≈ √d_k = {np.sqrt(d_k):.1f})")
        ax_hist.legend()
        keys = np.arange(n_k)
        ax_row.bar(keys - 0.2, row["raw"], width=0.4, color=PALETTE[0], label="softmax(raw)")
        ax_row.bar(keys + 0.2, row["scaled"], width=0.4, color=PALETTE[1], label="softmax(scaled)")
        ax_row.set_ylim(0, 1.05)
        ax_row.set_xlabel("key")
        ax_row.set_ylabel("attention weight")
        ax_row.set_title("One attention row")
        ax_row.legend()
        plt.show()
        return row

    slider = widgets.SelectionSlider(options=options, value=64, description="d_k", continuous_update=True)
    return widgets.interactive(draw, d_k=slider)


def alpha_explorer(scores: ArrayLike, labels: Sequence[str] | None = None) -> widgets.interactive:
    """An α slider that redraws α-entmax of one row of scores, from softmax (α = 1) to sparsemax (α = 2) and beyond.

    Parameters
    ----------
    scores : array_like
        One 1-D row of scores.
    labels : sequence of str, optional
        One name per score (tokens, say); by default the positions.

    Returns
    -------
    ipywidgets.interactive
        Display it in a notebook. Its ``children[0]`` is the slider (a
        ``FloatSlider`` from α = 1 to 3 in steps of 0.05, starting at 1) and its
        ``result`` holds the weights last drawn. The title names the mapping and
        the support size (how many weights are not exactly 0); only exact zeros
        are labelled "0".

    Raises
    ------
    ValueError
        If `scores` is not 1-D and non-empty, or `labels` has another length.
    TypeError
        If `scores` does not hold real numbers.

    Notes
    -----
    α = 1 is computed by :func:`~course_utils.softmax`, α = 1.5 by
    :func:`~course_utils.entmax15` and α = 2 by :func:`~course_utils.sparsemax`,
    all exactly; every other α by :func:`~course_utils.entmax_bisect`.

    Examples
    --------
    In a notebook (outside one, the widget has nowhere to draw):

    >>> explorer = alpha_explorer([1.0, 0.8, 0.1], ["a", "b", "c"])  # doctest: +SKIP
    >>> explorer  # shows the slider and the bars  # doctest: +SKIP
    >>> explorer.children[0].value = 2.0  # sparsemax  # doctest: +SKIP
    >>> explorer.result  # doctest: +SKIP
    array([0.6, 0.4, 0. ])
    """
    row = as_real_array(scores, "scores")
    if row.ndim != 1 or row.size == 0:
        raise ValueError(f"scores must be one non-empty row (1-D); got shape {row.shape}")
    names = [str(i) for i in range(row.size)] if labels is None else [str(label) for label in labels]
    if len(names) != row.size:
        raise ValueError(f"labels must have one name per score: {len(names)} labels for {row.size} scores")

    def mapping(alpha: float) -> tuple[np.ndarray, str]:
        # The exact closed forms where they exist (a slider value can be 2.0000000000000004).
        if abs(alpha - 1.0) < 1e-9:
            return softmax(row), "softmax"
        if abs(alpha - 1.5) < 1e-9:
            return entmax15(row), "1.5-entmax"
        if abs(alpha - 2.0) < 1e-9:
            return sparsemax(row), "sparsemax"
        return entmax_bisect(row, alpha=alpha), f"{alpha:.2f}-entmax"

    def draw(alpha: float) -> np.ndarray:
        weights, name = mapping(float(alpha))
        support = int(np.count_nonzero(weights))
        fig, ax = plt.subplots(figsize=(5.6, 3.0))
        bars = ax.bar(names, weights, color=PALETTE[0])
        # "0" only for an exact zero; a tiny positive weight must not read as one.
        texts = ["0" if w == 0 else "<0.001" if w < 0.0005 else f"{w:.3f}" for w in weights]
        ax.bar_label(bars, labels=texts, padding=2)
        ax.set_ylim(0, 1.12)
        ax.set_xlabel("position (token)")
        ax.set_ylabel("attention weight")
        ax.set_title(f"α = {alpha:.2f} ({name}): support {support} of {row.size}")
        plt.show()
        return weights

    slider = widgets.FloatSlider(
        value=1.0, min=1.0, max=3.0, step=0.05, description="α", readout_format=".2f", continuous_update=True
    )
    return widgets.interactive(draw, alpha=slider)
