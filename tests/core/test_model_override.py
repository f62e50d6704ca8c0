"""One meaning for ``model`` (memlab.model_use): every experiment, composed with a second model on the command line,
either tests that model (``tested_models`` names it, and the study receives its node) or refuses it in one line
naming the experiments that do — never runs its own models as if nothing were asked. Claims follow what ran."""

import subprocess
import sys

import pandas as pd
import pytest
from omegaconf import OmegaConf

from memlab.config import compose, experiment_names
from memlab.errors import ConfigError
from memlab import model_use as mu
from memlab.runner.keys import run_key


def _tested(experiment, overrides):
    cfg = compose(experiment, overrides)
    mu.check_model_override(cfg, overrides)  # what the runner does before execute
    return mu.tested_models(OmegaConf.to_container(cfg, resolve=True))


def _second_models(tmp_path):
    gguf = tmp_path / "Other-Model.Q4_K_M.gguf"
    return {"preset": (["model=gemma-3-270m"], "gemma-3-270m", "models/gemma-3-270m"),
            "gguf": ([f"model.path={gguf}"], "Other-Model.Q4_K_M", str(gguf)),
            "served": (["model=vllm", "model.model_id=org/served-7b"], "served-7b", "org/served-7b")}


@pytest.mark.parametrize("kind", ["preset", "gguf", "served"])
def test_every_experiment_tests_the_chosen_model_or_refuses_it(kind, tmp_path):
    overrides, name, where = _second_models(tmp_path)[kind]
    ran, refused = [], []
    for experiment in experiment_names():
        try:
            tested = _tested(experiment, overrides)
        except ConfigError as err:
            msg = str(err)
            assert "\n" not in msg and experiment in msg and "refusing" in msg
            assert msg.endswith("the experiments that test a given model: " + ", ".join(mu.testing_experiments()))
            refused.append(experiment)
            continue
        chosen = [m for m in tested if not m.startswith("tiny-neox/")]  # beside it: the zoo ground truth, if any
        assert chosen == [name], (experiment, tested)  # only the chosen model, not the defaults
        assert tested[name].endswith(where)
        ran.append(experiment)
    assert ran == mu.testing_experiments() and "pearl_wild" in ran
    assert {"pearl_mia", "pearl_epochs", "pearl_sizes", "pearl_calibration", "memorization_curve", "trace_stages",
            "trace_validation"} <= set(refused)


def test_the_default_run_tests_todays_models_in_todays_order():
    assert list(_tested("pearl_wild", [])) == ["smollm2-135m-instruct", "gemma-3-270m"]
    assert list(_tested("trace_capability_propensity", [])) == ["smollm2-135m-instruct", "gemma-3-270m",
                                                                 "tiny-neox/kjv"]


def test_the_zoo_control_beside_a_tested_model_keeps_the_experiments_own_settings():
    ov = ["model=gemma-3-270m", "model.threads=2"]
    cfg = compose("trace_capability_propensity", ov)
    mu.check_model_override(cfg, ov)
    assert (cfg.model.name, cfg.model.threads, cfg.model.kv_cache) == ("tiny-neox", 2, "grouped")
    assert [(m.name, m.threads) for m in cfg.models] == [("gemma-3-270m", 2)]


def test_a_gguf_path_keeps_the_experiments_runtime_settings_and_is_named_after_the_file(tmp_path):
    cfg = compose("pearl_wild", [f"model.path={tmp_path / 'x.Q4_1.gguf'}"])
    mu.check_model_override(cfg, [f"model.path={tmp_path / 'x.Q4_1.gguf'}"])
    (node,) = mu.target_nodes(cfg)
    preset = mu.target_nodes(compose("pearl_wild", []))[0]  # the experiment's `model` preset: SmolLM2's settings
    assert node["name"] == "x.Q4_1" and node["path"].endswith("x.Q4_1.gguf")
    assert {k: node[k] for k in ("batch_size", "dtype", "threads")} == {k: preset[k] for k in ("batch_size", "dtype",
                                                                                               "threads")}
    # run.json's threads / dtypes are those of the model that runs, not of the experiment's defaults
    from memlab.model_use import required_model_setting

    assert required_model_setting(OmegaConf.to_container(cfg, resolve=True), "dtype", "float32") == {
        "x.Q4_1": preset["dtype"]}


def test_several_models_are_a_list_of_the_same_entries(tmp_path):
    ov = [f"models=[gemma-3-270m,{{path: {tmp_path / 'mine'}}},{{preset: vllm, model_id: a/b}}]"]
    gemma = _tested("pearl_wild", ["model=gemma-3-270m"])["gemma-3-270m"]
    assert _tested("pearl_wild", ov) == {"gemma-3-270m": gemma, "mine": str(tmp_path / "mine"), "b": "a/b"}


def test_one_and_several_at_once_and_twice_the_same_name_are_refused():
    with pytest.raises(ConfigError, match="not both"):
        _tested("pearl_wild", ["model=gemma-3-270m", "models=[smollm2-135m-instruct]"])
    with pytest.raises(ConfigError, match="distinct names"):
        _tested("pearl_wild", ["models=[gemma-3-270m,gemma-3-270m]"])


def test_runtime_keys_are_not_a_choice_of_model_and_pass_for_the_zoo():
    tested = _tested("pearl_mia", ["model.threads=2", "model.batch_size=8"])
    assert set(tested) == {"tiny-neox/pearl", "tiny-neox/pearl_base"}


def test_the_runner_refuses_a_zoo_experiments_model_override_in_one_line(repo_root, tmp_path):
    run = subprocess.run([sys.executable, "-m", "memlab.run", "experiment=pearl_mia",
                          f"model.path={tmp_path / 'm.gguf'}", "logger=null"],
                         cwd=repo_root, capture_output=True, text=True, timeout=300)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert lines[0].startswith("memlab: error: experiment pearl_mia measures the tiny ground-truth zoo")
    assert "pearl_wild" in lines[0]


def test_the_run_key_names_the_model_and_the_tasks_that_ran():
    key = run_key(["experiment=pearl_wild", "model.path=/data/gguf/My-Model.Q4_K_M.gguf", "params.tasks=[completion]"])
    assert "My-Model.Q4_K_M.gguf" in key and "tasks=[completion]" in key
    # neither the user's directories nor a server's address reach the folder name; two folders stay apart
    assert "data" not in key and "gguf/" not in key
    other = run_key(["experiment=pearl_wild", "model.path=/other/My-Model.Q4_K_M.gguf", "params.tasks=[completion]"])
    assert other != key
    served = run_key(["model=llama-cpp", "model.base_url=http://10.1.2.3:8080/v1"])
    assert "10.1.2.3" not in served and served.startswith("model.base_url=v1-")


# -- claims follow what ran ------------------------------------------------------------------------------------


def _scores(tasks):
    return pd.DataFrame([{"model": "m", "source": "kjv", "doc_id": f"d{i}", "task_kind": t, "sensitivity": 0.5}
                         for t in tasks for i in range(12)])


def test_a_task_that_did_not_run_is_empty_not_zero():
    from memlab.methods.pearl.study import completion_vs_summarization

    only = completion_vs_summarization(_scores(["completion"]), 0.14, "sensitivity")
    assert only.completion.tolist() == [12] and only.summarization.isna().all() and only.both.isna().all()
    both = completion_vs_summarization(_scores(["completion", "summarization"]), 0.14, "sensitivity")
    assert both[["completion", "summarization", "both", "n"]].values.tolist() == [[12, 12, 12, 12]]


def test_the_summarization_claim_is_not_judged_when_summarization_did_not_run():
    from memlab.comparison import RULES, load_claims, rules_for
    NOT_TESTABLE = "not testable here"
    from memlab.methods.pearl.study import completion_vs_summarization
    from memlab.results import StudyResult

    rules_for("pearl_epochs")
    claim = next(c for c in load_claims() if c.id == "pearl_wild_task_dependence")
    for tasks, ran in ((["completion"], False), (["completion", "summarization"], True)):
        table = completion_vs_summarization(_scores(tasks), 0.14, "sensitivity")
        f = RULES[claim.id](StudyResult(tables={"completion_vs_summarization": table}, metrics={}), claim)
        assert ran or f.verdict == NOT_TESTABLE, (tasks, f)
        assert ("did not run" in f.reason) != ran, (tasks, f)  # judged on what ran, never on a task's absent flags
    assert "summarization did not run" in RULES[claim.id](
        StudyResult(tables={"completion_vs_summarization": completion_vs_summarization(_scores(["completion"]), 0.1, "sensitivity")},
                    metrics={}), claim).reason


def test_prompt_style_follows_what_the_model_speaks():
    from types import SimpleNamespace as NS

    from memlab.methods.pearl.study import prompt_style

    assert prompt_style(NS(has_chat_template=True, chat_only=False)) == "chat"
    assert prompt_style(NS(has_chat_template=False, chat_only=True)) == "chat"      # a chat-only endpoint
    assert prompt_style(NS(has_chat_template=False, chat_only=False)) == "raw"      # /v1/completions, base model,
    #                                                                                 or an hf model without a template


def test_run_json_names_the_models_that_ran_by_content_hash(tmp_path, repo_root):
    from memlab.provenance import model_hashes

    gguf = tmp_path / "Mine.Q4_1.gguf"
    gguf.write_bytes(b"GGUF not a real model, hashed all the same")

    def hashes(experiment, overrides):
        cfg = compose(experiment, overrides)
        mu.check_model_override(cfg, overrides)
        return model_hashes(OmegaConf.to_container(cfg, resolve=True), str(repo_root))

    mine = hashes("trace_capability_propensity", [f"model.path={gguf}"])
    assert set(mine) == {"Mine.Q4_1", "models/tiny-neox/kjv"}   # not the experiment's default pretrained models
    assert mine["Mine.Q4_1"].startswith("sha256:") and len(mine["Mine.Q4_1"]) == len("sha256:") + 12
    served = hashes("audit", ["model=vllm", "model.model_id=org/served-7b"])
    assert served == {"served-7b": "served org/served-7b at " + compose("audit", ["model=vllm"]).model.base_url}
    default = hashes("pearl_wild", [])
    assert set(default) == {"smollm2-135m-instruct", "gemma-3-270m"}   # pipeline models: their dvc.lock hash
    assert all(v.endswith(".dir") for v in default.values()), default


@pytest.mark.parametrize("preset", ["llama-cpp", "vllm"])
def test_a_served_model_over_an_hf_experiment_carries_none_of_the_hf_keys(preset):
    from memlab.backends.openai_config import openai_config

    overrides = [f"model={preset}", "model.base_url=http://127.0.0.1:9/v1"]
    cfg = compose("audit", overrides)
    mu.check_model_override(cfg, overrides)
    assert cfg.model.backend == "hf"            # the experiment's own node stays (its zoo control)
    (node,) = mu.target_nodes(cfg)
    assert "batch_size" not in node and node["backend"] == "openai"
    assert openai_config(node).base_url == "http://127.0.0.1:9/v1"   # the typed build refuses any stray key


@pytest.mark.parametrize("choice", ["gguf", "served"])
@pytest.mark.parametrize("extra", [[], ["profile=smoke"], ["numerics=native", "++model.threads=2", "++model.batch_size=3"]])
@pytest.mark.parametrize("experiment", mu.testing_experiments())
def test_the_experiments_own_model_node_comes_back_without_composing_again(experiment, extra, choice, tmp_path,
                                                                          monkeypatch):
    """Issue 48: a model choice (model.path=…, model=<served preset>) leaves ``model`` the experiment's own node,
    with the command line's runtime keys, exactly as composing the experiment without the choice gives it; read
    from conf/'s files (memlab.model_use.experiment_model_choice), so the run point is composed once."""
    import memlab.config

    chosen = {"gguf": [f"model.path={tmp_path / 'Mine.Q4_1.gguf'}"],
              "served": ["model=llama-cpp", "model.base_url=http://127.0.0.1:9/v1"]}[choice]
    overrides = [*chosen, *extra]
    cfg = compose(experiment, overrides)
    expected = OmegaConf.to_container(compose(experiment, extra), resolve=True)["model"]
    composed = []
    real = memlab.config.hydra_composition
    monkeypatch.setattr(memlab.config, "hydra_composition", lambda *a, **k: composed.append(a) or real(*a, **k))
    mu.check_model_override(cfg, overrides)
    assert composed == []
    assert OmegaConf.to_container(cfg, resolve=True)["model"] == expected
    assert mu.target_nodes(cfg)[0]["name"] in ("Mine.Q4_1", "llama-cpp")
