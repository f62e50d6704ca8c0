"""The audit's ground-truth column (memlab.audit.ground_truth): rates come only from a zoo run that used the same
decision rule, counted from that run's own tables; a missing run or another threshold gives a reason, never a number."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from memlab.audit import ground_truth as GT
from memlab.errors import ConfigError


def _run(results: Path, experiment: str, tables: dict[str, pd.DataFrame]) -> None:
    folder = results / experiment / "default"
    (folder / "tables").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"key": "default", "commit": "abcdef0123"}))
    for name, df in tables.items():
        df.to_csv(folder / "tables" / f"{name}.csv", index=False)


def _pearl_mia(results: Path, alpha: float = 0.2, fpr: float = 0.1) -> None:
    # final epoch 10: 4 members (sensitivity 0.5, 0.3, 0.1, 0.05; loss all high), 2 evaluation non-members, and one
    # calibration non-member that must never be counted
    rows = [("member", "member", 0.5, -1.0), ("member", "member", 0.3, -1.5), ("member", "member", 0.1, -2.0),
            ("member", "member", 0.05, -1.2), ("nonmember", "evaluation", 0.25, -4.0),
            ("nonmember", "evaluation", 0.0, -2.5), ("nonmember", "calibration", 0.9, -0.1)]
    df = pd.DataFrame([{"epoch": e, "split": s, "half": h, "sensitivity": v, "loss": l} for e in (0, 10)
                       for s, h, v, l in rows])
    thr = pd.DataFrame([{"score": "loss", "threshold": -3.0, "fitted_on": f"calibration half, epoch 0, FPR {fpr}"},
                        {"score": "sensitivity_alpha", "threshold": alpha, "fitted_on": "method.alpha"}])
    _run(results, "pearl_mia", {"scores_by_epoch": df, "fixed_thresholds": thr})


def test_pearl_and_mia_rates_are_counted_from_the_zoo_runs_tables(tmp_path):
    _pearl_mia(tmp_path)
    rates = GT.pearl_rates(tmp_path, "pearl_mia", ["loss"], 0.2, "sensitivity", 0.1)
    pe, loss = rates["sensitivity"], rates["loss"]
    assert (pe.members_flagged, pe.members, pe.nonmembers_flagged, pe.nonmembers) == (2, 4, 1, 2)
    assert (loss.members_flagged, loss.members, loss.nonmembers_flagged, loss.nonmembers) == (4, 4, 1, 2)
    row = pe.row()
    assert row["gt_recall"] == 0.5 and row["gt_fpr"] == 0.5 and row["gt_precision"] == pytest.approx(2 / 3)
    assert row["gt_recall_low"] < 0.5 < row["gt_recall_high"]
    assert "pearl_mia [default] at abcdef0" in pe.run and "final epoch 10" in pe.run


@pytest.mark.parametrize("alpha,fpr,missing", [(0.3, 0.1, "sensitivity"), (0.2, 0.05, "loss")])
def test_another_threshold_in_the_zoo_run_gives_no_rate(tmp_path, alpha, fpr, missing):
    _pearl_mia(tmp_path)
    rates = GT.pearl_rates(tmp_path, "pearl_mia", ["loss"], alpha, "sensitivity", fpr)
    assert rates[missing].members is None and "used another threshold" in rates[missing].run
    assert rates[missing].row()["gt_recall"] is None
    other = ({"sensitivity", "loss"} - {missing}).pop()
    assert rates[other].members == 4


def test_a_zoo_run_that_does_not_exist_is_named_with_the_command_that_makes_it(tmp_path):
    r = GT.recap_rates(tmp_path, "recap_table3", 5)
    assert r.members is None and "make reproduce" in r.run and "experiment=recap_table3" in r.run
    assert GT.trace_rates(tmp_path, "trace_validation").row()["gt_fpr"] is None


def test_recap_rate_is_books_with_a_recovered_passage_on_members_vs_non_members(tmp_path):
    books = pd.DataFrame([
        {"target": "tiny", "split": "member", "method": "recap", "passages_m5": 2},
        {"target": "tiny", "split": "member", "method": "recap", "passages_m5": 0},
        {"target": "tiny", "split": "nonmember", "method": "recap", "passages_m5": 0},
        {"target": "tiny", "split": "nonmember", "method": "recap", "passages_m5": 1},
        {"target": "tiny", "split": "nonmember", "method": "dsp", "passages_m5": 9},   # another method: not counted
        {"target": "big", "split": None, "method": "recap", "passages_m5": 3}])       # no membership: not counted
    _run(tmp_path, "recap_table3", {"book_scores": books})
    r = GT.recap_rates(tmp_path, "recap_table3", 5)
    assert (r.members_flagged, r.members, r.nonmembers_flagged, r.nonmembers) == (1, 2, 1, 2)
    assert GT.recap_rates(tmp_path, "recap_table3", 3).members is None   # no passages_m3 column: not this rule


def test_trace_rate_is_exact_matches_of_indexed_spans_vs_false_matches_of_others(tmp_path):
    val = pd.DataFrame([{"queries": 25, "exact_match_rate": 1.0}, {"queries": 25, "exact_match_rate": 0.8}])
    neg = pd.DataFrame([{"queries": 25, "false_exact_match_rate": 0.04}, {"queries": 25, "false_exact_match_rate": 0}])
    _run(tmp_path, "trace_validation", {"validation": val, "negative_control": neg})
    r = GT.trace_rates(tmp_path, "trace_validation")
    assert (r.members_flagged, r.members, r.nonmembers_flagged, r.nonmembers) == (45, 50, 1, 50)


def test_the_audit_tests_one_model_per_run():
    from memlab.audit.study import audit

    with pytest.raises(ConfigError) as e:
        audit(None, None, SimpleNamespace(targets=[{"name": "a"}, {"name": "b"}]))
    assert "\n" not in str(e.value) and "one model per run" in str(e.value) and "a, b" in str(e.value)
