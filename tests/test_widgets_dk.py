"""The d_k explorer redraws raw and scaled attention rows as its slider moves."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from course_utils import softmax
from course_utils.experiments import sample_scores
from course_utils.widgets import dk_explorer


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_the_slider_spans_d_k_from_1_to_1024_in_powers_of_two_and_starts_at_64():
    slider = dk_explorer().children[0]
    assert list(slider.values) == [2**i for i in range(11)]
    assert slider.value == 64


def test_each_position_draws_its_own_reproducible_row():
    explorer = dk_explorer(n_keys=5, n_rows=3, seed=4)
    first = explorer.result
    assert first["d_k"] == 64
    expected = sample_scores(64, 5, 3, np.random.default_rng([4, 64]))[0]
    np.testing.assert_array_equal(first["scores"], expected)
    explorer.children[0].value = 256
    assert explorer.result["d_k"] == 256
    explorer.children[0].value = 64
    np.testing.assert_array_equal(explorer.result["scores"], first["scores"])


@pytest.mark.parametrize("d_k", [1, 16, 1024])
def test_the_weights_are_softmax_of_the_raw_and_the_scaled_scores(d_k):
    explorer = dk_explorer(n_keys=8, n_rows=2)
    explorer.children[0].value = d_k
    row = explorer.result
    np.testing.assert_allclose(row["raw"], softmax(row["scores"]), rtol=1e-14)
    np.testing.assert_allclose(row["scaled"], softmax(row["scores"] / np.sqrt(d_k)), rtol=1e-12, atol=1e-300)
    # Dividing by sqrt(d_k) >= 1 is a temperature >= 1: the largest weight can only shrink.
    assert row["scaled"].max() <= row["raw"].max() + 1e-15


def test_at_d_k_1024_the_raw_row_is_nearly_one_hot_and_the_scaled_row_is_not():
    explorer = dk_explorer()
    explorer.children[0].value = 1024
    assert explorer.result["raw"].max() > 0.9
    assert explorer.result["scaled"].max() < 0.5


@pytest.mark.parametrize(
    "kwargs,error,name",
    [
        ({"n_keys": 0}, ValueError, "n_keys"),
        ({"n_rows": 0}, ValueError, "n_rows"),
        ({"seed": -1}, ValueError, "seed"),
        ({"seed": 1.5}, TypeError, "seed"),
        ({"n_keys": "16"}, TypeError, "n_keys"),
    ],
)
def test_bad_arguments_are_rejected_by_name(kwargs, error, name):
    with pytest.raises(error, match=name):
        dk_explorer(**kwargs)
