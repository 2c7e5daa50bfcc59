"""Tests for the notebook set-up and the figure style."""

import matplotlib as mpl
import numpy as np
import pytest
import torch

from course_utils import PALETTE, setup


def test_setup_returns_a_generator_that_repeats_with_the_seed():
    a = setup(seed=3).normal(size=5)
    b = setup(seed=3).normal(size=5)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, setup(seed=4).normal(size=5))


def test_setup_seeds_torch_and_pins_its_threads():
    setup(seed=7, threads=1)
    first = torch.rand(3)
    setup(seed=7, threads=1)
    assert torch.equal(first, torch.rand(3))
    assert torch.get_num_threads() == 1


def test_setup_prints_four_decimals():
    setup()
    assert np.array2string(np.array([1 / 3])) == "[0.3333]"


def test_setup_applies_an_opaque_light_figure_style():
    setup()
    assert mpl.rcParams["figure.facecolor"] == "white"
    assert mpl.rcParams["axes.facecolor"] == "white"
    assert mpl.rcParams["axes.prop_cycle"].by_key()["color"][: len(PALETTE)] == list(PALETTE)


def _luminance(hex_colour: str) -> float:
    r, g, b = (int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


@pytest.mark.parametrize("colour", PALETTE)
def test_every_palette_colour_contrasts_with_the_white_figure(colour):
    # WCAG contrast ratio against white; 2.2:1 and up keeps lines and markers visible.
    assert 1.05 / (_luminance(colour) + 0.05) >= 2.2


@pytest.mark.parametrize("kwargs,error", [({"seed": -1}, ValueError), ({"seed": 1.5}, TypeError), ({"threads": 0}, ValueError), ({"threads": True}, TypeError)])
def test_bad_setup_arguments_are_rejected_by_name(kwargs, error):
    with pytest.raises(error, match=next(iter(kwargs))):
        setup(**kwargs)


def test_setup_pins_numpy_blas_threads_too():
    from threadpoolctl import threadpool_info

    setup(seed=0, threads=2)
    blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert blas and all(pool["num_threads"] == 2 for pool in blas)
    setup(seed=0, threads=1)
    assert all(pool["num_threads"] == 1 for pool in threadpool_info() if pool["user_api"] == "blas")


def test_on_colab_setup_switches_on_its_widget_manager(monkeypatch):
    import sys
    import types

    calls = []
    colab, output = types.ModuleType("google.colab"), types.ModuleType("google.colab.output")
    output.enable_custom_widget_manager = lambda: calls.append("on")
    colab.output = output
    google = types.ModuleType("google")
    google.colab = colab
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setitem(sys.modules, "google.colab.output", output)
    setup()
    assert calls == ["on"]


def test_elsewhere_no_widget_manager_is_touched():
    from course_utils.reproducibility import use_hosted_widgets

    assert use_hosted_widgets() is False


def test_an_older_torch_than_the_tested_one_is_named_in_one_line(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch, "__version__", "2.9.1+cu128")
    setup()
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "PyTorch 2.9.1+cu128 is older than the 2.13" in out
    monkeypatch.setattr(torch, "__version__", "2.14.1")
    setup()
    assert capsys.readouterr().out == ""
