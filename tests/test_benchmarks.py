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
