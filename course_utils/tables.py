"""Tables that are tables: header cells for a screen reader, aligned text for a terminal and for nbval.

A lesson that prints a table with ``print(f"{x:>8}")`` gives a screen reader run-on lines of numbers
(WCAG 2.1, 1.3.1: structure shown by layout must be in the markup too). :func:`table` returns an object
that Jupyter displays as an HTML ``<table>`` with a caption, ``<th scope="col">`` header cells and, where the
first column holds names, ``<th scope="row">`` row headers, and that
``print`` (or any reader of the notebook's text/plain output) shows as the same aligned text as before.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

__all__ = ["MarkdownTable", "Table", "markdown_table", "table"]


@dataclass(frozen=True)
class Table:
    """A table of text cells: a header row, body rows and an optional caption.

    Build one with :func:`table`. ``str(t)`` is the aligned text; in Jupyter it shows as HTML.
    """

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str | None = None
    numeric: tuple[bool, ...] = ()  # per column: right-aligned (numbers) or left-aligned (text)

    def __str__(self) -> str:
        widths = [max(len(cell) for cell in column) for column in zip(self.header, *self.rows)]
        right = self.numeric or (False,) * len(self.header)

        def line(cells: Sequence[str]) -> str:
            return "  ".join(cell.rjust(w) if r else cell.ljust(w) for cell, w, r in zip(cells, widths, right)).rstrip()

        lines = [line(self.header), "  ".join("-" * w for w in widths), *(line(row) for row in self.rows)]
        return "\n".join(([self.caption] if self.caption else []) + lines)

    def _repr_html_(self) -> str:
        right = self.numeric or (False,) * len(self.header)

        def cell(tag: str, text: str, numeric: bool, scope: str = "") -> str:
            style = ' style="text-align: right"' if numeric else ' style="text-align: left"'
            return f"<{tag}{scope}{style}>{html.escape(text)}</{tag}>"

        head = "".join(cell("th", h, r, ' scope="col"') for h, r in zip(self.header, right))
        # A first column of names (not numbers) heads its row: a screen reader then says it with every cell of the row
        names = not right[0]
        body = "".join("<tr>" + "".join(cell("th", c, r, ' scope="row"') if j == 0 and names else cell("td", c, r)
                                        for j, (c, r) in enumerate(zip(row, right))) + "</tr>" for row in self.rows)
        caption = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": str(self), "text/html": self._repr_html_()}


def _cell(value: Any, fmt: str | None) -> str:
    if isinstance(value, str):
        return value
    if fmt is not None:
        return format(value, fmt)
    if isinstance(value, (bool, Integral)):
        return str(value)
    if isinstance(value, Real):
        return f"{float(value):.4f}"
    return str(value)


def table(rows: Sequence[Sequence[Any]], header: Sequence[str], *, caption: str | None = None,
          formats: Sequence[str | None] | None = None) -> Table:
    """A table to display: the last line of a cell, or ``display(table(...))``.

    Parameters
    ----------
    rows : sequence of sequences
        The body, one sequence of cells per row, each as long as `header`. Strings are shown as they are;
        numbers with their column's format, or integers as they are and other reals with 4 decimals.
    header : sequence of str
        The column names.
    caption : str, optional
        What the table shows, read out before it.
    formats : sequence of str or None, optional
        A format spec per column (``".3g"``, ``".1%"``), or None for the default.

    Returns
    -------
    Table
        Shown as HTML with header cells in Jupyter, as aligned text by ``print``.

    Raises
    ------
    TypeError
        If `header` or a row is not a sequence, or a header is not a str.
    ValueError
        If a row or `formats` has another length than `header`, or `header` is empty.

    Examples
    --------
    >>> t = table([["float16", 11.09], ["float32", 88.72]], ["dtype", "largest x"], caption="Where e^x overflows")
    >>> print(t)
    Where e^x overflows
    dtype    largest x
    -------  ---------
    float16    11.0900
    float32    88.7200
    >>> t._repr_html_()[:60]
    '<table><caption>Where e^x overflows</caption><thead><tr><th '
    """
    if isinstance(header, str) or not isinstance(header, Sequence):
        raise TypeError(f"header must be a sequence of str, not {type(header).__name__}")
    if not header:
        raise ValueError("header must name at least one column")
    if not all(isinstance(h, str) for h in header):
        raise TypeError("header must hold str column names")
    n = len(header)
    if formats is not None and len(formats) != n:
        raise ValueError(f"formats has {len(formats)} entries for {n} columns")
    formats = list(formats) if formats is not None else [None] * n
    body = []
    for i, row in enumerate(rows):
        if isinstance(row, str) or not isinstance(row, Sequence):
            raise TypeError(f"rows[{i}] must be a sequence of cells, not {type(row).__name__}")
        if len(row) != n:
            raise ValueError(f"rows[{i}] has {len(row)} cells for {n} columns")
        body.append(row)
    numeric = tuple(bool(body) and all(isinstance(r[j], Real) and not isinstance(r[j], bool) for r in body)
                    for j in range(n))
    cells = tuple(tuple(_cell(v, f) for v, f in zip(row, formats)) for row in body)
    return Table(tuple(header), cells, caption, numeric)


@dataclass(frozen=True)
class MarkdownTable:
    """Markdown (a table built elsewhere, such as the course map) that shows as Markdown and reads as itself in text.

    IPython's own ``Markdown`` object has only its Python repr as its plain text, so a plain-text reader of the
    notebook (a terminal, a screen reader's text view of a static copy, nbval) would lose every row.
    """

    text: str

    def __str__(self) -> str:
        return self.text

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/markdown": self.text, "text/plain": self.text}


def markdown_table(text: str) -> MarkdownTable:
    """Markdown to display, with the same text as its plain-text form.

    Raises
    ------
    TypeError
        If `text` is not a str.

    Examples
    --------
    >>> sorted(markdown_table("| a |\\n|---|\\n| 1 |")._repr_mimebundle_())
    ['text/markdown', 'text/plain']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    return MarkdownTable(text)
