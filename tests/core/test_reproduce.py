"""`make reproduce` (python -m memlab.reproduce) says which stage of how many it runs; a failed stage is one line
and finished stages are not rerun. Real git + dvc in a temp dir."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

ENV = {**os.environ, "DVC_NO_ANALYTICS": "1", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}


def _repo(tmp_path: Path, fail_second: bool) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    for cmd in (["git", "init", "-q"], [str(Path(sys.executable).with_name("dvc")), "init", "-q"]):
        subprocess.run(cmd, cwd=root, check=True, env=ENV)
    second = "import sys; sys.exit(3)" if fail_second else "open('b.txt', 'w').write(open('a.txt').read() * 2)"
    stages = {"first": {"cmd": "python -c \"open('a.txt', 'w').write('a')\"", "outs": ["a.txt"]},
              "second": {"cmd": f'python -c "{second}"', "deps": ["a.txt"], "outs": ["b.txt"]}}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    return root


def _reproduce(root: Path):
    return subprocess.run([sys.executable, "-m", "memlab.reproduce"], cwd=root, env=ENV, capture_output=True,
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
