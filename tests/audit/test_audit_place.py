"""Where the audit sits: an experiment like the others but not a stage of the reproduction (``requires.stage:
false``), and the report shows its newest run — while a pipeline experiment only ever shows its default run."""

from __future__ import annotations

import json

from memlab.config import compose, experiment_names
from memlab.pipeline import stage_wanted
from memlab.site.data import read_run


def test_the_audit_is_no_dvc_stage_and_every_other_experiment_is(repo_root):
    assert not stage_wanted("audit")
    assert all(stage_wanted(e) for e in experiment_names() if e != "audit") and stage_wanted("audit_selfcheck")
    text = (repo_root / "dvc.yaml").read_text()
    assert "exp-audit:" not in text and "exp-audit_selfcheck:" in text and "exp-pearl_wild:" in text


def test_the_audit_composes_three_methods_and_extends_pearl_wild():
    cfg = compose("audit")
    wild = compose("pearl_wild")
    assert cfg.method._schema_.endswith("PearlConfig")
    assert cfg.methods.recap._schema_.endswith("RecapConfig") and cfg.methods.trace._schema_.endswith("TraceConfig")
    assert list(cfg.models) == ["smollm2-135m-instruct"]
    # pearl_wild's sources; the audit's known-unseen controls are larger (30: 15 fit its thresholds, 15 its FPR)
    controls = set(cfg.params.calibration_sources.values())
    assert {k: v for k, v in cfg.params.sources.items() if k not in controls} == {
        k: v for k, v in wild.params.sources.items() if k not in controls}
    assert {cfg.params.sources[c].n for c in controls} == {30} and {wild.params.sources[c].n for c in controls} == {10}
    smoke = compose("audit", ["profile=smoke"])
    assert {s.n for s in smoke.params.sources.values()} == {2} and list(smoke.params.tasks) == ["completion"]


def _finished(folder, started):
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"started": started, "key": folder.name}))


def test_the_report_shows_the_newest_finished_audit_but_only_default_runs_of_stages(tmp_path):
    _finished(tmp_path / "audit" / "model=a", "2026-01-01T00:00:00+00:00")
    _finished(tmp_path / "audit" / "model=b", "2026-02-01T00:00:00+00:00")
    _finished(tmp_path / "audit" / "model=c.failed", "2026-03-01T00:00:00+00:00")
    _finished(tmp_path / "audit" / ".model=d.partial", "2026-04-01T00:00:00+00:00")
    run = read_run(tmp_path, "audit")
    assert run.key == "model=b" and run.folder == tmp_path / "audit" / "model=b"
    _finished(tmp_path / "pearl_mia" / "seed=1", "2026-01-01T00:00:00+00:00")
    assert read_run(tmp_path, "pearl_mia").folder is None
    _finished(tmp_path / "pearl_mia" / "default", "2025-01-01T00:00:00+00:00")
    assert read_run(tmp_path, "pearl_mia").key == "default"
