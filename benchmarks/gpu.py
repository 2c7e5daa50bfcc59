"""python -m benchmarks.gpu [--out PATH] [--quick]: what PyTorch's attention does on this machine's GPU.

Writes one JSON file (schema: ``course_utils.measured.FIELDS``) with the device, the torch and
CUDA versions and the date, and every measurement the lessons load from
``course_utils/data/gpu_h100.json``:

- correctness, from ``course_utils.backends``: what each SDPA backend returns for a query with
  nothing to attend to (CPU and CUDA), the gradients of blocked keys, ``is_causal`` with L != S,
  ``causal_lower_right`` with L > S, which backend the default dispatch picks, and the modules'
  all-padding sequences; NaN in the gradients at L = 64, 128 and 192 with each guard of empty rows
  (``grad_nan_by_length``, the conditions of pytorch issue #196678, on the CPU where there is no
  CUDA; not yet in the schema); plus ``torch.softmax`` of 65,536 equal half-precision scores, float64
  ``exp`` at the bottom of its range and the entmax package's sparsemax of an empty row;
- speed and memory: SDPA per backend against L (``flash_vs_math``; the backends timed interleaved, in a
  new random order each round, so that none is always first or last), the math backend's float32
  upcast, softmax pass by pass, and the exp unit against a bf16 matrix product.

Every timing keeps its spread and its clock beside its median (``ms``): ``ms_spread`` holds the
number of samples, their minimum, quartiles, median, maximum and interquartile range (lesson 07b's
convention), and ``sm_clock_MHz_during`` the SM clock read while the GPU worked through each sample
(median, minimum and maximum; ``None`` where neither NVML nor ``nvidia-smi`` can be read). A clock
lowered by the power limit, or a spread as large as a difference, then shows in the file itself.

Without CUDA it runs the CPU parts, prints one line per GPU part it skips, and writes ``null``
there; it never allocates on a GPU. ``--quick`` uses small sizes (for the tests).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import random
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from course_utils import backends
from course_utils.measured import FIELDS, HEADER, SCHEMA, validate

HERE = Path(__file__).resolve().parent
DTYPES = ("float16", "bfloat16", "float32")
LOWER_RIGHT_SHAPES = ((5, 3), (8, 4), (64, 32), (130, 100), (3, 5), (64, 64))
DISPATCH_SHAPES = ((2, 4, 8, 8, 64), (2, 8, 128, 128, 64), (2, 8, 128, 128, 128), (1, 16, 1024, 1024, 128))
PASS_SHAPES = ((512, 4096), (16384, 16384))
#: pytorch issue #196678 reports NaN in q.grad from cuDNN's backward for L % 128 == 64 (64, 192), not for 128.
GRAD_NAN_LENGTHS = (64, 128, 192)
#: Sections written beside the schema's ``FIELDS``; a later schema can adopt them.
EXTRA_FIELDS = ("grad_nan_by_length",)
#: Additive fills on both sides of float32's largest number divided by log2(e), about 2.3587e38.
FILLS = (-1e38, -2.0e38, -2.3e38, -2.35e38, -2.36e38, -2.4e38, -3.0e38)


def no_cuda_reason() -> str | None:
    """Why the GPU parts cannot run here, or None where they can."""
    if not torch.cuda.is_available():
        return f"no CUDA device (torch {torch.__version__}, torch.cuda.is_available() is False)"
    return None


def spread(samples: Sequence[float], digits: int = 4) -> dict[str, Any]:
    """The spread of repeated timings: their number, minimum, quartiles, median, maximum and interquartile range.

    The quartiles are ``numpy.percentile``'s default (linear interpolation between samples), as lesson 07b
    computes them.

    Examples
    --------
    >>> spread([1.0, 2.0, 3.0, 4.0, 100.0])
    {'n': 5, 'min': 1.0, 'q1': 2.0, 'median': 3.0, 'q3': 4.0, 'max': 100.0, 'iqr': 2.0}
    """
    if not samples:
        raise ValueError("samples must hold at least one timing")
    values = sorted(float(v) for v in samples)
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3
    return {"n": len(values), "min": round(values[0], digits), "q1": round(q1, digits), "median": round(median, digits),
            "q3": round(q3, digits), "max": round(values[-1], digits), "iqr": round(q3 - q1, digits)}


def _parse_clock(text: str) -> float | None:
    """The first line of ``nvidia-smi --query-gpu=clocks.sm --format=csv,noheader,nounits`` as MHz, or None.

    Examples
    --------
    >>> _parse_clock("1980\\n"), _parse_clock("[N/A]"), _parse_clock("")
    (1980.0, None, None)
    """
    try:
        return float(text.split()[0])
    except (IndexError, ValueError):
        return None


def _nvidia_smi_clock(index: int = 0) -> float | None:
    run = subprocess.run(["nvidia-smi", f"--id={index}", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=10, check=True)
    return _parse_clock(run.stdout)


def sm_clock_reader(index: int = 0) -> Callable[[], float | None] | None:
    """A function that reads GPU `index`'s SM clock now, in MHz; None where no way of reading it works here.

    It tries NVML (``torch.cuda.clock_rate``, which needs the ``pynvml`` package), then ``nvidia-smi``, once
    each. The reader it returns never raises: a reading that fails later is None. Without CUDA it is None.
    NVML averages over its own sample period (1/6 s to 1 s, by product), so a reading taken while the GPU
    works through a queue of calls is the clock under that load, not at one instant.
    """
    if not torch.cuda.is_available():
        return None
    for read in (lambda: float(torch.cuda.clock_rate(index)), lambda: _nvidia_smi_clock(index)):
        try:
            if read() is None:
                continue
        except Exception:  # no pynvml, no nvidia-smi, no permission: try the next way
            continue

        def guarded(read: Callable[[], float | None] = read) -> float | None:
            try:
                return read()
            except Exception:
                return None

        return guarded
    return None


def timed(fn: Callable[[], Any], runs: int, device: str, warmup: int = 3, inner: int = 1,
          clock: Callable[[], float | None] | None = None) -> dict[str, Any]:
    """Time one call of `fn` `runs` times (ms): the median, the spread of the samples, and the SM clock meanwhile.

    On a GPU each sample times `inner` calls queued back to back between one pair of CUDA events, so that
    the host's time to launch a call hides behind the GPU's work on the one before; on a CPU, `inner` calls
    between two readings of ``time.perf_counter``. `clock` (on a GPU :func:`sm_clock_reader` by default) is read once per sample,
    after the sample's calls are queued and before the host waits for them, while the GPU works.

    Returns
    -------
    dict
        ``ms`` (the median of one call), ``ms_spread`` (:func:`spread` of the samples) and
        ``sm_clock_MHz_during`` (median, minimum and maximum of the readings, or None without a reader).
    """
    if clock is None and device == "cuda":
        clock = sm_clock_reader()
    for _ in range(warmup):
        fn()
    return _summary([_sample(fn, device, inner, clock) for _ in range(runs)])


def _sample(fn: Callable[[], Any], device: str, inner: int, clock: Callable[[], float | None] | None) -> tuple[float, float | None]:
    """One sample of :func:`timed`: the time of one call (ms), over `inner` calls, and the clock read meanwhile."""
    if device == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        reading = clock() if clock else None  # the GPU is still working through the queue
        torch.cuda.synchronize()
        return start.elapsed_time(end) / inner, reading
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    reading = clock() if clock else None
    return 1e3 * (time.perf_counter() - t0) / inner, reading


def _summary(samples: Sequence[tuple[float, float | None]]) -> dict[str, Any]:
    """:func:`timed`'s result from (ms, clock) samples."""
    times = [t for t, _ in samples]
    read = [c for _, c in samples if c is not None]
    during = {"median": statistics.median(read), "min": min(read), "max": max(read), "n": len(read)} if read else None
    return {"ms": statistics.median(times), "ms_spread": spread(times), "sm_clock_MHz_during": during}


def interleaved(fns: dict[str, Callable[[], Any]], rounds: int, device: str, rng: random.Random, warmup: int = 3,
                inner: int = 1, clock: Callable[[], float | None] | None = None) -> tuple[dict[str, dict[str, Any]], list[list[str]]]:
    """Time several functions against each other, interleaved: each round times every one once, in a new random order.

    A fixed order lets a drift of the clock or the power state favour whichever function always runs first
    or last; interleaving in random orders spreads it over all of them (lesson 07b). Each function is warmed
    up `warmup` times before the first round, and each sample is one :func:`timed` sample of `inner` calls.

    Returns
    -------
    tuple
        ``{name: timed-style result over the rounds}`` and the order of each round.
    """
    if clock is None and device == "cuda":
        clock = sm_clock_reader()
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[tuple[float, float | None]]] = {name: [] for name in fns}
    orders = []
    for _ in range(rounds):
        order = list(fns)
        rng.shuffle(order)
        orders.append(order)
        for name in order:
            samples[name].append(_sample(fns[name], device, inner, clock))
    return {name: _summary(s) for name, s in samples.items()}, orders


def median_ms(fn: Callable[[], Any], runs: int, device: str, warmup: int = 3, inner: int = 1) -> float:
    """The median time of one call of `fn` in milliseconds (:func:`timed` without its spread and clock)."""
    return timed(fn, runs, device, warmup=warmup, inner=inner, clock=lambda: None)["ms"]


def _timing_fields(t: dict[str, Any], digits: int = 3) -> dict[str, Any]:
    """The fields a record keeps of a :func:`timed` result: the median, rounded, its spread and the clock."""
    return {"ms": round(t["ms"], digits), "ms_spread": t["ms_spread"], "sm_clock_MHz_during": t["sm_clock_MHz_during"]}


def memory_mib(fn: Callable[[], Any]) -> tuple[float, float]:
    """The GPU memory `fn()` allocates beyond what exists before it, in MiB: at its peak, and kept while its result lives."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    result = fn()
    torch.cuda.synchronize()
    peak, kept = torch.cuda.max_memory_allocated() - base, torch.cuda.memory_allocated() - base
    del result
    return round(peak / 2**20, 1), round(kept / 2**20, 1)


def softmax16(device: str) -> dict[str, Any]:
    """Is every weight of softmax over 65,536 equal half-precision scores exactly 2^-16? And is a float16 sum of 65,536 ones inf?"""
    result: dict[str, Any] = {}
    for dt in (torch.float16, torch.bfloat16):
        w = torch.softmax(torch.zeros(65536, dtype=dt, device=device), dim=-1)
        result[str(dt)] = bool((w == 2.0**-16).all())
    result["fp16 ones .sum()"] = str(float(torch.ones(65536, dtype=torch.float16, device=device).sum()))
    return result


def exp_float64(cuda: bool) -> dict[str, Any]:
    """float64 exp near the bottom of its range (on CPU and CUDA), and softmax([0, -745])."""
    x = [-744.0, -744.5, -745.0, -745.1, -745.2]
    result: dict[str, Any] = {"x": x}
    for device in ("cpu", "cuda"):
        if device == "cuda" and not cuda:
            result["cuda"] = result["softmax_cuda"] = None
            continue
        t = torch.tensor(x, dtype=torch.float64, device=device)
        result[device] = torch.exp(t).tolist()
        result[f"softmax_{device}"] = torch.softmax(torch.tensor([0.0, -745.0], dtype=torch.float64, device=device), 0).tolist()
    return result


_SPARSEMAX_PROBE = """
import sys, torch
try:
    import entmax
except ImportError as err:
    print(f"not run: {err}"); sys.exit()
try:
    out = entmax.sparsemax(torch.full((1, 4), float('-inf'), device=sys.argv[1]), dim=-1)
    if sys.argv[1] == 'cuda':
        torch.cuda.synchronize()
    print(f"returns {out.tolist()}")
except Exception as err:
    print(f"raises {type(err).__name__}: {str(err).splitlines()[0]}")
try:
    torch.zeros(1, device=sys.argv[1]) + 1
    if sys.argv[1] == 'cuda':
        torch.cuda.synchronize()
except Exception as err:
    print(f"and the next call raises {type(err).__name__}: {str(err).splitlines()[0]}")
"""


def sparsemax_empty_row(cuda: bool) -> dict[str, Any]:
    """The entmax package's sparsemax of a row of -inf, in a fresh process per device (a CUDA assert ends the context)."""
    result: dict[str, Any] = {}
    for device in ("cpu", "cuda"):
        if device == "cuda" and not cuda:
            result[device] = None
            continue
        run = subprocess.run([sys.executable, "-c", _SPARSEMAX_PROBE, device], capture_output=True, text=True, timeout=300)
        lines = [line for line in run.stdout.splitlines() if line.strip()]
        result[device] = "; ".join(lines) if lines else f"process ended with code {run.returncode}: {run.stderr[-200:]}"
    return result


def default_dispatch(shapes: tuple[tuple[int, ...], ...], device: str = "cuda") -> list[dict]:
    """Which backend SDPA picks by itself for half precision with a bool mask, and what the empty rows get there."""
    rows = []
    for dtype in ("float16", "bfloat16"):
        for shape in shapes:
            B, H, L, S, D = shape
            masks = {"bool [L,S]": torch.ones(L, S, dtype=torch.bool, device=device)}
            masks["bool [L,S]"][3] = False
            if B > 1:
                pad = torch.ones(B, 1, 1, S, dtype=torch.bool, device=device)
                pad[1] = False  # the second sequence is all padding: every one of its queries is empty
                masks["bool key-padding [B,1,1,S]"] = pad
            for kind, mask in masks.items():
                q, k, v = backends._inputs(shape, dtype, device, grad=False)
                unmasked, v_mean = backends._references(q, k, v)
                empty = ~mask.expand(B, H, L, S).any(dim=-1)
                record: dict[str, Any] = {"dtype": dtype, "shape": list(shape), "mask": kind,
                                          "choice": int(torch._fused_sdp_choice(q, k, v, attn_mask=mask))}
                q_, k_, v_ = (t.detach().requires_grad_(True) for t in (q, k, v))
                record["choice with grad"] = int(torch._fused_sdp_choice(q_, k_, v_, attn_mask=mask))
                for backend in ("default", "math", "efficient", "flash", "cudnn"):
                    try:
                        out = backends.run_sdpa(backend, q, k, v, attn_mask=mask)
                    except RuntimeError:
                        record[backend] = "unsupported"
                        continue
                    record[backend] = backends.describe_rows(out[empty], unmasked=unmasked[empty.cpu()],
                                                             v_mean=v_mean.expand_as(unmasked)[empty.cpu()], dtype=dtype)
                rows.append(record)
    return rows


def grad_nan_by_length(device: str = "cuda") -> list[dict]:
    """The probe of pytorch issue #196678: default dispatch, one empty row, backward, for each length, dtype and guard.

    Each record is :func:`course_utils.backends.grad_nan_probe`'s, plus the device's compute capability
    on CUDA: NaN rows in ``q.grad`` (and ``k.grad``, ``v.grad``) with no guard, with ``torch.where``
    after the kernel, and with ``mask | ~has_key`` before it as well.
    """
    capability = ".".join(map(str, torch.cuda.get_device_capability())) if device == "cuda" else None
    return [backends.grad_nan_probe(device, dtype, L, guard) | {"capability": capability}
            for dtype in ("float16", "bfloat16") for L in GRAD_NAN_LENGTHS for guard in backends.GUARDS]


def flash_vs_math(lengths: tuple[int, ...], tokens: int, heads: int, dim: int, runs: int, device: str = "cuda",
                  seed: int = 0) -> list[dict]:
    """bf16 forward SDPA per backend: median time, TFLOP/s (4·B·H·L²·D) and peak memory beyond the inputs.

    At each L the backends (PyTorch's own choice, ``"default"``, among them) are timed :func:`interleaved`,
    ``max(runs // 2, 3)`` rounds each in a new random order drawn from `seed`, so that no backend is always
    timed first or last; each record says how many rounds timed its backend first and last.
    """
    rng = random.Random(seed)
    rows = []
    for L in lengths:
        B = max(tokens // L, 1)
        q, k, v = (torch.randn(B, heads, L, dim, device=device, dtype=torch.bfloat16) for _ in range(3))
        choice = int(torch._fused_sdp_choice(q, k, v))
        records: dict[str, dict[str, Any]] = {}
        for backend in ("default", "math", "efficient", "flash", "cudnn"):
            record: dict[str, Any] = {"L": L, "B": B, "H": heads, "D": dim, "backend": backend}
            if backend == "default":
                record["choice"] = choice
            try:
                backends.run_sdpa(backend, q, k, v)
            except RuntimeError as err:
                records[backend] = record | {"extra_peak_MiB": None, "ms": None, "TFLOPs": None, "error": str(err).splitlines()[0]}
                continue
            extra, _ = memory_mib(lambda: backends.run_sdpa(backend, q, k, v))
            qg, kg, vg = (x.detach().requires_grad_(True) for x in (q, k, v))
            extra_grad, kept_grad = memory_mib(lambda: backends.run_sdpa(backend, qg, kg, vg))
            del qg, kg, vg
            records[backend] = record | {"extra_peak_MiB": extra, "extra_peak_MiB_grad": extra_grad, "kept_MiB_grad": kept_grad}
        fns = {b: (lambda b=b: backends.run_sdpa(b, q, k, v)) for b, r in records.items() if "error" not in r}
        timings, orders = interleaved(fns, max(runs // 2, 3), device, rng, inner=10)
        flops = 4 * B * heads * L * L * dim
        for backend, record in records.items():
            if backend in timings:
                t = timings[backend]
                record |= {**_timing_fields(t), "TFLOPs": round(flops / (t["ms"] * 1e-3) / 1e12, 1),
                           "TFLOPs_at_min_ms": round(flops / (t["ms_spread"]["min"] * 1e-3) / 1e12, 1),
                           "timed_first": sum(o[0] == backend for o in orders),
                           "timed_last": sum(o[-1] == backend for o in orders)}
            rows.append(record)
        del q, k, v
        if device == "cuda":
            torch.cuda.empty_cache()
    return rows


def math_upcast(L: int, runs: int) -> dict[str, Any]:
    """The math backend on bf16 inputs, with reduced-precision reductions off (the default) and on."""
    q, k, v = (torch.randn(1, 16, L, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    result = {}
    before = torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed()  # torch >= 2.5
    try:
        for allow in (False, True):
            torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(allow)
            extra, _ = memory_mib(lambda: backends.run_sdpa("math", q, k, v))
            t = timed(lambda: backends.run_sdpa("math", q, k, v), runs, "cuda")
            result[f"allow_reduced={allow}"] = {**_timing_fields(t, digits=2), "extra_peak_MiB": extra}
    finally:
        torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(before)
    return result


def lower_right_leaks(device: str = "cuda") -> list[dict]:
    """How many queries see keys they must not, per backend, with ``causal_lower_right`` (the invariance test)."""
    from torch.nn.attention.bias import causal_lower_right

    rows = []
    for dtype in DTYPES:
        for L, S in ((8, 4), (64, 32), (4, 8)):
            q, k, v = backends._inputs((1, 2, L, S, 16), dtype, device, grad=False)
            mask = backends._lower_right(L, S).to(device)
            with warnings.catch_warnings():  # "will produce NaNs when seq_len_q > seq_len_kv"
                warnings.simplefilter("ignore")
                bias = causal_lower_right(L, S)
            for backend in ("default",) + backends.BACKENDS[device]:
                attend = lambda q, k, v, _, b=backend: backends.run_sdpa(b, q, k, v, attn_mask=bias)  # noqa: E731
                try:
                    moved = backends.future_leaks(attend, q, k, v, mask)
                except RuntimeError:
                    moved = "unsupported"
                rows.append({"dtype": dtype, "L": L, "S": S, "backend": backend, "queries that moved": moved,
                             "queries": L, "queries with no key": int((~mask.any(dim=-1)).sum())})
    return rows


def math_memory_by_hand(L: int) -> dict[str, Any]:
    """The math backend's extra memory beside the same steps written by hand in float32, with and without
    ``torch._safe_softmax`` (the softmax that gives zeros for a row with no allowed key, torch >= 2.5)."""
    q, k, v = (torch.randn(1, 16, L, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))

    def by_hand(softmax: Callable[..., torch.Tensor]) -> torch.Tensor:
        q32, k32, v32 = q.float(), k.float(), v.float()
        scores = q32 @ k32.transpose(-2, -1) / math.sqrt(q.shape[-1])
        return (softmax(scores, -1) @ v32).to(q.dtype)

    steps = {"math backend": lambda: backends.run_sdpa("math", q, k, v),
             "by hand, torch.softmax": lambda: by_hand(torch.softmax),
             "by hand, torch._safe_softmax": lambda: by_hand(torch._safe_softmax)}
    return {"L": L, "B": 1, "H": 16, "D": 128, "extra_peak_MiB": {name: memory_mib(fn)[0] for name, fn in steps.items()}}


def softmax_passes(shapes: tuple[tuple[int, int], ...], device: str, runs: int) -> list[dict]:
    """Softmax pass by pass on float32 matrices: median time and bytes moved (read + written) per second."""
    rows = []
    for shape in shapes:
        x = torch.randn(*shape, device=device)
        m = x.amax(dim=-1, keepdim=True)
        e = (x - m).exp()
        s = e.sum(dim=-1, keepdim=True)
        n = x.numel() * 4

        def naive() -> torch.Tensor:
            e = (x - x.amax(dim=-1, keepdim=True)).exp()
            return e / e.sum(dim=-1, keepdim=True)

        passes = {
            "clone (read + write)": (lambda: x.clone(), 2 * n),
            "amax over rows (read)": (lambda: x.amax(dim=-1), n),
            "x - m (read + write)": (lambda: x - m, 2 * n),
            "exp (read + write)": (lambda: x.exp(), 2 * n),
            "sum over rows (read)": (lambda: e.sum(dim=-1), n),
            "e / s (read + write)": (lambda: e / s, 2 * n),
            "naive 5-pass softmax": (naive, 8 * n),
            "torch.softmax (fused, read + write)": (lambda: torch.softmax(x, dim=-1), 2 * n),
        }
        for name, (fn, nbytes) in passes.items():
            t = timed(fn, runs, device)
            rows.append({"shape": list(shape), "pass": name, **_timing_fields(t, digits=4),
                         "GB_per_s": round(nbytes / (t["ms"] * 1e-3) / 1e9, 1)})
    return rows


def exp_bottleneck(n: int, repeats: int, matmul_size: int, runs: int) -> dict[str, Any]:
    """exp2 per second on the special-function units (a Triton kernel), against a bf16 matrix product's FLOP/s."""
    import triton
    import triton.language as tl

    @triton.jit
    def exp2_chain(x_ptr, y_ptr, n_elements, REPEATS: tl.constexpr, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        inside = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=inside)
        for _ in range(REPEATS):  # x <- 2^-x: a contraction on [0, 1], so the chain stays bounded
            x = tl.math.exp2(-x)
        tl.store(y_ptr + offsets, x, mask=inside)

    x = torch.rand(n, device="cuda")
    y = torch.empty_like(x)
    grid = (triton.cdiv(n, 1024),)
    run = lambda: exp2_chain[grid](x, y, n, REPEATS=repeats, BLOCK=1024)  # noqa: E731
    exp_timing = timed(run, runs, "cuda")
    ms = exp_timing["ms"]
    exp_clock = _clock_while(run)
    check = x[:4096].double()
    for _ in range(repeats):
        check = torch.exp2(-check)
    exp_per_s = n * repeats / (ms * 1e-3)
    a, b = (torch.randn(matmul_size, matmul_size, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    mm_timing = timed(lambda: a @ b, runs, "cuda")
    mm_ms = mm_timing["ms"]
    mm_clock = _clock_while(lambda: a @ b)
    flops = 2 * matmul_size**3 / (mm_ms * 1e-3)
    props = torch.cuda.get_device_properties(0)
    clock = _max_sm_clock_mhz()
    return {
        "exp2_T_per_s": round(exp_per_s / 1e12, 2),
        "exp_result_ok": bool(torch.allclose(y[:4096].double(), check, rtol=1e-4, atol=1e-5)),
        "bf16_matmul_TFLOPs": round(flops / 1e12, 1),
        "matmul_over_exp": round(flops / exp_per_s, 1),
        "sm_count": props.multi_processor_count,
        "sm_clock_MHz": clock,
        "per_SM_exp2_per_clock": None if clock is None else round(exp_per_s / props.multi_processor_count / (clock * 1e6), 2),
        "sm_clock_MHz_during_exp": exp_clock,
        "sm_clock_MHz_during_matmul": mm_clock,
        "exp2_ms_spread": exp_timing["ms_spread"],
        "exp2_sm_clock_MHz_during": exp_timing["sm_clock_MHz_during"],
        "matmul_ms_spread": mm_timing["ms_spread"],
        "matmul_sm_clock_MHz_during": mm_timing["sm_clock_MHz_during"],
    }


def _clock_while(fn: Callable[[], Any], calls: int = 200, samples: int = 9) -> float | None:
    """The median SM clock (MHz, read through NVML) while `calls` queued calls of `fn` run on the GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    except Exception:  # no NVML: the clock is left out
        return None
    for _ in range(calls):
        fn()
    clocks = []
    for _ in range(samples):  # the host reads the clock while the GPU works through the queue
        time.sleep(0.005)
        clocks.append(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
    torch.cuda.synchronize()
    return float(statistics.median(clocks))


def _max_sm_clock_mhz() -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetMaxClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM))
    except Exception:  # no NVML: the per-clock figure is left out
        return None


def measure(quick: bool = False, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every measurement of the schema; the GPU ones only where CUDA is available."""
    reason = no_cuda_reason()
    cuda = reason is None
    data: dict[str, Any] = {
        "schema": SCHEMA,
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name(0) if cuda else "cpu only",
        "torch": torch.__version__,
        "cuda": torch.version.cuda if cuda else None,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
    }

    def part(name: str, fn: Callable[[], Any], gpu: bool = True) -> None:
        if gpu and not cuda:
            log(f"skipped {name}: {reason}")
            data[name] = None
            return
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                data[name] = fn()
        except Exception as err:  # keep the other parts; validate() then names the part that failed
            log(f"FAILED {name}: {type(err).__name__}: {err}")
            data[name] = {"error": f"{type(err).__name__}: {err}"}
            return
        log(f"{name}: {time.perf_counter() - t0:.1f} s")

    runs = 3 if quick else 20
    part("fully_masked_cpu", lambda: backends.fully_masked_table("cpu", DTYPES), gpu=False)
    part("modules_cpu", lambda: backends.padded_modules_table("cpu"), gpu=False)
    part("softmax16_cpu", lambda: softmax16("cpu"), gpu=False)
    part("exp_float64", lambda: exp_float64(cuda), gpu=False)
    part("sparsemax_empty_row", lambda: sparsemax_empty_row(cuda), gpu=False)
    part("fully_masked_cuda", lambda: backends.fully_masked_table("cuda", DTYPES))
    part("modules_cuda", lambda: backends.padded_modules_table("cuda"))
    part("softmax16_cuda", lambda: softmax16("cuda"))
    part("default_dispatch", lambda: default_dispatch(DISPATCH_SHAPES[:1] if quick else DISPATCH_SHAPES))
    part("is_causal_alignment", lambda: [backends.is_causal_alignment(L, S, "cuda", b)
                                         for L, S in ((4, 8), (8, 4)) for b in backends.BACKENDS["cuda"]])
    part("grad_blocked", lambda: backends.grad_of_blocked("cuda", "float16"))
    part("grad_blocked_guarded", lambda: backends.grad_of_blocked("cuda", "float16", guard=True))
    part("grad_default", lambda: {dt: backends.grad_of_blocked("cuda", dt, ["default"])["default"] for dt in ("float16", "bfloat16")})
    # On a machine without CUDA the probe runs on the CPU instead: each record names its device.
    part("grad_nan_by_length", lambda: grad_nan_by_length("cuda" if cuda else "cpu"), gpu=False)
    part("fill_overflow", lambda: [{"dtype": dt, "backend": b, "fill": fill, "row": backends.empty_row_with_fill("cuda", dt, b, fill)}
                                   for dt in ("bfloat16", "float32") for b in ("math", "efficient", "cudnn") for fill in FILLS])
    part("lower_right_leaks", lambda: lower_right_leaks("cuda"))
    part("causal_lower_right", lambda: [backends.causal_lower_right_check(L, S, dt, "cuda", b)
                                        for dt in DTYPES for L, S in LOWER_RIGHT_SHAPES
                                        for b in ("default",) + backends.BACKENDS["cuda"]])
    lengths = (512, 1024) if quick else (512, 1024, 2048, 4096, 8192, 16384)
    part("flash_vs_math", lambda: flash_vs_math(lengths, tokens=2048 if quick else 16384, heads=16, dim=128, runs=runs))
    part("math_upcast_L8192_B1_H16_D128", lambda: math_upcast(1024 if quick else 8192, runs))
    part("math_memory_by_hand", lambda: math_memory_by_hand(1024 if quick else 8192))
    part("softmax_passes", lambda: softmax_passes(((512, 4096),) if quick else PASS_SHAPES, "cuda", runs))
    part("exp_bottleneck", lambda: exp_bottleneck(2**20 if quick else 2**26, 256, 2048 if quick else 8192, runs))
    return {key: data[key] for key in (*HEADER, *FIELDS, *EXTRA_FIELDS)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "gpu_results.json", help="where to write the JSON")
    parser.add_argument("--quick", action="store_true", help="small sizes and few runs")
    args = parser.parse_args(argv)
    data = measure(quick=args.quick)
    args.out.write_text(json.dumps(data, indent=1, allow_nan=False) + "\n")
    print(f"wrote {args.out}")
    validate(data, source=str(args.out))  # after writing, so that a failed part's error can be read there
    return 0


if __name__ == "__main__":
    sys.exit(main())
