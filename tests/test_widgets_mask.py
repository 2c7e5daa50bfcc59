"""The mask explorer redraws causal + padding masked attention as its slider changes the number of real tokens."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from course_utils.widgets import mask_explorer


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def expected(n_real, max_len, padding, seed):
    """The mask and the weights, written out here: a row with no allowed key is all zeros."""
    q, k = np.random.default_rng(seed).standard_normal((2, max_len, 4))
    scores = q @ k.T / 2.0
    positions = np.arange(max_len)
    real = positions >= max_len - n_real if padding == "left" else positions < n_real
    mask = (positions[None, :] <= positions[:, None]) & real[None, :]
    weights = np.zeros((max_len, max_len))
    for i in range(max_len):
        if mask[i].any():
            e = np.exp(scores[i, mask[i]] - scores[i, mask[i]].max())
            weights[i, mask[i]] = e / e.sum()
    return scores, mask, weights


def test_the_slider_counts_real_tokens_from_0_to_max_len_and_leaves_room_to_move_right():
    slider = mask_explorer().children[0]
    assert (list(slider.values), slider.value) == (list(range(9)), 3)


@pytest.mark.parametrize("padding", ["left", "right"])
def test_moving_the_slider_redraws_the_masked_weights(padding):
    explorer = mask_explorer(max_len=6, n_real=2, padding=padding, seed=3)
    first_scores = explorer.result["scores"]
    for n_real in (2, 0, 5, 6):
        explorer.children[0].value = n_real
        drawn = explorer.result
        scores, mask, weights = expected(n_real, 6, padding, 3)
        assert drawn["n_real"] == n_real
        np.testing.assert_array_equal(drawn["scores"], first_scores)  # fixed scores at every position
        np.testing.assert_allclose(drawn["scores"], scores, rtol=1e-12)
        np.testing.assert_array_equal(drawn["mask"], mask)
        np.testing.assert_allclose(drawn["weights"], weights, rtol=1e-12, atol=1e-15)


def test_left_padding_makes_fully_masked_rows_and_masked_columns_that_disappear():
    explorer = mask_explorer()
    for n_real in range(9):
        explorer.children[0].value = n_real
        w, pads = explorer.result["weights"], 8 - n_real
        np.testing.assert_array_equal(w[:pads], 0.0)  # fully masked rows: zeros, not NaN
        np.testing.assert_array_equal(w[:, :pads], 0.0)  # pad columns
        np.testing.assert_allclose(w[pads:].sum(axis=-1), 1.0, rtol=1e-12)
    assert not np.isnan(explorer.result["weights"]).any()


def test_right_padding_leaves_no_fully_masked_row_unless_every_token_is_a_pad():
    explorer = mask_explorer(padding="right")
    np.testing.assert_allclose(explorer.result["weights"].sum(axis=-1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(explorer.result["weights"][:, 3:], 0.0)
    explorer.children[0].value = 0
    np.testing.assert_array_equal(explorer.result["weights"], 0.0)


@pytest.mark.parametrize(
    "kwargs,error,name",
    [
        ({"max_len": 0}, ValueError, "max_len"),
        ({"max_len": 4.0}, TypeError, "max_len"),
        ({"n_real": 9}, ValueError, "n_real"),
        ({"n_real": -1}, ValueError, "n_real"),
        ({"n_real": True}, TypeError, "n_real"),
        ({"padding": "middle"}, ValueError, "padding"),
        ({"padding": None}, ValueError, "padding"),
        ({"seed": -1}, ValueError, "seed"),
        ({"seed": 1.5}, TypeError, "seed"),
    ],
)
def test_bad_arguments_are_rejected_by_name(kwargs, error, name):
    with pytest.raises(error, match=name):
        mask_explorer(**kwargs)
