"""What a study function returns: named tables, figures and metrics, in the order a report shows them.

Study functions (``memlab.methods.<m>.study``) compute; a notebook hands the result to
:meth:`memlab.report.Report.save`, which writes ``tables/<name>.csv``, ``figures/<name>.png`` and ``metrics.json``
and displays what the study marked to show.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class StudyResult:
    tables: dict[str, Any] = field(default_factory=dict)     # name → DataFrame
    figures: dict[str, Any] = field(default_factory=dict)    # name → matplotlib Figure
    metrics: dict[str, Any] = field(default_factory=dict)
    shown: list[str] = field(default_factory=list)           # table/figure names displayed, in order
    captions: dict[str, str] = field(default_factory=dict)   # figure name → what is plotted, on what n

    def table(self, name: str, df, *, show: bool = True):
        self.tables[name] = df
        if show:
            self.shown.append(name)
        return df

    def figure(self, name: str, fig, *, show: bool = True, caption: str | None = None):
        """Add a figure; ``caption`` says what is plotted and on what n (the report site shows it)."""
        self.figures[name] = fig
        if caption:
            self.captions[name] = caption
        if show:
            self.shown.append(name)
        return fig

    def metric(self, **numbers: Any) -> None:
        self.metrics.update(numbers)

    def merge(self, other: "StudyResult") -> "StudyResult":
        self.tables.update(other.tables)
        self.figures.update(other.figures)
        self.metrics.update(other.metrics)
        self.captions.update(other.captions)
        self.shown += other.shown
        return self
