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
    seconds = time_notebooks([path])
    assert 0 < seconds["tiny.ipynb"] < 120
    text = markdown([], {}, seconds)
    assert "| tiny.ipynb |" in text and "| **all** |" in text


def test_target_samples_are_ratios_of_interleaved_cpu_time_medians():
    from benchmarks.targets import samples

    slow, fast = lambda: sum(range(20000)), lambda: sum(range(200))  # noqa: E731
    ratios = samples(slow, fast, repeats=5, runs=2)
    assert len(ratios) == 2 and all(r > 1 for r in ratios)
