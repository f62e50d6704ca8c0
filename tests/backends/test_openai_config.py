"""The OpenAI-compatible backend's settings are one typed config (issue 30): every key comes from conf/model/*.yaml,
none is defaulted in code, and a node missing or adding a key is refused in one line naming it."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest
import yaml

from memlab.backends.openai_compat import OpenAICompatBackend
from memlab.backends.openai_config import OpenAIConfig, openai_config
from memlab.errors import ConfigError
from tests.backends.hf_presets import preset_node
from tests.backends.openai_presets import openai_preset_config, served_node

ROOT = Path(__file__).resolve().parents[2]
SERVED_PRESETS = sorted(p.stem for p in (ROOT / "conf" / "model").glob("*.yaml")
                        if yaml.safe_load(p.read_text()).get("backend") == "openai")
# what the constructor's keyword defaults were before issue 30: every preset now spells them out
FORMER_DEFAULTS = {"backoff_base": 1.0, "backoff_max": 60.0, "max_tokens_param": "max_tokens", "revision": None,
                   "score_top_k": 5, "vocab_stats": "none"}


def test_no_field_has_a_default():
    for f in dataclasses.fields(OpenAIConfig):
        assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, f.name


def test_there_are_served_presets():
    assert {"llama-cpp", "vllm", "gpt-4.1", "claude", "gemini", "deepseek"} <= set(SERVED_PRESETS)


@pytest.mark.parametrize("preset", SERVED_PRESETS)
def test_every_served_preset_builds_the_config(preset):
    node = preset_node(preset)
    assert set(node) == {f.name for f in dataclasses.fields(OpenAIConfig)}, preset
    cfg = openai_config(node)
    assert cfg.backend == "openai" and cfg.base_url and cfg.model_id
    for key, value in FORMER_DEFAULTS.items():  # behaviour unchanged: the value the code used to default to
        assert getattr(cfg, key) == value, (preset, key)


@pytest.mark.parametrize("key", ["backoff_base", "max_tokens_param", "vocab_stats", "revision", "concurrency"])
def test_a_missing_key_is_one_line_naming_it(key):
    node = {k: v for k, v in served_node().items() if k != key}
    with pytest.raises(ConfigError, match=f"model.{key}: missing") as err:
        openai_config(node)
    assert "\n" not in str(err.value)


def test_a_missing_score_bos_says_what_it_means():
    node = {k: v for k, v in served_node().items() if k != "score_bos"}
    with pytest.raises(ConfigError, match="model.score_bos is not set") as err:
        openai_config(node)
    assert "\n" not in str(err.value)


def test_an_unknown_key_is_one_line_naming_it():
    with pytest.raises(ConfigError, match="model.backof_base: unknown option") as err:
        openai_config({**served_node(), "backof_base": 2.0})
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("change, match", [
    ({"base_url": ""}, "model.base_url is required"),
    ({"model_id": ""}, "model.model_id is required"),
    ({"concurrency": 0}, "model.concurrency must be >= 1"),
    ({"max_retries": -1}, "model.max_retries >= 0"),
    ({"max_tokens_param": "max_new_tokens"}, "model.max_tokens_param must be max_tokens or max_completion_tokens"),
    ({"can_score": "logits"}, "model.can_score must be one of echo_logprobs, prompt_logprobs or false"),
    ({"vocab_stats": "exact"}, "model.vocab_stats must be one of none, top_k_renormalized"),
    ({"vocab_stats": "top_k_renormalized", "score_top_k": 0}, "model.score_top_k must be >= 0"),
    ({"timeout": 0}, "model.timeout=0"),
    ({"concurrency": "4"}, "model.concurrency='4': must be an integer"),
    ({"backend": "hf"}, "model.backend='hf': must be one of openai"),
])
def test_a_bad_value_is_one_line(change, match):
    with pytest.raises(ConfigError, match=match) as err:
        openai_config(served_node(**change))
    assert "\n" not in str(err.value)


def test_the_constructor_takes_the_typed_config_only():
    params = list(inspect.signature(OpenAICompatBackend.__init__).parameters.values())
    assert [p.name for p in params] == ["self", "cfg"]
    assert all(p.default is inspect.Parameter.empty for p in params)


def test_the_backend_reads_the_typed_config():
    cfg = openai_preset_config("vllm", name=None, concurrency=3, vocab_stats="top_k_renormalized", score_top_k=7)
    api = OpenAICompatBackend(cfg)
    try:
        assert api.model_id == api.model_name == api.revision == cfg.model_id  # name, revision null: model_id
        assert (api.concurrency, api.can_score, api.score_variant) == (3, "prompt_logprobs", "top_k_renormalized@k=7")
    finally:
        api.close()
    api = OpenAICompatBackend(openai_preset_config("llama-cpp", can_score=False, revision="snap-1"))
    try:
        assert api.can_score is None and api.revision == "snap-1" and api.score_variant is None
    finally:
        api.close()
