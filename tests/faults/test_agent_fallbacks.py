"""LLM agents that fall back say so (issue 33): a served model that never answers the JSON the agents expect
(SmolLM2 through a llama-cpp server did this) — each agent's fallbacks are counted for metrics.json
(``agent_fallbacks/<agent>``), one console line per agent says it fell back, and the agents' label in
metrics.json and the claims' settings says ``llm (fell back: …)`` instead of ``llm``. A real HTTP server on 127.0.0.1
answering prose."""

from __future__ import annotations


from memlab.backends.factory import build_backend
from memlab.schema import method_config
from memlab.methods.recap.agents import agent_fallbacks, agents_label
from memlab.methods.recap.study import build_agents
from tests.backends.openai_presets import served_node
from tests.backends.scripted import ScriptedServer, completion

REF = "And it came to pass in the days when the judges ruled, that there was a famine in the land."


def _ProseServer() -> ScriptedServer:  # noqa: N802
    """A chat server that never answers the JSON the agents ask for."""
    return ScriptedServer(lambda body: (200, completion("Sure! Here is what I think about it.", "smol", chat=True)))


def test_fallbacks_are_counted_per_agent_and_said_once_each(capsys):
    server = _ProseServer()
    try:
        llm = build_backend(served_node(name="smol", base_url=server.url, model_id="smol", chat=True,
                                        concurrency=1, max_retries=0, timeout=10))
        _, agents = build_agents(method_config("recap"), llm)
        judge, verifier = agents.judge, agents.verifier
        capsys.readouterr()
        assert judge.judge([REF, REF], ["hint one", "hint two"]) == [None, None]  # fell back: no JSON
        verifier.verify([REF, REF], "Ruth")
        _, rule_based = build_agents(method_config("recap"), None)
        counts = agent_fallbacks(judge, verifier, rule_based.verifier)
        assert counts["agent_fallbacks/contamination_judge"] == 2 and counts["agent_fallbacks/verifier"] >= 1
        assert len(counts) == 2  # an agent without an LLM never falls back and is not listed
        said = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("memlab: warning: RECAP")]
        assert len(said) == 2, said  # one line per agent, however often it fell back
        assert {ln.split()[3] for ln in said} == {"contamination_judge", "verifier"}
    finally:
        server.close()


def test_the_agents_label_of_the_claims_names_the_fallbacks():
    from types import SimpleNamespace

    from memlab.methods.recap.claim_panels import setting_text as _setting

    server = _ProseServer()
    try:
        llm = build_backend(served_node(name="smol", base_url=server.url, model_id="smol", chat=True,
                                        concurrency=1, max_retries=0, timeout=10))
        _, agents = build_agents(method_config("recap"), llm)
        agents.judge.judge([REF, REF, REF], ["one", "two", "three"])  # three fallbacks: no JSON
        counts = agent_fallbacks(agents.judge, agents.verifier)
    finally:
        server.close()
    assert agents_label("llm", counts) == "llm (fell back: contamination_judge 3)"
    llm_run = SimpleNamespace(agents=SimpleNamespace(llm="smol"))   # the run's method config: LLM agents
    res = SimpleNamespace(method=llm_run, metrics=counts)             # and the fallbacks it measured
    assert "; EchoTrace-mini; llm (fell back: contamination_judge 3) agents" in _setting(res, ["t"], "copyrighted", 4)
    # the controls: no fallback keeps "llm"; deterministic agents stay "deterministic"
    quiet = {k: 0 for k in counts}
    assert agents_label("llm", quiet) == "llm"
    assert _setting(SimpleNamespace(method=llm_run, metrics=quiet), ["t"], "copyrighted", 4).endswith("; llm agents")
    deterministic = SimpleNamespace(method=SimpleNamespace(agents=SimpleNamespace(llm=None)), metrics=counts)
    assert _setting(deterministic, ["t"], "copyrighted", 4).endswith("; deterministic agents")
    assert agents_label("deterministic", counts) == "deterministic"
    assert agents_label("llm", {"agent_fallbacks/verifier": 7, "agent_fallbacks/summary": 1,
                                "agent_fallbacks/feedback": 0}) == "llm (fell back: verifier 7, summary 1)"
