"""DVC stages depend on the config they read, no more and no less (issue 30 item 4).

The staleness test runs real DVC on the real conf/: a temp repo holds a copy of conf/ and a dvc.yaml whose stages
are memlab.pipeline's, reduced to their ``params`` (the config part of each stage; code deps are checked on the
generated stages directly). ``dvc commit`` records the lock; then one edit at a time, ``dvc status`` must name
exactly the stages that read what was edited."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from memlab import pipeline
from memlab.config import experiment_names, repo_root
from memlab.errors import ConfigError

DVC = str(Path(sys.executable).with_name("dvc"))
ENV = {**os.environ, "DVC_NO_ANALYTICS": "1"}
PEARL_PAPER = {"exp-memorization_curve", "exp-pearl_calibration", "exp-pearl_epochs", "exp-pearl_mia",
               "exp-pearl_sizes", "exp-pearl_wild"}
PRETRAINED = {"exp-pearl_wild", "exp-recap_table3", "exp-recap_feedback", "exp-trace_capability_propensity"}


@pytest.fixture(scope="module")
def stages() -> dict:
    return pipeline.stages()


def sh(*cmd, cwd) -> str:
    r = subprocess.run(list(cmd), cwd=cwd, env=ENV, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))}: {r.stdout}{r.stderr}"
    return r.stdout


@pytest.fixture(scope="module")
def conf_repo(stages, tmp_path_factory) -> Path:
    """A git + DVC repo with conf/ and every stage's params, the lock committed as of the unedited conf/."""
    root = tmp_path_factory.mktemp("dvcdeps")
    shutil.copytree(repo_root() / "conf", root / "conf")
    config_only = {n: {"cmd": "true", "params": s["params"]} for n, s in stages.items() if s.get("params")}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": config_only}, sort_keys=False))
    sh("git", "init", "-q", cwd=root)
    sh(DVC, "init", "-q", cwd=root)
    sh(DVC, "commit", "-f", "-q", cwd=root)
    assert stale(root) == set()
    return root


def stale(root: Path) -> set[str]:
    return set(json.loads(sh(DVC, "status", "--json", cwd=root) or "{}"))


def edited(root: Path, rel: str, old: str, new: str, count: int = 1) -> str:
    """Replace ``old`` by ``new`` in conf file ``rel`` (must be there); returns the original text."""
    path = root / rel
    text = path.read_text()
    assert old in text, (rel, old)
    path.write_text(text.replace(old, new, count))
    return text


def stale_after(root: Path, rel: str, old: str, new: str) -> set[str]:
    text = edited(root, rel, old, new)
    try:
        return stale(root)
    finally:
        (root / rel).write_text(text)


def test_a_paper_number_makes_exactly_its_papers_stages_stale(conf_repo):
    assert stale_after(conf_repo, "conf/paper/003_pearl.yaml", "value: 0.20\n", "value: 0.21\n") == PEARL_PAPER
    assert stale_after(conf_repo, "conf/paper/000_recap.yaml", "experiment: recap_table3",
                       "experiment: recap_table3\n    note: edited") == {"exp-recap_table3", "exp-recap_feedback"}


def test_a_pretrained_models_batch_size_makes_exactly_its_users_stale(conf_repo):
    for preset in ("smollm2-135m-instruct", "gemma-3-270m"):
        assert stale_after(conf_repo, f"conf/model/{preset}.yaml", "\nbatch_size: ", "\nbatch_size: 1") == PRETRAINED


def test_the_template_models_batch_size_makes_every_experiment_composing_it_stale(conf_repo, stages):
    # every experiment composes model=tiny-neox (config.yaml's default), and its config.yaml output records it
    expected = {n for n, s in stages.items() if {"conf/model/tiny-neox.yaml": None} in s.get("params", [])}
    assert expected >= {"exp-pearl_epochs", "exp-memorization_curve", "exp-trace_stages"}
    assert stale_after(conf_repo, "conf/model/tiny-neox.yaml", "\nbatch_size: 128", "\nbatch_size: 32") == expected


def test_comments_and_scheduling_hints_make_nothing_stale(conf_repo):
    files = sorted(p for p in (conf_repo / "conf").rglob("*.yaml"))
    originals = {p: p.read_text() for p in files}
    try:
        for p, text in originals.items():  # a new comment line in each file, and an existing comment reworded
            p.write_text(text.replace("# ", "#  ", 1) + "# edited\n")
        edited(conf_repo, "conf/zoo/pearl.yaml", "\nminutes: ", "\nminutes: 1")  # `make reproduce` ordering only
        assert stale(conf_repo) == set()
    finally:
        for p, text in originals.items():
            p.write_text(text)


def test_a_method_setting_makes_exactly_that_methods_stages_stale(conf_repo):
    pearl = {f"exp-{e}" for e in experiment_names() if e.startswith("pearl_")}
    # and the audit's self-check and mia_low_fpr: their PEARL rows run with the pearl method's settings
    assert stale_after(conf_repo, "conf/method/pearl.yaml", "tau_b: 0.2 ", "tau_b: 0.3 ") == pearl | {
        "exp-audit_selfcheck", "exp-mia_low_fpr"}


def test_an_experiment_depends_on_its_own_claim_rules_only(stages):
    rules = {"pearl": "lib/memlab/methods/pearl/claims.py", "recap": "lib/memlab/methods/recap/claims.py",
             "trace": "lib/memlab/methods/trace/claims.py",
             "memorization_curve": "lib/memlab/methods/memorization_claims.py"}
    # the audit's self-check has no claims; of the studies it runs, pearl's imports its claims module (PAPER_TAU_B),
    # trace's no longer does (its bootstrap resamples are config: method.bootstrap.n_resamples, not claims.B)
    studies = [rules["pearl"]]
    assert [f for f in stages["exp-audit_selfcheck"]["deps"] if f.endswith("claims.py")] == studies
    for exp in filter(pipeline.stage_wanted, experiment_names()):
        if exp == "audit_selfcheck":
            continue   # checked above
        own = next((f for prefix, f in rules.items() if exp.startswith(prefix)), None)   # None: no claims (mia_low_fpr)
        deps = stages[f"exp-{exp}"]["deps"]
        assert own is None or own in deps, exp
        assert not [f for f in rules.values() if f != own and f in deps], exp


def test_an_experiment_pulled_in_by_another_is_a_param_of_it(stages):
    params = [next(iter(p)) for p in stages["exp-recap_feedback"]["params"]]
    assert "conf/experiment/recap_table3.yaml" in params  # recap_feedback's defaults list names it


def test_config_files_are_params_not_deps(stages):
    for name, st in stages.items():
        assert not [d for d in st["deps"] if d.startswith("conf/")], name


def test_prompt_folders_are_derived_from_the_method_groups(stages):
    """Each stage depends on the prompt folders its method groups name (prompts_dir), no other: the audit on all
    three, trace_validation (prompts_dir: null) on none; a requires.code list is refused."""
    prompts = {name: [d for d in st["deps"] if d.startswith("prompts/")] for name, st in stages.items()
               if name.startswith("exp-")}
    assert prompts["exp-pearl_epochs"] == ["prompts/pearl"] and prompts["exp-recap_feedback"] == ["prompts/recap"]
    assert prompts["exp-trace_stages"] == ["prompts/trace"] and prompts["exp-trace_validation"] == []
    assert prompts["exp-memorization_curve"] == []
    raw = {"method": {"task": {"prompts_dir": "${paths.prompts}/pearl"}},
           "methods": {"recap": {"prompts_dir": "${paths.prompts}/recap"}, "trace": {"prompts_dir": "/mine/trace"}}}
    assert pipeline.prompt_folders(raw) == ["prompts/pearl", "prompts/recap"]   # a user's own folder is no dep
    from memlab.model_use import required_models

    with pytest.raises(ConfigError, match="requires.code is derived from the config"):
        required_models({"experiment_name": "x", "requires": {"code": ["prompts/pearl"]}})


def test_where_runs_are_logged_and_cached_makes_nothing_stale(conf_repo, stages):
    """The result-free groups (logger, cache, paths, hydra: memlab.runner.keys.NON_RESULT_KEYS) are no stage's params:
    a new W&B project or cache file reruns nothing."""
    assert stale_after(conf_repo, "conf/logger/wandb.yaml", "project: memlab", "project: elsewhere") == set()
    assert stale_after(conf_repo, "conf/cache/sqlite.yaml", "responses.sqlite", "other.sqlite") == set()
    read = {f for s in stages.values() for entry in s.get("params", []) for f in entry}
    assert not {f for f in read if f.split("/")[1] in ("logger", "cache", "paths", "hydra")}, read
    # ...while a setting that does change results still does (the check above can fail)
    assert "exp-pearl_mia" in stale_after(conf_repo, "conf/config.yaml", "\nseed: ", "\nseed: 1")


def test_a_module_dropped_into_a_plugin_package_is_code_its_users_depend_on(tmp_path, monkeypatch):
    """The MIA registry imports every module of memlab.metrics.mia_scores at run time (no import names them): a
    score added there is a dependency of every stage that computes MIA scores, as its users' imports are."""
    shutil.copytree(repo_root() / "lib", tmp_path / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    (tmp_path / "lib" / "memlab" / "metrics" / "mia_scores" / "toy_score.py").write_text('"""a toy score"""\n')
    monkeypatch.setattr(pipeline, "repo_root", lambda: tmp_path)
    monkeypatch.setattr(pipeline, "NATIVE_SOURCES", {})   # the C source is named by its path in this checkout
    assert "lib/memlab/metrics/mia_scores/toy_score.py" in pipeline.code_deps(["memlab.methods.pearl.tables"])
    assert "lib/memlab/metrics/mia_scores/toy_score.py" not in pipeline.code_deps(["memlab.metrics.rouge"])
