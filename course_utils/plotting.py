"""The course's one figure style: colourblind-safe, and readable on light and dark themes.

Figures get explicit white face colours and dark ink, so on JupyterLab's dark
theme they appear as light cards with full contrast instead of dark text on a
transparent background. Colours come from the Okabe-Ito palette, designed to
stay distinguishable with the common forms of colour blindness; heatmaps use
``viridis``, which is perceptually uniform and colourblind-safe.
"""

from __future__ import annotations

import base64
import html
from typing import Any

import matplotlib as mpl
import numpy as np
from cycler import cycler

__all__ = ["PALETTE", "INK", "COLORMAP", "describe_figure", "figure_html", "figure_text", "plot_exp_overflow",
           "use_course_style", "use_figure_text"]

#: Okabe & Ito (2008), "Color Universal Design", without yellow (too pale on white), with its orange and sky blue
#: darkened (same hue) to reach the 3:1 contrast on white that WCAG 2.1 (1.4.11) asks of lines and markers: the
#: originals, #E69F00 and #56B4E9, give 2.2:1 and 2.3:1 (tests/test_plotting_alt.py computes every ratio).
PALETTE: tuple[str, ...] = (
    "#0072B2",  # blue, 5.2:1
    "#D55E00",  # vermillion, 3.9:1
    "#009E73",  # bluish green, 3.4:1
    "#CC79A7",  # reddish purple, 3.1:1
    "#A66E00",  # orange, darkened, 4.3:1
    "#1F8FCF",  # sky blue, darkened, 3.6:1
    "#000000",  # black, 21:1
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


# --- text alternatives: every figure says in words what it shows (WCAG 2.1, 1.1.1) -------------------------
#
# JupyterLab draws an image/png output as an <img> with no alt attribute, whatever the output's metadata says
# (jupyter/enhancement-proposals#120); nbconvert reads the metadata's "alt". So a described figure is displayed
# as both: text/html, an <img> with its alt (which JupyterLab and nbconvert's HTML prefer to the PNG), and
# image/png with {"alt": ...} in its metadata (for every other reader). Strict nbval skips the PNG and compares
# the html with its image data sanitized away (tests/sanitize.cfg), so the alt text itself is checked on re-run.

_ALT = "_course_alt"


def describe_figure(fig: "mpl.figure.Figure", text: str) -> "mpl.figure.Figure":
    """Give `fig` a text alternative: what it shows, in words, with the numbers that matter.

    Once :func:`course_utils.setup` has run in a notebook, the figure is displayed with `text` as its
    ``alt``: in JupyterLab (to a screen reader), in HTML copies and in the output's metadata. Write it from
    the data the figure draws, so that it stays true when the data change.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure to describe.
    text : str
        The description: at least one full sentence, more than the title.

    Returns
    -------
    matplotlib.figure.Figure
        `fig`, so that the call can end a cell's figure code.

    Raises
    ------
    TypeError
        If `fig` is not a matplotlib Figure or `text` is not a string.
    ValueError
        If `text` is blank.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> _ = ax.plot([0, 1], [0, 2])
    >>> figure_text(describe_figure(fig, "A line from (0, 0) to (1, 2)."))
    'A line from (0, 0) to (1, 2).'
    >>> plt.close(fig)
    """
    from matplotlib.figure import Figure

    if not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib Figure, not {type(fig).__name__}")
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    if not text.strip():
        raise ValueError("text must describe the figure, not be blank")
    setattr(fig, _ALT, " ".join(text.split()))
    return fig


def figure_text(fig: "mpl.figure.Figure") -> str | None:
    """The text alternative given to `fig` by :func:`describe_figure`, or None.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = plt.figure()
    >>> figure_text(fig) is None
    True
    >>> plt.close(fig)
    """
    return getattr(fig, _ALT, None)


def figure_html(png_base64: str, alt: str) -> str:
    """An ``<img>`` of a base64 PNG with its alt text, escaped for HTML.

    Examples
    --------
    >>> figure_html("AAAA", 'weights "p" < 1')
    '<img src="data:image/png;base64,AAAA" alt="weights &quot;p&quot; &lt; 1">'
    """
    return f'<img src="data:image/png;base64,{png_base64}" alt="{html.escape(alt, quote=True)}">'


def use_figure_text(shell: Any = None) -> bool:
    """Display every described figure with its text alternative, in this IPython session.

    Wraps the inline backend's PNG formatter: a figure with a text (:func:`describe_figure`) gets its PNG once,
    shown as text/html (an ``<img>`` with ``alt``) and as image/png with ``{"alt": ...}`` in its metadata; a
    figure without one is displayed as before. Does nothing outside IPython or without a PNG formatter.

    Returns
    -------
    bool
        Whether the formatters were installed.

    Examples
    --------
    >>> use_figure_text(shell=None) in (True, False)  # True in a notebook, False in a plain Python process
    True
    """
    from matplotlib.figure import Figure

    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None:
        return False
    formatters = shell.display_formatter.formatters
    png = formatters["image/png"]
    try:
        draw = png.lookup_by_type(Figure)
    except KeyError:  # the inline backend registers its formatter with the first figure: make one
        import matplotlib.pyplot as plt

        plt.close(plt.figure())
        try:
            draw = png.lookup_by_type(Figure)
        except KeyError:
            return False
    draw = getattr(draw, "_course_draw", draw)  # installed before: wrap the inline backend's own, once

    def as_html(fig: Figure) -> str | None:
        alt = figure_text(fig)
        if alt is None:
            return None
        data = draw(fig)
        setattr(fig, "_course_png", data)  # the image/png formatter, which runs next, reuses it
        return figure_html(data if isinstance(data, str) else base64.b64encode(data).decode("ascii"), alt)

    def as_png(fig: Figure) -> Any:
        alt = figure_text(fig)
        data = fig.__dict__.pop("_course_png", None) or draw(fig)
        return data if alt is None else (data, {"alt": alt})

    as_png._course_draw = draw  # type: ignore[attr-defined]
    formatters["text/html"].for_type(Figure, as_html)
    png.for_type(Figure, as_png)
    return True
