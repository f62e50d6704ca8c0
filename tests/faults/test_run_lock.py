"""Two runs of the same experiment and run key at once (issue 33): the second refuses in one line naming the
first's pid and touches nothing of its partial folder; a killed holder never blocks the next run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from memlab.errors import MemlabError
from memlab.runner.keys import run_key
from memlab.runner.run_lock import exclusive, lock_path

HOLDER = r"""
import sys, time
from pathlib import Path
from memlab.runner.run_lock import exclusive, lock_path
exp_dir = Path(sys.argv[1])
with exclusive(exp_dir, sys.argv[2], "first run"):
    partial = exp_dir / f".{sys.argv[2]}.partial"
    partial.mkdir(parents=True, exist_ok=True)
    (partial / "metrics.json").write_text('{"auc": 0.9}')
    print("HOLDING", flush=True)
    time.sleep(120)
"""


def _hold(tmp_path, exp_dir, key):
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    proc = subprocess.Popen([sys.executable, str(script), str(exp_dir), key], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "HOLDING"
    return proc


def test_second_run_of_the_same_key_refuses_in_one_line(tmp_path):
    results = tmp_path / "results"
    overrides = ["params.n_probes=6"]
    key = run_key(overrides)
    holder = _hold(tmp_path, results / "memorization_curve", key)
    try:
        r = subprocess.run([sys.executable, "-m", "memlab.run", "experiment=memorization_curve", *overrides,
                            f"paths.results={results}", f"paths.cache={tmp_path / 'cache'}", "logger=null"],
                           capture_output=True, text=True, timeout=300)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1, r.stderr
        assert f"pid {holder.pid}" in lines[0] and "another run of memorization_curve" in lines[0]
        partial = results / "memorization_curve" / f".{key}.partial"
        assert (partial / "metrics.json").read_text() == '{"auc": 0.9}'  # the first run's work is untouched
        assert sorted(p.name for p in partial.iterdir()) == ["metrics.json"]
    finally:
        holder.kill()
        holder.wait()


def test_a_killed_holder_never_blocks_the_next_run(tmp_path):
    exp_dir = tmp_path / "exp"
    holder = _hold(tmp_path, exp_dir, "k")
    with pytest.raises(MemlabError, match=f"pid {holder.pid}"):
        with exclusive(exp_dir, "k", "second run"):
            pass
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    with exclusive(exp_dir, "k", "third run"):  # the kernel dropped the dead run's lock
        assert lock_path(exp_dir, "k").read_text().strip() == str(os.getpid())
