"""Sweeps on real distributed engines (issue 14): the same two-point sweep through Hydra's basic launcher, a
local Ray cluster (hydra-ray-launcher) and submitit's local executor writes the same metrics.json, each run in
its own folder; a job that fails on a worker is one line on the driver; launchers that can't work here are
refused in one line. These are the commands the README's cluster section shows."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

@pytest.fixture(scope="module")
def zoo(tmp_path_factory, zoo_builder, one_chapter_family):
    return zoo_builder(tmp_path_factory.mktemp("launch-zoo"), one_chapter_family)


def sweep(zoo, results, *extra):
    cmd = [sys.executable, "-m", "memlab.run", "-m", "experiment=memorization_curve", "seed=0,1",
           "params.family=micro", f"paths.zoo={zoo / 'conf'}", f"paths.models={zoo / 'models'}",
           f"paths.results={results}", "params.n_probes=4", "params.prefix_len=8", "params.cont_len=8",
           "logger=null", "cache=null", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def metrics(results):
    runs = sorted(p for p in (results / "memorization_curve").iterdir() if not p.name.startswith(".") and p.name != "sweeps")
    return {p.name: json.loads((p / "metrics.json").read_text()) for p in runs}


@pytest.fixture(scope="module")
def basic(zoo, tmp_path_factory):
    out = tmp_path_factory.mktemp("basic")
    r = sweep(zoo, out)
    assert r.returncode == 0, r.stderr[-3000:]
    return metrics(out)


@pytest.mark.parametrize("launcher", ["ray", "submitit_local"])
def test_sweep_on_a_launcher_matches_the_basic_launcher(zoo, basic, tmp_path, launcher):
    r = sweep(zoo, tmp_path, f"hydra/launcher={launcher}")
    assert r.returncode == 0, r.stderr[-3000:]
    got = metrics(tmp_path)
    assert len(got) == 2 and any("seed=0" in k for k in got) and any("seed=1" in k for k in got)
    assert got == basic  # same runs, same folders, same numbers


def test_a_job_failing_on_a_ray_worker_is_one_line_on_the_driver(zoo, tmp_path):
    r = sweep(zoo, tmp_path, "hydra/launcher=ray", "params.family=nope")
    assert r.returncode == 2, r.stderr[-3000:]
    own = [line for line in r.stderr.splitlines() if "(_run_job" not in line]  # the driver's lines, not Ray's relay
    errors = [line for line in own if line.startswith("memlab: error: job failed:")]
    assert len(errors) == 2 and all("unknown zoo family 'nope'" in line for line in errors), r.stderr[-3000:]
    assert not any(line.startswith("Traceback") for line in own), r.stderr[-3000:]


@pytest.mark.parametrize("extra,fix", [
    (["hydra/launcher=submitit_slurm"], "needs Slurm's `sbatch`"),
    (["hydra/launcher=ray", "hydra.launcher.ray.init.address=ray://127.0.0.1:9"], "cannot reach the Ray cluster"),
])
def test_launchers_that_cannot_work_here_are_one_line(zoo, tmp_path, extra, fix):
    r = sweep(zoo, tmp_path, *extra)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and fix in r.stderr, r.stderr
