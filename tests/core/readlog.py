"""Test instrumentation (issue 30): log every read of the config in a process — Hydra composes (``@hydra.main``
and ``hydra.compose`` both go through Hydra's ConfigLoaderImpl.load_configuration), plain YAML/OmegaConf loads and
open() of files under a ``conf/`` folder or of a run folder's ``config.yaml``, and typed-dataclass builds
(:func:`memlab.schema.typed`). Reads Hydra makes while composing count as that one compose. One JSON line per read
goes to the file named by $MEMLAB_READS_LOG (appended, so the runner and the notebook kernel share it).

Activated in another process by putting ``tests/core/readlog_site`` first on PYTHONPATH (its sitecustomize calls
:func:`install`); papermill's kernel inherits the environment, so it is logged too. Not used by production code."""

from __future__ import annotations

import builtins
import io
import json
import os
import pathlib
import sys
import threading
import traceback

_state = threading.local()
_LOG: str | None = None


def _depth() -> int:
    return getattr(_state, "depth", 0)


def _where() -> str:
    """The innermost frames (up to four) in memlab code, Hydra's entry or a notebook cell, innermost first."""
    out = []
    for f in reversed(traceback.extract_stack()[:-3]):
        fn = f.filename.replace(os.sep, "/")
        if "/lib/memlab/" in fn or "/ipykernel_" in fn or fn.endswith("hydra/_internal/hydra.py"):
            short = fn.split("/lib/memlab/", 1)[1] if "/lib/memlab/" in fn else fn.rsplit("/", 1)[-1]
            out.append(f"{short}:{f.lineno} {f.name}")
            if len(out) == 4:
                break
    return " < ".join(out)


def record(kind: str, what: str) -> None:
    if _LOG is None or getattr(_state, "writing", False):
        return
    _state.writing = True
    try:
        line = json.dumps({"pid": os.getpid(), "kind": kind, "what": what, "where": _where()})
        with _real_open(_LOG, "a") as fh:
            fh.write(line + "\n")
    finally:
        _state.writing = False


def _config_file(path) -> str | None:
    try:
        p = os.fspath(path)
    except TypeError:
        return None
    if isinstance(p, bytes) or not p.endswith((".yaml", ".yml")):
        return None
    parts = p.replace(os.sep, "/").split("/")
    if "conf" in parts[:-1]:
        return "/".join(parts[parts.index("conf"):])
    if parts[-1] == "config.yaml":  # a run folder's resolved config (the runner's hand-over)
        return "run-folder:" + "/".join(parts[-3:])
    return None


_real_open = builtins.open


def install(log: str) -> None:
    global _LOG
    if _LOG is not None:
        return
    _LOG = log

    def logged_open(file, mode="r", *a, **k):
        if _depth() == 0 and "r" in str(mode) and (name := _config_file(file)):
            record("open", name)
        return _real_open(file, mode, *a, **k)

    builtins.open = logged_open
    io.open = logged_open
    pathlib.io.open = logged_open  # Path.open / read_text go through pathlib's io.open

    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    load = ConfigLoaderImpl.load_configuration

    def load_configuration(self, config_name, overrides, *a, **k):
        record("compose", f"{config_name} {list(overrides)}")
        _state.depth = _depth() + 1
        try:
            return load(self, config_name, overrides, *a, **k)
        finally:
            _state.depth -= 1

    ConfigLoaderImpl.load_configuration = load_configuration

    from omegaconf import OmegaConf

    oc_load = OmegaConf.load

    def omegaconf_load(file_):
        if _depth() == 0 and (name := _config_file(file_)):
            record("OmegaConf.load", name)
        _state.depth = _depth() + 1  # its open() is this read
        try:
            return oc_load(file_)
        finally:
            _state.depth -= 1

    OmegaConf.load = staticmethod(omegaconf_load)

    import yaml

    for fn_name in ("safe_load", "load", "full_load", "unsafe_load"):
        real = getattr(yaml, fn_name)

        def wrapped(stream, *a, _real=real, _name=fn_name, **k):
            # a load of text read by open() was logged as that open; a file object is logged here
            if _depth() == 0 and (name := _config_file(getattr(stream, "name", ""))):
                record(f"yaml.{_name}", name)
            return _real(stream, *a, **k)

        setattr(yaml, fn_name, wrapped)

    import memlab.schema as schema

    real_typed = schema.typed

    def typed(cls, node, where):
        record("typed", f"{cls.__module__}.{cls.__qualname__} ({where})")
        return real_typed(cls, node, where)

    schema.typed = typed


def read_log(path) -> list[dict]:
    p = pathlib.Path(path)
    return [json.loads(ln) for ln in p.read_text().splitlines()] if p.exists() else []
