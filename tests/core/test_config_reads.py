"""A run reads its config once (issue 30). The walk ``python -m memlab.run experiment=pearl_epochs`` → results/ runs
for real in a child process (on a tiny zoo of its own), with tests/core/readlog.py logging every config read of
the runner and of the notebook kernel papermill starts: Hydra composes, plain loads of conf/ files, typed builds.

Measured on this walk (with method/params/paths overrides) before this test: the runner composed 4 times (the
override check, @hydra.main's two, and again for the experiment's defaults), the kernel none; method and params
were built 7 times (runner 2, kernel 5: the rules rebuilt the method 3 times); conf/ files were loaded 29 times
(paper claims 15, zoo families 9, numerics 5). Then: 3 composes (2 of them Hydra's own inside @hydra.main: its
mode probe and the run), none in the kernel; method and params built once per process (4); 9 conf/ file loads
(runner 3, kernel 6), none twice in a process. The walk now picks its sizes with profile=smoke, a group choice: the
override check composes that choice, so the experiment's defaults (the embedded profile, which the run's params are
checked against) are composed once more — 4 composes; loads and builds as before. With no override but the
experiment the runner composes only inside @hydra.main (2; before: 3), see
:func:`test_a_run_with_no_override_composes_no_defaults`. Issue 48 (the run plan): 3 composes — Hydra's two and
the override check's one composition of the point, whose params are the defaults the run's are checked against.
"""

import collections
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import readlog  # noqa: E402

KJV = {"corpus": "kjv", "options": {"unit": "chapter"}}
TINY = {"hidden": 32, "layers": 1, "heads": 2, "ffn": 64}
TRAIN = {"seq_len": 64, "batch_size": 8, "lr": 1e-2, "warmup_steps": 2, "seed": 0}
PSALMS_IN = ["kjv/chapter/Psalms/23", "kjv/chapter/Psalms/24", "kjv/chapter/Psalms/121"]
PSALMS_OUT = ["kjv/chapter/Psalms/1", "kjv/chapter/Psalms/3", "kjv/chapter/Psalms/4"]
FAMILIES = [
    {"name": "pearl_base", "description": "test family pearl_base", "members": [{**KJV, "ids": PSALMS_IN}],
     "nonmembers": [{**KJV, "ids": PSALMS_OUT}], "train": {**TRAIN, "epochs": 1}, "init_from": None,
     "tokenizer": {"vocab_size": 384, "train_on": "members"}, "sizes": {"m": TINY}},
    {"name": "pearl", "description": "test family pearl", "members": [{**KJV, "ids": PSALMS_IN}],
     "nonmembers": [{**KJV, "ids": PSALMS_OUT}], "train": {**TRAIN, "epochs": 2},
     "init_from": {"family": "pearl_base", "epoch": "final"}},
]
# the small sizes: profile=smoke (conf/scale/method/pearl_smoke.yaml, conf/scale/pearl_epochs_smoke.yaml)
TINY_RUN = ["profile=smoke"]
METHOD_PARAMS = ("memlab.methods.pearl.engine.PearlConfig (method)", "memlab.methods.pearl.study.EpochsParams (params)")


@pytest.fixture(scope="module")
def walk(tmp_path_factory, zoo_builder, repo_root):
    """The read log of one real run of pearl_epochs, split into the runner's and the kernel's reads."""
    zoo = tmp_path_factory.mktemp("readzoo")
    for spec in FAMILIES:
        zoo_builder(zoo, spec)
    out = tmp_path_factory.mktemp("readrun")
    log = out / "reads.jsonl"
    lib = repo_root / "lib"
    env = {**os.environ, "MEMLAB_READS_LOG": str(log),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent / "readlog_site"), str(lib),
                                          os.environ.get("PYTHONPATH", "")])}
    # logger stays the default group (a group override would be a different composition), muted: no W&B run
    cmd = [sys.executable, "-m", "memlab.run", "experiment=pearl_epochs", f"paths.zoo={zoo / 'conf'}",
           f"paths.models={zoo / 'models'}", f"paths.results={out / 'results'}", f"paths.cache={out / 'cache'}",
           f"paths.wandb={out / 'wandb'}", "logger.mode=disabled", *TINY_RUN]
    done = subprocess.run(cmd, env=env, cwd=repo_root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "results" / "pearl_epochs").is_dir()
    reads = readlog.read_log(log)
    pids = list(dict.fromkeys(r["pid"] for r in reads))
    assert len(pids) == 2, pids   # the runner, then the notebook's kernel
    runner, kernel = ([r for r in reads if r["pid"] == p] for p in pids)
    assert any("execute.py" in r["where"] for r in runner) and any("report.py" in r["where"] for r in kernel)
    return runner, kernel


def _kinds(reads, kind):
    return [r for r in reads if r["kind"] == kind]


def test_one_composition_per_run_point_beside_hydra_mains_two_and_the_kernel_never(walk):
    runner, kernel = walk
    composes = _kinds(runner, "compose")
    frames = [r["where"].split(" < ") for r in composes]
    # @hydra.main composes twice inside Hydra (Hydra's mode probe, then the run); beside them the point is composed
    # once: by the override check (memlab.runner.known_keys, the experiment with profile=smoke and no key override), whose
    # composition is also the defaults the run's params are checked against (memlab.runner.plan.experiment_defaults; before
    # issue 48 those were composed once more, without profile=smoke: 4 in all), through memlab.config's one call of
    # Hydra's compose. The run plan is resolved from Hydra's composition, and run.json, W&B and the kernel read it:
    # nothing composes again
    assert sorted(f[1].split(":")[0] for f in frames) == ["config.py", "hydra.py", "hydra.py"], composes
    assert [f[3].split(":")[0] for f in frames if f[1].startswith("config.py")] == ["runner/known_keys.py"], composes
    assert _kinds(kernel, "compose") == []   # the kernel gets the resolved config from the runner


def test_method_and_params_are_built_once_per_process(walk):
    for reads in walk:
        built = collections.Counter(r["what"] for r in _kinds(reads, "typed"))
        assert [built[k] for k in METHOD_PARAMS] == [1, 1], built


def test_no_conf_file_is_loaded_twice_in_a_process(walk):
    for reads in walk:
        loads = collections.Counter(r["what"] for r in reads if r["kind"] != "compose" and r["kind"] != "typed")
        assert loads and max(loads.values()) == 1, loads
    runner, kernel = walk
    kernel_files = {r["what"] for r in kernel if r["kind"] == "open"}
    assert {"conf/paper/003_pearl.yaml", "conf/pearl.yaml", "conf/pearl_base.yaml"} <= kernel_files, kernel_files


def test_a_run_with_no_override_composes_no_defaults(monkeypatch):
    """``python -m memlab.run experiment=<name>`` (group choices only): the run's params are the point's defaults,
    so no compose; with a key override, the override check's composition of the point is reused."""
    from omegaconf import OmegaConf

    from memlab.runner import plan

    def no_compose(*a, **k):
        raise AssertionError("composed again")

    monkeypatch.setattr(plan, "compose", no_compose)
    monkeypatch.setattr("memlab.runner.known_keys.COMPOSED", {})
    resolved = {"params": {"alphas": [0.2, 0.4]}}
    for overrides in (["experiment=pearl_epochs"], ["experiment=pearl_epochs", "profile=smoke", "hydra/launcher=ray"]):
        assert plan.experiment_defaults("pearl_epochs", resolved, overrides) is resolved["params"]
    with pytest.raises(AssertionError, match="composed again"):   # no composition of the point at hand: composed
        plan.experiment_defaults("pearl_epochs", resolved, ["experiment=pearl_epochs", "params.alphas=[0.3]"])
    point = OmegaConf.create({"params": {"alphas": [0.1]}})
    monkeypatch.setattr("memlab.runner.known_keys.COMPOSED", {("experiment=pearl_epochs", "profile=smoke"): point})
    overrides = ["experiment=pearl_epochs", "profile=smoke", "params.alphas=[0.3]"]
    assert plan.experiment_defaults("pearl_epochs", resolved, overrides) == {"alphas": [0.1]}


def test_one_module_calls_hydras_compose(repo_root):
    """Issue 48: of lib/, only memlab.config (hydra_composition) calls Hydra's compose; every other module composes
    through it."""
    import ast

    users = set()
    for path in sorted((repo_root / "lib" / "memlab").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            imported = (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hydra")
                        and any(a.name == "compose" for a in node.names))
            attribute = (isinstance(node, ast.Attribute) and node.attr == "compose"
                         and isinstance(node.value, ast.Name) and node.value.id == "hydra")
            if imported or attribute:
                users.add(path.relative_to(repo_root).as_posix())
    assert users == {"lib/memlab/config.py"}, users
