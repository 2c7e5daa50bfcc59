"""Text alternatives for figures (WCAG 2.1, 1.1.1): course_utils.plotting.describe_figure and use_figure_text."""

from __future__ import annotations

import base64
from functools import partial

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.core.pylabtools import print_figure  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from course_utils.plotting import describe_figure, figure_html, figure_text, use_figure_text  # noqa: E402

ALT = 'Weights of 3 keys: 0.09, 0.24 and 0.67; "the" < "cat".'


@pytest.fixture
def shell():
    """An IPython shell whose PNG formatter for figures is the inline backend's."""
    ip = InteractiveShell.instance()
    png = ip.display_formatter.formatters["image/png"]
    saved = {name: f.type_printers.copy() for name, f in ip.display_formatter.formatters.items()}
    png.for_type(Figure, partial(print_figure, fmt="png", base64=True, bbox_inches="tight"))
    yield ip
    for name, printers in saved.items():
        ip.display_formatter.formatters[name].type_printers = printers


@pytest.fixture
def fig():
    figure, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1, 2], [0.09, 0.24, 0.67])
    yield figure
    plt.close(figure)


def test_a_described_figure_is_shown_as_an_img_with_its_alt_and_a_png_with_alt_metadata(shell, fig):
    assert use_figure_text(shell)
    data, metadata = shell.display_formatter.format(describe_figure(fig, ALT))
    assert data["text/html"] == figure_html(data["image/png"], ALT)
    assert 'alt="Weights of 3 keys: 0.09, 0.24 and 0.67; &quot;the&quot; &lt; &quot;cat&quot;."' in data["text/html"]
    assert metadata["image/png"] == {"alt": ALT}
    assert base64.b64decode(data["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_figure_without_a_text_is_shown_as_before(shell, fig):
    before, _ = shell.display_formatter.format(fig)
    use_figure_text(shell)
    data, metadata = shell.display_formatter.format(fig)
    assert "text/html" not in data and "image/png" not in (metadata or {})
    assert data["image/png"] == before["image/png"]


def test_installing_twice_wraps_the_backends_formatter_once(shell, fig):
    use_figure_text(shell)
    use_figure_text(shell)
    data, metadata = shell.display_formatter.format(describe_figure(fig, ALT))
    assert metadata["image/png"] == {"alt": ALT} and data["text/html"].startswith('<img src="data:image/png;base64,')


def test_the_text_is_kept_on_one_line():
    figure = plt.figure()
    try:
        assert figure_text(describe_figure(figure, "  Two\n   lines  ")) == "Two lines"
    finally:
        plt.close(figure)


@pytest.mark.parametrize(("fig_arg", "text", "error", "name"), [
    ("not a figure", ALT, TypeError, "fig"),
    (None, 3, TypeError, "text"),
    (None, "   ", ValueError, "text"),
])
def test_bad_input_is_refused_naming_the_argument(fig, fig_arg, text, error, name):
    with pytest.raises(error, match=name):
        describe_figure(fig if fig_arg is None else fig_arg, text)


def test_outside_ipython_nothing_is_installed(monkeypatch):
    import IPython

    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    assert use_figure_text() is False


def _relative_luminance(colour: str) -> float:
    """WCAG 2.1's relative luminance of an sRGB colour '#rrggbb'."""
    channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    light, dark = sorted((_relative_luminance(a), _relative_luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_the_contrast_formula_gives_wcags_known_values():
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)


@pytest.mark.parametrize("colour", __import__("course_utils.plotting", fromlist=["PALETTE"]).PALETTE)
def test_every_palette_colour_has_3_to_1_contrast_on_the_white_figure(colour):
    assert contrast(colour, "#ffffff") >= 3.0, f"{colour}: lines and markers need 3:1 on white (WCAG 1.4.11)"

