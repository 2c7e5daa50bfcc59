"""Interactive explorers built with ipywidgets, one per lesson idea; their sliders are `controls.StepSlider`."""

from __future__ import annotations

import base64
import html
import io
from typing import Any, Callable, Mapping, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import PIL.Image
from matplotlib.artist import Artist
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from numpy.typing import ArrayLike, DTypeLike
from traitlets import Unicode

from ._validation import as_real_array, check_int, check_positive_finite
from .controls import LiveText, StepSlider
from .attention import causal_mask, padding_mask, scaled_dot_product_attention
from .experiments import sample_scores
from .floats import exp_limits
from .gradients import softmax_jacobian
from .plotting import COLORMAP, INK, PALETTE, figure_html
from .softmax import naive_softmax, softmax
from .sparse import entmax15, entmax_bisect, sparsemax

#: The colour of blocked (masked) entries in the heatmap of mask_explorer.
_BLOCKED = "#d9d9d9"

__all__ = [
    "alpha_explorer",
    "dk_explorer",
    "fading_explorer",
    "mask_explorer",
    "overflow_explorer",
    "saturation_explorer",
    "temperature_explorer",
]


def _log_slider(description: str, low: float, high: float, step: float, *, value: float, readout: str) -> StepSlider:
    """A `StepSlider` over 10**low to 10**high in steps of `step` in the exponent, its range in its name.

    Examples
    --------
    >>> slider = _log_slider("T", -2, 2, 0.2, value=1.0, readout=".2f")
    >>> slider.description, len(slider.labels), slider.labels[:3], slider.readout
    ('T (0.01 to 100, log scale)', 21, ['0.01', '0.02', '0.03'], '1.00')
    """
    count = round((high - low) / step) + 1
    values = 10.0 ** np.round(low + step * np.arange(count), 12)  # 10**0 is exactly 1, 10**2 exactly 100
    return StepSlider(values, value=value, description=f"{description} ({values[0]:g} to {values[-1]:g}, log scale)",
                      readout=readout)


class _NamedImage(widgets.Image):
    """An ``ipywidgets.Image`` whose ``tooltip`` becomes its ``<img>``'s ``title``: the picture's accessible name.

    ipywidgets 8 gives ``Image`` no ``alt``. Its view is an ``<img>``, and the base view's ``updateTooltip``
    copies ``tooltip`` into the element's ``title``, which browsers take as an image's name when it has no
    ``alt`` (HTML-AAM), but only after testing ``model.get('description').length === 0``
    (@jupyter-widgets/base, src/widget.ts, ``DOMWidgetView.updateTooltip``). The Image model has no
    ``description``, so with a tooltip that test would throw in the browser. This subclass syncs an always empty
    ``description``: the same model and view, nothing added in JavaScript.
    """

    description = Unicode("", help="Always empty: the browser's tooltip code reads its length.").tag(sync=True)


class _Explorer(widgets.VBox):
    """Sliders above one figure that each move redraws in place and puts in words; it carries a still of the first.

    Every explorer in this module returns one. The figure is a
    ``matplotlib.figure.Figure`` outside pyplot, so nothing shows it but the
    explorer, and it reaches the page as the bytes of an ``ipywidgets.Image``:
    one comm message a frame, with no output area cleared and redrawn.

    A frame costs only what changes. `build` draws what every frame shares
    (axes, labels, ticks, fixed limits) and returns ``frame``; ``frame(**values)``
    draws or updates what the sliders change and returns ``(result, artists)``,
    the artists it changed or made. The first frame is laid out (constrained
    layout) and rendered without those artists, and that rendering is kept
    as the background; each frame then restores the background and draws only
    its artists on top (matplotlib's blitting). Artists of the previous frame
    that a frame does not return again are removed. A frame that changes
    the limits of an axes renders the background anew.

    Each frame is also put in words (WCAG 2.1, 1.1.1 and 4.1.3): `describe`
    writes one sentence from what the frame drew, with the sliders' values
    as their readouts show them first. The sentence is the text of a live
    region under the picture (``role="status"``), which screen readers
    announce when a slider moves; the picture's accessible name (the
    ``title`` of its ``<img>``, see `_NamedImage`) says the values and
    points to it, so that a screen reader does not read the sentence twice
    (a short text alternative and a long description next to it, WCAG
    technique G73).

    Displayed, its bundle holds four views: the live widget
    (``application/vnd.jupyter.widget-view+json``, which JupyterLab,
    Notebook and VS Code show when a kernel runs it), the still for readers
    without a kernel (GitHub, nbviewer, ``jupyter nbconvert``, JupyterLab on
    a notebook it does not trust) twice, as ``text/html`` (an ``<img>`` with
    the first frame's sentence as its ``alt``, which JupyterLab and
    nbconvert prefer) and as ``image/png`` (with that sentence as ``alt`` in
    its metadata), and a one-line ``text/plain``.

    Parameters
    ----------
    build : callable
        ``build(figure)`` draws the shared part into the empty `figure` and
        returns ``frame``, a function of the sliders' values, by keyword.
    figsize : (float, float)
        The figure's size in inches.
    describe : callable, optional
        ``describe(result, **readouts)``: the sentence for a frame, from its
        result and each slider's readout (a str, by the slider's keyword).
        By default the readouts and the figure's titles.
    **sliders
        One widget per keyword argument of ``frame``; a slider without a
        description is labelled with its argument's name.

    Attributes
    ----------
    figure : matplotlib.figure.Figure
        The figure every frame is drawn into.
    image : ipywidgets.Image
        The widget that shows the frame, as PNG; its ``tooltip`` names the values and points to `text`.
    live : course_utils.controls.LiveText
        The live region under the picture; it shows `text`.
    result
        What the last frame returned as its result.
    text : str
        The sentence for the last frame.
    still : bytes
        The PNG of the first frame.
    still_text : str
        The sentence for the first frame: the still's ``alt``.
    blit : bool
        True (the default, a class attribute): each frame is drawn on the
        kept background, as above. False: each frame renders the whole figure
        anew (background and artists, as a frame that changes the limits
        does), in the same pixels at the cost of a full redraw. Set on the
        class, it switches every explorer at once; the browser test does so
        to time the full redraw that the blitted frames are held against.

    Examples
    --------
    >>> def build(fig):
    ...     ax = fig.subplots()
    ...     ax.set(xlim=(-1, 5), ylim=(0, 1.1))
    ...     def frame(n):
    ...         return n, list(ax.bar(range(n), 1.0))
    ...     return frame
    >>> def describe(n_bars, n):
    ...     return f"At n = {n}, {n_bars} bars of height 1."
    >>> slider = StepSlider([1, 2, 3, 4, 5], value=3, description="n")
    >>> explorer = _Explorer(build, figsize=(3.0, 2.0), describe=describe, n=slider)
    >>> explorer.still[:8] == b"\\x89PNG\\r\\n\\x1a\\n", explorer.result, explorer.text
    (True, 3, 'At n = 3, 3 bars of height 1.')
    >>> explorer.children[0].value = 5  # a new frame and sentence; the still stays the first one
    >>> explorer.result, len(explorer.figure.axes[0].patches), explorer.image.value == explorer.still
    (5, 5, False)
    >>> explorer.image.tooltip, explorer.still_text
    ('Figure at n = 5, described in the text below it', 'At n = 3, 3 bars of height 1.')
    >>> data, metadata = explorer._repr_mimebundle_()
    >>> data["text/plain"], metadata
    ('explorer with slider n: run the notebook to move it', {'image/png': {'alt': 'At n = 3, 3 bars of height 1.'}})
    """

    blit: bool = True

    def __init__(self, build: Callable[[Figure], Callable[..., tuple[Any, list[Artist]]]], *,
                 figsize: tuple[float, float], describe: Callable[..., str] | None = None,
                 **sliders: StepSlider) -> None:
        self._sliders = sliders
        for name, slider in sliders.items():
            slider.description = slider.description or name
        self.figure = Figure(figsize=figsize, layout="constrained")
        FigureCanvasAgg(self.figure)
        self._frame = build(self.figure)
        self._describe = describe or self._titles
        self._shown: list[Artist] = []
        self._background: Any = None
        self.result: Any = None
        self.text = ""
        # At its natural size: a picture stretched to the page's width looks larger than every other figure.
        width = f"{round(self.figure.bbox.width)}px"
        self.image = _NamedImage(format="png", layout=widgets.Layout(width=width, max_width="100%"))
        self.live = LiveText(layout=widgets.Layout(width=width, max_width="100%"))
        super().__init__([*sliders.values(), self.image, self.live])
        self.add_class("widget-interact")
        self.update()
        self.still: bytes = bytes(self.image.value)
        self.still_text: str = self.text
        for slider in sliders.values():
            slider.observe(self.update, names="value")

    def _limits(self) -> list[tuple[float, ...]]:
        return [(*ax.get_xlim(), *ax.get_ylim()) for ax in self.figure.axes]

    def _titles(self, result: Any, **readouts: str) -> str:
        """The default sentence: the sliders' readouts, then the figure's titles."""
        values = _join([f"{name} = {text}" for name, text in readouts.items()])
        suptitle = self.figure.get_suptitle()
        titles = [title for title in [suptitle, *(ax.get_title() for ax in self.figure.axes)] if title.strip()]
        return f"At {values}, the figure shows " + ("; ".join(titles) or "no title") + "."

    def update(self, *_: Any) -> None:
        """Draw the frame for the sliders' current values, show it and say what it shows."""
        figure, canvas = self.figure, self.figure.canvas
        limits = self._limits()
        self.result, artists = self._frame(**{name: slider.value for name, slider in self._sliders.items()})
        keep = {id(artist) for artist in artists}
        for old in self._shown:
            if id(old) not in keep:
                old.remove()
        # The spines of an axes a frame draws in are drawn with the frame, in zorder, as a whole drawing
        # draws them: above bars and images, below text.
        axes = {id(artist.axes): artist.axes for artist in artists if getattr(artist, "axes", None) is not None}
        spines = [spine for ax in axes.values() for spine in ax.spines.values() if id(spine) not in keep]
        self._shown = list(artists)
        for artist in [*artists, *spines]:
            artist.set_animated(True)  # left out of the background, drawn on top of it
        if not self.blit or self._background is None or self._limits() != limits:
            canvas.draw()  # the background; the first time, laid out
            figure.set_layout_engine("none")  # keep that layout: a frame must not move the axes
            self._background = canvas.copy_from_bbox(figure.bbox)
        else:
            canvas.restore_region(self._background)
        for artist in sorted([*artists, *spines], key=lambda artist: artist.get_zorder()):
            figure.draw_artist(artist)
        buffer = io.BytesIO()  # compressed lightly: at the default level, encoding costs more than drawing
        PIL.Image.fromarray(np.asarray(canvas.buffer_rgba())).save(buffer, format="png", compress_level=1)
        readouts = {name: slider.readout for name, slider in self._sliders.items()}
        self.text = self._describe(self.result, **readouts)
        with self.image.hold_sync():  # the picture and its name in one message
            self.image.value = buffer.getvalue()
            values = _join([f"{slider.description.split(' (')[0]} = {readouts[name]}" for name, slider in self._sliders.items()])
            self.image.tooltip = f"Figure at {values}, described in the text below it"
        self.live.text = self.text

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        data = super()._repr_mimebundle_(**kwargs)
        names = ", ".join(slider.description for slider in self._sliders.values())
        data["text/plain"] = f"explorer with slider {names}: run the notebook to move it"
        png = base64.b64encode(self.still).decode("ascii")
        data["text/html"] = figure_html(png, self.still_text)
        data["image/png"] = png
        return data, {"image/png": {"alt": self.still_text}}


def _join(parts: Sequence[str]) -> str:
    """Words joined as in a sentence.

    Examples
    --------
    >>> _join(["a"]), _join(["a", "b"]), _join(["a", "b", "c"])
    ('a', 'a and b', 'a, b and c')
    """
    parts = list(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else "".join(parts)


def _span(indices: Sequence[int]) -> str:
    """Positions in words, runs of consecutive ones as ranges.

    Examples
    --------
    >>> _span([0, 1, 2, 3, 4]), _span([2]), _span([0, 1, 5])
    ('0 to 4', '2', '0 to 1 and 5')
    """
    runs: list[list[int]] = []
    for i in map(int, indices):
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return _join([f"{run[0]} to {run[-1]}" if len(run) > 1 else f"{run[0]}" for run in runs])


def _keys(n: int) -> str:
    return f"{n:,} key" if n == 1 else f"{n:,} keys"


def _row_text(names: Sequence[str], texts: Sequence[str], weights: np.ndarray, limit: int = 8) -> str:
    """A row's weights by name, as they are labelled: every one up to `limit` keys, else the three largest.

    Examples
    --------
    >>> _row_text(["a", "b"], ["0.269", "0.731"], np.array([0.269, 0.731]))
    'a: 0.269 and b: 0.731'
    >>> _row_text(list("abcdefghij"), ["0.100"] * 9 + ["0.100"], np.full(10, 0.1), limit=4)
    'a: 0.100, b: 0.100 and c: 0.100 (the three largest; the other 7 keys 0.700 together)'
    """
    if len(names) <= limit:
        return _join([f"{name}: {text}" for name, text in zip(names, texts)])
    top = np.argsort(-weights, kind="stable")[:3]
    rest = float(weights.sum() - weights[top].sum())
    return (_join([f"{names[i]}: {texts[i]}" for i in top])
            + f" (the three largest; the other {_keys(len(names) - 3)} {rest:.3f} together)")


def _row_and_labels(scores: ArrayLike, labels: Sequence[str] | None) -> tuple[np.ndarray, list[str]]:
    """One non-empty 1-D row of scores and one name per score (the positions by default)."""
    row = as_real_array(scores, "scores")
    if row.ndim != 1 or row.size == 0:
        raise ValueError(f"scores must be one non-empty row (1-D); got shape {row.shape}")
    names = [str(i) for i in range(row.size)] if labels is None else [str(label) for label in labels]
    if len(names) != row.size:
        raise ValueError(f"labels must have one name per score: {len(names)} labels for {row.size} scores")
    return row, names


def _bar_axes(fig: Figure, names: Sequence[str]) -> Axes:
    """The fixed part of a bar chart of one row of attention weights: one axes, one tick per name, y from 0 to 1.12."""
    ax = fig.subplots()
    ax.set_xticks(range(len(names)), names)
    ax.set(xlim=(-0.6, len(names) - 0.4), ylim=(0, 1.12), xlabel="position (token)", ylabel="attention weight")
    return ax


def _bars(ax: Axes, weights: np.ndarray, texts: Sequence[str]) -> list[Artist]:
    """One bar per weight with its text on top: the artists of one frame of a bar chart from :func:`_bar_axes`."""
    bars = ax.bar(range(len(weights)), weights, color=PALETTE[0])
    return [*bars, *ax.bar_label(bars, labels=texts, padding=2)]


def temperature_explorer(scores: ArrayLike, labels: Sequence[str] | None = None) -> _Explorer:
    """A temperature slider that redraws ``softmax(scores / T)`` as a bar chart.

    Parameters
    ----------
    scores : array_like
        One 1-D row of scores.
    labels : sequence of str, optional
        One name per score (tokens, say); by default the positions.

    Returns
    -------
    ipywidgets.VBox
        Display it in a notebook. Its ``children[0]`` is the slider (a
        ``StepSlider`` from T = 0.01 to 100, 20 arrow-key steps of a
        factor 10^0.2 ≈ 1.58, through 0.1, 1 and 10), its ``result`` holds the
        weights last drawn and its ``text`` says them in words.

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
    row, names = _row_and_labels(scores, labels)

    def build(fig: Figure) -> Callable[..., tuple[np.ndarray, list[Artist]]]:
        ax = _bar_axes(fig, names)

        def frame(temperature: float) -> tuple[np.ndarray, list[Artist]]:
            weights = softmax(row, temperature=temperature)
            ax.set_title(f"softmax(scores / T) at T = {temperature:.2f}")
            return weights, [*_bars(ax, weights, [f"{w:.3f}" for w in weights]), ax.title]

        return frame

    def describe(weights: np.ndarray, temperature: str) -> str:
        top = int(np.argmax(weights))
        return (f"At T = {temperature}, softmax(scores / T) gives the {_keys(row.size)} the weights "
                f"{_row_text(names, [f'{w:.3f}' for w in weights], weights)}; the largest, on {names[top]}, "
                f"holds {weights[top]:.0%} of the attention (an even split would give each {1 / row.size:.0%}).")

    slider = _log_slider("T", -2, 2, 0.2, value=1.0, readout=".2f")
    return _Explorer(build, figsize=(5.6, 3.0), describe=describe, temperature=slider)


def dk_explorer(*, n_keys: int = 16, n_rows: int = 200, seed: int = 0) -> _Explorer:
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
    ipywidgets.VBox
        Display it in a notebook. Its ``children[0]`` is the slider (a
        ``StepSlider`` over d_k = 1, 2, 4, ..., 1024, starting at 64) and
        its ``result`` is a dict with the row last drawn: ``"d_k"``,
        ``"scores"`` (the raw scores of the row), ``"raw"`` (their softmax)
        and ``"scaled"`` (the softmax of ``scores / sqrt(d_k)``), and the
        standard deviations of all the scores in the histogram, ``"raw_std"``
        and ``"scaled_std"``. Its ``text`` says what they show in words.

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

    def sample(d_k: int) -> np.ndarray:
        return sample_scores(d_k, n_k, n_r, np.random.default_rng([base_seed, d_k]))

    def build(fig: Figure) -> Callable[..., tuple[dict[str, object], list[Artist]]]:
        ax_hist, ax_row = fig.subplots(1, 2)
        # The tallest bin is at the smallest d_k, where raw and scaled scores are the most peaked;
        # a frame with a taller one raises the limit (and the background is drawn anew).
        tallest = max(np.histogram(sample(d) / np.sqrt(d), bins=bins)[0].max() for d in options[:2])
        ax_hist.set(xlim=(bins[0], bins[-1]), ylim=(0, 1.08 * tallest), xlabel="attention score",
                    ylabel=f"count (of {n_r * n_k} scores)")
        legend = [Patch(color=PALETTE[0], alpha=0.7, label="raw q·k"), Patch(color=PALETTE[1], alpha=0.7, label="q·k / √d_k")]
        ax_hist.legend(handles=legend)
        keys = np.arange(n_k)
        ax_row.set(xlim=(-0.7, n_k - 0.3), ylim=(0, 1.05), xlabel="key", ylabel="attention weight", title="One attention row")
        ax_row.legend(handles=[Patch(color=PALETTE[0], label="softmax(raw)"), Patch(color=PALETTE[1], label="softmax(scaled)")])

        def frame(d_k: int) -> tuple[dict[str, object], list[Artist]]:
            raw = sample(d_k)
            scaled = raw / np.sqrt(d_k)
            row = {"d_k": d_k, "scores": raw[0], "raw": softmax(raw[0]), "scaled": softmax(scaled[0]),
                   "raw_std": float(raw.std()), "scaled_std": float(scaled.std())}
            shown: list[Artist] = []
            for scores, colour in ((raw, PALETTE[0]), (scaled, PALETTE[1])):
                counts = np.histogram(scores, bins=bins)[0]
                if counts.max() > ax_hist.get_ylim()[1]:
                    ax_hist.set_ylim(0, 1.08 * counts.max())
                shown += ax_hist.stairs(counts, bins, fill=True, color=colour, alpha=0.7),
            ax_hist.set_title(f"Scores at d_k = {d_k} (raw std ≈ √d_k = {np.sqrt(d_k):.1f})")
            shown += ax_row.bar(keys - 0.2, row["raw"], width=0.4, color=PALETTE[0])
            shown += ax_row.bar(keys + 0.2, row["scaled"], width=0.4, color=PALETTE[1])
            return row, [*shown, ax_hist.title]

        return frame

    def describe(row: dict[str, Any], d_k: str) -> str:
        raw, scaled = row["raw"], row["scaled"]
        return (f"At d_k = {d_k}, the histogram shows the {n_r * n_k:,} raw scores q·k spread with standard "
                f"deviation {row['raw_std']:.1f} (√d_k = {np.sqrt(row['d_k']):.1f}) and the scaled scores q·k / √d_k "
                f"with {row['scaled_std']:.2f}. In the one row drawn ({_keys(n_k)}, an even split {1 / n_k:.3f} each), "
                f"the softmax of the raw scores gives its two largest weights {np.sort(raw)[-1]:.3f} and "
                f"{np.sort(raw)[-2]:.3f}, that of the scaled scores {np.sort(scaled)[-1]:.3f} and {np.sort(scaled)[-2]:.3f}.")

    slider = StepSlider(options, value=64, description="d_k", readout="d")
    return _Explorer(build, figsize=(10.0, 3.4), describe=describe, d_k=slider)


def alpha_explorer(scores: ArrayLike, labels: Sequence[str] | None = None) -> _Explorer:
    """An α slider that redraws α-entmax of one row of scores, from softmax (α = 1) to sparsemax (α = 2) and beyond.

    Parameters
    ----------
    scores : array_like
        One 1-D row of scores.
    labels : sequence of str, optional
        One name per score (tokens, say); by default the positions.

    Returns
    -------
    ipywidgets.VBox
        Display it in a notebook. Its ``children[0]`` is the slider (a
        ``StepSlider`` from α = 1 to 3 in 20 steps of 0.1, starting at 1), its
        ``result`` holds the weights last drawn and its ``text`` says them in
        words. The title names the mapping and the support size (how many
        weights are not exactly 0); only exact zeros are labelled "0".

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
    row, names = _row_and_labels(scores, labels)

    def mapping(alpha: float) -> tuple[np.ndarray, str]:
        # The exact closed forms where they exist (a slider value can be 2.0000000000000004).
        if abs(alpha - 1.0) < 1e-9:
            return softmax(row), "softmax"
        if abs(alpha - 1.5) < 1e-9:
            return entmax15(row), "1.5-entmax"
        if abs(alpha - 2.0) < 1e-9:
            return sparsemax(row), "sparsemax"
        return entmax_bisect(row, alpha=alpha), f"{alpha:.2f}-entmax"

    def texts(weights: np.ndarray) -> list[str]:
        # "0" only for an exact zero; a tiny positive weight must not read as one.
        return ["0" if w == 0 else "<0.001" if w < 0.0005 else f"{w:.3f}" for w in weights]

    drawn = {"name": ""}  # the mapping of the last frame, for its sentence

    def build(fig: Figure) -> Callable[..., tuple[np.ndarray, list[Artist]]]:
        ax = _bar_axes(fig, names)

        def frame(alpha: float) -> tuple[np.ndarray, list[Artist]]:
            weights, drawn["name"] = mapping(float(alpha))
            support = int(np.count_nonzero(weights))
            ax.set_title(f"α = {alpha:.2f} ({drawn['name']}): support {support} of {row.size}")
            return weights, [*_bars(ax, weights, texts(weights)), ax.title]

        return frame

    def describe(weights: np.ndarray, alpha: str) -> str:
        zeros = [name for name, w in zip(names, weights) if w == 0]
        support = row.size - len(zeros)
        dropped = "" if not zeros else (f", and {_join(zeros)} get exactly 0" if len(zeros) <= 8
                                        else f", and the other {_keys(len(zeros))} get exactly 0")
        return (f"At α = {alpha} ({drawn['name']}), the {_keys(row.size)} get the weights "
                f"{_row_text(names, texts(weights), weights)}; {support} of {row.size} keep a weight above 0{dropped}.")

    slider = StepSlider(np.round(np.linspace(1.0, 3.0, 21), 12), value=1.0, description="α", readout=".2f")
    return _Explorer(build, figsize=(5.6, 3.0), describe=describe, alpha=slider)


def overflow_explorer(
    *, x: float = 10.0, dtypes: Sequence[DTypeLike] = ("float16", "float32", "float64")
) -> _Explorer:
    """A slider for the largest score x that redraws the naive and the stable softmax of ``[x, 0]`` in each dtype.

    One panel per dtype: the two weights of the textbook formula
    (:func:`~course_utils.naive_softmax`, computed in the dtype itself) next
    to the two weights of the stable :func:`~course_utils.softmax`. A NaN
    weight is drawn as a hatched full-height bar labelled "NaN"; the panel's
    title says whether ``e^x`` is still finite, and the panel names the
    dtype's limit from :func:`~course_utils.exp_limits`.

    Parameters
    ----------
    x : float, default 10.0
        The score the slider starts at, in [1, 1000].
    dtypes : sequence of dtype-like, default ("float16", "float32", "float64")
        The dtypes to compare, one panel each, without repeats; each one
        float16, float32 or float64.

    Returns
    -------
    ipywidgets.VBox
        Display it in a notebook. Its ``children[0]`` is the slider (a
        ``StepSlider`` from x = 1 to 1000, so the limits near 11, 88.7 and
        709.8 are evenly spread, in 30 arrow-key steps of a factor
        10^0.1 ≈ 1.26, each limit between two of them) and its ``result`` is a
        dict with what was last drawn: ``"x"`` (the score), and ``"naive"`` and
        ``"stable"``, each a dict from dtype name to the two weights of
        ``[x, 0]`` in that dtype. Its ``text`` says them in words.

    Raises
    ------
    TypeError
        If `x` is not a real number, or an entry of `dtypes` is not float16, float32 or float64.
    ValueError
        If `x` is outside [1, 1000], or `dtypes` is empty or repeats a dtype.

    Examples
    --------
    In a notebook (outside one, the widget has nowhere to draw):

    >>> explorer = overflow_explorer()  # doctest: +SKIP
    >>> explorer  # shows the slider and one panel per dtype  # doctest: +SKIP
    >>> explorer.children[0].value = 100.0  # past float32's limit, not float64's  # doctest: +SKIP
    >>> explorer.result["naive"]["float32"], explorer.result["naive"]["float64"]  # doctest: +SKIP
    (array([nan,  0.], dtype=float32), array([1., 0.]))
    """
    start = check_positive_finite(x, "x")
    if not 1.0 <= start <= 1000.0:
        raise ValueError(f"x must lie in [1, 1000], the slider's range; got {start!r}")
    if isinstance(dtypes, (str, bytes)) or not isinstance(dtypes, Sequence):
        raise TypeError(f"dtypes must be a sequence of dtypes, such as ('float16', 'float64'); got {dtypes!r}")
    if len(dtypes) == 0:
        raise ValueError("dtypes must name at least one dtype")
    limits = {}
    for dtype in dtypes:
        try:
            lim = exp_limits(dtype)
        except TypeError:
            raise TypeError(f"dtypes must hold float16, float32 or float64; got {dtype!r}") from None
        if lim.dtype.name in limits:
            raise ValueError(f"dtypes must not repeat a dtype; {lim.dtype.name} appears twice")
        limits[lim.dtype.name] = lim
    positions = [0.0, 1.0, 2.4, 3.4]
    ticks = ["naive\nw(x)", "naive\nw(0)", "stable\nw(x)", "stable\nw(0)"]

    def label(w: float) -> str:
        return "NaN" if np.isnan(w) else "0" if w == 0 else f"{w:.3g}"

    colours = [PALETTE[1], PALETTE[1], PALETTE[0], PALETTE[0]]

    def build(fig: Figure) -> Callable[..., tuple[dict[str, object], list[Artist]]]:
        axes = fig.subplots(1, len(limits), sharey=True, squeeze=False)[0]
        notes = []
        for ax in axes:
            ax.set_xticks(positions, ticks, fontsize=9)
            ax.set(xlim=(positions[0] - 0.6, positions[-1] + 0.6), ylim=(0, 1.35), xlabel="weight of score x and of score 0")
            notes.append(ax.text(0.5, 0.97, "", transform=ax.transAxes, ha="center", va="top", fontsize=9))
        axes[0].set_ylabel("weight")
        fig.suptitle(" ")

        def frame(x: float) -> tuple[dict[str, object], list[Artist]]:
            drawn: dict[str, object] = {"x": float(x), "naive": {}, "stable": {}}
            shown: list[Artist] = []
            for ax, note, (name, lim) in zip(axes, notes, limits.items()):
                row = np.array([x, 0.0], dtype=lim.dtype)
                with np.errstate(over="ignore"):
                    e_x = np.exp(row[0])
                naive, stable = naive_softmax(row), softmax(row)
                drawn["naive"][name], drawn["stable"][name] = naive, stable
                weights = np.concatenate([naive, stable]).astype(np.float64)
                bad = np.isnan(weights)
                bars = ax.bar(positions, np.where(bad, 1.0, weights), color=colours, width=0.8)
                for bar, is_bad in zip(bars, bad):
                    if is_bad:  # NaN has no height: a hatched outline the full height of the axis
                        bar.set_facecolor("white")
                        bar.set_edgecolor(PALETTE[1])
                        bar.set_hatch("///")
                broken = bool(np.isnan(naive).any())
                ax.set_title(f"{name}: " + ("naive gives NaN" if broken else "naive still finite"),
                             color=PALETTE[1] if broken else INK)
                note.set_text(f"$e^x$ = {float(e_x):.3g}; finite up to x = {lim.largest:.2f}")
                shown += [*bars, *ax.bar_label(bars, labels=[label(w) for w in weights], padding=2, fontsize=9),
                          ax.title, note]
            fig.suptitle(f"softmax([x, 0]) at x = {x:.1f}: naive (vermillion) vs stable (blue)")
            return drawn, [*shown, fig._suptitle]

        return frame

    def by_dtype(texts: dict[str, str]) -> str:
        """One text for every dtype where they agree, else each with its dtype."""
        if len(set(texts.values())) == 1:
            return next(iter(texts.values()))
        return ", ".join(f"{text} in {name}" for name, text in texts.items())

    def describe(drawn: dict[str, Any], x: str) -> str:
        naive = {name: _join([label(w) for w in drawn["naive"][name]]) for name in limits}
        stable = {name: _join([label(w) for w in drawn["stable"][name]]) for name in limits}
        broken = [name for name in limits if "NaN" in naive[name]]
        finite = [name for name in limits if name not in broken]
        parts = []
        if broken:
            past = _join([f"{limits[n].largest:.2f}" for n in broken])
            parts.append(f"e^x overflows in {_join(broken)} (past x = {past}), so the naive weights are "
                         f"{by_dtype({n: naive[n] for n in broken})}, the stable ones "
                         f"{by_dtype({n: stable[n] for n in broken})}")
        if finite:
            with np.errstate(over="ignore"):
                e_x = float(np.exp(drawn["x"]))
            agree = all(naive[n] == stable[n] for n in finite)
            weights = (f"the naive and the stable weights are both {by_dtype({n: naive[n] for n in finite})}" if agree
                       else f"the naive weights are {by_dtype({n: naive[n] for n in finite})}, the stable ones "
                            f"{by_dtype({n: stable[n] for n in finite})}")
            up_to = _join([f"{limits[n].largest:.2f}" for n in finite])
            parts.append(f"e^x = {e_x:.3g} is finite in {_join(finite)} (up to x = {up_to}), and {weights}")
        return f"At x = {x}, softmax([x, 0]): " + "; ".join(parts) + "."

    slider = _log_slider("x", 0, 3, 0.1, value=start, readout=".1f")
    return _Explorer(build, figsize=(3.4 * len(limits) + 0.6, 3.5), describe=describe, x=slider)


def saturation_explorer(scores: ArrayLike | None = None, labels: Sequence[str] | None = None) -> _Explorer:
    """A slider for the scale c that redraws ``softmax(c·z)`` and the heatmap of its Jacobian.

    Left: the weights as bars. Right: the Jacobian
    ``J = diag(p) - p pᵀ`` (:func:`~course_utils.softmax_jacobian`) as a
    heatmap on the fixed colour range [-0.25, 0.25], which holds every
    possible entry (``p_i(1 - p_i) <= 1/4`` and ``p_i p_k <= 1/4``), so
    the heatmap visibly fades as the softmax saturates. Its title gives the
    Frobenius norm ``‖J‖_F``.

    Parameters
    ----------
    scores : array_like, optional
        One 1-D row of scores z. By default 8 fixed standard normal scores,
        ``numpy.random.default_rng(0).standard_normal(8)``.
    labels : sequence of str, optional
        One name per score (tokens, say); by default the positions.

    Returns
    -------
    ipywidgets.VBox
        Display it in a notebook. Its ``children[0]`` is the slider (a
        ``StepSlider`` from c = 0.1 to 100, starting at 1, in 30
        arrow-key steps of a factor 10^0.1 ≈ 1.26) and its ``result`` is a
        dict with what was last drawn: ``"c"``, ``"weights"``
        (``softmax(c·z)``), ``"jacobian"`` and ``"norm"`` (its Frobenius norm).
        Its ``text`` says them in words.

    Raises
    ------
    ValueError
        If `scores` is not 1-D and non-empty, or `labels` has another length.
    TypeError
        If `scores` does not hold real numbers.

    Examples
    --------
    In a notebook (outside one, the widget has nowhere to draw):

    >>> explorer = saturation_explorer([2.0, 1.0, 0.1])  # doctest: +SKIP
    >>> explorer  # shows the slider, the bars and the heatmap  # doctest: +SKIP
    >>> explorer.children[0].value = 100.0  # saturated: one weight takes everything  # doctest: +SKIP
    >>> explorer.result["norm"] < 1e-40  # doctest: +SKIP
    True
    """
    row, names = _row_and_labels(np.random.default_rng(0).standard_normal(8) if scores is None else scores, labels)

    def build(fig: Figure) -> Callable[..., tuple[dict[str, object], list[Artist]]]:
        ax_bar, ax_jac = fig.subplots(1, 2, width_ratios=(1.15, 1.0))
        small = 8 if row.size > 8 else None
        ax_bar.set_xticks(range(row.size), names, fontsize=small)
        ax_bar.set(xlim=(-0.6, row.size - 0.4), ylim=(0, 1.05), xlabel="position (token)", ylabel="attention weight")
        image = ax_jac.imshow(np.zeros((row.size, row.size)), cmap=COLORMAP, vmin=-0.25, vmax=0.25)
        ax_jac.set_xticks(range(row.size), names, fontsize=small)
        ax_jac.set_yticks(range(row.size), names, fontsize=small)
        ax_jac.set_xlabel("score $x_k$ (column k)")
        ax_jac.set_ylabel("weight $p_i$ (row i)")
        ax_jac.grid(False)
        fig.colorbar(image, ax=ax_jac, shrink=0.9, label=r"$\partial p_i / \partial x_k$")

        def frame(c: float) -> tuple[dict[str, object], list[Artist]]:
            weights = softmax(c * row)
            jac = softmax_jacobian(weights)
            norm = float(np.linalg.norm(jac))
            bars = ax_bar.bar(range(row.size), weights, color=PALETTE[0])
            ax_bar.set_title(f"softmax(c·z) at c = {c:.2f}: largest weight {weights.max():.3f}")
            image.set_data(jac)
            ax_jac.set_title(f"Jacobian $J$: Frobenius norm {norm:.2e}")
            return {"c": float(c), "weights": weights, "jacobian": jac, "norm": norm}, [*bars, image, ax_bar.title, ax_jac.title]

        return frame

    def describe(drawn: dict[str, Any], c: str) -> str:
        weights, jac = drawn["weights"], drawn["jacobian"]
        top = np.argsort(-weights, kind="stable")[:3]
        largest = _join([f"{names[i]}: {weights[i]:.3f}" for i in top])
        return (f"At c = {c}, softmax(c·z) over {_keys(row.size)} gives its largest weights to {largest} (bars, "
                f"left; an even split {1 / row.size:.3f} each). The heatmap of its Jacobian (right, colours from -0.25 "
                f"to 0.25) has Frobenius norm {drawn['norm']:.3g}, its entries {float(np.abs(jac).max()):.3g} at most "
                f"in size.")

    slider = _log_slider("c", -1, 2, 0.1, value=1.0, readout=".2f")
    return _Explorer(build, figsize=(10.0, 3.9), describe=describe, c=slider)


def mask_explorer(
    *, max_len: int = 8, n_real: int = 3, padding: str = "left", seed: int = 0
) -> _Explorer:
    """A slider for the number of real tokens that redraws causal + padding masked attention weights.

    One padded sequence of `max_len` positions, `n_real` of them real tokens
    and the rest ``<pad>``, attends to itself with a causal mask combined
    with a padding mask on the keys, through
    :func:`~course_utils.scaled_dot_product_attention`. The heatmap shows
    the weights on a fixed range from 0 to 1, with blocked entries in grey;
    a query that may attend to nothing (a fully masked row, all zeros by the
    course's convention) has its label in vermillion and says so.

    Parameters
    ----------
    max_len : int, default 8
        The padded length, >= 1.
    n_real : int, default 3
        The number of real tokens the slider starts at, in [0, `max_len`].
    padding : {"left", "right"}, default "left"
        Where the pads go. Left padding (as decoders use) makes the pad
        queries at the start fully masked rows; right padding leaves the
        pad queries attending to the real tokens.
    seed : int, default 0
        The queries and keys are fixed random draws,
        ``q, k = numpy.random.default_rng(seed).standard_normal((2, max_len, 4))``,
        the same at every slider position; the scores are
        ``q kᵀ / 2`` (the 1/√d_k scale with d_k = 4).

    Returns
    -------
    ipywidgets.VBox
        Display it in a notebook. Its ``children[0]`` is the slider (an
        ``StepSlider`` from 0 to `max_len` real tokens) and its ``result`` is
        a dict with what was last drawn: ``"n_real"``, ``"scores"`` (the
        unmasked scaled scores), ``"mask"`` (bool, True = may attend) and
        ``"weights"``. Its ``text`` says what the heatmap shows in words.

    Raises
    ------
    TypeError, ValueError
        If `max_len`, `n_real` or `seed` is not an int, `max_len` < 1,
        `n_real` is outside [0, `max_len`], `seed` < 0, or `padding` is not
        "left" or "right".

    Examples
    --------
    In a notebook (outside one, the widget has nowhere to draw):

    >>> explorer = mask_explorer()  # doctest: +SKIP
    >>> explorer  # shows the slider and the heatmap  # doctest: +SKIP
    >>> explorer.children[0].value = 6  # 6 real tokens, 2 pads on the left  # doctest: +SKIP
    >>> explorer.result["weights"].sum(axis=-1)  # doctest: +SKIP
    array([0., 0., 1., 1., 1., 1., 1., 1.])
    """
    size = check_int(max_len, "max_len", 1)
    start = check_int(n_real, "n_real", 0)
    if start > size:
        raise ValueError(f"n_real must lie in [0, max_len={size}]; got {start}")
    if padding not in ("left", "right"):
        raise ValueError(f"padding must be 'left' or 'right'; got {padding!r}")
    base_seed = check_int(seed, "seed", 0)
    q, k = np.random.default_rng(base_seed).standard_normal((2, size, 4))
    values = np.zeros((size, 1))  # only the weights are drawn
    scores = q @ k.T / 2.0
    causal = causal_mask(size)

    def build(fig: Figure) -> Callable[..., tuple[dict[str, object], list[Artist]]]:
        ax = fig.subplots()
        cmap = plt.get_cmap(COLORMAP).with_extremes(bad=_BLOCKED)
        image = ax.imshow(np.ma.masked_all((size, size)), cmap=cmap, vmin=0.0, vmax=1.0)
        # The longest tick labels, so that the layout leaves room for every frame's.
        ax.set_xticks(range(size), [f"{i} tok" for i in range(size)], rotation=45, ha="right")
        ax.set_yticks(range(size), [f"{i} tok" for i in range(size)])
        ax.set_xlabel("key (attended to); grey = blocked, weight exactly 0")
        ax.set_ylabel("query (attending)")
        ax.grid(False)
        fig.colorbar(image, ax=ax, shrink=0.85, label="attention weight")

        def frame(n_real: int) -> tuple[dict[str, object], list[Artist]]:
            real = padding_mask([n_real], size)[0]
            if padding == "left":
                real = real[::-1]
            mask = causal & real[None, :]
            _, weights = scaled_dot_product_attention(q, k, values, mask=mask)
            names = [f"{i} tok" if real[i] else f"{i} pad" for i in range(size)]
            empty = ~mask.any(axis=-1)
            image.set_data(np.ma.masked_array(weights, ~mask))
            ax.set_xticks(range(size), names, rotation=45, ha="right")
            ax.set_yticks(range(size), names)
            for tick, e in zip(ax.get_yticklabels(), empty):
                tick.set_color(PALETTE[1] if e else INK)
            texts: list[Artist] = []
            for i in range(size):
                if empty[i]:
                    texts.append(ax.text((size - 1) / 2, i, "no key allowed: all weights 0", ha="center",
                                         va="center", fontsize=9, color=INK))
                elif size <= 12:
                    texts += [ax.text(j, i, f"{weights[i, j]:.2f}", ha="center", va="center", fontsize=8,
                                      color="black" if weights[i, j] > 0.55 else "white") for j in np.flatnonzero(mask[i])]
            ax.set_title(f"Causal + {padding} padding: {n_real} real of {size}, {int(empty.sum())} fully masked rows")
            drawn = {"n_real": int(n_real), "scores": scores, "mask": mask, "weights": weights}
            return drawn, [image, ax.xaxis, ax.yaxis, *texts, ax.title]

        return frame

    def describe(drawn: dict[str, Any], n_real: str) -> str:
        mask, weights = drawn["mask"], drawn["weights"]
        pads = np.flatnonzero(~mask.diagonal())  # causal: a key is allowed to its own query unless it is a pad
        empty = ~mask.any(axis=-1)
        rows = np.flatnonzero(~empty)
        n_empty = int(empty.sum())
        parts = [f"{n_empty} fully masked row{'s' * (n_empty != 1)} (queries {_span(np.flatnonzero(empty))}, all "
                 f"weights 0)" if n_empty else "no fully masked row"]
        if pads.size:
            parts.append(f"the pad keys {_span(pads)} get weight 0 in every row")
        if 0 < rows.size <= 12:
            tops = [f"query {i} on key {j} ({weights[i, j]:.2f})" for i, j in zip(rows, weights[rows].argmax(axis=-1))]
            parts.append(f"the largest weight of each {'other ' * bool(empty.any())}query: {_join(tops)}")
        elif rows.size:
            largest = weights[rows].max(axis=-1)
            parts.append(f"the largest weight of each of the other {rows.size} queries lies between "
                         f"{largest.min():.2f} and {largest.max():.2f}")
        return (f"At {n_real} real token{'s' * (drawn['n_real'] != 1)} of {size} ({padding} padding), the heatmap "
                f"of causal attention weights has " + "; ".join(parts) + ".")

    slider = StepSlider(list(range(size + 1)), value=start, description="real tokens", readout="d")
    return _Explorer(build, figsize=(6.4, 5.2), describe=describe, n_real=slider)


def fading_explorer(
    mappings: Mapping[str, Callable[[np.ndarray], np.ndarray]] | None = None,
    *,
    gap: float = 6.0,
    start: int = 256,
    max_n: int = 10**6,
) -> _Explorer:
    """A slider for the number of keys n that redraws the weight of the one relevant key.

    The row is lesson 09b's toy: ``n - 1`` irrelevant keys with score 0 and
    one relevant key (the last) with score `gap`. Each mapping turns the row
    into weights, and a bar shows the weight it gives the relevant key, on a
    fixed axis from 0 to 1: plain softmax fades like ``e^gap / (e^gap + n - 1)``.

    Parameters
    ----------
    mappings : mapping of str to callable, optional
        Name -> function of one 1-D row returning its weights (same length).
        By default ``{"softmax": softmax}``.
    gap : float, default 6.0
        The relevant key's score: finite and > 0.
    start : int, default 256
        The n the slider starts at, in [2, `max_n`].
    max_n : int, default 10**6
        The largest n on the slider, >= 2.

    Returns
    -------
    ipywidgets.VBox
        Display it in a notebook. Its ``children[0]`` is the slider (a
        ``StepSlider`` over whole numbers n from 2 to `max_n`) and its ``result`` is a dict with what was last drawn:
        ``"n"`` and ``"weights"`` (name -> the relevant key's weight). Its
        ``text`` says them in words. An arrow key multiplies n by about 2:
        the steps run from 2 through `start`, as near a factor 2 each as
        that allows (exactly 2 where `start` is a power of two), then on by
        the same factor, the last step ending at `max_n`.

    Raises
    ------
    ValueError
        If `gap` is not finite and > 0, `max_n` < 2, `start` is outside
        [2, `max_n`], or `mappings` is empty.
    TypeError
        If `start` or `max_n` is not an int, or a mapping is not callable.

    Examples
    --------
    In a notebook (outside one, the widget has nowhere to draw):

    >>> explorer = fading_explorer({"softmax": softmax})  # doctest: +SKIP
    >>> explorer  # shows the slider and the bars  # doctest: +SKIP
    >>> explorer.children[0].value = 10_000  # doctest: +SKIP
    >>> round(explorer.result["weights"]["softmax"], 4)  # e^6 / (e^6 + 9999)  # doctest: +SKIP
    0.0388
    """
    a = check_positive_finite(gap, "gap")
    top = check_int(max_n, "max_n", 2)
    first = check_int(start, "start", 2)
    if first > top:
        raise ValueError(f"start must lie in [2, max_n={top}]; got {first}")
    chosen = {"softmax": softmax} if mappings is None else dict(mappings)
    if not chosen:
        raise ValueError("mappings must name at least one mapping")
    for name, f in chosen.items():
        if not callable(f):
            raise TypeError(f"mappings[{name!r}] must be a function of one row; got {type(f).__name__}")
    colours = [PALETTE[i % len(PALETTE)] for i in range(len(chosen))]

    def build(fig: Figure) -> Callable[..., tuple[dict[str, object], list[Artist]]]:
        ax = fig.subplots()
        ax.set_yticks(range(len(chosen)), list(chosen)[::-1])  # the first mapping on top
        ax.set(xlim=(0, 1.15), ylim=(-0.6, len(chosen) - 0.4), xlabel="weight of the one relevant key", ylabel="mapping")

        def frame(n_float: float) -> tuple[dict[str, object], list[Artist]]:
            n = int(round(n_float))
            row = np.zeros(n)
            row[-1] = a
            weights = {name: float(f(row)[-1]) for name, f in chosen.items()}
            bars = ax.barh(range(len(chosen)), list(weights.values())[::-1], color=colours[::-1])
            labels = ax.bar_label(bars, labels=[f"{w:.4f}" for w in list(weights.values())[::-1]], padding=3)
            ax.set_title(f"One relevant key (score {a:g}) among n = {n:,} keys")
            return {"n": n, "weights": weights}, [*bars, *labels, ax.title]

        return frame

    def describe(drawn: dict[str, Any], n_float: str) -> str:
        n = drawn["n"]
        weights = "; ".join(f"{w:.4f} under {name}" for name, w in drawn["weights"].items())
        return (f"At n = {n_float} keys, one relevant key with score {a:g} among {n - 1:,} with score 0: the relevant "
                f"key's weight is {weights} (an even split would give each key {1 / n:.2g}).")

    low, octave = float(np.log10(2)), float(np.log10(2))
    span = float(np.log10(first)) - low
    step = span / max(1, round(span / octave)) if span > 0 else octave
    exponents = low + step * np.arange(int(np.floor((np.log10(top) - low) / step + 1e-9)) + 1)
    # Whole numbers of keys, ending at max_n: a step from the last of them to max_n is at least half a step.
    values = sorted({int(round(10.0**e)) for e in exponents if 10.0 ** (e + step / 2) < top} | {first, top})
    slider = StepSlider(values, value=first, description=f"n ({values[0]:g} to {values[-1]:g}, log scale)",
                        readout="d")
    return _Explorer(build, figsize=(7.0, 3.4), describe=describe, n_float=slider)
