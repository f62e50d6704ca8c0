"""`make reproduce` (python -m memlab.reproduce) says which stage of how many it runs; a failed stage is one line
and finished stages are not rerun. Real git + dvc in a temp dir."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

ENV = {**os.environ, "DVC_NO_ANALYTICS": "1", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}


def _init(root: Path) -> Path:
    """An empty git + DVC repository at ``root``."""
    root.mkdir()
    for cmd in (["git", "init", "-q"], [str(Path(sys.executable).with_name("dvc")), "init", "-q"]):
        subprocess.run(cmd, cwd=root, check=True, env=ENV)
    return root


def _repo(tmp_path: Path, fail_second: bool) -> Path:
    root = _init(tmp_path / "repo")
    second = "import sys; sys.exit(3)" if fail_second else "open('b.txt', 'w').write(open('a.txt').read() * 2)"
    stages = {"first": {"cmd": "python -c \"open('a.txt', 'w').write('a')\"", "outs": ["a.txt"]},
              "second": {"cmd": f'python -c "{second}"', "deps": ["a.txt"], "outs": ["b.txt"]}}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    return root


def _reproduce(root: Path, *args: str):
    return subprocess.run([sys.executable, "-m", "memlab.reproduce", *args], cwd=root, env=ENV, capture_output=True,
                          text=True, timeout=300)


def test_stages_are_counted_and_a_second_run_does_nothing(tmp_path):
    root = _repo(tmp_path, fail_second=False)
    r = _reproduce(root)
    assert r.returncode == 0, r.stderr
    assert "memlab: [1/2] first" in r.stderr and "memlab: [2/2] second" in r.stderr
    assert (root / "b.txt").read_text() == "aa"
    again = _reproduce(root)
    assert again.returncode == 0 and "0 stage(s) to run" in again.stderr and "[1/" not in again.stderr


def test_failed_stage_is_one_line_and_finished_stages_stay(tmp_path):
    root = _repo(tmp_path, fail_second=True)
    r = _reproduce(root)
    assert r.returncode == 2
    errors = [line for line in r.stderr.splitlines() if line.startswith("memlab: error:")]
    assert len(errors) == 1 and "stage second failed ([2/2]" in errors[0]
    assert (root / "a.txt").exists() and "first" in (root / "dvc.lock").read_text()


def _parallel_repo(tmp_path: Path, cores: dict[str, int], fail: str | None = None, b_after_a: bool = False) -> Path:
    """Stages a and b are independent (each records when it ran, waiting long enough to overlap a sibling);
    c needs both. ``meta.cores`` as memlab.pipeline writes it."""
    root = _init(tmp_path / "repo")
    (root / "in.txt").write_text("x")

    def timed(name: str) -> str:
        body = ("import time, sys; t = time.time(); time.sleep(3); "
                + ("sys.exit(5)" if name == fail else
                   f"open('{name}.txt', 'w').write(repr((t, time.time())))"))
        return f'python -c "{body}"'

    stages = {n: {"cmd": timed(n), "deps": ["in.txt"], "outs": [f"{n}.txt"], "meta": {"cores": cores[n]}}
              for n in ("a", "b")}
    if b_after_a:
        stages["b"]["meta"]["after"] = ["a"]
    stages["c"] = {"cmd": "python -c \"open('c.txt', 'w').write(open('a.txt').read() + open('b.txt').read())\"",
                   "deps": ["a.txt", "b.txt"], "outs": ["c.txt"], "meta": {"cores": 1}}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    return root


def _interval(root: Path, name: str) -> tuple[float, float]:
    return ast.literal_eval((root / f"{name}.txt").read_text())  # the (start, end) the stage wrote


def test_independent_stages_run_side_by_side_and_dvc_records_all(tmp_path):
    root = _parallel_repo(tmp_path, {"a": 1, "b": 1})
    r = _reproduce(root, "--jobs", "2")
    assert r.returncode == 0, r.stderr
    (a0, a1), (b0, b1) = _interval(root, "a"), _interval(root, "b")
    assert a0 < b1 and b0 < a1, "a and b did not overlap"
    assert "beside" in r.stderr and (root / ".cache/reproduce/a.log").exists()
    lock = yaml.safe_load((root / "dvc.lock").read_text())["stages"]
    assert set(lock) == {"a", "b", "c"}
    status = subprocess.run([str(Path(sys.executable).with_name("dvc")), "status"], cwd=root, env=ENV,
                            capture_output=True, text=True)
    assert "up to date" in status.stdout, status.stdout


def test_a_stage_that_wants_every_core_runs_alone(tmp_path):
    root = _parallel_repo(tmp_path, {"a": 2, "b": 1})
    r = _reproduce(root, "--jobs", "2")
    assert r.returncode == 0, r.stderr
    (a0, a1), (b0, b1) = _interval(root, "a"), _interval(root, "b")
    assert a1 <= b0 or b1 <= a0, "a (2 cores) overlapped b on a 2-core budget"


def test_meta_after_orders_without_a_dvc_dependency(tmp_path):
    root = _parallel_repo(tmp_path, {"a": 1, "b": 1}, b_after_a=True)
    r = _reproduce(root, "--jobs", "2")
    assert r.returncode == 0, r.stderr
    (a0, a1), (b0, b1) = _interval(root, "a"), _interval(root, "b")
    assert a1 <= b0, "b started before a ended"
    lock = yaml.safe_load((root / "dvc.lock").read_text())["stages"]
    assert [d["path"] for d in lock["b"]["deps"]] == ["in.txt"]  # ordering only: DVC records no a → b edge


def test_a_failure_lets_the_running_sibling_finish_and_names_its_log(tmp_path):
    root = _parallel_repo(tmp_path, {"a": 1, "b": 1}, fail="b")
    r = _reproduce(root, "--jobs", "2")
    assert r.returncode == 2
    errors = [line for line in r.stderr.splitlines() if line.startswith("memlab: error:")]
    assert len(errors) == 1 and "stage b failed" in errors[0] and ".cache/reproduce/b.log" in errors[0]
    lock = yaml.safe_load((root / "dvc.lock").read_text())["stages"]
    assert set(lock) == {"a"} and not (root / "c.txt").exists()


def test_critical_path_first_and_packing():
    from memlab.reproduce import _priority, next_stages

    downs = {"zoo": {"exp1", "exp2"}, "exp1": set(), "exp2": set(), "other": set()}
    minutes = {"zoo": 1.0, "exp1": 2.0, "exp2": 3.0, "other": 4.5}
    prio = _priority(["zoo", "other", "exp1", "exp2"], downs, minutes)
    assert prio == {"zoo": 4.0, "other": 4.5, "exp1": 2.0, "exp2": 3.0}  # the long lone run outranks the chain
    cores = {"big": 2, "x": 1, "y": 1, "huge": 8}
    assert next_stages(["big", "x", "y"], 0, 2, cores) == ["big"]
    assert next_stages(["x", "y", "big"], 0, 2, cores) == ["x", "y"]
    assert next_stages(["x", "big", "y"], 0, 2, cores) == ["x"]  # y does not overtake big, which waits for 2
    assert next_stages(["big", "x"], 1, 2, cores) == []
    assert next_stages(["huge"], 1, 2, cores) == []
    assert next_stages(["huge"], 0, 2, cores) == ["huge"]


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan whose reaper here may be slow to collect it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_killed_run_stops_its_stages_and_keeps_finished_ones(tmp_path):
    root = _init(tmp_path / "repo")
    slow = "import os, time; open('slow.pid', 'w').write(str(os.getpid())); time.sleep(120); open('slow.txt', 'w')"
    stages = {"quick": {"cmd": "python -c \"open('quick.txt', 'w').write('q')\"", "outs": ["quick.txt"]},
              "slow": {"cmd": f'python -c "{slow}"', "deps": ["quick.txt"], "outs": ["slow.txt"]}}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    proc = subprocess.Popen([sys.executable, "-m", "memlab.reproduce", "--jobs", "2"], cwd=root, env=ENV,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (root / "slow.pid").exists() and time.time() < deadline:
        time.sleep(0.2)
    assert (root / "slow.pid").exists(), "the slow stage never started"
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 2
    errors = [line for line in err.splitlines() if line.startswith("memlab: error:")]
    assert len(errors) == 1 and "interrupted: stopped slow" in errors[0] and "1/2 stages done" in errors[0]
    pid = int((root / "slow.pid").read_text())
    time.sleep(0.5)
    assert not _running(pid), "the stage's own process outlived the run"
    assert "quick" in yaml.safe_load((root / "dvc.lock").read_text())["stages"]
