"""RECAP's LLM agents through a real OpenAI-compatible server (issue 29 item 3): the verifier, jailbreaker, feedback
agent and contamination judge talk to SmolLM2-135M-Instruct served by llama-cpp-python on 127.0.0.1, while the
target is the test zoo's tiny KJV model; the run goes through the runner (console progress) end to end, and every
agent answer is either parsed or counted as a fallback — none is silently dropped."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from omegaconf import OmegaConf

from memlab.config import compose
from memlab.runner.execute import execute
from tests.backends.llama_server import llama_server, smollm_gguf
from tests.backends.openai_presets import served_node
from tests.notebooks.test_notebooks import FAMILIES, RECAP_TEST

AGENT_ROLES = ("verifier", "jailbreaker", "feedback", "contamination_judge")


@pytest.fixture(scope="module")
def zoo(tmp_path_factory, zoo_builder):
    root = tmp_path_factory.mktemp("agents-zoo")
    for spec in FAMILIES:
        if spec["name"] == "kjv":
            zoo_builder(root, spec)
    return root


def test_llm_agents_run_end_to_end_through_a_llama_cpp_server(zoo, tmp_path, capfd):
    gguf = smollm_gguf(tmp_path / "gguf")
    with llama_server(gguf, tmp_path) as url:
        cfg = compose("recap_table3", [f"paths.zoo={zoo / 'conf'}", f"paths.models={zoo / 'models'}",
                                       f"paths.results={tmp_path / 'results'}", f"paths.cache={tmp_path / 'cache'}",
                                       "logger=null", "cache=null", *RECAP_TEST,
                                       "~method.targets.tiny-neox-kjv-aligned",
                                       # short agent answers: the test is the path, not their quality
                                       "method.agents.max_new_tokens.jailbreak=48",
                                       "method.agents.max_new_tokens.feedback=48",
                                       # one book of each kind is the path: one release note (of 2), ~9 s of agents
                                       "method.echotrace.non_training.n_docs=1"])
        OmegaConf.update(cfg, "method.agents.llm", served_node(
            name="smollm2-agents", base_url=url, model_id="smollm2", chat=True, concurrency=1, max_retries=0,
            timeout=120), merge=False)
        run = execute(cfg, "llm-agents")
    metrics = json.loads((run / "metrics.json").read_text())
    assert str(metrics["agents"]).startswith("llm")
    stages = pd.read_csv(run / "tables" / "cost_by_stage.csv").set_index("stage")
    ok = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines() if x.strip()]
    ok = [e for e in ok if e.get("status") == "ok"]
    # the served model really answered: one verifier call per DSP output, feedback reports with completion tokens
    assert stages.loc["verifier_dsp", "calls"] == len(ok) > 0
    assert stages.loc["feedback", "calls"] > 0 and stages.loc["feedback", "tokens_out"] > 0
    # the verifier also judges each prefix-probing output (uncharged: stage None in the pipeline)
    verifier_calls = stages.loc[["verifier_dsp", "verifier_jb", "verifier_fb"], "calls"].sum() + len(ok)
    fell = {r: metrics[f"agent_fallbacks/{r}"] for r in AGENT_ROLES if f"agent_fallbacks/{r}" in metrics}
    assert {"verifier", "feedback", "contamination_judge"} <= set(fell), sorted(metrics)
    assert fell["verifier"] <= verifier_calls
    # the judge's answers: parsed (True/False) or None, and every None is a counted fallback
    judged = [e["hint_audit"]["metadata_judge"] for e in ok]
    assert all(j in (True, False, None) for j in judged)
    assert sum(j is None for j in judged) <= fell["contamination_judge"]
    said = capfd.readouterr()
    console = said.out + said.err
    assert "recap_table3" in console and "elapsed" in console  # the runner's progress lines
    fallback_lines = [ln for ln in console.splitlines() if ln.startswith("memlab: warning: RECAP")]
    assert len(fallback_lines) == sum(1 for n in fell.values() if n)  # one line per agent that fell back
