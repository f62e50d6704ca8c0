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
from memlab.metrics.intervals import wilson


def _run(results: Path, experiment: str, tables: dict[str, pd.DataFrame]) -> None:
    folder = results / experiment / "default"
    (folder / "tables").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"key": "default", "commit": "abcdef0123"}))
    for name, df in tables.items():
        df.to_csv(folder / "tables" / f"{name}.csv", index=False)


def _selfcheck(results: Path) -> None:
    from memlab.audit.selfcheck import pooled_rates, rates

    # two checkpoints' decisions of one rule: judged documents with their truth, control documents never counted
    rows = [("c1", "mix", True, True), ("c1", "mix", True, False), ("c1", "mix", False, False),
            ("c1", "null", False, True), ("c1", "known-unseen", False, True),
            ("c2", "mix", True, True), ("c2", "null", False, False), ("c2", "null", False, False)]
    d = pd.DataFrame([{"checkpoint": c, "method": "MIA (loss)", "source": s, "member": m, "flagged": f}
                      for c, s, m, f in rows])
    runs = rates(d, ["checkpoint", "method"]).assign(draw=0)
    _run(results, "audit_selfcheck", {"selfcheck_rates": pooled_rates(d, runs, 1.0)[1]})


def test_the_rates_beside_a_finding_are_the_audits_own_blind_run_on_the_zoo(tmp_path):
    _selfcheck(tmp_path)
    rates = GT.selfcheck_rates(tmp_path, "audit_selfcheck")
    loss = GT.lookup(rates, "MIA (loss)")
    assert (loss.members_flagged, loss.members, loss.nonmembers_flagged, loss.nonmembers) == (2, 3, 1, 4)
    row = loss.row()
    assert row["gt_recall"] == pytest.approx(2 / 3) and row["gt_fpr"] == 0.25
    assert "audit_selfcheck [default] at abcdef0" in loss.run and "FPR 0.00–0.50" in loss.rule
    # beside the pooled rate, the band one audit fell in across the two models: c1's recall 1/2 and c2's 1/1 give
    # the lowest and highest Wilson bound of the two (not the pooled 2/3's own, narrower interval)
    assert (row["gt_recall_low"], row["gt_recall_high"]) == pytest.approx((wilson(1, 2)[0], wilson(1, 1)[1]))
    assert row["gt_recall_low"] < wilson(2, 3)[0] and "2 zoo checkpoints" in loss.rule
    other = GT.lookup(rates, "PEARL (completion)")
    assert other.members is None and "did not run this rule" in other.run


def test_a_zoo_run_that_does_not_exist_is_named_with_the_command_that_makes_it(tmp_path, monkeypatch):
    monkeypatch.setattr(GT, "ZOO_RATES", tmp_path / "nothing shipped")
    r = GT.lookup(GT.selfcheck_rates(tmp_path, "audit_selfcheck"), "RECAP")
    assert r.members is None and "make reproduce" in r.run and "experiment=audit_selfcheck" in r.run
    assert GT.trace_rates(tmp_path, "trace_validation").row()["gt_fpr"] is None


def test_without_a_run_here_the_rates_shipped_with_the_package_are_read(tmp_path, monkeypatch):
    """The installed command, outside a checkout: `make reproduce` copied the default runs' tables (ship) with the
    md5 of their DVC output; the audit reads those and names them."""
    checkout = tmp_path / "checkout"
    _selfcheck(checkout / "results")
    (checkout / "dvc.lock").write_text("schema: '2.0'\nstages:\n  exp-audit_selfcheck:\n    outs:\n"
                                       "    - path: results/audit_selfcheck/default/tables\n"
                                       "      md5: 0123456789abcdef0123.dir\n")
    monkeypatch.setattr(GT, "ZOO_RATES", tmp_path / "shipped")
    written = GT.ship(checkout, GT.ZOO_RATES)
    assert {p.name for p in written} == {"selfcheck_rates.csv", "source.json"}   # trace_validation: not run here
    loss = GT.lookup(GT.selfcheck_rates(tmp_path / "elsewhere", "audit_selfcheck"), "MIA (loss)")
    assert (loss.members_flagged, loss.members) == (2, 3)
    assert loss.run == ("audit_selfcheck as shipped with memlab (make reproduce: "
                        "results/audit_selfcheck/default/tables 0123456789ab)")


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


def test_recaps_row_names_the_zoo_targets_and_texts_it_pooled(tmp_path):
    """Issue 50: RECAP's ground-truth row pooled the zoo's two RECAP targets under one target's name, and then as
    "checkpoints (KJV text)" although the aligned target's books are also licences and Wikipedia articles."""
    from memlab.audit.ground_truth import selfcheck_rates

    tables = tmp_path / "audit_selfcheck" / "default" / "tables"
    tables.mkdir(parents=True)
    # a run of its own (run.json), so this table is read, not the copy shipped with memlab
    (tables.parent / "run.json").write_text(json.dumps({"key": "default", "commit": "abcdef0123"}))
    cols = ("method,recall_k,recall_n,fpr_k,fpr_n,checkpoints,runs,band,recall_runs_min,recall_runs_max,fpr_runs_min,"
            "fpr_runs_max,recall_band_low,recall_band_high,fpr_band_low,fpr_band_high")
    (tables / "selfcheck_rates.csv").write_text(cols + "\nRECAP,4,38,0,35,2,2,0.95,0,0.12,0,0,0,0.49,0,0.49\n"
                                                "MIA (loss),150,198,40,396,11,1100,0.95,0,1,0,0.6,0,1,0,0.5\n")
    rates = selfcheck_rates(tmp_path, "audit_selfcheck")
    assert "2 zoo RECAP targets" in rates["RECAP"].rule and "Wikipedia" in rates["RECAP"].rule
    assert "zoo checkpoints" not in rates["RECAP"].rule and "11 zoo checkpoints (KJV text)" in rates["MIA (loss)"].rule


def _low_fpr_table(results: Path) -> None:
    """mia_low_fpr's low_fpr table as its study writes it: loss resolvable at both FPRs, PEARL's subset only at 1 %."""
    def row(attack, documents, t, tpr, resolvable, n_cal):
        return {"attack": attack, "documents": documents, "target_fpr": t, "tpr": tpr, "tpr_ci_low": tpr - 0.04,
                "tpr_ci_high": tpr + 0.04, "n_members": 510 if documents == "all" else 100, "n_evaluation": n_cal,
                "n_calibration": n_cal, "resolvable": resolvable, "auc": 0.99 if attack == "loss" else 0.49,
                "auc_ci_low": 0.98, "auc_ci_high": 0.995}
    _run(results, "mia_low_fpr", {"low_fpr": pd.DataFrame([
        row("loss", "all", 0.01, 0.735, True, 1499), row("loss", "all", 0.001, 0.294, True, 1499),
        row("pearl_sensitivity", "seeded subset", 0.01, 0.01, True, 100),
        row("pearl_sensitivity", "seeded subset", 0.001, 0.01, False, 100),
        row("blind", "all", 0.01, 0.06, True, 1499), row("blind", "all", 0.001, 0.0, True, 1499)])})


def test_each_attack_carries_its_zoo_tpr_at_low_fpr_and_an_unresolvable_fpr_gives_no_number(tmp_path):
    from memlab.audit import page

    _low_fpr_table(tmp_path)
    low = GT.low_fpr_rates(tmp_path, "mia_low_fpr")
    loss = GT.low_fpr_lookup(low, "MIA (loss)").row()
    assert loss["gt_tpr_at_fpr_0.01"] == 0.735 and loss["gt_tpr_at_fpr_0.001"] == 0.294 and loss["gt_auc"] == 0.99
    assert "510 members vs 1499 held-out non-members" in loss["gt_low_fpr_n"]
    assert "mia_low_fpr [default] at abcdef0" in loss["gt_low_fpr_run"]
    # PEARL's completion row reads mia_low_fpr's PEARL attack; 0.1 % FPR is not readable on 100 non-members
    pearl = GT.low_fpr_lookup(low, "PEARL (completion)").row()
    assert pearl["gt_tpr_at_fpr_0.01"] == 0.01 and pearl["gt_tpr_at_fpr_0.001"] is None
    assert "seeded subset" in pearl["gt_low_fpr_n"]
    shown = page._low_fpr(pearl)
    assert shown.startswith("1 % (") and "/ not resolvable; AUC 0.490" in shown
    # the blind baseline's row reads mia_low_fpr's blind attack (the same score, never the model)
    no_model = GT.low_fpr_lookup(low, "blind (zlib compressibility)").row()
    assert no_model["gt_tpr_at_fpr_0.01"] == 0.06 and no_model["gt_low_fpr_attack"] == "blind"
    # a rule mia_low_fpr does not run, and a missing run: no number, the reason instead
    recap = GT.low_fpr_lookup(low, "RECAP").row()
    assert recap["gt_auc"] is None and "does not run this rule" in recap["gt_low_fpr_run"]
    assert page._low_fpr(recap) == page.NONE


def test_a_missing_low_fpr_run_names_the_command_that_makes_it(tmp_path, monkeypatch):
    monkeypatch.setattr(GT, "ZOO_RATES", tmp_path / "nothing shipped")
    row = GT.low_fpr_lookup(GT.low_fpr_rates(tmp_path, "mia_low_fpr"), "MIA (loss)").row()
    assert row["gt_auc"] is None and "experiment=mia_low_fpr" in row["gt_low_fpr_run"]
