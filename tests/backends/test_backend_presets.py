"""Every conf/model preset composes through the real config and either builds a backend or fails with one
line that names the fix (no network is touched: API clients connect lazily)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlab.backends.factory import build_backend
from memlab.config import compose
from memlab.errors import MemlabError

MODEL_DIR = Path(__file__).resolve().parents[2] / "conf" / "model"
PRESETS = sorted(p.stem for p in MODEL_DIR.glob("*.yaml"))
API_KEYS = ("name", "backend", "base_url", "api_key_env", "model_id", "concurrency", "max_retries", "timeout",
            "price_in_per_mtok", "price_out_per_mtok", "chat")


def test_api_presets_exist():
    for name in ("gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "claude", "gemini", "deepseek", "vllm", "pythia-160m"):
        assert name in PRESETS


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_composes_and_builds(preset, monkeypatch):
    model = compose(None, [f"model={preset}", "logger=null", "cache=null"]).model
    assert model.score_bos in ("tokenizer", "prepend")  # one BOS policy key in every preset (score_bos.py)
    assert (model.score_bos == "prepend") == (preset == "llama-cpp")  # HF presets: today's numbers
    if model.backend == "openai":
        assert all(k in model for k in API_KEYS)
        if model.api_key_env:
            monkeypatch.delenv(model.api_key_env, raising=False)
            with pytest.raises(MemlabError, match=model.api_key_env) as err:
                build_backend(model)
            assert "\n" not in str(err.value)
            monkeypatch.setenv(model.api_key_env, "test-key-not-real")
        backend = build_backend(model)
        assert backend.model_name == model.model_id and backend.usage.cost_usd == 0.0
        assert model.price_in_per_mtok >= 0 and model.price_out_per_mtok >= 0
    else:
        assert model.backend == "hf"
        path = Path(str(model.path))
        if path.is_dir():  # built locally: check its config loads (loading weights is for bench_backends)
            from transformers import AutoConfig

            kwargs = {"gguf_file": str(model.gguf_file)} if model.gguf_file else {}
            assert AutoConfig.from_pretrained(str(path), **kwargs).model_type
            return
        with pytest.raises(MemlabError) as err:  # not built yet, or a hub id while the hub is offline
            build_backend(model)
        assert "\n" not in str(err.value)
        assert "make models" in str(err.value) or "hub is offline" in str(err.value)
