"""The typed settings of the HF backend: a ``backend: hf`` node of conf/model/*.yaml as a frozen dataclass.

Every key is required (no defaults in code, as in :mod:`memlab.schema`): a node missing one, or naming one this
class does not know, is refused in one line naming the key. The values' meaning:

- ``path``: a local model folder, a ``.gguf`` file, or a hub id; ``gguf_file``: a GGUF file inside ``path``.
- ``revision``: ``auto`` = hash of the local weight files; for a hub id, a branch, tag or commit.
- ``device``: cpu | cuda | auto; ``dtype``: float32 | bfloat16 | float16 | auto | bfloat16_if_fast.
- ``threads``: torch threads (null = torch's choice); ``batch_size``: rows per generation pass;
  ``score_batch_size``: rows per scoring pass (null = ``batch_size``).
- ``kv_cache``: dynamic (written in place: backends/hf_kv.py) | static | grouped (backends/hf_grouped.py);
  ``chat_template``: auto | none; ``trust_remote_code``: transformers' flag;
  ``score_bos``: tokenizer | prepend (backends/score_bos.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from memlab.backends.score_bos import score_bos_of
from memlab.errors import ConfigError
from memlab.schema import check, typed

KV_CACHES = ("dynamic", "static", "grouped")


@dataclass(frozen=True)
class HFBackendConfig:
    name: str | None
    backend: str = field(metadata=check(choices=("hf",)))
    path: str
    gguf_file: str | None
    revision: str | None
    device: str
    dtype: str
    threads: int | None
    batch_size: int
    score_batch_size: int | None
    chat_template: str
    kv_cache: str = field(metadata=check(choices=KV_CACHES))
    trust_remote_code: bool
    score_bos: str


def hf_backend_config(node: Mapping[str, Any]) -> HFBackendConfig:
    """``node`` (a model node) as an :class:`HFBackendConfig`; a bad node is one ConfigError line."""
    score_bos_of(node)  # its own message: what each value means
    cfg = typed(HFBackendConfig, node, "model")
    if not cfg.path:
        raise ConfigError("model.path is required for backend: hf (a local folder, a .gguf file or a hub id)")
    return cfg


def looks_like_hub_id(path: str) -> bool:
    """A hub id ("org/name" or "name"), not a path: no leading / . ~, no .gguf, not under an existing folder
    (so a missing "models/x" is reported as an unbuilt model, not as a hub id)."""
    if path.startswith(("/", ".", "~")) or path.count("/") > 1 or "\\" in path or path.endswith(".gguf"):
        return False
    parent = Path(path).parent
    return str(parent) == "." or not parent.is_dir()
