"""The HF backend's settings are one typed config (issue 30): every key comes from conf/model/*.yaml, none is
defaulted in code, and a node missing or adding a key is refused in one line naming it."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest
import yaml

from memlab.backends.hf import HFBackend
from memlab.backends.hf_config import HFBackendConfig, hf_backend_config
from memlab.errors import ConfigError
from tests.backends.hf_presets import preset_node

ROOT = Path(__file__).resolve().parents[2]
HF_PRESETS = sorted(p.stem for p in (ROOT / "conf" / "model").glob("*.yaml")
                    if yaml.safe_load(p.read_text()).get("backend") == "hf")
HF_MODULES = ("hf.py", "hf_config.py", "hf_decode.py", "hf_load.py")
OPENAI_MODULES = ("openai_compat.py", "openai_config.py", "openai_wire.py")


def test_no_field_has_a_default():
    for f in dataclasses.fields(HFBackendConfig):
        assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, f.name


@pytest.mark.parametrize("preset", HF_PRESETS)
def test_every_hf_preset_builds_the_config(preset):
    node = preset_node(preset)
    assert set(node) == {f.name for f in dataclasses.fields(HFBackendConfig)}, preset
    cfg = hf_backend_config(node)
    assert cfg.backend == "hf" and cfg.path


@pytest.mark.parametrize("key", ["kv_cache", "score_batch_size", "trust_remote_code", "threads"])
def test_a_missing_key_is_one_line_naming_it(key):
    node = {k: v for k, v in preset_node("tiny-neox").items() if k != key}
    with pytest.raises(ConfigError, match=f"model.{key}: missing") as err:
        hf_backend_config(node)
    assert "\n" not in str(err.value)


def test_an_unknown_key_is_one_line_naming_it():
    with pytest.raises(ConfigError, match="model.kv_cahce: unknown option") as err:
        hf_backend_config({**preset_node("tiny-neox"), "kv_cahce": "static"})
    assert "\n" not in str(err.value)


def test_the_constructor_takes_the_typed_config_only():
    params = list(inspect.signature(HFBackend.__init__).parameters.values())
    assert [p.name for p in params] == ["self", "cfg"]
    assert all(p.default is inspect.Parameter.empty for p in params)


def test_hf_modules_are_small():
    """Every HF and OpenAI-compatible backend module ≤ 450 lines, every function ≤ 60."""
    for name in HF_MODULES + OPENAI_MODULES:
        src = (ROOT / "lib" / "memlab" / "backends" / name).read_text()
        assert src.count("\n") <= 450, name
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno - node.lineno + 1 <= 60, f"{name}:{node.name}"
