"""Provenance flags of a run (memlab.site.provenance), against a checkout: the rule stated on every run page."""

from __future__ import annotations

import hashlib
import json

from memlab.site.data import Checkout, Run
from memlab.site.provenance import flags

HEAD = Checkout("a" * 40, "aaaaaaa", [])


def _run(tmp_path, **info) -> Run:
    (tmp_path / "config.yaml").write_text("seed: 0\n")
    return Run("exp", tmp_path, info=info)


def test_a_clean_run_at_head_has_no_flag(tmp_path):
    sha = hashlib.sha256(b"seed: 0\n").hexdigest()
    assert flags(_run(tmp_path, commit="a" * 40, dirty=False, config_sha256=sha), HEAD) == []


def test_dvc_lock_alone_is_not_dirty(tmp_path):
    assert flags(_run(tmp_path, commit="a" * 40, dirty=True, dirty_files=["dvc.lock"]), HEAD) == []
    assert not Checkout("a" * 40, "aaaaaaa", ["dvc.lock"]).dirty
    assert Checkout("a" * 40, "aaaaaaa", ["dvc.lock", "conf/x.yaml"]).dirty


def test_each_reason_is_named(tmp_path):
    run = _run(tmp_path, commit="b" * 40, dirty=True, dirty_files=["dvc.lock", "lib/x.py"], config_sha256="0" * 64)
    assert flags(run, HEAD) == ["made at commit bbbbbbb, the report is of aaaaaaa",
                                "made with uncommitted changes (dvc.lock, lib/x.py)",
                                "its config.yaml differs from the one the run recorded (config_sha256)"]
    assert flags(_run(tmp_path, started="x"), HEAD) == ["run.json records no commit (made before runs recorded it)"]
    assert "no run.json" in flags(Run("exp", tmp_path), HEAD)[0]
    json.dumps(run.info)  # run.json fields stay JSON
