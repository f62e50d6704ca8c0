"""Every command of the README's quick start, checked as far as a test can run it.

Cheap commands run for real: `--help`, and each `python -m memlab.run …` command with `--cfg job` appended (Hydra
composes the config, validates nothing beyond composition, and runs no notebook); a `-m` sweep is run as one
`--cfg job` per value. The `make` commands (`make test`, `make reproduce`, `make report`, `make lab`) take minutes
to an hour, so they are checked with `make -n`: the recipe is the documented one. The JupyterLab server itself is
started in tests/core/test_lab_clean.py.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest
import yaml

from memlab.config import experiment_names

# what each `make` command of the quick start must run (its recipe, by `make -n`)
MAKE_RECIPES = {
    "make test": ["-m pytest"],
    "make test-vendors": ["-m vendors", "tests/core/test_numerics_vendors.py"],
    "make reproduce": ["-m memlab.reproduce", "-m memlab.site"],
    "make report": ["-m memlab.site"],
    "make lab": ["jupyter lab --config=lab/jupyter_server_config.py"],
}


def _quickstart(repo_root) -> str:
    text = (repo_root / "README.md").read_text()
    return text[text.index("## Quick start"):text.index("\n## ", text.index("## Quick start") + 1)]


def _commands(repo_root) -> list[str]:
    """The commands of the quick start: lines of its code block (comments dropped) and inline `make …` or
    `.venv/bin/python …` code spans."""
    section = _quickstart(repo_root)
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    cmds = [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]
    spans = re.findall(r"`((?:make|\.venv/bin/python) [^`]+)`", section.replace("\n  ", " "))
    return list(dict.fromkeys(cmds + spans))


def _run(repo_root, argv: list[str], timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(repo_root / "lib")}
    return subprocess.run(argv, cwd=repo_root, env=env, capture_output=True, text=True, timeout=timeout)


def _memlab_run(repo_root, cmd: str, extra: list[str]) -> subprocess.CompletedProcess:
    args = shlex.split(cmd)
    assert args[:3] == [".venv/bin/python", "-m", "memlab.run"], cmd
    return _run(repo_root, [sys.executable, "-m", "memlab.run", *args[3:], *extra])


def test_quickstart_has_the_two_commands_and_each_command_is_checked_below(repo_root):
    cmds = _commands(repo_root)
    assert cmds[:2] == ["make test", "make reproduce"]
    assert "results/report/index.html" in _quickstart(repo_root)
    unchecked = [c for c in cmds if c not in MAKE_RECIPES and not c.startswith(".venv/bin/python -m memlab.run")]
    assert not unchecked, f"quick-start commands with no check in this file: {unchecked}"


@pytest.mark.parametrize("cmd", sorted(MAKE_RECIPES))
def test_quickstart_make_command_is_the_documented_recipe_dry_run(repo_root, cmd):
    """`make -n`: the target exists and its recipe runs what the README says (nothing is executed)."""
    if cmd not in _commands(repo_root):
        pytest.fail(f"{cmd!r} is checked here but no longer in the quick start: update MAKE_RECIPES")
    out = _run(repo_root, ["make", "-n", "-s", *cmd.split()[1:]])
    assert out.returncode == 0, out.stderr
    recipe = out.stdout.replace("\\\n", " ")
    for part in MAKE_RECIPES[cmd]:
        assert part in recipe, f"{cmd}: {part!r} not in its recipe:\n{recipe[-2000:]}"


def test_quickstart_memlab_run_commands_compose_with_cfg_job(repo_root):
    """Each `python -m memlab.run …` command, with `--cfg job`: exit 0, and every override it passes is in the
    composed config (a `-m` sweep: one composition per value, each with its own run folder)."""
    from memlab.runner.keys import run_key

    runs = [c for c in _commands(repo_root) if c.startswith(".venv/bin/python -m memlab.run") and "--help" not in c]
    assert runs
    for cmd in runs:
        args = shlex.split(cmd)[3:]
        sweep = "-m" in args
        overrides = [a for a in args if a != "-m"]
        choices = [o for o in overrides if "," in o.split("=", 1)[1] and not o.split("=", 1)[1].startswith("[")]
        assert sweep == bool(choices), f"{cmd}: a -m sweep lists values a,b,…; a single run does not"
        key, values = choices[0].split("=", 1) if sweep else ("", "")
        jobs = [[o if o not in choices else f"{key}={v}" for o in overrides] for v in values.split(",")] if sweep \
            else [overrides]
        for job in jobs:
            out = _memlab_run(repo_root, ".venv/bin/python -m memlab.run " + shlex.join(job), ["--cfg", "job"])
            assert out.returncode == 0, f"{cmd}: {out.stderr[-2000:]}"
            cfg = yaml.safe_load(out.stdout)
            for o in job:
                k, v = o.split("=", 1)
                node = cfg
                for part in (k if k != "experiment" else "experiment_name").split("."):
                    node = node[part]
                assert node == yaml.safe_load(v), f"{cmd}: {k} is {node!r} in the composed config, not {v}"
        assert len({run_key([o for o in j if not o.startswith("experiment=")]) for j in jobs}) == len(jobs)


def test_quickstart_help_lists_experiments_and_groups(repo_root):
    cmd = next(c for c in _commands(repo_root) if c.endswith("--help"))
    out = _memlab_run(repo_root, cmd, [])
    assert out.returncode == 0, out.stderr
    line = next(l for l in out.stdout.splitlines() if l.startswith("experiment: "))
    assert set(experiment_names()) == set(line.removeprefix("experiment: ").split(", ")) and "model:" in out.stdout
