"""Lesson 04's exercises: q2 promises the gradient without the Jacobian, and its checker holds it to that.

The checker hands the answer g and p as arrays that report every array NumPy computes from them, and it watches
every PyTorch call: an n x n array, on any row, in either library, is the Jacobian the exercise asks to skip.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from course_utils import exercises
from course_utils.softmax import softmax
from test_exercises import _unwrapped  # the printed text, before it was wrapped

EX = exercises.load("04")


def _vjp(g, p):
    return p * (g - (g * p).sum(axis=-1, keepdims=True))


def _with_jacobian(g, p):
    rows = [(np.diag(pr) - np.outer(pr, pr)) @ gr for gr, pr in zip(np.atleast_2d(g), np.atleast_2d(p))]
    return np.reshape(rows, np.shape(g))


def test_q2_an_answer_that_builds_the_jacobian_is_rejected_and_told_which_line(capsys):
    assert EX.q2.check(_with_jacobian).status == "incorrect"
    out = _unwrapped(capsys.readouterr().out)
    assert "built an array of shape (3, 3), n x n for rows of n = 3" in out
    assert "`rows = [(np.diag(pr) - np.outer(pr, pr)) @ gr" in out and "This is exactly what" not in out


def test_q2_the_vector_formula_passes_on_the_long_row_too():
    assert max(np.shape(case.args[0])[-1] for case in EX.q2.cases) >= 1000
    assert EX.q2.evaluate(_vjp).passed


def test_q2_the_checkers_reference_passes():
    assert EX.q2.evaluate(EX.q2.reference).passed


def _asarray_einsum(g, p):
    g, p = np.asarray(g), np.asarray(p, dtype=np.float64)
    return p * (g - np.einsum("...i,...i->...", g, p)[..., None])


def _stacked(g, p):  # one array of g and p together: 2n numbers, not n x n
    gp = np.stack([g, p])
    return gp[1] * (gp[0] - (gp[0] * gp[1]).sum(axis=-1, keepdims=True))


def _torch_autograd(g, p):  # autograd through log p: PyTorch computes the product without forming J
    x = torch.log(torch.from_numpy(np.array(p))).requires_grad_(True)
    torch.softmax(x, dim=-1).backward(torch.from_numpy(np.array(g)))
    return x.grad.numpy()


def _torch_formula(g, p):
    g, p = torch.as_tensor(g), torch.as_tensor(p)
    return (p * (g - (g * p).sum(dim=-1, keepdim=True))).numpy()


def _clipped_p(g, p):
    p = np.clip(p, 1e-300, 1.0)
    return p * (g - (g * p).sum(axis=-1, keepdims=True))


def _float32_out(g, p):  # the default rtol 1e-6 admits float32's rounding, 6e-8 relative
    g32, p32 = g.astype(np.float32), p.astype(np.float32)
    return p32 * (g32 - (g32 * p32).sum(axis=-1, keepdims=True))


def _float32_inside(g, p):
    return _float32_out(g, p).astype(np.float64)


def _python_lists(g, p):  # g and p as Python lists of n floats: O(n) memory, five times the reference's at most
    out = []
    for gr, pr in zip(np.atleast_2d(g).tolist(), np.atleast_2d(p).tolist()):
        dot = sum(gi * pi for gi, pi in zip(gr, pr))
        out.append([pi * (gi - dot) for gi, pi in zip(gr, pr)])
    return np.reshape(out, np.shape(g))


RIGHT = {
    "the vector formula": _vjp,
    "in Python lists of n": _python_lists,
    "float32 out": _float32_out,
    "float32 inside, float64 out": _float32_inside,
    "np.asarray and np.einsum": _asarray_einsum,
    "g and p stacked in one array": _stacked,
    "torch autograd through log p": _torch_autograd,
    "the formula in torch": _torch_formula,
    "p clipped away from 0": _clipped_p,
}


@pytest.mark.parametrize("answer", RIGHT.values(), ids=RIGHT.keys())
def test_q2_right_answers_pass_while_the_checker_watches_their_arrays(answer, capsys):
    verdict = EX.q2.check(answer)
    assert verdict.passed, capsys.readouterr().out


def _jacobian_on_short_rows_only(g, p):  # the review's loophole: J where the memory check did not look
    return _with_jacobian(g, p) if np.shape(g)[-1] < 1000 else _vjp(g, p)


def _jacobian_on_long_rows_only(g, p):
    return _with_jacobian(g, p) if np.shape(g)[-1] >= 1000 else _vjp(g, p)


def _jacobian_in_torch(g, p):  # tracemalloc never saw this one
    G, P = torch.from_numpy(np.atleast_2d(g)), torch.from_numpy(np.atleast_2d(p))
    J = torch.diag_embed(P) - P[:, :, None] * P[:, None, :]
    return (J @ G[:, :, None])[..., 0].reshape(np.shape(g)).numpy()


def _jacobian_from_autograd(g, p):
    rows = []
    for gr, pr in zip(np.atleast_2d(g), np.atleast_2d(p)):
        J = torch.autograd.functional.jacobian(lambda x: torch.softmax(x, -1), torch.log(torch.tensor(pr)))
        rows.append((J.T @ torch.tensor(gr)).numpy())
    return np.reshape(rows, np.shape(g))


def _jacobian_from_python_lists(g, p):
    out = []
    for gr, pr in zip(np.atleast_2d(g), np.atleast_2d(p)):
        J = np.array([[pr[i] * ((i == k) - pr[k]) for k in range(len(pr))] for i in range(len(pr))])
        out.append(J @ gr)
    return np.reshape(out, np.shape(g))


def _jacobian_flattened(g, p):  # J g summed from J's n * n entries kept in one flat row: never an n x n block
    g2, p2 = np.atleast_2d(g), np.atleast_2d(p)
    n = g2.shape[-1]
    p_i, p_k, g_i = np.repeat(p2, n, axis=-1), np.tile(p2, n), np.repeat(g2, n, axis=-1)  # entry i * n + k
    delta = np.arange(n * n) % (n + 1) == 0
    terms = g_i * p_i * (delta - p_k)  # J_ik g_i
    return np.stack([terms[:, k::n].sum(axis=-1) for k in range(n)], axis=-1).reshape(np.shape(g))


JACOBIANS = {  # answer: what the message must say it built
    "J on short rows only": (_jacobian_on_short_rows_only, "an array of shape (3, 3), n x n for rows of n = 3"),
    "J on the long row only": (
        _jacobian_on_long_rows_only, "an array of shape (2000, 2000), n x n for rows of n = 2000"),
    "J in torch": (_jacobian_in_torch, "an array of shape (1, 3, 3), n x n for rows of n = 3"),
    "J from torch.autograd.functional.jacobian": (_jacobian_from_autograd, "an array of shape (3, 3)"),
    "J from Python lists": (_jacobian_from_python_lists, "an array of shape (3, 3)"),
    "J flattened into one row": (
        _jacobian_flattened, "an array of 9 numbers (shape (1, 9)), more than g and p hold together (6)"),
}


@pytest.mark.parametrize("label", JACOBIANS)
def test_q2_a_jacobian_in_numpy_or_torch_on_any_row_is_rejected_and_named(label, capsys):
    answer, built = JACOBIANS[label]
    assert EX.q2.check(answer).status == "incorrect"
    out = _unwrapped(capsys.readouterr().out)
    assert f"the result is right, but your function built {built}" in out and "the Jacobian's size" in out
    assert "This is exactly what" not in out


# --- what the watching cannot follow (review 33, A2): memory, on rows of lengths drawn afresh for each check ------

FIXED_N = {np.shape(case.args[0])[-1] for case in EX.q2.cases}


def _jacobian_as_python_lists(g, p):
    """The nested Python list J = [[p_i (delta_ik - p_k)]], on every row but the long one."""
    n = np.shape(g)[-1]
    if n >= 1000:
        return _vjp(g, p)
    rows = []
    for gr, pr in zip(np.atleast_2d(g).tolist(), np.atleast_2d(p).tolist()):
        J = [[pr[i] * ((i == k) - pr[k]) for k in range(n)] for i in range(n)]
        rows.append([sum(J[i][k] * gr[k] for k in range(n)) for i in range(n)])
    return np.reshape(rows, np.shape(g))


def _jacobian_after_a_view(g, p):
    """J in NumPy from `p.view(np.ndarray)`, which the watching does not follow, on every row but the long one."""
    n = np.shape(g)[-1]
    if n >= 1000:
        return _vjp(g, p)
    p0, g0 = p.view(np.ndarray), g.view(np.ndarray)
    J = np.einsum("...i,ij->...ij", p0, np.eye(n)) - p0[..., :, None] * p0[..., None, :]
    return np.einsum("...ij,...j->...i", J, g0)


def _jacobian_but_on_the_fixed_lengths(g, p):
    """The formula on the rows of the cases' own lengths, a Python-list J on any other."""
    return _vjp(g, p) if np.shape(g)[-1] in FIXED_N else _jacobian_as_python_lists(g, p)


def _below_64(jacobian):
    def answer(g, p):
        return jacobian(g, p) if np.shape(g)[-1] < 64 else _vjp(g, p)
    return answer


def _jacobian_from_bytes(g, p):
    """J in NumPy from `np.frombuffer(p.tobytes())`, on short rows only."""
    if np.ndim(p) > 1 or np.shape(p)[-1] >= 64:
        return _vjp(g, p)
    p0 = np.frombuffer(p.tobytes())
    return (np.diag(p0) - np.outer(p0, p0)) @ g


def _jacobian_from_the_base(g, p):
    """J in NumPy from `np.asarray(memoryview(p))` or `p.base`, on short rows only."""
    if np.ndim(p) > 1 or np.shape(p)[-1] >= 64:
        return _vjp(g, p)
    p0 = p.base if p.base is not None else np.asarray(memoryview(p))
    return (np.diag(p0) - np.outer(p0, p0)) @ g


@pytest.mark.parametrize("answer", [_jacobian_from_bytes, _jacobian_from_the_base, _jacobian_after_a_view])
def test_q2_a_jacobian_from_bytes_a_base_or_a_view_is_still_watched_on_the_shortest_rows(answer, capsys):
    verdict = EX.q2.check(answer)
    out = _unwrapped(capsys.readouterr().out)
    assert verdict.status == "incorrect" and "the result is right, but your function built an array of shape" in out


ESCAPES = {
    "J as nested Python lists below n = 64": _below_64(_jacobian_as_python_lists),
    "J as nested Python lists below n = 1000": _jacobian_as_python_lists,
    "J as Python lists on every length but the cases' own": _jacobian_but_on_the_fixed_lengths,
}


@pytest.mark.parametrize("label", ESCAPES)
def test_q2_a_jacobian_the_watching_cannot_follow_is_caught_by_its_memory_on_a_fresh_row(label, capsys):
    for _ in range(3):  # on any lengths the checks draw
        verdict = EX.q2.check(ESCAPES[label])
        out = _unwrapped(capsys.readouterr().out)
        assert verdict.status == "incorrect" and verdict.mistake == "the property _without_the_jacobian", out
        n = int(out.split("on this row of n = ")[1].split(" ")[0])
        assert 32 <= n < 1024 and n not in FIXED_N
        assert "the memory of an n x n Jacobian" in out and "This is exactly what" not in out
        assert verdict.next_step.startswith("Find where your function makes n x n numbers")


def test_q2_each_check_draws_two_rows_of_new_lengths_and_keeps_its_fixed_cases():
    from course_utils.exercises.core import Case

    seen = []

    def spy(g, p):
        seen.append(np.shape(g))
        return _vjp(g, p)

    fixed = EX.q2.cases
    lengths = set()
    for _ in range(4):
        seen.clear()
        verdict = EX.q2.evaluate(spy)
        assert verdict.passed and f"all {len(fixed) + 2} test inputs" in verdict.message
        drawn = [shape for shape in seen if shape not in {np.shape(c.args[0]) for c in fixed}]
        assert len({s[-1] for s in drawn}) == 2 and all(32 <= s[-1] < 1024 and len(s) == 1 for s in drawn)
        assert min(s[-1] for s in drawn) < 64  # one row always short, where a J of Python lists is still small
        lengths.update(s[-1] for s in drawn)
    assert len(lengths) > 2  # new ones each time
    assert EX.q2.cases is fixed and all(isinstance(c, Case) for c in fixed)


def test_q2_the_memory_limit_is_the_references_own_peak_on_the_row_times_8_or_a_quarter_of_j():
    from course_utils.exercises import lesson04
    from course_utils.exercises.core import Case, Run

    n = 32
    g, p = np.random.default_rng(0).standard_normal(n), softmax(np.random.default_rng(1).standard_normal(n))
    run = Run(_jacobian_as_python_lists, Case((g, p)), _vjp(g, p), _vjp(g, p), "float64", EX.q2.reference)
    assert "the memory of an n x n Jacobian" in lesson04._without_the_jacobian(run)
    for answer in RIGHT.values():
        assert lesson04._without_the_jacobian(Run(answer, Case((g, p)), _vjp(g, p), _vjp(g, p), "float64",
                                                  EX.q2.reference)) is None


def test_q2_after_a_jacobian_the_next_step_is_the_vector_formula_in_code(capsys):
    ex = exercises.load("04").q2
    ex.check(_jacobian_in_torch)
    feedback = _unwrapped(capsys.readouterr().out)
    ex.hint()
    step = _unwrapped(capsys.readouterr().out)
    assert step.startswith("Next step for this mistake: Find where your function makes n x n numbers")
    assert "`p * (g - (g * p).sum(axis=-1, keepdims=True))`" in step and step.split(": ", 1)[1] not in feedback
    # It names no code the learner did not write: it says what to look for (review 33, N5).
    assert "Replace `(np.diag(p) - np.outer(p, p)) @ g`" not in step


def test_q2_the_watching_sees_an_n_by_n_block_but_not_the_inputs_stacked():
    from course_utils.exercises.lesson04 import _Sizes

    sizes = _Sizes(n=5, limit=30)  # a (3, 5) batch of g and of p
    sizes.see([np.zeros((2, 3, 5)), np.zeros(30)], "`np.stack`")
    assert sizes.big is None
    sizes.see(torch.zeros(5, 5), "`torch.outer`")
    assert sizes.big is not None and sizes.big.shape == (5, 5) and sizes.big.how == "`torch.outer`"


# --- named wrong answers (review P5): each gets its advice and a next step in code ----------------------


def _sign_flipped(g, p):
    return p * ((g * p).sum(axis=-1, keepdims=True) - g)


def _log_softmax_backward(g, p):
    return g - p * g.sum(axis=-1, keepdims=True)


def _argmax_of_soft_targets(logits, targets):
    return softmax(logits, axis=-1) - np.eye(np.shape(targets)[-1])[np.argmax(targets, axis=-1)]


def _over_logits_shape_0(logits, targets):
    return (softmax(logits, axis=-1) - targets) / logits.shape[0]


def _over_the_number_of_rows(logits, targets):
    return (softmax(logits, axis=-1) - targets) / (logits.shape[0] if logits.ndim == 2 else 1)


NAMED = {  # (exercise, answer, label, words of its advice, code in its next step)
    "q2 sign flipped": ("q2", _sign_flipped, "the wrong sign", "with a plus sign",
                        "`g - (g * p).sum(axis=-1, keepdims=True)`"),
    "q2 log-softmax backward": ("q2", _log_softmax_backward, "the log-softmax backward pass, g - p * sum(g)",
                                "backward pass of log p", "`p * (g - (g * p).sum(axis=-1, keepdims=True))`"),
    "q3 argmax of soft targets": ("q3", _argmax_of_soft_targets,
                                  "the one-hot of the targets' argmax in place of soft targets",
                                  "[0.2, 0.3, 0.5]", "`return p - targets`"),
    "q3 / logits.shape[0]": ("q3", _over_logits_shape_0, "dividing by len(logits)",
                             "number of classes for a single row", "`/ logits.shape[0]`"),
    "q3 / the number of rows": ("q3", _over_the_number_of_rows, "dividing by the batch size", 'reduction="mean"',
                                "`/ logits.shape[0]`"),
}


@pytest.mark.parametrize("case", NAMED)
def test_a_natural_wrong_answer_is_named_with_its_advice_and_its_next_step(case, capsys):
    name, answer, label, advice, code = NAMED[case]
    ex = getattr(exercises.load("04"), name)
    verdict = ex.check(answer)
    out = _unwrapped(capsys.readouterr().out)
    assert verdict.status == "incorrect" and verdict.mistake == label
    assert f"This is exactly what {label} gives." in out and advice in out
    ex.hint()
    assert code in _unwrapped(capsys.readouterr().out)



def _jacobian_in_an_empty_array_below_100(g, p):
    """J written entry by entry into `np.empty((n, n))`, on short rows only (review 33, rerun c)."""
    if np.ndim(g) > 1 or np.shape(g)[-1] >= 100:
        return _vjp(g, p)
    n = np.shape(g)[-1]
    J = np.empty((n, n))
    for i in range(n):
        for k in range(n):
            J[i, k] = p[i] * ((i == k) - p[k])
    return J @ g


def test_q2_a_jacobian_made_by_a_numpy_constructor_is_seen_on_every_row(capsys):
    assert EX.q2.check(_jacobian_in_an_empty_array_below_100).status == "incorrect"
    assert "n x n for rows of n = 3" in _unwrapped(capsys.readouterr().out)
