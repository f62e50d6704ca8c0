"""A swept key that changes no metric (memlab.sweep_effects): after a sweep, one warning line per swept key whose
points wrote byte-identical metrics.json, naming the tables that do differ; a key that changes a metric is no
warning. Synthetic run folders at the runner's keys, then a real `python -m memlab.run -m` sweep."""

from __future__ import annotations

import json
from pathlib import Path

from memlab.run import run_key
from memlab.sweep_effects import idle_keys, warn_idle_keys
from memlab.sweeps import expand

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
    assert line.endswith("sweeping method.alpha changed no metric in metrics.json; it changed nothing at all")
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


def test_a_real_sweep_warns_for_the_key_that_changed_only_a_table(tmp_path, zoo_builder, two_chapter_family):
    """`python -m memlab.run -m` on the demo with a micro zoo (2 epochs): `params.epoch_every=1,2` evaluates
    epochs [1, 2] or [2] — the curve table changes, the last-epoch metrics do not; `params.n_probes=4,6` changes
    metrics.json (n_probes is one of its metrics) and is no warning."""
    import subprocess
    import sys

    zoo = zoo_builder(tmp_path / "zoo", two_chapter_family)
    results = tmp_path / "results"
    args = [sys.executable, "-m", "memlab.run", "-m", "experiment=memorization_curve", "params.family=micro",
            f"paths.zoo={zoo / 'conf'}", f"paths.models={zoo / 'models'}", f"paths.results={results}",
            f"paths.cache={zoo / 'cache'}", "logger=null", "params.prefix_len=8", "params.cont_len=8",
            "params.sizes=[xs]", "params.epoch_every=1,2", "params.n_probes=4,6"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    warnings = [line for line in r.stderr.splitlines() if "changed no metric" in line]
    assert warnings == ["memlab: warning: sweeping params.epoch_every changed no metric in metrics.json; "
                        "it changed tables/continuation_rate.csv (4 of 4 rows)"], r.stderr[-3000:]
