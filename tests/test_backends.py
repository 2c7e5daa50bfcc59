"""course_utils.backends: the words it gives each backend's result, checked on the CPU against exact references."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from course_utils import backends
from course_utils.backends import (
    causal_lower_right_check,
    describe_rows,
    fully_masked_table,
    future_leaks,
    grad_of_blocked,
    is_causal_alignment,
    outcome_grid,
    outcome_table,
    padded_modules_table,
)
from course_utils.measured import load_measurements

RECORDED = load_measurements()


def _sdpa(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


REF = torch.tensor([[1.0, -2.0, 0.5]], dtype=torch.float64)
MEAN = torch.tensor([[0.25, 0.25, 0.25]], dtype=torch.float64)


@pytest.mark.parametrize(
    "rows,word",
    [
        (torch.full((1, 3), math.nan), "nan"),
        (torch.zeros(1, 3), "zeros"),
        (REF + 1e-6, "as if unmasked"),
        (MEAN.clone(), "uniform mean of V"),
        (REF + 0.1, "finite other"),
    ],
)
def test_describe_rows_gives_each_outcome_its_word(rows, word):
    assert describe_rows(rows, unmasked=REF, v_mean=MEAN, dtype="float32") == word


def test_describe_rows_uses_the_tolerance_of_the_dtype():
    off = REF + 5e-3  # within float16's rounding of these values, far outside float32's
    assert describe_rows(off, unmasked=REF, v_mean=MEAN, dtype="float16") == "as if unmasked"
    assert describe_rows(off, unmasked=REF, v_mean=MEAN, dtype="float32") == "finite other"


@pytest.mark.parametrize("bad", ["float8", None, 32])
def test_describe_rows_rejects_an_unknown_dtype_by_name(bad):
    with pytest.raises(ValueError, match="dtype"):
        describe_rows(REF, unmasked=REF, v_mean=MEAN, dtype=bad)


def test_no_function_allocates_on_a_gpu_that_is_not_there():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="device is 'cuda'"):
        fully_masked_table("cuda")
    with pytest.raises(ValueError, match="device must be one of"):
        fully_masked_table("tpu")


def test_the_cpu_table_run_live_equals_the_cpu_table_recorded_beside_the_gpu():
    live = {(r["dtype"], r["backend"], r["mask"]): (r["row"], r.get("dq row")) for r in fully_masked_table("cpu")}
    recorded = {(r["dtype"], r["backend"], r["mask"]): (r["row"], r.get("dq row")) for r in RECORDED["fully_masked_cpu"]}
    assert live == recorded, f"torch {torch.__version__} on this CPU differs from torch {RECORDED['torch']}'s CPU path"


def test_a_float16_finfo_min_mask_leaves_an_empty_row_unmasked_through_sdpa_on_the_cpu():
    rows = [r for r in fully_masked_table("cpu", ["float16"]) if r["mask"] == "additive finfo.min"]
    assert {r["row"] for r in rows} == {"as if unmasked"}


def test_the_modules_table_run_live_equals_the_recorded_cpu_table():
    strip = lambda rows: [{k: v for k, v in r.items() if k != "device"} for r in rows]  # noqa: E731
    assert strip(padded_modules_table("cpu")) == strip(RECORDED["modules_cpu"])


def test_cpu_backends_give_blocked_keys_and_empty_queries_no_gradient_with_or_without_the_guard():
    for guard in (False, True):
        for grads in grad_of_blocked("cpu", "float32", guard=guard).values():
            assert grads == {"dv of blocked key 5": 0.0, "dq of empty row 3": 0.0}


def test_the_guard_zeroes_the_gradient_of_a_backend_that_attends_from_an_empty_row(monkeypatch):
    """A stand-in for cuDNN's bool-mask convention: the empty row attends as if unmasked."""

    def as_if_unmasked_for_empty_rows(backend, q, k, v, attn_mask=None):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        empty = ~attn_mask.any(dim=-1, keepdim=True)
        return torch.where(empty, F.scaled_dot_product_attention(q, k, v), out)

    monkeypatch.setattr(backends, "run_sdpa", as_if_unmasked_for_empty_rows)
    leaky = grad_of_blocked("cpu", "float32", ["math"])["math"]
    assert leaky["dv of blocked key 5"] > 0 and leaky["dq of empty row 3"] > 0
    assert grad_of_blocked("cpu", "float32", ["math"], guard=True)["math"] == {"dv of blocked key 5": 0.0, "dq of empty row 3": 0.0}


@pytest.mark.parametrize("L,S", [(5, 3), (8, 4), (3, 5), (16, 16)])
@pytest.mark.parametrize("backend", ["default", "math", "flash"])
def test_cpu_backends_get_every_real_query_of_causal_lower_right_right(L, S, backend):
    record = causal_lower_right_check(L, S, "float32", "cpu", backend)
    assert record["real queries wrong"] == 0 and record["real queries"] == min(L, S)
    assert record["empty rows zero"] is (True if L > S else None)


def test_causal_lower_right_check_counts_a_backend_that_ignores_the_mask(monkeypatch):
    monkeypatch.setattr(backends, "run_sdpa", lambda backend, q, k, v, attn_mask=None: F.scaled_dot_product_attention(q, k, v))
    record = causal_lower_right_check(8, 4, "float32", "cpu", "math")
    assert record["real queries wrong"] == 3  # the last real query may see every key, so it is right by chance
    assert record["empty rows zero"] is False


@pytest.mark.parametrize("bad", [0, -1, 2.5])
def test_causal_lower_right_check_rejects_a_bad_length_by_name(bad):
    with pytest.raises(ValueError, match="L must be"):
        causal_lower_right_check(bad, 3, "float32", "cpu")


@pytest.mark.parametrize("L,S", [(4, 8), (8, 4)])
def test_is_causal_aligns_to_the_upper_left_on_the_cpu(L, S):
    for backend in backends.available_backends("cpu"):
        record = is_causal_alignment(L, S, "cpu", backend, "float32")
        assert (record["upper-left"], record["lower-right"], record["nan rows"]) == (True, False, 0)


def _qkv(L=6, S=6, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(2, n, 4, generator=gen, dtype=torch.float64) for n in (L, S, S))


def test_future_leaks_finds_none_in_correct_masking():
    q, k, v = _qkv()
    assert future_leaks(_sdpa, q, k, v, torch.ones(6, 6, dtype=torch.bool).tril()) == 0


def test_future_leaks_counts_every_query_that_a_forgotten_mask_lets_see_the_future():
    q, k, v = _qkv()
    assert future_leaks(lambda q, k, v, m: _sdpa(q, k, v, None), q, k, v, torch.ones(6, 6, dtype=torch.bool).tril()) == 5


def test_future_leaks_counts_the_queries_an_upper_left_mask_exposes_where_lower_right_was_meant():
    q, k, v = _qkv(L=3, S=5)
    upper_left = torch.ones(3, 5, dtype=torch.bool).tril()
    lower_right = torch.ones(3, 5, dtype=torch.bool).tril(diagonal=2)
    # Used the other way round: the upper-left mask hides keys the lower-right one allows; nothing leaks.
    assert future_leaks(lambda q, k, v, m: _sdpa(q, k, v, upper_left), q, k, v, lower_right) == 0
    assert future_leaks(lambda q, k, v, m: _sdpa(q, k, v, lower_right), q, k, v, upper_left) == 3


def test_future_leaks_rejects_bad_arguments_by_name():
    q, k, v = _qkv()
    mask = torch.ones(6, 6, dtype=torch.bool)
    with pytest.raises(TypeError, match="attend"):
        future_leaks("sdpa", q, k, v, mask)
    with pytest.raises(TypeError, match="mask"):
        future_leaks(_sdpa, q, k, v, mask.double())
    with pytest.raises(ValueError, match="mask"):
        future_leaks(_sdpa, q, k, v, mask[:5])
    with pytest.raises(ValueError, match="trials"):
        future_leaks(_sdpa, q, k, v, mask, trials=0)


@pytest.mark.parametrize("field", ["row", "dq row"])
def test_the_outcome_grid_holds_the_cells_of_the_outcome_table_with_header_cells_and_a_caption(field):
    h100 = [r | {"device": "H100"} for r in RECORDED["fully_masked_cuda"]]
    text = outcome_table(RECORDED["fully_masked_cpu"], h100, field=field).splitlines()
    grid = outcome_grid(RECORDED["fully_masked_cpu"], h100, field=field, caption="Query 3 on the CPU and the H100")
    assert grid.header == ("dtype", "mask", "cpu math", "cpu flash", "H100 math", "H100 efficient", "H100 flash",
                           "H100 cudnn")
    assert len(grid.rows) == len(text) - 1 == 12
    for line, row in zip(text[1:], grid.rows):  # each text line holds its row's cells, in order
        assert line.split() == " ".join(row).split()
    html = grid._repr_html_()
    assert "<caption>Query 3 on the CPU and the H100</caption>" in html
    assert html.count('<th scope="col"') == 8
    assert "refused" in dict(zip(grid.header, grid.rows[3]))["H100 cudnn"]  # -1e9 in float16: every column


def test_the_outcome_grid_of_a_bare_device_marks_a_refused_fill_in_that_devices_columns_only():
    refused = {"device": "cpu", "dtype": "float16", "backend": "-", "mask": "additive -1e9", "row": "masked_fill refused: x"}
    ran = {"device": "cpu", "dtype": "float16", "backend": "math", "mask": "additive -inf", "row": "zeros"}
    gpu_ran = {"device": "H100", "dtype": "float16", "backend": "cudnn", "mask": "additive -inf", "row": "zeros"}
    grid = outcome_grid([ran, refused], [gpu_ran])
    assert grid.header == ("dtype", "mask", "cpu math", "H100 cudnn")
    assert grid.rows == (("float16", "additive -inf", "zeros", "zeros"), ("float16", "additive -1e9", "refused", ""))
    assert grid.caption is None
