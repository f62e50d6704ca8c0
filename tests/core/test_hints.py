"""Every `make X` and `dvc repro X` that the library tells a user to run exists (issue 9, item 4)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
MAKE = re.compile(r"`make ([A-Za-z0-9_.-]+)")
DVC = re.compile(r"`dvc repro ([^`]+)`")


def _hints(pattern: re.Pattern) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for f in sorted((REPO / "lib" / "memlab").rglob("*.py")):
        for m in pattern.finditer(f.read_text()):
            found.setdefault(m.group(1), []).append(str(f.relative_to(REPO)))
    return found


def test_every_make_target_named_in_lib_exists():
    hints = _hints(MAKE)
    assert {"models", "bench"} <= set(hints)  # the collector sees the hints it must check
    for target, where in hints.items():
        # `make -n` resolves the target without running it; an unknown target fails with "No rule"
        r = subprocess.run(["make", "-n", "-C", str(REPO), target], capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})
        assert "No rule to make target" not in r.stderr, f"`make {target}` named in {where} does not exist"


def test_every_dvc_repro_named_in_lib_exists():
    stages = set(yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"])
    for args, where in _hints(DVC).items():
        names = [a.strip("'\"") for a in args.split() if not a.startswith("-")]
        for name in names:
            pat = re.compile("^" + re.escape(name).replace(r"\*", ".*") + "$")
            assert any(pat.match(s) for s in stages), f"`dvc repro {args}` named in {where}: no stage {name}"


@pytest.mark.parametrize("target", ["report", "lab"])
def test_report_and_lab_never_reinstall_the_venv_after_a_pull(target):
    """A pull that touches pyproject.toml / requirements.lock leaves the venv stamp older than them: `make test` and
    `make reproduce` reinstall the pins then, `make report` and `make lab` run offline on the venv there is (issue 50).
    `make -n -W FILE` prints what make would run were FILE newer than everything."""
    if not (REPO / ".venv" / ".installed").exists():
        pytest.fail("no .venv/.installed: run `make test` (it builds the venv) before this test")
    for changed in ("pyproject.toml", "requirements.lock"):
        dry = subprocess.run(["make", "-n", "-C", str(REPO), "-W", changed, target], capture_output=True, text=True)
        assert dry.returncode == 0, dry.stderr
        assert "pip install" not in dry.stdout and "uv pip" not in dry.stdout, dry.stdout
        control = subprocess.run(["make", "-n", "-C", str(REPO), "-W", changed, "test"], capture_output=True,
                                 text=True)
        assert "uv pip" in control.stdout or "pip install" in control.stdout, control.stdout   # the rule can fail
