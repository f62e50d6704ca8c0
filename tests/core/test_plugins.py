"""The one plugin-package loop (memlab.plugins.import_all): a registry's package is listed once per process, and a
module added at run time (a folder added to its path, a file written into one) is still found."""

from __future__ import annotations

import importlib
import pkgutil
import sys

from memlab import plugins
from memlab.backends import registry
from memlab.metrics import mia


def test_a_plugin_package_is_listed_once_and_again_when_it_changes(tmp_path, monkeypatch):
    listed = []
    real = pkgutil.iter_modules
    monkeypatch.setattr(pkgutil, "iter_modules", lambda path: listed.append(list(path)) or real(path))
    monkeypatch.setattr(plugins, "_SCANNED", {})
    for _ in range(3):
        assert registry.kind_names() == ("hf", "openai") and "loss" in mia.score_names()
    assert len(listed) == 2   # the kinds' package once, the scores' package once
    package = importlib.import_module(registry.KIND_PACKAGE)
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    registry.registered()
    assert len(listed) == 3   # a folder added to the package's path: listed again
    (tmp_path / "toy_later.py").write_text("import sys\nsys.modules[__name__].LOADED = True\n")
    try:
        assert registry.find_kind("no-such-kind") is None
        assert sys.modules[f"{registry.KIND_PACKAGE}.toy_later"].LOADED   # written later: found by a miss
    finally:
        sys.modules.pop(f"{registry.KIND_PACKAGE}.toy_later", None)
