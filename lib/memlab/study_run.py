"""The experiment names its study (issue 30): ``study: <module>.<function>`` in conf/experiment/<name>.yaml, and every
study function has one signature, ``f(method, params, run)``:

* ``method`` — ``cfg.method`` as its typed dataclass (``None`` for an experiment without a method group);
* ``params`` — ``cfg.params`` as its typed dataclass (the experiment's ``_schema_``);
* ``run`` — a :class:`StudyRun`: what a study needs beyond its settings (the model catalog, seed, output folder,
  models under test, results root, other typed config groups).

:meth:`memlab.report.Report.run_study` resolves the function with :func:`resolve_study`, builds the run and calls it;
every notebook's study cell is ``res = rep.run_study()``.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from memlab.errors import ConfigError

STUDY_PARAMETERS = ("method", "params", "run")


@dataclass(frozen=True)
class StudyRun:
    """One run as a study sees it; ``cfg`` is the resolved config the report holds."""

    cfg: Any
    catalog: Any          # memlab.models.catalog.Catalog: named models and zoo checkpoints, through the cache
    seed: int
    out_dir: Path         # the run folder (tables/, figures/, metrics.json)
    results_root: Path    # ${paths.results}: other experiments' runs (e.g. the audit's ground truth)
    progress: bool        # progress bars of long loops

    @property
    def targets(self) -> list[dict]:
        """The model nodes under test (:func:`memlab.model_use.target_nodes`; the experiment's ``models``)."""
        from memlab import model_use

        return model_use.target_nodes(self.cfg)

    def typed(self, key: str):
        """The config node at dotted ``key`` (e.g. ``"methods.recap"``) as its ``_schema_`` dataclass."""
        return typed_node(self.cfg, key)


def typed_node(cfg, key: str):
    """The node at dotted ``key`` of ``cfg`` as the dataclass its ``_schema_`` names — every value checked, no
    defaults in code (see :mod:`memlab.schema`)."""
    from omegaconf import OmegaConf

    from memlab.config import to_plain
    from memlab.schema import SCHEMA_KEY, schema_class, typed

    node = OmegaConf.select(cfg, key)
    if node is None or SCHEMA_KEY not in node:
        raise ConfigError(f"config key {key}: missing or has no {SCHEMA_KEY}")
    return typed(schema_class(node[SCHEMA_KEY], key), to_plain(node), key)


def resolve_study(path: Any) -> Callable:
    """The study function a config's ``study`` key names (``<module>.<function>``), checked to take
    ``(method, params, run)``; else a one-line ConfigError."""
    if not isinstance(path, str) or "." not in path:
        raise ConfigError(f"study must name a study function as <module>.<function>, got {path!r}")
    module, _, name = path.rpartition(".")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"study {path}: no such function ({e})") from None
    if not callable(fn) or tuple(inspect.signature(fn).parameters) != STUDY_PARAMETERS:
        raise ConfigError(f"study {path} must be a function f({', '.join(STUDY_PARAMETERS)})")
    return fn
