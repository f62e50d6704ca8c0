"""Hydra's own flags work through `python -m memlab.run` (their values are not read as overrides)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml


def _run(repo_root, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(repo_root / "lib")}
    return subprocess.run([sys.executable, "-m", "memlab.run", *args], cwd=repo_root, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("order", ["flag_last", "flag_first"])
def test_cfg_job_prints_the_composed_config_and_runs_nothing(repo_root, order):
    args = ["experiment=memorization_curve", "params.n_probes=7"]
    out = _run(repo_root, *(args + ["--cfg", "job"] if order == "flag_last" else ["--cfg", "job"] + args))
    assert out.returncode == 0, out.stderr
    cfg = yaml.safe_load(out.stdout)
    assert cfg["experiment_name"] == "memorization_curve" and cfg["params"]["n_probes"] == 7
    assert not (repo_root / "results" / "memorization_curve" / "n_probes=7").exists()


def test_info_and_info_with_a_topic(repo_root):
    out = _run(repo_root, "experiment=memorization_curve", "--info")
    assert out.returncode == 0 and "Config search path" in out.stdout, out.stderr
    out = _run(repo_root, "--info", "defaults", "experiment=memorization_curve")
    assert out.returncode == 0 and "Defaults List" in out.stdout, out.stderr


def test_help_lists_groups(repo_root):
    out = _run(repo_root, "--help")
    assert out.returncode == 0 and "== Configuration groups ==" in out.stdout, out.stderr


def test_cfg_with_multirun_and_a_malformed_override_are_one_line_errors(repo_root):
    out = _run(repo_root, "-m", "experiment=memorization_curve", "seed=0,1", "--cfg", "job")
    assert out.returncode == 2 and out.stderr.strip().startswith("memlab: error: --cfg") and "Traceback" not in out.stderr
    out = _run(repo_root, "experiment=memorization_curve", "seed=[0", "--cfg", "job")
    assert out.returncode == 2 and "malformed override 'seed=[0'" in out.stderr and "Traceback" not in out.stderr
