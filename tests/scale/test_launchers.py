"""Sweeps on real distributed engines (issue 14): the same two-point sweep through Hydra's basic launcher, a
local Ray cluster (hydra-ray-launcher) and submitit's local executor writes the same metrics.json, each run in
its own folder; a job that fails on a worker is one line on the driver; launchers that can't work here are
refused in one line. These are the commands the README's cluster section shows."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def zoo(launch_zoo):
    return launch_zoo


@pytest.fixture(scope="module")
def sweep(seed_sweeper):
    """``sweep(zoo, results, *extra, family="micro")``: the seed sweep (tests/conftest.py), with a launcher."""
    return seed_sweeper


def metrics(results):
    """Each run folder's metrics.json, by run key (a failed point's folder, if it left one, has none)."""
    runs = sorted(p for p in (results / "memorization_curve").iterdir() if not p.name.startswith(".") and p.name != "sweeps")
    return {p.name: json.loads((p / "metrics.json").read_text()) for p in runs if (p / "metrics.json").exists()}


@pytest.fixture(scope="module")
def basic(basic_seed_sweep):
    return metrics(basic_seed_sweep)


def test_a_submitit_sweep_matches_the_basic_launcher(zoo, sweep, basic, tmp_path):
    r = sweep(zoo, tmp_path, "hydra/launcher=submitit_local")
    assert r.returncode == 0, r.stderr[-3000:]
    got = metrics(tmp_path)
    assert len(got) == 2 and any("seed=0" in k for k in got) and any("seed=1" in k for k in got)
    assert got == basic  # same runs, same folders, same numbers


def test_a_ray_sweep_matches_the_basic_launcher_and_its_failing_jobs_are_one_line_each(zoo, sweep, basic, tmp_path):
    """One Ray cluster for both checks (its start is most of the cost): the sweep's two good points give the basic
    launcher's folders and numbers; its two points on an unknown family fail on a worker, one line each on the
    driver, and exit 2."""
    r = sweep(zoo, tmp_path, "hydra/launcher=ray", family="micro,nope")
    assert r.returncode == 2, r.stderr[-3000:]
    own = [line for line in r.stderr.splitlines() if "(_run_job" not in line]  # the driver's lines, not Ray's relay
    errors = [line for line in own if line.startswith("memlab: error: job failed:")]
    assert len(errors) == 2 and all("unknown zoo family 'nope'" in line for line in errors), r.stderr[-3000:]
    assert not any(line.startswith("Traceback") for line in own), r.stderr[-3000:]
    ran = {k: v for k, v in metrics(tmp_path).items() if "nope" not in k}
    assert len(ran) == 2 and ran == basic  # same runs, same folders, same numbers
    assert not any("nope" in k for k in metrics(tmp_path)), "a failed point wrote metrics"


@pytest.mark.parametrize("extra,fix", [
    (["hydra/launcher=submitit_slurm"], "needs Slurm's `sbatch`"),
    (["hydra/launcher=ray", "hydra.launcher.ray.init.address=ray://127.0.0.1:9"], "cannot reach the Ray cluster"),
])
def test_launchers_that_cannot_work_here_are_one_line(zoo, sweep, tmp_path, extra, fix):
    r = sweep(zoo, tmp_path, *extra)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and fix in r.stderr, r.stderr
