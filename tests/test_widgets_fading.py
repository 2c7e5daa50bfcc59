"""The fading explorer redraws the weight of one relevant key among n: softmax fades like 1/n, the remedies need not."""

import math

import matplotlib.pyplot as plt
import numpy as np
import pytest

from course_utils import scalable_softmax, softmax
from course_utils.widgets import fading_explorer


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_the_slider_spans_n_from_2_to_max_n_on_a_log_scale_and_starts_at_start():
    slider = fading_explorer(start=100, max_n=10_000).children[0]
    assert (slider.values[0], slider.values[-1], slider.value) == (2, 10_000, 100)


@pytest.mark.parametrize("n", [2, 16, 256, 4096, 100_000])
def test_moving_the_slider_redraws_the_softmax_weight_e_gap_over_e_gap_plus_n_minus_1(n):
    explorer = fading_explorer(gap=6.0)
    explorer.children[0].value = n
    drawn = explorer.result
    assert drawn["n"] == n
    assert drawn["weights"]["softmax"] == pytest.approx(math.exp(6) / (math.exp(6) + n - 1), rel=1e-12)


def test_softmax_fades_and_scalable_softmax_does_not():
    s = 1 / math.log(256)
    explorer = fading_explorer({"softmax": softmax, "SSMax": lambda row: scalable_softmax(row, s)})
    seen = []
    for n in (256, 10_000, 1_000_000):
        explorer.children[0].value = n
        seen.append(explorer.result["weights"])
    assert seen[0]["softmax"] == pytest.approx(seen[0]["SSMax"], rel=1e-12)  # equal at n = e^{1/s} = 256
    assert seen[2]["softmax"] < 0.001 < 0.5 < seen[2]["SSMax"]


@pytest.mark.parametrize(
    "kwargs,error",
    [
        ({"gap": 0.0}, ValueError),
        ({"max_n": 1}, ValueError),
        ({"start": 1}, ValueError),
        ({"start": 500, "max_n": 100}, ValueError),
        ({"mappings": {}}, ValueError),
        ({"mappings": {"x": 3}}, TypeError),
        ({"start": 2.5}, TypeError),
    ],
)
def test_bad_arguments_are_rejected_by_name(kwargs, error):
    name = next(iter(kwargs)) if "mappings" not in kwargs else "mappings"
    with pytest.raises(error, match=name):
        fading_explorer(**kwargs)
