"""The models a run may open, named one way everywhere.

* a ``conf/model/<name>.yaml`` entry by name (composed by Hydra with this run's paths), and
* a checkpoint of a tiny zoo family by (family, size, epoch): its model node is the run's ``model`` node (device,
  dtype, threads, batch size) pointed at the checkpoint by :meth:`memlab.models.zoo.Family.model_cfg`.

Every backend is built through :func:`memlab.backends.factory.build_backend` with the run's cache, and kept in
:attr:`Catalog.opened` so the report can sum token usage and cost. Study functions receive a Catalog; they never
build paths or merge configs.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

from memlab.backends.base import Backend
from memlab.config import to_plain


class Catalog:
    def __init__(self, template: Mapping[str, Any] | None, cache: Mapping[str, Any] | None, paths: Mapping[str, Any]):
        self.template = to_plain(template) if template is not None else None
        self.cache = to_plain(cache) if cache is not None else None
        self.paths = to_plain(paths)
        self.opened: list[Backend] = []

    # -- model nodes ------------------------------------------------------------------------------------
    def family(self, name: str):
        """The zoo family ``name`` (conf/zoo/<name>.yaml) with its models under ``paths.models``."""
        from memlab.models.zoo import load_family

        return load_family(name, self.paths["zoo"], self.paths["models"])

    def named_cfg(self, name: str) -> dict:
        """The node of ``conf/model/<name>.yaml`` composed by Hydra, resolved against this run's paths."""
        from memlab.model_use import preset

        return preset(name, self.paths)

    def checkpoint_cfg(self, family: str, size: str, epoch: int | str) -> dict:
        return self.family(family).model_cfg(size, epoch, self.template)

    # -- backends ---------------------------------------------------------------------------------------
    def open(self, model_cfg: Mapping[str, Any] | None = None) -> Backend:
        """A backend for a model node (default: the run's ``model``), wrapped in the run's cache."""
        from memlab.backends.factory import build_backend
        from memlab.backends.registry import has_weights_at_path
        from memlab.models.convert import gguf_as_folder
        from memlab.models.gguf_progress import gguf_load_progress

        node = to_plain(model_cfg if model_cfg is not None else self.template)
        # a GGUF loads from its folder converted once; a first conversion (30-130 s) says so on the runner's console
        if node is not None and self.paths.get("gguf") and has_weights_at_path(node):
            with gguf_load_progress():
                node = gguf_as_folder(node, self.paths["gguf"])
        b = build_backend(node, self.cache)
        self.opened.append(b)
        return b

    @contextmanager
    def using(self, model_cfg: Mapping[str, Any] | None = None) -> Iterator[Backend]:
        """``with catalog.using(node) as backend:`` — the backend is closed (its weights freed) afterwards."""
        b = self.open(model_cfg)
        try:
            yield b
        finally:
            b.close()

    def named(self, name: str):
        return self.using(self.named_cfg(name))

    def checkpoint(self, family: str, size: str, epoch: int | str):
        return self.using(self.checkpoint_cfg(family, size, epoch))
