"""Every experiment composes; bad names fail with one line; dvc.yaml is generated from conf/."""

import subprocess
import sys
from pathlib import Path

import pytest

from memlab.config import compose, experiment_names, repo_root
from memlab.errors import ConfigError
from memlab.pipeline import stage_wanted
from memlab.runner.keys import run_key

EXPERIMENTS = experiment_names()
STAGED = [e for e in EXPERIMENTS if stage_wanted(e)]   # every experiment but the audit (requires.stage: false)


def test_there_are_experiments():
    assert "memorization_curve" in EXPERIMENTS


@pytest.mark.parametrize("name", EXPERIMENTS)
@pytest.mark.parametrize("profile", ["embedded", "full", "smoke"])
def test_every_experiment_composes(name, profile):
    cfg = compose(name, [f"profile={profile}"])
    assert cfg.experiment_name == name
    assert (repo_root() / "notebooks" / cfg.notebook).exists()
    assert cfg.paths.root == str(repo_root())
    assert "params" in cfg


def test_unknown_experiment_is_one_line():
    with pytest.raises(ConfigError) as err:
        compose("no_such_experiment")
    assert "\n" not in str(err.value) and "known:" in str(err.value)


def test_logger_and_cache_can_be_null():
    cfg = compose("memorization_curve", ["logger=null", "cache=null"])
    assert cfg.get("logger") is None and cfg.get("cache") is None


def test_run_key_contains_every_override():
    assert run_key([]) == "default"
    assert run_key(["params.n=5", "model=smollm2-135m-instruct", "experiment=x", "logger=null"]) == \
        "model=smollm2-135m-instruct,n=5"
    assert run_key(["paths.results=/a/b", "cache=null"]) == "default"
    assert "/" not in run_key(["params.dir=/a/b"])
    long_a, long_b = run_key([f"params.x={'a' * 200}1"]), run_key([f"params.x={'a' * 200}2"])
    assert long_a != long_b and len(long_a) <= 160


def _cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "memlab.run", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=repo_root())


@pytest.mark.parametrize("args,needle", [
    (["experiment=nope"], "unknown experiment 'nope'"),
    (["experiment=memorization_curve", "model=nope"], "unknown model 'nope'"),
    ([], "no experiment given"),
])
def test_cli_bad_names_one_line(args, needle):
    r = _cli(*args)
    assert r.returncode == 2
    assert needle in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_cli_malformed_override_one_line():
    r = _cli("experiment=memorization_curve", "seed=[unclosed")
    assert r.returncode != 0
    assert "Traceback" not in r.stderr


def test_dvc_yaml_is_generated_from_conf():
    r = subprocess.run([sys.executable, "-m", "memlab.pipeline", "--check"], capture_output=True, text=True,
                       cwd=repo_root())
    assert r.returncode == 0, r.stderr


def test_dvc_stage_deps_cover_conf_files():
    import yaml

    stages = yaml.safe_load((repo_root() / "dvc.yaml").read_text())["stages"]
    for name in STAGED:
        params = [next(iter(p)) for p in stages[f"exp-{name}"]["params"]]  # conf files are DVC params
        assert f"conf/experiment/{name}.yaml" in params
        assert "conf/config.yaml" in params
        assert any(p.startswith("conf/model/") for p in params)


def test_dvc_analytics_off_in_committed_config():
    text = (repo_root() / ".dvc" / "config").read_text()
    assert "analytics = false" in text


def test_every_stage_says_its_cores_and_after_names_planned_experiments():
    import yaml

    stages = yaml.safe_load((repo_root() / "dvc.yaml").read_text())["stages"]
    for name, st in stages.items():
        assert st["meta"]["cores"] >= 1, name
        for a in st["meta"].get("after", []):
            assert a in stages and a != name and a.startswith("exp-"), (name, a)
    # the PEARL runs that reuse each other's cached responses run in that order; nothing waits on itself
    assert stages["exp-pearl_mia"]["meta"]["after"] == ["exp-pearl_epochs"]
    assert all(stages[f"exp-{e}"]["meta"]["minutes"] > 0 for e in STAGED)  # every experiment says its minutes
    zoo = [n for n in stages if n.startswith("zoo-")]  # and every zoo build, from its family file's `minutes`
    assert zoo and all(stages[n]["meta"]["minutes"] > 0 for n in zoo)
    assert "after" not in stages["exp-recap_feedback"]["meta"]


def test_a_venv_shared_by_two_checkouts_runs_in_the_checkout_of_the_working_folder(tmp_path):
    """Issue 50: the root was the checkout the (editable) package was installed from, so a venv shared by two
    checkouts wrote into the other one's results/. Now the working folder's checkout (or its parent's) wins; a folder
    outside any checkout still gets the package's, and $MEMLAB_ROOT beats both."""
    import os

    other = tmp_path / "other-checkout"
    (other / "notebooks").mkdir(parents=True)
    (other / "conf").symlink_to(repo_root() / "conf")
    plain = tmp_path / "plain"
    plain.mkdir()
    probe = "from memlab.config import CONF_DIR, compose; print(CONF_DIR); print(compose('pearl_epochs').paths.results)"
    env = {k: v for k, v in os.environ.items() if k != "MEMLAB_ROOT"}

    def where(cwd, **extra):
        r = subprocess.run([sys.executable, "-c", probe], cwd=cwd, env={**env, **extra}, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    assert where(other) == [str(other / "conf"), str(other / "results")]
    assert where(other / "notebooks") == [str(other / "conf"), str(other / "results")]
    package_checkout = Path(__file__).resolve().parents[2]
    assert where(plain) == [str(package_checkout / "conf"), str(package_checkout / "results")]
    assert where(other, MEMLAB_ROOT=str(plain))[1] == str(plain / "results")
