"""Lessons 08 and 08b's training: the retrieval task, the model, Adam, the arms and the learning-rate sweep."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from course_utils.training import (
    Arm,
    adam_steps,
    at_best_rate,
    init_retrieval_params,
    learning_rate_sweep,
    retrieval_batches,
    retrieval_forward,
    scale_arms,
    train_retrieval,
)

# --- the retrieval model and its training -----------------------------------


def test_the_same_seed_gives_the_same_batches_and_queries_are_noisy_copies_of_the_target():
    a, b = retrieval_batches(3), retrieval_batches(3)
    for _ in range(2):
        for u, v in zip(next(a), next(b)):
            assert torch.equal(u, v)
    x, y, t, query = next(retrieval_batches(4, batch=2000))
    target_key = x[torch.arange(2000), t]
    noise = math.sqrt(2) * query - target_key
    assert float(query.var()) == pytest.approx(1.0, rel=0.05)
    assert float(noise.var()) == pytest.approx(1.0, rel=0.05)
    assert abs(float((noise * target_key).mean())) < 0.05  # the noise is independent of the key
    assert int(y.max()) == 7 and int(t.max()) == 31


def one_model_batch(seed=0, d_k=16):
    w_q, w_k, labels = init_retrieval_params(d_k, seed)
    batch = next(retrieval_batches(seed))
    return (w_q[None], w_k[None], labels[None]), tuple(p[None] for p in batch)


@pytest.mark.parametrize("c", [1.0, 0.25, 1 / 16])
def test_retrieval_loss_matches_torch_sdpa_with_projected_keys(c):
    (w_q, w_k, labels), (x, y, t, query) = one_model_batch()
    out = retrieval_forward(w_q, w_k, labels, torch.tensor([c], dtype=torch.float64), torch.tensor([False]), (x, y, t, query))
    attn = torch.nn.functional.scaled_dot_product_attention((query[0] @ w_q[0])[:, None, :], x[0] @ w_k[0], labels[0][y[0]], scale=c)
    ref = torch.nn.functional.cross_entropy(attn[:, 0] @ labels[0].T, y[0][torch.arange(32), t[0]])
    assert float(out["loss"][0]) == pytest.approx(float(ref), rel=1e-12)


def test_qk_norm_scores_are_sqrt_d_times_the_cosine_of_projected_q_and_k():
    (w_q, w_k, labels), (x, y, t, query) = one_model_batch(d_k=64)
    out = retrieval_forward(w_q, w_k, labels, torch.tensor([0.125], dtype=torch.float64), torch.tensor([True]), (x, y, t, query))
    q = torch.nn.functional.rms_norm(query[0] @ w_q[0], (64,))
    k = torch.nn.functional.rms_norm(x[0] @ w_k[0], (64,))
    expected = torch.einsum("bd,bkd->bk", q, k) / 8
    torch.testing.assert_close(out["scores"][0], expected, rtol=1e-5, atol=1e-6)  # rms_norm's eps ~ 2e-16 relative
    assert float(out["scores"].abs().max()) <= 8 + 1e-9


def test_one_training_arm_is_plain_torch_adam_on_its_own_model():
    # An independent training loop for seed 1 of the scaled arm, with torch.optim.Adam (not fused).
    d_k, steps = 16, 5
    run = train_retrieval([Arm("u"), Arm("s", c_power=0.5)], d_k, [0, 1], steps=steps, lr=0.05)
    params = [p.clone().requires_grad_() for p in init_retrieval_params(d_k, 1)]
    opt = torch.optim.Adam(params, lr=0.05)
    stream = retrieval_batches(1)
    c = torch.tensor([0.25], dtype=torch.float64)
    for step in range(steps):
        batch = tuple(a[None] for a in next(stream))
        loss = retrieval_forward(*(p[None] for p in params), c, torch.tensor([False]), batch)["loss"][0]
        assert loss.item() == pytest.approx(run["loss"][step, 1, 1], rel=1e-12)
        opt.zero_grad()
        loss.backward()
        opt.step()


ARMS08 = [Arm("unscaled"), Arm("scaled", c_power=0.5), Arm("init matched", init_power=0.25),
          Arm("init and lr matched", init_power=0.25, lr_power=0.25), Arm("learnable", learnable=True),
          Arm("qk-norm", c_power=0.5, qk_norm=True)]


@pytest.fixture(scope="module")
def short_run():
    return train_retrieval(ARMS08, 64, [0, 1], steps=40, lr=1e-2)


def test_a_constant_on_the_scores_is_sqrt_c_on_init_and_learning_rate_under_adam(short_run):
    # Exact up to Adam's epsilon: the gradients of the matched arm are d_k**0.25 times larger.
    np.testing.assert_allclose(short_run["loss"][:, 3], short_run["loss"][:, 1], rtol=1e-4)
    exact = train_retrieval([ARMS08[1], ARMS08[3]], 64, [0, 1], steps=40, lr=1e-2, eps=0.0)
    assert np.isfinite(exact["loss"]).all() and np.isfinite(exact["spread"]).all()  # nan == nan would pass below
    np.testing.assert_allclose(exact["loss"][:, 1], exact["loss"][:, 0], rtol=1e-10, equal_nan=False)
    np.testing.assert_allclose(exact["spread"][:, 1], exact["spread"][:, 0], rtol=1e-10, equal_nan=False)
    assert np.abs(exact["loss"][:, 1] - exact["loss"][:, 0]).max() < 1e-12 < np.abs(short_run["loss"][:, 3] - short_run["loss"][:, 1]).max()


def test_without_epsilon_fixed_factors_stay_fixed_and_the_learnable_one_trains():
    # A fixed c has gradient 0; were it an Adam parameter, eps = 0 would make its step 0 / 0 = nan.
    run = train_retrieval([ARMS08[0], ARMS08[1], ARMS08[4]], 16, [0], steps=5, lr=1e-2, eps=0.0)
    assert np.isfinite(run["loss"]).all()
    np.testing.assert_array_equal(run["c"][:, :2, 0], np.tile([1.0, 0.25], (5, 1)))
    assert run["c"][-1, 2, 0] != 1.0


def test_matching_the_init_alone_starts_like_the_scaled_arm_then_drifts_away(short_run):
    np.testing.assert_allclose(short_run["loss"][0, 2], short_run["loss"][0, 1], rtol=1e-12)
    assert np.abs(short_run["loss"][-1, 2] - short_run["loss"][-1, 1]).max() > 1e-3


def test_arms_share_weights_and_batches_per_seed_and_runs_repeat_exactly(short_run):
    np.testing.assert_allclose(short_run["loss"][0, 4], short_run["loss"][0, 0], rtol=1e-12)  # learnable starts at c = 1
    np.testing.assert_allclose(short_run["c"][:, 1], 0.125, rtol=1e-12)
    assert not np.allclose(short_run["loss"][0, 0, 0], short_run["loss"][0, 0, 1])  # seeds differ
    again = train_retrieval(ARMS08, 64, [0, 1], steps=40, lr=1e-2)
    np.testing.assert_array_equal(again["loss"], short_run["loss"])
    # Fewer arms change how the products are blocked, so only the last bits may differ.
    fewer = train_retrieval(ARMS08[:2], 64, [0, 1], steps=40, lr=1e-2)
    np.testing.assert_allclose(fewer["loss"], short_run["loss"][:, :2], rtol=1e-9)


def test_the_unscaled_arm_starts_saturated_and_the_learnable_c_falls(short_run):
    assert short_run["entropy"][0, 0].max() < 1.5 < short_run["entropy"][0, 1].min()
    assert (short_run["c"][-1, 4] < 1).all()
    assert short_run["loss"].shape == (40, 6, 2)


@pytest.mark.parametrize("steps", [7, 150, 200])
def test_progress_shows_the_percentage_of_steps_done_and_ends_at_100(steps):
    class Bar:
        def __init__(self):
            self.seen = []

        @property
        def value(self):
            return self.seen[-1] if self.seen else 0

        @value.setter
        def value(self, v):
            self.seen.append(v)

    bar = Bar()
    train_retrieval(ARMS08[:1], 8, [0], steps=steps, progress=bar)
    assert bar.seen[-1] == 100 and bar.seen == sorted(set(bar.seen))  # rises, never past 100, never repeats
    assert len(bar.seen) == min(steps, 100)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"arms": []}, TypeError, "arms"),
        ({"arms": ["scaled"]}, TypeError, "arms"),
        ({"seeds": []}, ValueError, "seeds"),
        ({"d_k": 0}, ValueError, "d_k"),
        ({"steps": 0}, ValueError, "steps"),
        ({"lr": -1.0}, ValueError, "lr"),
        ({"lr": float("nan")}, ValueError, "lr"),
        ({"batch": 0}, ValueError, "batch"),
        ({"eps": -1e-8}, ValueError, "eps"),
    ],
)
def test_train_retrieval_rejects_bad_arguments_by_name(kwargs, error, match):
    args = {"arms": ARMS08[:1], "d_k": 8, "seeds": [0], "steps": 1}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        train_retrieval(args.pop("arms"), args.pop("d_k"), args.pop("seeds"), **args)


# --- normalizing the keys alone, and the learning-rate sweep -----------------------------



def test_key_norm_scores_are_the_query_against_keys_of_length_sqrt_d_k():
    d_k = 8
    w_q, w_k, labels = init_retrieval_params(d_k, 3)
    x, y, t, query = (a[None] for a in next(retrieval_batches(3, batch=4)))
    c = torch.tensor([0.5], dtype=torch.float64)
    out = retrieval_forward(w_q[None], w_k[None], labels[None], c, torch.tensor([False]), (x, y, t, query),
                            key_norm=torch.tensor([True]))
    q, k = query[0] @ w_q, x[0] @ w_k  # (B, d_k), (B, S, d_k)
    expected = 0.5 * torch.einsum("bd,bsd->bs", q, math.sqrt(d_k) * k / k.norm(dim=-1, keepdim=True))
    torch.testing.assert_close(out["scores"][0], expected, rtol=1e-12, atol=1e-12)
    # q keeps its length: doubling W_q doubles the scores (QK-norm would leave them unchanged)
    doubled = retrieval_forward(2 * w_q[None], w_k[None], labels[None], c, torch.tensor([False]), (x, y, t, query),
                                key_norm=torch.tensor([True]))
    torch.testing.assert_close(doubled["scores"], 2 * out["scores"], rtol=1e-12, atol=1e-12)


def test_an_arm_cannot_normalize_both_ways_and_a_model_cannot_either():
    with pytest.raises(ValueError, match="key_norm"):
        Arm("both", qk_norm=True, key_norm=True)
    w_q, w_k, labels = init_retrieval_params(8, 0)
    batch = tuple(a[None] for a in next(retrieval_batches(0, batch=2)))
    with pytest.raises(ValueError, match="key_norm"):
        retrieval_forward(w_q[None], w_k[None], labels[None], torch.tensor([1.0], dtype=torch.float64),
                          torch.tensor([True]), batch, key_norm=torch.tensor([True]))


def test_adding_a_keys_only_arm_leaves_the_other_arms_runs_unchanged(short_run):
    keys_only = Arm("keys only", c_power=0.5, key_norm=True)
    run = train_retrieval(ARMS08 + [keys_only], 64, [0, 1], steps=40, lr=1e-2)
    np.testing.assert_allclose(run["loss"][:, :6], short_run["loss"], rtol=1e-9)
    np.testing.assert_allclose(run["loss"][0, 6], run["loss"][0, 1], rtol=0.05)  # starts near the scaled arm
    assert np.isfinite(run["loss"]).all() and (run["loss"][-10:, 6].mean(axis=0) < run["loss"][:10, 6].mean(axis=0)).all()


def test_the_sweep_keeps_each_rates_final_loss_and_c_as_train_retrieval_does():
    arms, lrs = [ARMS08[1], ARMS08[4]], [2e-3, 8e-3]
    sweep = learning_rate_sweep(arms, 16, [0, 1], lrs, steps=24, final_steps=5)
    assert sweep["final"].shape == sweep["c"].shape == (2, 2, 2)
    np.testing.assert_array_equal(sweep["lr"], lrs)
    for r, lr in enumerate(lrs):
        run = train_retrieval(arms, 16, [0, 1], steps=24, lr=lr)
        np.testing.assert_allclose(sweep["final"][r], run["loss"][-5:].mean(axis=0), rtol=1e-12)
        np.testing.assert_allclose(sweep["c"][r], run["c"][-1], rtol=1e-12)
    # the learnable c moves further at the larger rate
    assert (sweep["c"][1, 1] < sweep["c"][0, 1]).all()


def test_the_sweep_window_defaults_to_an_eighth_of_the_steps():
    sweep = learning_rate_sweep(ARMS08[:1], 8, [0], [1e-2], steps=16)
    run = train_retrieval(ARMS08[:1], 8, [0], steps=16, lr=1e-2)
    np.testing.assert_allclose(sweep["final"][0], run["loss"][-2:].mean(axis=0), rtol=1e-12)


def test_the_sweep_drives_one_progress_bar_over_all_rates():
    class Bar:  # what train_retrieval drives: an ipywidgets.IntProgress, or anything with an int value
        def __init__(self):
            self.shown, self._value = [], 0

        @property
        def value(self):
            return self._value

        @value.setter
        def value(self, percent):
            self._value = percent
            self.shown.append(percent)

    bar = Bar()
    learning_rate_sweep(ARMS08[:1], 8, [0], [1e-3, 2e-3], steps=10, progress=bar)
    percents = bar.shown
    assert percents == sorted(percents) and percents[-1] == 100 and 50 in percents


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"lrs": []}, TypeError, "lrs"),
        ({"lrs": 1e-3}, TypeError, "lrs"),
        ({"lrs": [1e-3, -1.0]}, ValueError, r"lrs\[1\]"),
        ({"lrs": [float("inf")]}, ValueError, r"lrs\[0\]"),
        ({"steps": 0}, ValueError, "steps"),
        ({"final_steps": 0}, ValueError, "final_steps"),
        ({"final_steps": 5}, ValueError, "final_steps"),
        ({"progress": 1}, TypeError, "progress"),
        ({"arms": []}, TypeError, "arms"),
    ],
)
def test_the_sweep_rejects_bad_arguments_by_name(kwargs, error, match):
    args = {"arms": ARMS08[:1], "d_k": 8, "seeds": [0], "lrs": [1e-3], "steps": 4}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        learning_rate_sweep(args.pop("arms"), args.pop("d_k"), args.pop("seeds"), args.pop("lrs"), **args)


def test_scale_arms_are_the_seven_arms_of_lessons_08_and_08b_in_order():

    arms = scale_arms()
    assert [a.name[:3] for a in arms] == [f"({x})" for x in "abcdefg"]
    assert arms[1].c_power == 0.5 and arms[3].init_power == arms[3].lr_power == 0.25
    assert arms[4].learnable and arms[5].qk_norm and arms[6].key_norm and not arms[6].qk_norm
    assert scale_arms() is not scale_arms()  # a fresh list each call


# --- adam_steps: Adam in NumPy ------------------------------------------------------------------


def torch_adam_path(w0, grads, **kwargs):
    """The weights torch.optim.Adam (foreach=False, the plain loop) takes for the given gradients."""
    p = torch.tensor(w0, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([p], foreach=False, **kwargs)
    path = [p.detach().clone()]
    for g in grads:
        p.grad = torch.as_tensor(g, dtype=torch.float64)
        opt.step()
        path.append(p.detach().clone())
    return torch.stack(path).numpy()


@pytest.mark.parametrize("eps", [1e-8, 0.0, 1e-3])
def test_adam_steps_match_torch_optim_adam(eps):
    rng = np.random.default_rng(3)
    w0, grads = rng.normal(size=(4, 5)), rng.normal(size=(30, 4, 5)) * np.logspace(-6, 2, 5)
    ours = adam_steps(w0, grads, lr=1e-2, betas=(0.8, 0.99), eps=eps)
    theirs = torch_adam_path(w0, grads, lr=1e-2, betas=(0.8, 0.99), eps=eps)
    # float64 rounding: each step's size |dw| comes from a few roundings (relative error under 10u, u = 2^-53)
    # and adding it to w rounds by |w|u, so after the steps |ours - theirs| <= sum 10u|dw| + steps * u * max|w|.
    u = 2.0**-53
    bound = (10 * u * np.abs(np.diff(theirs, axis=0)).sum(axis=0) + len(grads) * u * np.abs(theirs).max(axis=0))
    assert (np.abs(ours - theirs) <= bound).all()  # every step, every component
    assert (np.abs(ours[-1] - w0) > 1e6 * bound).all()  # and every weight moved far beyond the tolerance


def test_adam_ignores_the_gradients_size_up_to_epsilon():
    rng = np.random.default_rng(4)
    w0, grads = rng.normal(size=6), rng.normal(size=(20, 6))
    base = adam_steps(w0, grads, lr=1e-3, eps=0.0)
    for a in (1e-4, 1e3):
        np.testing.assert_allclose(adam_steps(w0, a * grads, lr=1e-3, eps=0.0), base, rtol=1e-13, atol=0)
    # With epsilon, tiny gradients (|g| ~ eps) take smaller steps: the invariance holds only while eps << sqrt(v).
    small = adam_steps(w0, 1e-8 * grads, lr=1e-3)
    assert np.abs(small[-1] - w0).max() < 0.8 * np.abs(base[-1] - w0).max()


def test_the_first_adam_step_is_lr_times_the_sign_of_the_gradient():
    path = adam_steps(np.zeros(3), [[2.0, -0.5, 1e-3]], lr=0.01, eps=0.0)
    np.testing.assert_allclose(path[1], [-0.01, 0.01, -0.01], rtol=1e-15)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"grads": np.zeros((3, 2))}, ValueError, "grads"),
    ({"grads": np.zeros((0, 2, 2))}, ValueError, "grads"),
    ({"lr": 0.0}, ValueError, "lr"),
    ({"lr": float("nan")}, ValueError, "lr"),
    ({"betas": (0.9, 1.0)}, ValueError, "betas"),
    ({"betas": [0.9, 0.99]}, ValueError, "betas"),
    ({"eps": -1e-8}, ValueError, "eps"),
    ({"w": "ab"}, TypeError, "w"),
])
def test_adam_steps_reject_bad_arguments_by_name(kwargs, error, match):
    args = {"w": np.zeros((2, 2)), "grads": np.ones((3, 2, 2)), "lr": 1e-3, **kwargs}
    with pytest.raises(error, match=match):
        adam_steps(args.pop("w"), args.pop("grads"), **args)


# --- at_best_rate ------------------------------------------------------------------------------------


def test_each_arm_is_taken_at_the_rate_with_its_lowest_mean_loss():
    rng = np.random.default_rng(0)
    final = rng.uniform(0.5, 2.0, size=(6, 4, 5))
    best, losses = at_best_rate(final)
    for a in range(4):
        means = [final[r, a].mean() for r in range(6)]
        assert best[a] == min(range(6), key=means.__getitem__)  # an independent argmin, by Python
        np.testing.assert_array_equal(losses[a], final[best[a], a])


def test_the_best_rate_is_by_the_mean_over_seeds_not_by_one_seed():
    final = np.array([[[0.1, 2.0]], [[0.6, 0.6]]])  # rate 0 has the lowest single loss, rate 1 the lowest mean
    best, _ = at_best_rate(final)
    assert best.tolist() == [1]


@pytest.mark.parametrize(("final", "error"), [
    (np.zeros((3, 2)), ValueError),
    (np.zeros((0, 2, 2)), ValueError),
    (np.full((2, 2, 2), np.nan), ValueError),
    ("abc", TypeError),
])
def test_at_best_rate_rejects_bad_input_by_name(final, error):
    with pytest.raises(error, match="final"):
        at_best_rate(final)
