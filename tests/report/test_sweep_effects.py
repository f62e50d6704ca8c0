"""A swept key that changes no metric (memlab.runner.sweep_effects): after a sweep, one warning line per swept key whose
points wrote byte-identical metrics.json, naming the tables that do differ; a key that changes a metric is no
warning. Synthetic run folders at the runner's keys, then a real `python -m memlab.run -m` sweep."""

from __future__ import annotations

import json
from pathlib import Path

from memlab.runner.keys import run_key
from memlab.runner.sweep_effects import idle_keys, warn_idle_keys
from memlab.runner.sweeps import expand

OVERRIDES = ["experiment=pearl_sizes", "method.alpha=0.1,0.2", "seed=0,1"]


def _point(results: Path, point: list[str], metrics: dict, tables: dict[str, str]) -> None:
    folder = results / "pearl_sizes" / run_key(point)
    (folder / "tables").mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(metrics, sort_keys=True))
    for name, text in tables.items():
        (folder / "tables" / name).write_text(text)


def _value(point: list[str], key: str) -> str:
    return next(o.split("=", 1)[1] for o in point if o.startswith(key + "="))


def test_a_key_acting_on_one_table_is_named_and_a_key_changing_metrics_is_not(tmp_path, capsys):
    results = tmp_path / "results"
    _, points = expand(OVERRIDES)
    for p in points:  # alpha only moves one row of the flag table; seed moves the metric
        alpha, seed = _value(p, "method.alpha"), _value(p, "seed")
        _point(results, p, {"auc": 0.5 + int(seed) / 10},
               {"flags.csv": f"doc,flagged\nd1,1\nd2,{alpha}\nd3,0\n", "scores.csv": "doc,score\nd1,0.3\n",
                "comparison.csv": "claim_id,our_value\nc1,0.5\n"})
    (line,) = warn_idle_keys(results, "pearl_sizes", OVERRIDES)
    assert line == ("memlab: warning: sweeping method.alpha changed no metric in metrics.json; "
                    "it changed tables/flags.csv (1 of 3 rows)")
    assert capsys.readouterr().err == line + "\n"
    assert "seed" not in idle_keys(results, "pearl_sizes", OVERRIDES)  # the negative control


def test_a_key_changing_nothing_says_so_and_missing_points_are_left_out(tmp_path):
    results = tmp_path / "results"
    _, points = expand(OVERRIDES)
    for p in points[:-1]:  # the last point failed: it has no folder and is not compared
        _point(results, p, {"auc": 0.5 + int(_value(p, "seed")) / 10}, {"flags.csv": "doc,flagged\nd1,1\n"})
    (line,) = warn_idle_keys(results, "pearl_sizes", OVERRIDES)
    # judged where both alphas ran (seed 0) only: the warning says on how many points (it did not)
    assert line.endswith("sweeping method.alpha changed no metric in metrics.json; it changed nothing at all "
                         "(judged on the 3 of 4 points that ran in this sweep)")
    # one changed byte of metrics.json at one point: alpha changed a metric, no warning
    (results / "pearl_sizes" / run_key(points[0]) / "metrics.json").write_text('{"auc": 0.51}')
    assert warn_idle_keys(results, "pearl_sizes", OVERRIDES) == []


def test_no_point_ran_or_one_point_per_combination_is_no_verdict(tmp_path):
    results = tmp_path / "results"
    assert idle_keys(results, "pearl_sizes", OVERRIDES) == {}
    _, points = expand(OVERRIDES)
    for p in points[:1]:
        _point(results, p, {"auc": 0.5}, {})
    assert idle_keys(results, "pearl_sizes", OVERRIDES) == {}


# the real `-m` sweep that exercises this warning end to end is tests/report/test_sweeps.py::
# test_a_real_sweep_through_the_runner (one sweep for both: each real sweep costs minutes of make test)
