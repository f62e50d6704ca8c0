"""The audit's ground-truth column (memlab.audit.ground_truth): rates come from the audit's own blind run on the zoo
(audit_selfcheck) and the tracer's validation, counted from those runs' tables; a missing run or an unmeasured rule gives
a reason, never a number."""

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


def _selfcheck(results: Path) -> None:
    from memlab.audit.selfcheck import rates

    # two checkpoints' decisions of one rule: judged documents with their truth, control documents never counted
    rows = [("c1", "mix", True, True), ("c1", "mix", True, False), ("c1", "mix", False, False),
            ("c1", "null", False, True), ("c1", "known-unseen", False, True),
            ("c2", "mix", True, True), ("c2", "null", False, False), ("c2", "null", False, False)]
    d = pd.DataFrame([{"checkpoint": c, "method": "MIA (loss)", "source": s, "member": m, "flagged": f}
                      for c, s, m, f in rows])
    per_run = rates(d, ["checkpoint", "method"])
    spread = per_run.groupby("method").agg(recall_runs_min=("recall", "min"), recall_runs_max=("recall", "max"),
                                           fpr_runs_min=("fpr", "min"), fpr_runs_max=("fpr", "max")).reset_index()
    _run(results, "audit_selfcheck", {"selfcheck_rates": rates(d, ["method"]).merge(spread, on="method")})


def test_the_rates_beside_a_finding_are_the_audits_own_blind_run_on_the_zoo(tmp_path):
    _selfcheck(tmp_path)
    rates = GT.selfcheck_rates(tmp_path, "audit_selfcheck")
    loss = GT.lookup(rates, "MIA (loss)")
    assert (loss.members_flagged, loss.members, loss.nonmembers_flagged, loss.nonmembers) == (2, 3, 1, 4)
    row = loss.row()
    assert row["gt_recall"] == pytest.approx(2 / 3) and row["gt_fpr"] == 0.25
    assert "audit_selfcheck [default] at abcdef0" in loss.run and "FPR 0.00–0.50" in loss.rule
    other = GT.lookup(rates, "PEARL (completion)")
    assert other.members is None and "did not run this rule" in other.run


def test_a_zoo_run_that_does_not_exist_is_named_with_the_command_that_makes_it(tmp_path):
    r = GT.lookup(GT.selfcheck_rates(tmp_path, "audit_selfcheck"), "RECAP")
    assert r.members is None and "make reproduce" in r.run and "experiment=audit_selfcheck" in r.run
    assert GT.trace_rates(tmp_path, "trace_validation").row()["gt_fpr"] is None


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
