"""A Report writing into a temp folder whose displays are recorded instead of sent to a kernel (shared by the tests
that check what a page shows)."""

from __future__ import annotations

import memlab.report as report
from memlab.report import Report


def recording_report(tmp_path, monkeypatch) -> tuple[Report, list]:
    shown = []
    monkeypatch.setattr(report, "_display", shown.append)
    monkeypatch.setattr(report, "_text", lambda s: ("text", s))
    monkeypatch.setattr(report, "_png", lambda p: ("png", p.name))
    rep = object.__new__(Report)
    rep.out_dir, rep.experiment, rep._catalog, rep._metrics = tmp_path, "no_such_experiment", None, {}
    rep._metrics_path = tmp_path / "metrics.json"
    for d in ("tables", "figures"):
        (tmp_path / d).mkdir()
    return rep, shown
