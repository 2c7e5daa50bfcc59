"""The course's one figure style: colourblind-safe, and readable on light and dark themes.

Figures get explicit white face colours and dark ink, so on JupyterLab's dark
theme they appear as light cards with full contrast instead of dark text on a
transparent background. Colours come from the Okabe-Ito palette, designed to
stay distinguishable with the common forms of colour blindness; heatmaps use
``viridis``, which is perceptually uniform and colourblind-safe.
"""

from __future__ import annotations

import matplotlib as mpl
from cycler import cycler

__all__ = ["PALETTE", "INK", "COLORMAP", "use_course_style"]

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
