"""The verdict summary `make reproduce` prints (memlab.summary): an experiment that ran but judges no claim (the
audit's self-check) is named as such, never as missing its run; one that did not run says so."""

from __future__ import annotations

import subprocess

import yaml

from memlab.summary import summary


def _repo(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    stages = {f"exp-{n}": {"cmd": "true"} for n in ("audit_selfcheck", "pearl_calibration", "trace_stages")}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\n")
    return tmp_path


def test_a_run_without_claims_is_not_called_missing(tmp_path):
    root = _repo(tmp_path)
    ran = root / "results" / "audit_selfcheck" / "default"
    ran.mkdir(parents=True)
    (ran / "run.json").write_text("{}")
    judged = root / "results" / "pearl_calibration" / "default" / "tables"
    judged.mkdir(parents=True)
    (judged / "comparison.csv").write_text("claim_id,verdict,our_value,our_n,paper_value\nc1,reproduced,0.5,10,0.4\n")
    lines = summary(root).splitlines()
    assert "  audit_selfcheck: no claims to judge (its findings: results/audit_selfcheck/default)" in lines
    assert "  trace_stages: no default run" in lines
    assert "  pearl_calibration: 1 claim(s), 0 sanity check(s)" in lines and lines[-1] == "memlab: claims: 1 reproduced"
