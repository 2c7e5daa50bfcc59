"""The README's calibration table: the model against the readings' mean, and against the fresh required readings."""

from __future__ import annotations

import json

from course_utils.course import CALIBRATION, FRESH_ROUND, calibration_markdown, model_minutes


def _notebook(folder, name, lesson, words):
    cell = lambda text: {"cell_type": "markdown", "metadata": {}, "source": text}  # noqa: E731
    nb = {"cells": [cell("# header"), cell("word " * words)], "metadata": {"course": {"page": lesson}},
          "nbformat": 4, "nbformat_minor": 5}
    (folder / name).write_text(json.dumps(nb))
    return nb


def test_the_table_names_each_notebook_outside_the_calibration_and_only_those(tmp_path):
    near = _notebook(tmp_path, "a.ipynb", "a", 1600)  # 20 minutes at 80 words a minute
    _notebook(tmp_path, "b.ipynb", "b", 1600)
    assert model_minutes(near) == 20
    readings = [{"lesson": "a", "minutes": 21, "round": 1},
                {"lesson": "a", "minutes": 19, "required": 19, "round": FRESH_ROUND},
                {"lesson": "b", "minutes": 40, "round": 1},
                {"lesson": "b", "minutes": 30, "required": 30, "round": FRESH_ROUND},
                {"lesson": "b", "minutes": 10, "required": 10, "round": FRESH_ROUND + 1}]
    path = tmp_path / "readings.json"
    path.write_text(json.dumps({"readings": readings}))
    table = calibration_markdown(tmp_path, path)
    assert "| a.ipynb | 21, 19 | 20 | 20 | +0% | 19 | 20 | +5% |" in table
    assert "| b.ipynb | 40, 30, 10 | 27 | 20 | -25% | 30, 10 | 20 | +0% |" in table
    assert table.endswith(f"within ±{CALIBRATION:.0%} of the readings' mean for 1 of 2 notebooks (not for b (-25%)), and "
                          f"within ±{CALIBRATION:.0%} of the mean of the fresh readings of the required path for 2 of 2 "
                          "notebooks.")
