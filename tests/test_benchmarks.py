"""The benchmark suite runs end to end (on tiny shapes) and reports every section; speed itself is not tested here."""

from pathlib import Path

import numpy as np

from benchmarks.suite import main, max_relative_error, mp_softmax


def test_the_benchmark_writes_its_table_and_plot(tmp_path: Path):
    text = main(shapes=((8, 16),), repeats=1, out_dir=tmp_path)
    assert (tmp_path / "results.md").read_text() == text
    assert (tmp_path / "results.png").stat().st_size > 1000
    for heading in ("## Time and memory", "## Targets", "## Accuracy on adversarial rows"):
        assert heading in text
    for op in ("softmax", "log_softmax", "logsumexp", "sparsemax", "entmax15"):
        assert f"| {op} | (8, 16) |" in text


def test_the_accuracy_reference_is_an_exact_softmax():
    rows = np.array([[0.0, np.log(3.0), -np.inf]])
    np.testing.assert_allclose(mp_softmax(rows), [[0.25, 0.75, 0.0]], rtol=1e-15)
    assert max_relative_error(np.array([[0.25, 0.75, 0.0]]), np.array([[0.25, 0.75, 0.0]])) == 0.0
    assert max_relative_error(np.array([[np.nan, 1.0]]), np.array([[0.5, 0.5]])) == float("inf")


def test_notebook_timing_reports_each_notebook_and_the_total(tmp_path: Path):
    import nbformat

    from benchmarks.suite import markdown, time_notebooks

    path = tmp_path / "tiny.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), path)
    seconds = time_notebooks([path], floor_runs=0)  # the floor's kernel would only add seconds to make test
    assert list(seconds) == ["tiny.ipynb"] and 0 < seconds["tiny.ipynb"] < 120
    text = markdown([], {}, seconds)
    assert "| tiny.ipynb |" in text and "| **all** |" in text
    text = markdown([], {}, {"FLOOR": 4.0, "a.ipynb": 8.5, "b.ipynb": 10.5})
    assert "less the 4.0 s of a notebook" in text
    assert "| a.ipynb | 8.5 | yes | 4.5 | yes |" in text and "| b.ipynb | 10.5 | no | 6.5 | no |" in text
    assert "| **all** | **19.0** | yes (60 s) | | |" in text


def test_target_samples_are_ratios_of_interleaved_cpu_time_medians():
    from benchmarks.targets import samples

    slow, fast = lambda: sum(range(20000)), lambda: sum(range(200))  # noqa: E731
    ratios = samples(slow, fast, repeats=5, runs=2)
    assert len(ratios) == 2 and all(r > 1 for r in ratios)


def test_the_slider_benchmark_names_the_cpu_and_the_sliders_over_their_targets():
    from benchmarks.sliders import cpu, report

    assert cpu("processor\t: 0\nmodel name\t: AMD EPYC 7B13\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n").startswith(
        "AMD EPYC 7B13, ")
    assert cpu("").startswith("unknown CPU, ")
    quick = {"notebook": "01.ipynb", "slider": "T", "presses": 12, "median_ms": 90.0, "p95_ms": 140.0,
             "reference_median_ms": 130.0}
    slow = {**quick, "notebook": "03.ipynb", "slider": "d_k", "median_ms": 183.0, "p95_ms": 401.0}
    text = report([quick, slow], "AMD EPYC 7B13, 2 cores")
    assert "AMD EPYC 7B13, 2 cores" in text
    assert "| 01.ipynb | T | 12 | 90 | 140 | 130 | yes |" in text
    assert "| 03.ipynb | d_k | 12 | 183 | 401 | 130 | no: median over 150 ms, 95th percentile over 400 ms |" in text
    assert text.endswith("Over a target: 03.ipynb 'd_k'.")
    assert report([quick], "x").endswith("Every slider meets both targets.")


# --- benchmarks/gpu.py: every timing keeps its spread and the SM clock (the parts that run without a GPU) ---


def test_a_timings_spread_has_the_quartiles_lesson_07b_computes():
    from benchmarks.gpu import spread

    samples = [3.1, 2.9, 7.5, 3.0, 3.3, 2.8, 3.2]
    got = spread(samples)
    q1, median, q3 = np.percentile(samples, [25, 50, 75])
    assert got["n"] == 7 and got["min"] == 2.8 and got["max"] == 7.5
    assert (got["q1"], got["median"], got["q3"]) == (round(q1, 4), round(median, 4), round(q3, 4))
    assert got["iqr"] == round(q3 - q1, 4)
    assert spread([1.5]) == {"n": 1, "min": 1.5, "q1": 1.5, "median": 1.5, "q3": 1.5, "max": 1.5, "iqr": 0.0}


def test_a_spread_of_no_timings_is_refused():
    import pytest

    from benchmarks.gpu import spread

    with pytest.raises(ValueError, match="at least one"):
        spread([])


def test_timed_on_a_cpu_keeps_every_sample_its_median_and_no_clock():
    from benchmarks.gpu import timed

    t = timed(lambda: sum(range(2000)), runs=5, device="cpu", warmup=1)
    s = t["ms_spread"]
    assert s["n"] == 5 and s["min"] <= s["q1"] <= s["median"] <= s["q3"] <= s["max"]
    assert abs(t["ms"] - s["median"]) < 1e-4
    assert t["sm_clock_MHz_during"] is None


def test_timed_reads_the_clock_once_per_sample_and_reports_its_range():
    from benchmarks.gpu import timed

    readings = iter([1980.0, 1755.0, None, 1980.0])
    calls = []
    t = timed(lambda: calls.append(1), runs=4, device="cpu", warmup=0, inner=3, clock=lambda: next(readings))
    assert len(calls) == 12  # 4 samples of 3 calls
    assert t["sm_clock_MHz_during"] == {"median": 1980.0, "min": 1755.0, "max": 1980.0, "n": 3}


def test_the_clock_reader_is_none_without_cuda(monkeypatch):
    import torch

    from benchmarks import gpu

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu.sm_clock_reader() is None


def test_the_clock_reader_falls_back_to_nvidia_smi_and_never_raises(monkeypatch):
    import subprocess

    import torch

    from benchmarks import gpu

    def no_nvml(index=None):
        raise ModuleNotFoundError("pynvml does not seem to be installed")

    answers = iter(["1755\n", "[N/A]\n"])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "clock_rate", no_nvml)
    monkeypatch.setattr(gpu.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, next(answers, ""), ""))
    read = gpu.sm_clock_reader()
    assert read is not None
    assert read() is None  # the second answer, "[N/A]", reads as no clock

    def broken(*a, **k):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(gpu.subprocess, "run", broken)
    assert read() is None  # a reader that fails later gives None, not an exception
    assert gpu.sm_clock_reader() is None  # neither way works: no reader


def test_a_records_timing_fields_are_the_rounded_median_its_spread_and_the_clock():
    from benchmarks.gpu import _timing_fields, spread

    t = {"ms": 0.13149, "ms_spread": spread([0.1301, 0.1315, 0.1402]), "sm_clock_MHz_during": None}
    assert _timing_fields(t) == {"ms": 0.131, "ms_spread": t["ms_spread"], "sm_clock_MHz_during": None}


def test_interleaved_timing_times_every_function_once_per_round_in_a_new_random_order():
    import random

    from benchmarks.gpu import interleaved

    calls = []
    fns = {name: (lambda name=name: calls.append(name)) for name in ("a", "b", "c", "d")}
    results, orders = interleaved(fns, rounds=12, device="cpu", rng=random.Random(0), warmup=1, inner=2)
    assert calls[:4] == ["a", "b", "c", "d"]  # the warm-up, once each
    assert calls[4:] == [name for order in orders for name in order for _ in range(2)]  # each sample as drawn
    assert len(orders) == 12 and all(sorted(order) == ["a", "b", "c", "d"] for order in orders)
    assert len({order[0] for order in orders}) > 1 and len({order[-1] for order in orders}) > 1
    assert all(results[name]["ms_spread"]["n"] == 12 for name in fns)
    _, again = interleaved(fns, rounds=12, device="cpu", rng=random.Random(0), warmup=0)
    assert again == orders  # the orders come from the seed


def test_flash_vs_math_times_no_backend_always_first_or_last(monkeypatch):
    from benchmarks import gpu

    monkeypatch.setattr(gpu, "memory_mib", lambda fn: (fn(), (0.0, 0.0))[1])  # GPU memory cannot be read on a CPU
    rows = gpu.flash_vs_math((16, 32), tokens=64, heads=2, dim=8, runs=24, device="cpu")
    assert [r["backend"] for r in rows[:5]] == ["default", "math", "efficient", "flash", "cudnn"]
    for L in (16, 32):
        timed = [r for r in rows if r["L"] == L and r["ms"] is not None]
        assert {r["backend"] for r in timed} >= {"default", "math"}  # the CPU runs at least these two
        assert sum(r["timed_first"] for r in timed) == sum(r["timed_last"] for r in timed) == 12  # 24 // 2 rounds
        assert all(r["timed_first"] < 12 and r["timed_last"] < 12 and r["ms_spread"]["n"] == 12 for r in timed)
