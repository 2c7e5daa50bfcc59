"""Interactive explorers built with ipywidgets, one per lesson idea."""

from __future__ import annotations

from typing import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_real_array
from .plotting import PALETTE
from .softmax import softmax

__all__ = ["temperature_explorer"]


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
