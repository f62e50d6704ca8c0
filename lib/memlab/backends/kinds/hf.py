"""``backend: hf``: a local transformers folder, a GGUF file or a hub id, run in this process (backends/hf.py)."""

from __future__ import annotations

from typing import Any, Mapping

from memlab.backends.base import Backend
from memlab.backends.hf_config import HFBackendConfig
from memlab.backends.registry import backend_kind


@backend_kind("hf", config=HFBackendConfig, served=False, weights_at_path=True)
def build_hf(node: Mapping[str, Any]) -> Backend:
    from memlab.backends.hf import HFBackend

    return HFBackend.from_config(node)
