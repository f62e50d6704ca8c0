"""Build a backend from the ``model`` config node (and wrap it in the response cache from the ``cache`` node)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memlab.backends.base import Backend
from memlab.backends.registry import kind_of
from memlab.errors import ConfigError


def _model_dict(cfg: Any) -> dict:
    """A model/cache config node as a fresh plain dict ({} for None)."""
    from memlab.config import to_plain

    d = to_plain(cfg) if cfg is not None else {}
    if not isinstance(d, dict):
        raise ConfigError(f"model config must be a mapping, got {type(cfg).__name__}")
    return d


def build_backend(model_cfg: Any, cache_cfg: Any = None) -> Backend:
    """``model_cfg.backend``: a registered kind (backends/registry.py: "hf" = a local folder / GGUF / hub id, "openai"
    = any OpenAI-compatible server). ``cache_cfg``: None (or ``name: null``) = no cache; else a sqlite cache at
    ``cache_cfg.path``."""
    cfg = _model_dict(model_cfg)
    backend = kind_of(cfg).build(cfg)
    cache = _model_dict(cache_cfg) if cache_cfg is not None else {}
    if cache and cache.get("name") not in (None, "null", "none"):
        if not cache.get("path"):
            raise ConfigError("cache.path is required for the sqlite cache (or use cache=null)")
        from memlab.backends.cache import CachedBackend

        backend = CachedBackend(backend, Path(cache["path"]))
    return backend
