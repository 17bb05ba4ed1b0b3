"""The export report in a terminal: rich tables whose cells wrap only between words.

rich folds a cell mid-word when its column is narrower than the cell's longest word (at 80
columns ``float32[2, 3]`` came out as ``float32[2`` / ``, 3]``). Here every column gets at least its
longest word, the room left is shared by what the columns would take unwrapped, and the widths
are fixed, so rich wraps only at spaces. Shapes lose the space after their commas
(``float32[2,3]``): a shape is one word, never split across lines. When a row of longest words is
wider than the console, the checks table turns on its side (a ``field value`` row per column, a
block per output). When even that does not fit, or the output is not a terminal (a pipe, a file),
the report prints as plain text (:meth:`ExportReport.__str__`), whose lines are never wrapped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

#: ", " inside brackets: the separator of a shape's dims
_DIM_SEPARATOR = re.compile(r",\s+(?=[^\[\]]*\])")


def compact_shapes(text: str) -> str:
    """``x: float32[B, 4]`` -> ``x: float32[B,4]``: each shape one word for the line wrapper."""
    return _DIM_SEPARATOR.sub(",", text)


def longest_word(text: str) -> int:
    return max((len(word) for word in text.split()), default=0)


def column_widths(header: Sequence[str], rows: Sequence[Sequence[str]], room: int) -> list[int] | None:
    """Content widths for the columns, summing to at most ``room``: each at least its longest word
    (header included), at most its longest line; None when the longest words alone do not fit."""
    columns = list(zip(header, *rows))
    least = [max(1, *(longest_word(cell) for cell in column)) for column in columns]  # rich needs 1
    most = [max(len(line) for cell in column for line in cell.splitlines() or [""]) for column in columns]
    spare = room - sum(least)
    if spare < 0:
        return None
    widths = list(least)
    wants = [m - w for m, w in zip(most, least)]
    while spare > 0 and any(wants):  # one column at a time, the one missing most, so none is starved
        i = max(range(len(widths)), key=lambda k: wants[k])
        widths[i] += 1
        wants[i] -= 1
        spare -= 1
    return widths


#: a light table: a rule under the header, no boxes, two spaces between columns (narrow terminals
#: keep more room for the cells)
_STYLE = {"show_edge": False, "pad_edge": False, "collapse_padding": True}


def _table(console: Any, header: Sequence[str], rows: Sequence[Sequence[str]], section_ends: Sequence[int] = (),
           **options: Any) -> Any:
    """A rich Table with fixed column widths that fit the console, or None when they cannot."""
    from rich import box
    from rich.measure import Measurement
    from rich.table import Table

    def make(widths: Sequence[int]) -> Any:
        table = Table(box=box.SIMPLE_HEAD, **_STYLE, **options)
        for name, w in zip(header, widths):
            table.add_column(name, width=w, overflow="fold", justify="right" if "err" in name else "left")
        return table

    # what rules and padding take, measured on the same table with one-character columns
    frame = Measurement.get(console, console.options, make([1] * len(header))).maximum - len(header)
    widths = column_widths(header, rows, console.width - frame)
    if widths is None:
        return None
    table = make(widths)
    for i, row in enumerate(rows):
        table.add_row(*row, end_section=i in section_ends)
    return table


def _per_output(header: Sequence[str], rows: Sequence[Sequence[str]]) -> tuple[list[list[str]], list[int]]:
    """The checks table turned on its side for a narrow terminal: per output, one ``field value``
    row per column, a rule between outputs."""
    records: list[list[str]] = []
    ends = []
    for row in rows:
        records += [[h, c] for h, c in zip(header, row)]
        ends.append(len(records) - 1)
    return records, ends


def print_report(report: Any, console: Any = None) -> None:
    """``report.print()``: tables in a terminal (or notebook), plain text anywhere else."""
    try:
        from rich.console import Console
    except ImportError:
        print(str(report))
        return
    console = console or Console()
    if not (console.is_terminal or console.is_jupyter):  # piped: no 80-column guess, no wrapping
        console.print(str(report), markup=False, highlight=False, soft_wrap=True)
        return
    header = list(report._OUTPUT_HEADER)
    outputs = [[compact_shapes(c) for c in r] for r in report._output_rows()]
    summary = [[k, compact_shapes(v)] for k, v in report._summary_rows()]
    title = f"verification: {'[green]match[/green]' if report.ok else '[red]MISMATCH[/red]'}"
    caption = f"inputs tried: {compact_shapes(report.inputs_tried())}"
    checks = _table(console, header, outputs, title=title, caption=caption)
    if checks is None:  # too narrow for a row per output: a block of rows per output
        records, ends = _per_output(header, outputs)
        checks = _table(console, ["", ""], records, ends, title=title, caption=caption, show_header=False)
    model = _table(console, ["", ""], summary, title="model", show_header=False)
    if checks is None or model is None:  # a word wider than the terminal: plain lines, never folded
        console.print(str(report), markup=False, highlight=False, soft_wrap=True)
        return
    model.columns[0].style = "bold"
    console.print(checks)
    console.print(model)
