"""Lesson 05c's guard of empty rows (course_utils.backends.sdpa_guarded) and the probe of pytorch issue #196678.

No GPU runs here. A kernel that misbehaves is stood in for on the CPU: the torch.softmax path (NaN in an
empty row), cuDNN's -65504 bool fill (an empty row attends as if unmasked), and a kernel whose backward puts
NaN into q.grad for a row it saw empty, as #196678 reports of cuDNN at L % 128 == 64.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from course_utils import backends
from course_utils.backends import GUARDS, grad_nan_probe, sdpa_guarded

L = 8
EMPTY, BLOCKED = 3, 5


def _mask() -> torch.Tensor:
    mask = torch.ones(L, L, dtype=torch.bool).tril()
    mask[:, BLOCKED] = False  # a key no query may see
    mask[EMPTY] = False  # a query that may see nothing
    return mask


def _qkv(seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(1, 2, L, 4, generator=gen, dtype=torch.float64).requires_grad_() for _ in range(3)]


def _softmax_path(backend, q, k, v, attn_mask=None):
    """torch.softmax after masked_fill(-inf): an empty row is NaN, forward and backward."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores.masked_fill(~attn_mask, -math.inf), dim=-1) @ v


def _cudnn_fill(backend, q, k, v, attn_mask=None):
    """cuDNN's bool-mask convention on the CPU: the blocked scores get -65504, so an empty row is as if unmasked."""
    additive = torch.zeros(attn_mask.shape, dtype=q.dtype).masked_fill(~attn_mask, -65504.0)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=additive)


def _nan_backward_at_64_mod_128(backend, q, k, v, attn_mask=None):
    """A kernel that, like #196678's report, returns NaN in q.grad for the rows it saw empty, at L % 128 == 64."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    if q.shape[-2] % 128 != 64:
        return out
    empty = ~attn_mask.any(dim=-1, keepdim=True)
    poison = torch.where(empty, torch.tensor(math.inf, dtype=q.dtype), torch.tensor(0.0, dtype=q.dtype))
    return out + q * poison * 0.0  # d/dq is inf * 0 = NaN in the empty rows, whatever gradient arrives


def _run(guard: str, seed: int = 0):
    q, k, v = _qkv(seed)
    out = sdpa_guarded("math", q, k, v, _mask(), guard)
    out.sum().backward()
    return out.detach(), [t.grad for t in (q, k, v)]


def test_the_guard_before_the_kernel_hands_no_kernel_an_empty_row(monkeypatch):
    seen = []

    def spy(backend, q, k, v, attn_mask=None):
        seen.append(attn_mask.clone())
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)

    monkeypatch.setattr(backends, "run_sdpa", spy)
    q, k, v = _qkv()
    sdpa_guarded("math", q, k, v, _mask(), "before and after")
    sdpa_guarded("math", q, k, v, _mask(), "after")
    assert seen[0].any(dim=-1).all(), "the kernel met an empty row"
    assert torch.equal(seen[0][EMPTY], torch.ones(L, dtype=torch.bool)) and torch.equal(seen[0][:EMPTY], _mask()[:EMPTY])
    assert torch.equal(seen[1], _mask()), "the guard after the kernel hands it the mask as it is"


def test_the_guarded_call_keeps_every_real_row_and_zeroes_the_empty_one_on_the_cpu():
    plain, plain_grads = _run("none")
    for guard in ("after", "before and after"):
        out, grads = _run(guard)
        assert torch.equal(out, plain), guard  # on the CPU the plain call already gives zeros
        assert (out[..., EMPTY, :] == 0).all()
        for g, p in zip(grads, plain_grads):
            assert torch.equal(g, p), guard


@pytest.mark.parametrize("stand_in", [_softmax_path, _cudnn_fill], ids=["torch.softmax path", "cuDNN's -65504 fill"])
def test_guarding_before_and_after_gives_the_plain_cpu_sdpa_result_on_a_path_that_misbehaves(monkeypatch, stand_in):
    reference, reference_grads = _run("none")  # CPU SDPA: zeros and zero gradients for the empty row
    monkeypatch.setattr(backends, "run_sdpa", stand_in)
    out, grads = _run("before and after")
    torch.testing.assert_close(out, reference, rtol=0, atol=1e-12)
    for g, r in zip(grads, reference_grads):
        assert g.isfinite().all()
        torch.testing.assert_close(g, r, rtol=0, atol=1e-12)
    assert (grads[0][..., EMPTY, :] == 0).all() and (grads[2][..., BLOCKED, :] == 0).all()


def test_on_the_softmax_path_the_guard_after_the_kernel_leaves_nan_in_the_values_gradient(monkeypatch):
    monkeypatch.setattr(backends, "run_sdpa", _softmax_path)
    out, (dq, dk, dv) = _run("after")
    assert (out[..., EMPTY, :] == 0).all()
    assert dv.isnan().any() and dq.isfinite().all() and dk.isfinite().all()


def test_the_probe_finds_a_backward_nan_that_only_the_guard_before_the_kernel_avoids(monkeypatch):
    monkeypatch.setattr(backends, "run_sdpa", _nan_backward_at_64_mod_128)
    for length in (64, 192):
        nan_rows = {g: grad_nan_probe("cpu", "float32", length, g, head_dim=8)["NaN rows in q.grad"] for g in GUARDS}
        assert nan_rows == {"none": 1, "after": 1, "before and after": 0}, length
    assert all(grad_nan_probe("cpu", "float32", 128, g, head_dim=8)["NaN rows in q.grad"] == 0 for g in GUARDS)


def test_the_probe_finds_no_nan_on_the_cpu_in_either_half_precision_dtype():
    for dtype, guard in itertools.product(("float16", "bfloat16"), GUARDS):
        r = grad_nan_probe("cpu", dtype, 64, guard, head_dim=16)
        assert r["empty row zero"] and (r["NaN rows in q.grad"], r["NaN rows in k.grad"], r["NaN rows in v.grad"]) == (0, 0, 0)


def test_the_gpu_script_probes_every_length_dtype_and_guard_of_issue_196678():
    from benchmarks import gpu

    assert gpu.GRAD_NAN_LENGTHS == (64, 128, 192)  # two lengths % 128 == 64, and the control
    records = gpu.grad_nan_by_length("cpu")
    cases = [(r["dtype"], r["L"], r["guard"]) for r in records]
    assert sorted(cases) == sorted(itertools.product(("float16", "bfloat16"), (64, 128, 192), GUARDS))
    assert all(r["device"] == "cpu" and r["backend"] == "default" and r["capability"] is None for r in records)
    assert all(r["NaN rows in q.grad"] == 0 and r["empty row zero"] for r in records)
    assert "grad_nan_by_length" in gpu.EXTRA_FIELDS


def test_the_guard_and_the_probe_reject_bad_arguments_by_name():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="guard"):
        sdpa_guarded("math", q, k, v, _mask(), "before")
    with pytest.raises(TypeError, match="mask"):
        sdpa_guarded("math", q, k, v, _mask().double())
    with pytest.raises(ValueError, match="L must be"):
        grad_nan_probe("cpu", "float32", 2, "none")


def test_the_modules_hand_sdpa_a_float_minus_inf_mask_where_they_were_given_a_bool_one():
    x, pads = torch.randn(2, 4, 8), torch.tensor([[False] * 4, [True] * 4])
    mha = torch.nn.MultiheadAttention(8, num_heads=2, batch_first=True)
    layer = torch.nn.TransformerEncoderLayer(8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True)
    causal_blocked = ~torch.ones(4, 4, dtype=torch.bool).tril()  # True = blocked, as the modules read it
    assert backends.masks_sdpa_receives(lambda: mha(x, x, x, key_padding_mask=pads, need_weights=False)) == ["float32 of -inf and 0"]
    assert backends.masks_sdpa_receives(lambda: mha(x, x, x, attn_mask=causal_blocked, need_weights=False)) == ["float32 of -inf and 0"]
    assert backends.masks_sdpa_receives(lambda: layer(x, src_key_padding_mask=pads)) == ["float32 of -inf and 0"]
    assert backends.masks_sdpa_receives(lambda: F.scaled_dot_product_attention(x, x, x)) == ["no mask"]
    assert F.scaled_dot_product_attention is torch._C._nn.scaled_dot_product_attention, "the spy was left in place"
