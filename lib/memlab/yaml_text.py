"""YAML read fast: :func:`safe_load` is ``yaml.safe_load`` through libyaml's C parser when PyYAML was built with it
(the same documents and errors, ~5x faster: dvc.lock is ~0.5 MB and every run's provenance reads it)."""

from __future__ import annotations

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str):
    """The Python object of one YAML document (``yaml.YAMLError`` when it is not one), as ``yaml.safe_load``."""
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader
