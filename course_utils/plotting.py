"""The course's one figure style: colourblind-safe, and readable on light and dark themes.

Figures get explicit white face colours and dark ink, so on JupyterLab's dark
theme they appear as light cards with full contrast instead of dark text on a
transparent background. Colours come from the Okabe-Ito palette, designed to
stay distinguishable with the common forms of colour blindness; heatmaps use
``viridis``, which is perceptually uniform and colourblind-safe.
"""

from __future__ import annotations

import matplotlib as mpl
import numpy as np
from cycler import cycler

__all__ = ["PALETTE", "INK", "COLORMAP", "plot_exp_overflow", "use_course_style"]

#: Okabe & Ito (2008), "Color Universal Design", without yellow (too pale on white).
PALETTE: tuple[str, ...] = (
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#000000",  # black
)
#: The colour of text, axes and ticks.
INK = "#1a1a1a"
#: The colour map for heatmaps.
COLORMAP = "viridis"


def use_course_style() -> None:
    """Apply the course style to matplotlib's global settings.

    Examples
    --------
    >>> use_course_style()
    >>> import matplotlib as mpl
    >>> mpl.rcParams["figure.facecolor"]
    'white'
    """
    mpl.rcParams.update(
        {
            "figure.facecolor": "white",
            "figure.edgecolor": "white",
            "savefig.facecolor": "white",
            "savefig.transparent": False,
            "axes.facecolor": "white",
            "axes.edgecolor": INK,
            "axes.labelcolor": INK,
            "axes.titlecolor": INK,
            "axes.titleweight": "bold",
            "axes.titlesize": 12,
            "axes.labelsize": 11,
            "axes.grid": True,
            "axes.axisbelow": True,
            "grid.color": "#d0d0d0",
            "grid.linewidth": 0.6,
            "axes.prop_cycle": cycler(color=list(PALETTE)),
            "axes.spines.top": False,
            "axes.spines.right": False,
            "text.color": INK,
            "xtick.color": INK,
            "ytick.color": INK,
            "legend.frameon": False,
            "lines.linewidth": 2.0,
            "image.cmap": COLORMAP,
            "figure.figsize": (6.4, 3.6),
            "figure.dpi": 90,
            "figure.constrained_layout.use": True,
            "font.size": 11,
        }
    )


def plot_exp_overflow(ax: "mpl.axes.Axes | None" = None) -> "mpl.axes.Axes":
    """Draw where ``e^x`` crosses the largest float16, float32 and float64 (lesson 02).

    Both axes are logarithmic: the score x runs from 1 to 1000 and the size of
    ``e^x`` is shown as its power of ten, ``x / ln 10``, which is then a
    straight line. Each dtype's largest finite value is a dashed horizontal
    line, and a dot marks the crossing at the score
    :func:`~course_utils.exp_limits` measures, labelled with that score; past
    it, ``e^x`` is ``inf`` in that dtype. On a log y axis the three ceilings
    (near 10^4.8, 10^38.5 and 10^308) are evenly spread, so all three
    crossings can be seen.

    Parameters
    ----------
    ax : matplotlib.axes.Axes, optional
        The axes to draw on; a new figure's axes by default.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> ax = plot_exp_overflow()
    >>> len(ax.lines)  # e^x, then one ceiling and one crossing per dtype
    7
    """
    import matplotlib.pyplot as plt

    from .floats import exp_limits

    if ax is None:
        _, ax = plt.subplots()
    xs = np.logspace(0, 3, 400)
    ax.plot(xs, xs / np.log(10), color=INK, label="$e^x$, written as a power of ten")
    # Each label sits where the line is not: above and left of the dot, except float16's, which
    # would run off the left edge there and goes below and right instead.
    offsets = {"float16": (8, -16, "left"), "float32": (-8, 8, "right"), "float64": (-8, 8, "right")}
    for dtype, colour in zip((np.float16, np.float32, np.float64), PALETTE):
        name, largest = np.dtype(dtype).name, float(np.finfo(dtype).max)
        ceiling = np.log10(largest)
        x = exp_limits(dtype).largest
        ax.axhline(ceiling, color=colour, linestyle="--", label=f"largest {name}, {largest:.3g}")
        ax.plot([x], [ceiling], "o", color=colour, markersize=7)
        dx, dy, ha = offsets[name]
        ax.annotate(f"{name}: $e^x$ = inf past x = {x:.1f}", (x, ceiling),
                    textcoords="offset points", xytext=(dx, dy), ha=ha, color=colour)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(1, 1000)
    ax.set_ylim(0.01, 1000)  # room below the line for the legend
    ax.set_xlabel("score x (log scale)")
    ax.set_ylabel("$\\log_{10} e^x$ (log scale)")
    ax.set_title("Where $e^x$ leaves each floating-point range")
    ax.legend(loc="lower right")
    return ax
