"""``backend: openai``: any OpenAI-compatible server (a provider's API, llama-server, vLLM; backends/openai_compat.py)."""

from __future__ import annotations

from typing import Any, Mapping

from memlab.backends.base import Backend
from memlab.backends.openai_config import OpenAIConfig
from memlab.backends.registry import backend_kind


@backend_kind("openai", config=OpenAIConfig, served=True, weights_at_path=False)
def build_openai(node: Mapping[str, Any]) -> Backend:
    from memlab.backends.openai_compat import OpenAICompatBackend

    return OpenAICompatBackend.from_config(node)
