"""RECAP test helpers: settings and agents come from conf/method/recap.yaml (no values repeated in tests).

``recap.method("method.x=1", ...)`` is the typed method config with Hydra-style overrides;
``recap.summary(target_words=40)`` (likewise ``verifier``, ``jailbreaker``, ``feedback``) is the agent
``study.build_agents`` builds from the YAML, with the given fields replaced (e.g. ``llm=``).
"""

import dataclasses
from types import SimpleNamespace

import pytest

from memlab.methods.recap.study import build_agents
from memlab.schema import method_config


@pytest.fixture(scope="session")
def recap():
    base = method_config("recap")

    def method(*overrides):
        return method_config("recap", list(overrides)) if overrides else base

    def agent(which):
        def make(**fields):
            summary, agents = build_agents(base)
            a = summary if which == "summary" else getattr(agents, which)
            return dataclasses.replace(a, **fields)
        return make

    return SimpleNamespace(method=method, summary=agent("summary"), verifier=agent("verifier"),
                           jailbreaker=agent("jailbreaker"), feedback=agent("feedback"))
