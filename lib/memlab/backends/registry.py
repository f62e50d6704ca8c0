"""The registry of backend kinds: what ``model.backend`` may name, and what the rest of memlab asks about a kind.

A kind registers once, with :func:`backend_kind` on its build function, in one module of :data:`KIND_PACKAGE`
(``hf`` and ``openai`` there too): its name (the value of ``model.backend``), the frozen dataclass of its model
node (its fields are the node's keys: the runner's override check knows them from it, and the file defining it is
where an unknown key's message points), and what the rest asks instead of comparing names:

- ``served``: a server answers for the model (``model.base_url`` serves ``model.model_id``): the run's provenance
  asks the server what it serves, pre-flight checks the URL, and the model's name comes from ``model_id``.
- ``weights_at_path``: ``model.path`` names a transformers folder, a ``.gguf`` file or a hub id: pre-flight checks
  its files, a GGUF file is converted to a folder first, and provenance hashes the weight files.

A kind that is neither (a toy computed in code) has nothing to check or hash. Adding a kind = one module in
:data:`KIND_PACKAGE` + one YAML in ``conf/model/`` with ``backend: <kind>``. :func:`registered` imports every module
of the package (by name); the build functions import their heavy code (torch) only when called.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from memlab.backends.base import Backend
from memlab.errors import ConfigError
from memlab.plugins import import_all

__all__ = ["BackendKind", "KIND_PACKAGE", "backend_kind", "unregister", "registered", "kind_names", "find_kind",
           "kind_of", "is_served", "has_weights_at_path"]

KIND_PACKAGE = "memlab.backends.kinds"   # every module in it is imported by registered()
Build = Callable[[Mapping[str, Any]], Backend]


@dataclass(frozen=True)
class BackendKind:
    """One registered kind (see the module docstring for what each fact means)."""

    name: str
    config: type
    build: Build
    served: bool
    weights_at_path: bool

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys of its model node: the fields of its config dataclass."""
        return tuple(f.name for f in fields(self.config))

    @property
    def docs(self) -> str:
        """The file documenting its keys, and the class in it (for one-line messages)."""
        return f"lib/{self.config.__module__.replace('.', '/')}.py ({self.config.__name__})"


_KINDS: dict[str, BackendKind] = {}


def backend_kind(name: str, *, config: type, served: bool, weights_at_path: bool) -> Callable[[Build], Build]:
    """Register the decorated function (model node → :class:`Backend`) as the build of kind ``name``."""

    def add(build: Build) -> Build:
        if name in _KINDS:
            raise ValueError(f"backend kind {name!r} is registered twice")
        _KINDS[name] = BackendKind(name, config, build, served, weights_at_path)
        return build

    return add


def unregister(name: str) -> None:
    """Drop kind ``name`` (tests that add a toy kind undo it)."""
    _KINDS.pop(name, None)


def registered() -> tuple[BackendKind, ...]:
    """Every registered kind, after importing every module of :data:`KIND_PACKAGE` (in order of module name; once
    per process: :func:`memlab.plugins.import_all`)."""
    import_all(KIND_PACKAGE)
    return tuple(_KINDS.values())


def kind_names() -> tuple[str, ...]:
    return tuple(k.name for k in registered())


def find_kind(name: Any) -> BackendKind | None:
    """The registered kind called ``name``; None for any other value (a missing or unknown ``model.backend``)."""
    if not isinstance(name, str):
        return None
    if name not in {k.name for k in registered()}:
        import_all(KIND_PACKAGE, again=True)   # a module added since the package was imported
    return _KINDS.get(name)


def kind_of(node: Mapping[str, Any]) -> BackendKind:
    """The kind of a model node (its ``backend``); an unknown one is one ConfigError line naming the known kinds."""
    kind = find_kind(node.get("backend"))
    if kind is None:
        raise ConfigError(f"model.backend must be one of {', '.join(kind_names())}, got {node.get('backend')!r} "
                          f"(model {node.get('name', '?')!r}; see conf/model/)")
    return kind


def is_served(node: Mapping[str, Any]) -> bool:
    """The node's kind is registered and ``served`` (False for a missing or unknown ``model.backend``)."""
    kind = find_kind(node.get("backend"))
    return kind is not None and kind.served


def has_weights_at_path(node: Mapping[str, Any]) -> bool:
    """The node's kind is registered and reads ``weights_at_path``, and the node names a ``path``."""
    kind = find_kind(node.get("backend"))
    return kind is not None and kind.weights_at_path and bool(node.get("path"))
