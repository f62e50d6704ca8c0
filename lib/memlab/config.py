"""Config composition: one place that knows where conf/ is and how to compose it.

The runner (``python -m memlab.run``) uses Hydra's ``@hydra.main``; tests, notebooks opened by hand and the
DVC generator use :func:`compose`, which yields the same config for the same overrides.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

from omegaconf import DictConfig, ListConfig, OmegaConf

from memlab.errors import ConfigError
from memlab.numerics import read_yaml  # noqa: F401 - a conf/ YAML file parsed once per process (issue 30)
from memlab import zoo_layout as layout


def repo_root() -> Path:
    """The project root: $MEMLAB_ROOT if set, else the memlab checkout the working folder is in (so one venv shared
    by two checkouts runs each in its own: issue 50), else the checkout this package lives in, else the cwd."""
    if os.environ.get("MEMLAB_ROOT"):
        return Path(os.environ["MEMLAB_ROOT"]).resolve()
    cwd = Path.cwd().resolve()
    for folder in (cwd, *cwd.parents):
        if is_checkout(folder):
            return folder
    here = Path(__file__).resolve().parents[2]
    if (here / "conf" / "config.yaml").exists():
        return here
    return cwd


SHIPPED = Path(__file__).resolve().parent / "shipped"   # conf/, notebooks/, prompts/ as `pip install .` ships them


def is_checkout(root: Path) -> bool:
    """``root`` holds memlab's own project folders (a checkout, or $MEMLAB_ROOT made like one)."""
    return (root / "conf" / "experiment" / "audit.yaml").is_file()


def project_dir(name: str) -> Path:
    """``conf``, ``notebooks`` or ``prompts``: the checkout's, else the copies shipped inside the installed package
    (the installed ``memlab`` command run from any folder, whose results/ and data go to that folder)."""
    root = repo_root()
    return root / name if is_checkout(root) else SHIPPED / name


def cache_root() -> Path:
    """Where downloads and caches live: the checkout's ``.cache/``, else ``memlab/`` in the user's cache folder
    ($XDG_CACHE_HOME or ~/.cache), shared by every folder the installed command runs in."""
    root = repo_root()
    if is_checkout(root):
        return root / ".cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").resolve() / "memlab"


CONF_DIR = project_dir("conf")

for _name, _fn in (("memlab_root", lambda: str(repo_root())), ("memlab_project", lambda name: str(project_dir(name))),
                   ("memlab_cache", lambda: str(cache_root()))):
    if not OmegaConf.has_resolver(_name):
        OmegaConf.register_new_resolver(_name, _fn)


def _zoo_checkpoint(models_dir, family, size, epoch) -> str:
    return str(layout.checkpoint_dir(models_dir, str(family), str(size), epoch))


def _zoo_membership(models_dir, family, size) -> str:
    return str(layout.membership_file(models_dir, str(family), str(size)))


# a config names a zoo checkpoint by (family, size, epoch), never by its folder: ${zoo_checkpoint:${paths.models},kjv,
# m,final}; ${zoo_membership:${paths.models},kjv,m} is that size's membership.json (memlab.zoo_layout)
for _name, _fn in (("zoo_checkpoint", _zoo_checkpoint), ("zoo_membership", _zoo_membership)):
    if not OmegaConf.has_resolver(_name):
        OmegaConf.register_new_resolver(_name, _fn)


def to_plain(node):
    """A config node (OmegaConf or plain) as fresh plain dicts/lists, interpolations resolved — the one
    config-to-dict helper; the caller may change the result without touching the config."""
    import copy

    if isinstance(node, (DictConfig, ListConfig)):
        return OmegaConf.to_container(node, resolve=True)
    if isinstance(node, Mapping):
        return {k: to_plain(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [to_plain(v) for v in node]
    return copy.deepcopy(node)


def experiment_names() -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))


def check_experiment(name: str | None) -> None:
    if name is None:
        raise ConfigError("no experiment given: pass experiment=<name>; known: " + ", ".join(experiment_names()))
    if name not in experiment_names():
        raise ConfigError(f"unknown experiment '{name}'; known: " + ", ".join(experiment_names()))


def compose(experiment: str | None = None, overrides: Sequence[str] = ()) -> DictConfig:
    """Compose conf/ like the runner does (without Hydra's runtime), e.g. for tests and notebooks."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    ov = normalize_overrides(overrides)
    if experiment is not None:
        check_experiment(experiment)
        ov = [f"experiment={experiment}", *ov]
    try:
        return hydra_composition(ov)
    except (HydraException, OmegaConfBaseException) as err:
        raise ConfigError(_first_line(err)) from None


def hydra_composition(overrides: list[str], *, hydra_node: bool = False, with_defaults: bool = False):
    """The one call of Hydra's compose in memlab (issue 48): conf/'s ``config`` under ``overrides`` (normalized).
    ``hydra_node``: keep Hydra's own node (its group choices); ``with_defaults``: return (config, the defaults list
    Hydra read). Inside the runner's ``@hydra.main`` it reuses that Hydra (same conf/); Hydra's errors propagate."""
    from hydra import compose as hydra_compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    def composed():
        cfg = hydra_compose(config_name="config", overrides=overrides, return_hydra_config=hydra_node)
        if not with_defaults:
            return cfg
        loader = GlobalHydra.instance().config_loader()
        return cfg, loader.compute_defaults_list("config", overrides, RunMode.RUN).defaults

    if GlobalHydra.instance().is_initialized():
        return composed()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return composed()


def config_groups() -> set[str]:
    return {p.name for p in CONF_DIR.iterdir() if p.is_dir()}


def normalize_overrides(overrides: Sequence[str]) -> list[str]:
    """``group=null`` (e.g. ``logger=null``, ``cache=null``) → Hydra's ``~group`` (drop that default)."""
    groups = config_groups()
    out = []
    for o in overrides:
        key, sep, value = o.partition("=")
        if sep and key in groups and value in ("null", "none", "None"):
            out.append(f"~{key}")
        else:
            out.append(o)
    return out


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__

