"""Plugin packages (issue 48): a registry whose entries are the modules of one package (backend kinds in
``memlab.backends.kinds``, MIA scores in ``memlab.metrics.mia_scores``) imports every module of it, so a module
dropped in registers itself. This is the one loop that does it, for every such registry."""

from __future__ import annotations

import importlib
import os
import pkgutil

_SCANNED: dict[str, tuple] = {}   # package → the folders (and their mtimes) its modules were imported from


def import_all(package_name: str, *, again: bool = False) -> None:
    """Import every module of the package ``package_name`` (per folder of its path, in order of module name) — once
    per process: again only when its folders changed (a folder added to its ``__path__``, a module written into one:
    a test's toy plugin) or when ``again`` (a registry that did not find a name looks once more)."""
    package = importlib.import_module(package_name)
    stamp = tuple((str(p), _mtime(str(p))) for p in package.__path__)
    if not again and _SCANNED.get(package_name) == stamp:
        return
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package_name}.{module.name}")
    _SCANNED[package_name] = stamp


def _mtime(folder: str) -> int | None:
    try:
        return os.stat(folder).st_mtime_ns
    except OSError:
        return None
