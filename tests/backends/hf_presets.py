"""A complete :class:`HFBackendConfig` for tests: a real conf/model preset, composed as the runner composes it,
with the fields a test changes replaced (``dataclasses.replace``), so no test lists every key by hand."""

from __future__ import annotations

import dataclasses

from memlab.backends.hf_config import HFBackendConfig, hf_backend_config


def preset_node(preset: str) -> dict:
    """conf/model/<preset>.yaml as the runner resolves it (default numerics, no cache)."""
    from memlab.config import compose, to_plain

    return to_plain(compose(overrides=[f"model={preset}", "cache=null"]).model)


def hf_preset_config(preset: str, **changes) -> HFBackendConfig:
    return dataclasses.replace(hf_backend_config(preset_node(preset)), **changes)
