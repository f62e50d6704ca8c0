"""What a study function returns: named tables, figures and metrics, in the order a report shows them.

Study functions (``memlab.methods.<m>.study``) compute; a notebook hands the result to
:meth:`memlab.report.Report.save`, which writes ``tables/<name>.csv``, ``figures/<name>.png`` and ``metrics.json``
and displays what the study marked to show.

The claim rules (:mod:`memlab.comparison`) judge a result under the settings its run used: ``config`` is the run's
composed config (:meth:`memlab.report.Report.save` attaches it; :func:`load_result` reads a run folder's
``config.yaml``), and :attr:`StudyResult.method` / :attr:`StudyResult.params` give its typed nodes. ``metrics``
hold what the run measured, never a setting read back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memlab.errors import ConfigError


@dataclass
class StudyResult:
    tables: dict[str, Any] = field(default_factory=dict)     # name → DataFrame
    figures: dict[str, Any] = field(default_factory=dict)    # name → matplotlib Figure
    metrics: dict[str, Any] = field(default_factory=dict)
    # ("table" | "figure", name) displayed, in order: a table and a figure may share a name (tables/x.csv, figures/x.png)
    shown: list[tuple[str, str]] = field(default_factory=list)
    captions: dict[str, str] = field(default_factory=dict)   # figure name → what is plotted, on what n
    views: dict[str, Any] = field(default_factory=dict)      # table name → what the page shows instead of the frame
    page_captions: list[str] = field(default_factory=list)   # figures whose caption is also printed under them
    config: Any = field(default=None, repr=False)             # the run's composed config; None: not attached yet
    # (config, {key: typed node}) that :meth:`attach` handed over: nodes of that config already built, not rebuilt
    _typed: tuple = field(default=(None, {}), init=False, repr=False, compare=False)

    def attach(self, config, typed_nodes: dict | None = None) -> None:
        """Attach the run's config, with the typed nodes already built from it (:meth:`Report.typed`) so the
        rules judging this result reuse them instead of building them again (issue 30)."""
        self.config = config
        self._typed = (config, dict(typed_nodes or {}))

    @property
    def method(self):
        """The run's ``method`` node as its typed dataclass (e.g. PearlConfig): the settings the run used."""
        return self.typed("method")

    @property
    def params(self):
        """The run's ``params`` node (the experiment's study parameters) as its typed dataclass."""
        return self.typed("params")

    def typed(self, key: str):
        """The run config's node at ``key`` as the dataclass its ``_schema_`` names (:meth:`Report.typed_node`);
        a one-line ConfigError when this result carries no config."""
        from omegaconf import DictConfig, OmegaConf

        from memlab.report import Report

        if self.config is None:
            raise ConfigError(f"this result carries no run config, so its {key} settings are unknown: judge it "
                              "through Report.save, or load a run folder that has its config.yaml")
        built_from, built = self._typed
        if built_from is self.config and key in built:
            return built[key]
        cfg = self.config if isinstance(self.config, DictConfig) else OmegaConf.create(self.config)
        return Report.typed_node(cfg, key)

    def table(self, name: str, df, *, show: bool = True, view: Any = None):
        """Add a table (written whole to ``tables/<name>.csv``); ``view``: what the page shows in its place, e.g. the
        same rows in words (:func:`memlab.audit.page.owner_table`) — the CSV is the frame, whatever the view."""
        self.tables[name] = df
        if view is not None:
            self.views[name] = view
        if show:
            self.shown.append(("table", name))
        return df

    def figure(self, name: str, fig, *, show: bool = True, caption: str | None = None,
               caption_on_page: bool = False):
        """Add a figure; ``caption`` says what is plotted and on what n (the report site shows it; with
        ``caption_on_page`` the run's own page prints it under the figure too)."""
        self.figures[name] = fig
        if caption:
            self.captions[name] = caption
            if caption_on_page:
                self.page_captions.append(name)
        if show:
            self.shown.append(("figure", name))
        return fig

    def metric(self, **numbers: Any) -> None:
        self.metrics.update(numbers)

    def merge(self, other: "StudyResult") -> "StudyResult":
        self.tables.update(other.tables)
        self.figures.update(other.figures)
        self.metrics.update(other.metrics)
        self.captions.update(other.captions)
        self.views.update(other.views)
        self.page_captions += other.page_captions
        self.shown += other.shown
        return self


def load_result(folder: str | Path) -> StudyResult:
    """A finished run folder (``results/<exp>/<key>/``) as a :class:`StudyResult`: ``tables/*.csv``,
    ``metrics.json`` and the ``config.yaml`` the run wrote — without it the settings the rules need are unknown,
    so a folder lacking it is refused in one line rather than judged under assumed defaults."""
    import json

    import pandas as pd
    from omegaconf import OmegaConf

    folder = Path(folder)
    if not (folder / "config.yaml").exists():
        raise ConfigError(f"{folder}: no config.yaml, so the settings this run used are unknown (rerun it)")
    tables = {p.stem: pd.read_csv(p) for p in sorted((folder / "tables").glob("*.csv"))}
    metrics = json.loads((folder / "metrics.json").read_text()) if (folder / "metrics.json").exists() else {}
    return StudyResult(tables=tables, metrics=metrics, config=OmegaConf.load(folder / "config.yaml"))
