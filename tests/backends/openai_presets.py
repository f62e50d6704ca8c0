"""A complete ``backend: openai`` model node (or :class:`OpenAIConfig`) for tests: a real conf/model preset, composed
as the runner composes it, with the keys a test changes replaced, so no test lists every key by hand (issue 30)."""

from __future__ import annotations

import dataclasses
import functools

from memlab.backends.openai_config import OpenAIConfig, openai_config
from tests.backends.hf_presets import preset_node


@functools.lru_cache(maxsize=None)
def _composed(preset: str) -> tuple:
    return tuple(preset_node(preset).items())


def served_node(preset: str = "llama-cpp", **changes) -> dict:
    """conf/model/<preset>.yaml as a plain dict with ``changes`` replacing its keys (a key it lacks is a test bug)."""
    node = dict(_composed(preset))
    unknown = sorted(set(changes) - set(node))
    assert not unknown, f"not keys of conf/model/{preset}.yaml: {unknown}"
    return {**node, **changes}


def openai_preset_config(preset: str = "llama-cpp", **changes) -> OpenAIConfig:
    return dataclasses.replace(openai_config(served_node(preset)), **changes)
