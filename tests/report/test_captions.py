"""Figure captions and degenerate figures: a study's captions reach ``figures/captions.json`` with a reason for
every figure that has nothing to show (no point, one point, every value equal); the site shows that sentence."""

from __future__ import annotations

import json
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from memlab.report import Report, degenerate  # noqa: E402
from memlab.results import StudyResult  # noqa: E402


def _fig(kind: str):
    fig, ax = plt.subplots()
    if kind == "curve":
        ax.plot([0, 1, 2], [0.1, 0.3, 0.2])
    elif kind == "zeros":
        ax.plot([0, 1, 2], [0, 0, 0])
        ax.plot([0, 1, 2], [0, 0, 0])
    elif kind == "one":
        ax.scatter([1], [0.5])
    elif kind == "bars":
        ax.bar(["a", "b"], [0, 2])
    elif kind == "flat_bars":
        ax.bar(["a", "b"], [0, 0])
    return fig


def test_degenerate_names_why():
    assert degenerate(_fig("curve")) == ""
    assert degenerate(_fig("bars")) == ""
    assert degenerate(_fig("zeros")) == "every plotted value is 0 (6 points)"
    assert degenerate(_fig("one")) == "the figure has one data point (0.5)"
    assert degenerate(_fig("flat_bars")).startswith("every plotted value is 0")
    assert degenerate(_fig("empty")) == "the figure has no data points"
    plt.close("all")


def test_captions_json_from_a_study(tmp_path):
    res = StudyResult()
    res.figure("curve", _fig("curve"), caption="share flagged vs epoch, n = 6 members")
    res.figure("flat", _fig("zeros"))
    res.merge(StudyResult(captions={"other": "x"}))
    (tmp_path / "figures").mkdir()
    Report._write_captions(SimpleNamespace(out_dir=tmp_path), res)
    data = json.loads((tmp_path / "figures" / "captions.json").read_text())
    assert data == {"curve": {"caption": "share flagged vs epoch, n = 6 members"},
                    "flat": {"caption": "", "degenerate": "every plotted value is 0 (6 points)"}}
    plt.close("all")


def test_figure_code_captions_reach_captions_json(tmp_path):
    import pandas as pd

    from memlab.methods.pearl import plots

    flags = pd.DataFrame({"kind": ["bitflip"] * 4, "split": ["member", "member", "nonmember", "nonmember"],
                          "alpha": [0.2] * 4, "epoch": [0, 10, 0, 10], "share": [0.0, 0.5, 0.0, 1 / 6],
                          "flagged": [0, 3, 0, 1], "n": [6, 6, 6, 6]})
    res = StudyResult()
    res.figure("flagged", plots.flagged_by_epoch(flags, ["bitflip"], "sensitivity"))
    (tmp_path / "figures").mkdir()
    Report._write_captions(SimpleNamespace(out_dir=tmp_path), res)
    entry = json.loads((tmp_path / "figures" / "captions.json").read_text())["flagged"]
    assert entry == {"caption": "Share of members and non-members PEARL flags (sensitivity > α) per fine-tuning epoch "
                                "of the tiny model, one panel per perturbation kind; bars: 95 % Wilson intervals; "
                                "n = 6 documents per point."}
    plt.close("all")
