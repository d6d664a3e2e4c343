"""What a report is made of, independent of how it is rendered: sections holding figures, tables and notes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar


@dataclass
class Missing:
    """Something a section could not show, and the command that produces it."""

    what: str
    how: str


@dataclass
class FigureSpec:
    """One figure: `name` becomes `figures/<name>.png` and `.svg`; `draw()` returns the matplotlib Figure (a
    picklable callable, e.g. a `functools.partial` of a module-level function, so figures can be drawn in worker
    processes)."""

    kind: ClassVar[str] = "figure"
    name: str
    title: str
    caption: str
    draw: Callable[[], Any]
    source: str = ""  # label/extraction source and data behind it, shown under the figure


@dataclass
class Cell:
    """A table cell: its text, an optional sort key (numbers sort numerically) and a CSS class."""

    text: str
    sort: float | str | None = None
    css: str = ""
    title: str = ""  # tooltip: how the value and its interval were computed
    detail: str = ""  # a second, smaller line: the interval, the valid rate


@dataclass
class TableSpec:
    kind: ClassVar[str] = "table"
    title: str
    columns: list[str]
    rows: list[list[Cell]]
    caption: str = ""
    source: str = ""
    sortable: bool = False
    # Optional header groups above the columns: (label, span) pairs, as in the papers' multi-level headers.
    groups: list[tuple[str, int]] = field(default_factory=list)
    table_id: str = ""


@dataclass
class Section:
    key: str
    title: str
    paper: str
    data_note: str = ""
    blocks: list[FigureSpec | TableSpec] = field(default_factory=list)  # in the order they are shown
    notes: list[str] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)

    def add(self, *blocks: FigureSpec | TableSpec | None) -> None:
        self.blocks += [block for block in blocks if block is not None]

    @property
    def figures(self) -> list[FigureSpec]:
        return [block for block in self.blocks if isinstance(block, FigureSpec)]

    @property
    def tables(self) -> list[TableSpec]:
        return [block for block in self.blocks if isinstance(block, TableSpec)]
