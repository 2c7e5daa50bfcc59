"""course_utils.tables: tables a screen reader reads as tables, and a terminal as aligned text."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from course_utils.tables import markdown_table, table


def test_the_html_has_a_caption_and_one_column_header_per_column():
    t = table([["a", 1, 0.5], ["b", 22, 0.25]], ["name", "count", "share"], caption="Counts", formats=[None, None, ".0%"])
    html = t._repr_html_()
    assert html.count('<th scope="col"') == 3 and "<caption>Counts</caption>" in html
    assert re.findall(r'<th scope="row"[^>]*>([^<]*)</th>', html) == ["a", "b"]  # the names head their rows
    assert re.findall(r"<td[^>]*>([^<]*)</td>", html) == ["1", "50%", "22", "25%"]


def test_a_first_column_of_numbers_heads_no_row():
    assert 'scope="row"' not in table([[1, 2.0], [3, 4.0]], ["n", "x"])._repr_html_()


def test_the_text_keeps_the_columns_aligned_with_numbers_to_the_right():
    lines = str(table([["x", 1.5], ["longer", -10.0]], ["word", "value"])).splitlines()
    assert lines == ["word       value", "------  --------", "x         1.5000", "longer  -10.0000"]


def test_text_is_escaped_in_the_html():
    assert "&lt;b&gt;" in table([["<b>"]], ["tag"])._repr_html_()


def test_numpy_numbers_are_numbers():
    t = table([[np.float64(0.1), np.int64(3)]], ["p", "n"])
    assert t.rows == (("0.1000", "3"),) and t.numeric == (True, True)


@given(st.lists(st.lists(st.integers(-10**6, 10**6), min_size=3, max_size=3), min_size=1, max_size=6))
def test_every_text_line_holds_its_rows_cells_in_order(rows):
    lines = str(table(rows, ["a", "b", "c"])).splitlines()[2:]
    assert [[int(x) for x in line.split()] for line in lines] == rows


@pytest.mark.parametrize(("kwargs", "error", "name"), [
    ({"rows": [[1]], "header": "a"}, TypeError, "header"),
    ({"rows": [[1]], "header": []}, ValueError, "header"),
    ({"rows": [[1, 2]], "header": ["a"]}, ValueError, r"rows\[0\]"),
    ({"rows": ["ab"], "header": ["a"]}, TypeError, r"rows\[0\]"),
    ({"rows": [[1]], "header": ["a"], "formats": [None, None]}, ValueError, "formats"),
    ({"rows": [[1]], "header": [1]}, TypeError, "header"),
])
def test_bad_input_is_refused_naming_the_argument(kwargs, error, name):
    with pytest.raises(error, match=name):
        table(**kwargs)


def test_markdown_reads_as_itself_in_plain_text():
    text = "| lesson | minutes |\n|---|---|\n| 01 | 60 |"
    assert markdown_table(text)._repr_mimebundle_() == {"text/markdown": text, "text/plain": text}
    with pytest.raises(TypeError, match="text"):
        markdown_table(3)
