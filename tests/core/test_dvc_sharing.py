"""Results travel through DVC: reproduce → `dvc push` to a local-folder remote → a fresh clone → `dvc pull`
restores every output of a run folder (metrics.json included) and `dvc status` is clean with no stage re-run.
Real git and real dvc in temp dirs; the stage's outputs are declared exactly as memlab.pipeline declares them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from memlab.pipeline import run_outputs

DVC = str(Path(sys.executable).with_name("dvc"))
ENV = {**os.environ, "DVC_NO_ANALYTICS": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}

WRITE_RUN = r"""
import json, pathlib, sys
run = pathlib.Path("results/toy/default"); (run / "tables").mkdir(parents=True, exist_ok=True)
(run / "figures").mkdir(exist_ok=True)
n = int(pathlib.Path("params.txt").read_text())
(run / "tables" / "t.csv").write_text("x\n%d\n" % (n * n))
(run / "figures" / "f.png").write_bytes(bytes(range(n)))
for name in ("toy.ipynb", "toy.html", "config.yaml"):
    (run / name).write_text(name + str(n))
(run / "metrics.json").write_text(json.dumps({"n_squared": n * n}))
"""


def sh(*cmd, cwd):
    r = subprocess.run(list(cmd), cwd=cwd, env=ENV, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))}: {r.stdout}{r.stderr}"
    return r.stdout + r.stderr


def test_push_then_pull_in_a_fresh_clone_restores_everything(tmp_path):
    origin, remote, clone = tmp_path / "origin", tmp_path / "remote", tmp_path / "clone"
    origin.mkdir()
    sh("git", "init", "-q", "-b", "main", cwd=origin)
    sh(DVC, "init", "-q", cwd=origin)
    sh(DVC, "config", "core.analytics", "false", cwd=origin)
    sh(DVC, "remote", "add", "-d", "local", str(remote), cwd=origin)
    (origin / "write_run.py").write_text(WRITE_RUN)
    (origin / "params.txt").write_text("7\n")
    stage = {"cmd": "python write_run.py", "deps": ["write_run.py", "params.txt"],
             **run_outputs("results/toy/default", "toy")}
    (origin / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"exp-toy": stage}}))
    ENV["PATH"] = f"{Path(sys.executable).parent}:{ENV['PATH']}"
    sh(DVC, "repro", cwd=origin)
    sh("git", "add", "-A", cwd=origin)
    sh("git", "commit", "-qm", "run", cwd=origin)
    assert "dvc.lock" in sh("git", "ls-files", cwd=origin)
    sh(DVC, "push", cwd=origin)

    sh("git", "clone", "-q", str(origin), str(clone), cwd=tmp_path)
    assert not (clone / "results/toy/default/metrics.json").exists()  # only in DVC, not in git
    sh(DVC, "pull", cwd=clone)
    run = clone / "results" / "toy" / "default"
    assert json.loads((run / "metrics.json").read_text()) == {"n_squared": 49}
    for name in ("tables/t.csv", "figures/f.png", "toy.ipynb", "toy.html", "config.yaml"):
        assert (run / name).read_bytes() == (origin / "results/toy/default" / name).read_bytes(), name
    status = sh(DVC, "status", cwd=clone)
    assert "up to date" in status, status
    repro = sh(DVC, "repro", cwd=clone)
    assert "didn't change, skipping" in repro or "up to date" in repro, repro
    assert "Running stage" not in repro
