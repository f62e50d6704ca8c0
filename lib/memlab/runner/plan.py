"""The run plan (issue 48): one run point resolved once, before anything runs, into a frozen :class:`RunPlan`.

The runner (:func:`memlab.runner.execute.execute`) reads the plan: the resolved config it writes to ``config.yaml`` and hands
to the notebook's kernel as its one injected parameter (``cfg``), the folders it writes, the numeric profile it
pins, ``run.json``'s models with their threads and dtypes (:func:`memlab.provenance.write_run_json`) and W&B's
config. Nothing composes conf/ again for that point: Hydra's ``@hydra.main`` composed it, and the experiment's
defaults its params are checked against come from the point itself or from the composition the runner's override
check already made (:func:`experiment_defaults`).
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from omegaconf import OmegaConf

from memlab.config import check_experiment, compose, config_groups, normalize_overrides
from memlab.errors import ConfigError
from memlab.model_use import required_models, required_threads, target_nodes
from memlab.provenance import required_dtypes
from memlab.schema import check_like_defaults, validate_tree


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """One run point, resolved. ``resolved`` is the config as the kernel gets it (with ``run``: key and folders);
    :meth:`cfg` hands out a copy, so no reader changes the plan. ``typed``: every ``_schema_`` node of the config
    built into its dataclass (dotted key → instance; ``params`` is the experiment's typed params when it names a
    schema). ``tested``: the model nodes under test (an experiment with a ``models`` list), ``required``: the model
    folders it reads, ``threads``/``dtypes``: each model's as it will load (known without loading one)."""

    name: str
    key: str
    resolved: Mapping[str, Any]
    typed: Mapping[str, Any]
    notebook: Path
    work: Path
    final: Path
    failed: Path
    numerics: str
    tested: tuple[Mapping[str, Any], ...]
    required: tuple[str, ...]
    threads: Mapping[str, int]
    dtypes: Mapping[str, str]

    @property
    def root(self) -> str:
        return str(self.resolved["paths"]["root"])

    @property
    def params(self) -> Any:
        """The experiment's params: typed when its params node names a ``_schema_``, else the resolved mapping."""
        return self.typed.get("params", self.resolved["params"])

    def cfg(self) -> dict:
        """The resolved config as a fresh plain dict (the kernel's ``cfg``, ``config.yaml``, W&B's config)."""
        return copy.deepcopy(dict(self.resolved))


def make_plan(cfg, key: str, overrides: Sequence[str] | None = None) -> RunPlan:
    """The plan of one run point from its composed config (``cfg``: Hydra's, or :func:`memlab.config.compose`'s) and
    run key; ``overrides``: the command line's, when known (the runner), so the experiment's defaults need no second
    composition. Every check that needs no model runs here: the experiment exists, the config resolves, every
    ``_schema_`` node is typed and range-checked, the params keep their defaults' types, the notebook exists."""
    check_experiment(cfg.get("experiment_name"))
    resolved = resolve(cfg)
    typed = validate_tree(resolved)  # every node with a _schema_ is typed and range-checked before any model loads
    name = resolved["experiment_name"]
    check_like_defaults(experiment_defaults(name, resolved, overrides), resolved["params"], "params")
    final = Path(resolved["paths"]["results"]) / name / key
    work, failed = final.with_name(f".{key}.partial"), final.with_name(f"{key}.failed")
    resolved["run"] = {"key": key, "out_dir": str(work), "result_dir": str(final)}
    notebook = Path(resolved["paths"]["notebooks"]) / resolved["notebook"]
    if not notebook.exists():
        raise ConfigError(f"experiment '{name}' names notebook {notebook} which does not exist")
    tested = tuple(target_nodes(resolved)) if resolved.get("models") is not None else ()
    return RunPlan(name=name, key=key, resolved=resolved, typed=MappingProxyType(typed), notebook=notebook,
                   work=work, final=final, failed=failed, numerics=str(resolved["numerics"]["name"]),
                   tested=tested, required=tuple(required_models(resolved)),
                   threads=MappingProxyType(dict(required_threads(resolved))),
                   dtypes=MappingProxyType(required_dtypes(resolved)))


def experiment_defaults(name: str, resolved: dict, overrides: Sequence[str] | None = None) -> dict:
    """The ``params`` a run's params are checked against (:func:`memlab.schema.check_like_defaults`: a value given
    on the command line keeps its default's type): the point's config without the command line's key overrides.
    That is the run's own params when every override is a group choice; else the composition the runner's override
    check (:mod:`memlab.runner.known_keys`) made of the point's group choices; composed once only when neither is at hand
    (a direct call of :func:`memlab.runner.execute.execute`, a sweep's job launched in another process). The values the group
    choices bring come from conf/ files, each checked against its experiment's own defaults in every profile by
    tests/core/test_validation.py."""
    from memlab.runner.known_keys import COMPOSED

    if overrides is None:
        return resolve(compose(name))["params"]
    groups = group_choices(overrides)
    if len(groups) == len([o for o in overrides if not _is_hydra(o)]):
        return resolved["params"]
    point = COMPOSED.get(tuple(normalize_overrides(groups)))
    if point is None:
        return resolve(compose(name, [o for o in groups if not o.startswith("experiment=")]))["params"]
    return resolve(point.params)


def group_choices(overrides: Sequence[str]) -> list[str]:
    """The overrides that choose a config group (``experiment=…``, ``profile=smoke``, ``~logger``), in order;
    Hydra's own (``hydra/…``, ``hydra.…``) are neither a group choice nor a key of the run."""
    groups = config_groups()
    return [o for o in overrides if not _is_hydra(o) and "." not in _key(o) and _key(o).split("/")[0] in groups]


def _key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


def _is_hydra(override: str) -> bool:
    key = _key(override)
    return key == "hydra" or key.startswith(("hydra.", "hydra/"))


def resolve(cfg) -> dict:
    """A composed config (or one node of it) as plain dicts, interpolations resolved, without Hydra's own node; one
    line if it does not resolve."""
    from omegaconf.errors import OmegaConfBaseException

    try:
        data = OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as err:
        raise ConfigError(f"config does not resolve: {str(err).splitlines()[0]}") from None
    if isinstance(data, dict):
        data.pop("hydra", None)
    return data
