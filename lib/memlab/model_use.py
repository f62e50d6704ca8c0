"""The model under test: one meaning for ``model`` in every experiment.

* An experiment that tests pretrained models says which by default in a top-level ``models:`` list (its
  conf/experiment file). On the command line the ``model`` group replaces that list by one model:
  ``model=<preset>`` (conf/model/), ``model.path=<folder or .gguf>`` (over the experiment's ``model`` preset),
  ``model=vllm model.model_id=…``. Several models: ``models=[<preset>, {path: <folder or .gguf>}, …]``, each entry a
  conf/model/ name or a mapping over the run's ``model`` node (``preset: <name>`` picks another base).
* An experiment that measures the tiny ground-truth zoo (no ``models:`` list) refuses a model choice in one line
  naming the experiments that test a given model. Keys that only say how a model runs (threads, batch sizes, device,
  dtype, kv cache) are not a choice of model and pass: the zoo experiments apply them to every checkpoint.

:func:`check_model_override` is called by the runner before a run; :func:`target_nodes` gives a study its models;
:func:`tested_models` names what a run tested (``run.json``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from memlab.backends.registry import is_served
from memlab.config import CONF_DIR, to_plain
from memlab.errors import ConfigError
from memlab.numerics import read_yaml
from memlab.zoo_layout import checkpoint_name, checkpoint_of

RUNTIME_KEYS = ("threads", "batch_size", "score_batch_size", "device", "dtype", "kv_cache")
IDENTITY_KEYS = ("path", "gguf_file", "model_id")   # a node given one of these but no name is named after it


def _key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


def model_choices(overrides: Sequence[str]) -> list[str]:
    """The command-line overrides that choose a model (``model=…``, ``model.<key>=…`` other than runtime keys)."""
    out = []
    for o in overrides:
        key = _key(o)
        if key == "model" or (key.startswith("model.") and key.split(".")[1] not in RUNTIME_KEYS):
            out.append(o)
    return out


def _nearest(name: str, pick, seen: frozenset = frozenset()):
    """``pick(spec)`` of an experiment's conf/experiment file, else of the nearest file it extends (its defaults
    list's experiment names, last first, as Hydra merges them); None where none sets it. Read from the files."""
    path = CONF_DIR / "experiment" / f"{name}.yaml"
    if name in seen or not path.exists():
        return None
    spec = read_yaml(path) or {}
    found = pick(spec)
    parents = [d for d in spec.get("defaults") or [] if isinstance(d, str) and d != "_self_"]
    for parent in reversed(parents):
        if found is None:
            found = _nearest(parent, pick, seen | {name})
    return found


def default_models(name: str) -> list | None:
    """The ``models:`` list an experiment's conf/experiment file sets (or the nearest file it extends), else None."""
    return _nearest(name, lambda spec: list(spec["models"]) if spec.get("models") is not None else None)


def testing_experiments() -> list[str]:
    """Experiments that test a given model: their conf/experiment file (or one it extends) sets ``models:``."""
    return sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml") if default_models(p.stem) is not None)


def check_model_override(cfg, overrides: Sequence[str]) -> None:
    """Refuse a model choice where the experiment tests no given model; where it does, make the chosen ``model``
    the one model under test (``cfg.models = [model]``, named after its path or served id unless named) and give
    ``cfg.model`` back its experiment's node (its preset, :func:`experiment_model_choice`, with the command line's
    runtime keys): read from the files, not composed again (issue 48)."""
    from omegaconf import OmegaConf, open_dict

    name = cfg.get("experiment_name")
    given_none = any(_key(o) == "models" for o in overrides) and cfg.get("models") is not None and not len(cfg.models)
    if given_none and (default := default_models(str(name))):
        raise ConfigError(f"models=[] names no model for experiment {name} to test; give one (model=<preset> or "
                          f"model.path=<folder or .gguf>) or several (models=[<preset>, …]); its default: "
                          f"models=[{', '.join(map(str, default))}]")
    choices = model_choices(overrides)
    if not choices:
        return
    if cfg.get("models") is None:
        raise ConfigError(f"experiment {name} measures {_what_it_measures(cfg)}, not a given model: refusing "
                          f"'{choices[0]}'; the experiments that test a given model: "
                          f"{', '.join(testing_experiments())}")
    if any(_key(o) == "models" for o in overrides):
        raise ConfigError(f"give the models under test either as model=/model.<key>= (one) or as models=[…] "
                          f"(several), not both: {choices[0]}")
    node = OmegaConf.to_container(cfg.model, resolve=False)
    keys = {_key(o).removeprefix("model.") for o in choices}
    if "name" not in keys and keys & set(IDENTITY_KEYS):
        scope = {"paths": cfg.paths, "numerics": cfg.numerics, "model": node}
        node["name"] = derived_name(to_plain(OmegaConf.create(scope).model))
    # the `model` node itself stays the experiment's own (the template of its zoo checkpoints, e.g. the tiny ground
    # truth beside the tested models): the same control whatever model is tested
    own = preset(experiment_model_choice(str(name)), cfg.paths, cfg.numerics)
    own.update({k: cfg.model[k] for k in {_key(o).removeprefix("model.") for o in overrides} & set(RUNTIME_KEYS)})
    with open_dict(cfg):
        cfg.models = [node]
        cfg.model = own


def experiment_model_choice(name: str) -> str:
    """The conf/model preset an experiment's file picks (``override /model: <preset>``, or the nearest file it
    extends), else conf/config.yaml's: read from the files, as Hydra's defaults list picks it (no composition)."""
    def override(spec: Mapping) -> str | None:
        picked = [v for d in spec.get("defaults") or [] if isinstance(d, Mapping)
                  for k, v in d.items() if k.split()[-1].strip("/") == "model"]
        return str(picked[0]) if picked else None

    top = read_yaml(CONF_DIR / "config.yaml") or {}
    return _nearest(name, override) or next(str(e["model"]) for e in top["defaults"]
                                           if isinstance(e, Mapping) and "model" in e)


def _what_it_measures(cfg) -> str:
    required = required_models(cfg)
    if not required:
        return "no model"
    if all(m.startswith("models/tiny-neox/") for m in required):
        return "the tiny ground-truth zoo"
    return "the models its own config lists"


def derived_name(node: Mapping[str, Any]) -> str:
    """A model's name from what identifies it: a GGUF file's stem, a folder's name, a served id's last part — and a
    zoo checkpoint's folder (``…/tiny-neox/kjv/m/final``) its zoo name (``tiny-neox-kjv-m-final``), not ``final``."""
    if is_served(node) or not node.get("path"):
        return str(node.get("model_id") or node.get("name")).rstrip("/").split("/")[-1]
    path = Path(str(node["path"])) / node["gguf_file"] if node.get("gguf_file") else Path(str(node["path"]))
    if path.suffix == ".gguf":
        return path.stem
    checkpoint = checkpoint_of(path)
    return checkpoint_name(*checkpoint) if checkpoint else path.name


def target_nodes(cfg) -> list[dict]:
    """The model nodes (resolved, plain dicts) of the models a run tests, in the order of its ``models`` list."""
    cfg = to_plain(cfg)
    entries = cfg.get("models")
    if entries is None:
        raise ConfigError(f"experiment {cfg.get('experiment_name')} tests no given model (no `models` list)")
    if isinstance(entries, (str, Mapping)):
        entries = [entries]
    out = []
    for entry in entries:
        if isinstance(entry, str):
            out.append(preset(entry, cfg["paths"], cfg.get("numerics")))
            continue
        if not isinstance(entry, Mapping):
            raise ConfigError(f"each entry of models must be a conf/model/ name or a mapping, got {entry!r}")
        entry = dict(entry)
        base = preset(entry.pop("preset"), cfg["paths"], cfg.get("numerics")) if "preset" in entry else dict(cfg["model"])
        if entry.get("backend", base.get("backend")) != base.get("backend"):
            base = {}   # another backend's node (model=llama-cpp over an HF experiment): none of the base's keys apply
        node = {**base, **entry}
        if "name" not in entry and set(entry) & set(IDENTITY_KEYS):
            node["name"] = derived_name(node)
        out.append(node)
    names = [n.get("name") for n in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"models under test must have distinct names, got {names}")
    return out


def require_preset(name: str) -> None:
    """``name`` is a preset of conf/model/; else the one line naming the known ones."""
    known = sorted(p.stem for p in (CONF_DIR / "model").glob("*.yaml"))
    if name not in known:
        raise ConfigError(f"unknown model {name!r}; known (conf/model/): {', '.join(known)}")


def preset(name: str, paths: Mapping, numerics: Mapping | None = None) -> dict:
    """The node of ``conf/model/<name>.yaml`` (over the presets its ``defaults`` list names, as Hydra merges them),
    resolved against a run's ``paths`` and numeric path (``numerics``; default: the one this process was pinned to —
    a preset's dtype follows it). Read from the preset's own files (issue 48: no composition for one preset): the
    same node as composing ``model=<name> numerics=<profile>`` (tests/core/test_run_plan.py)."""
    from omegaconf import OmegaConf

    from memlab.numerics import active

    require_preset(name)
    profile = (numerics or {}).get("name") or active()
    scope = {"paths": to_plain(paths), "numerics": read_yaml(CONF_DIR / "numerics" / f"{profile}.yaml") or {},
             "model": preset_node(name)}
    return to_plain(OmegaConf.create(scope).model)


def preset_node(name: str, seen: tuple[str, ...] = ()) -> dict:
    """``conf/model/<name>.yaml`` unresolved, merged over the presets its ``defaults`` list names (``_self_`` where
    it stands in that list, else last: Hydra's order)."""
    from omegaconf import OmegaConf

    if name in seen:
        raise ConfigError(f"conf/model/{name}.yaml: its defaults list names itself ({' → '.join([*seen, name])})")
    spec = read_yaml(CONF_DIR / "model" / f"{name}.yaml") or {}
    defaults = list(spec.pop("defaults", None) or [])
    other = [d for d in defaults if not isinstance(d, str)]
    if other:   # read from the files, not composed: an entry that is no preset name would be lost without a word
        raise ConfigError(f"conf/model/{name}.yaml: its defaults list holds {other[0]!r}; a model preset's defaults "
                          "name only other presets of conf/model/ (or _self_)")
    if "_self_" not in defaults:
        defaults.append("_self_")
    parts = [spec if d == "_self_" else preset_node(d, (*seen, name)) for d in defaults]
    return OmegaConf.to_container(OmegaConf.merge(*parts), resolve=False)


def tested_models(resolved_cfg: Mapping) -> dict[str, str]:
    """Name → where each model the run used lives: the models under test (``models``: a local folder or GGUF file for
    hf, the served id for openai), then the zoo families it requires (``tiny-neox/<family>`` → its folder: the
    ground truth). An experiment without a ``models`` list: every model its config names (:func:`required_models`)."""
    cfg = to_plain(resolved_cfg)
    out = {n["name"]: _location(n) for n in target_nodes(cfg)} if cfg.get("models") is not None else {}
    root = Path(str(cfg["paths"]["models"]))
    for req in required_models(cfg):
        rel = str(req).rstrip("/").removeprefix("models/")
        if cfg.get("models") is None or rel.startswith("tiny-neox/"):
            out[rel] = str(root / rel)
    return out


def _location(node: Mapping[str, Any]) -> str:
    if is_served(node):
        return str(node.get("model_id"))
    if not node.get("path"):   # a kind that reads no weights from a path (computed in code)
        return str(node.get("name"))
    path = Path(str(node["path"]))
    return str(path / node["gguf_file"]) if node.get("gguf_file") else str(path)


# keys under which a config names a conf/model preset (params.models, method.targets.<t>.model, method.agents.llm,
# the top-level `models` list) and a tiny zoo family (method.study.family, params.family, params.tiny.family,
# params.zoo_families)
MODEL_KEYS = ("model", "models", "llm", "reference")
FAMILY_KEYS = ("family", "zoo_families")
# a preset naming a zoo checkpoint (memlab.config's resolver): its family is the first argument after the models folder
ZOO_CHECKPOINT = re.compile(r"^\$\{zoo_checkpoint:\$\{paths\.models\},\s*([^,}\s]+)")
# the `requires` keys derived from the config: an experiment file naming one is refused (no second, unchecked list)
DERIVED_BY = {"models": "memlab.model_use.required_models",
              "code": "memlab.pipeline.prompt_folders: the method groups' prompts_dir; lib/ code from the imports"}
DERIVED_REQUIRES = ("models", "code")


def _zoo_lineage(family: str, zoo: Path) -> list[str]:
    """``family`` and the families it continues from (``init_from``), nearest first — read from the zoo folder as
    :func:`memlab.models.zoo.family_files` names them and :meth:`memlab.models.zoo.Family.lineage` follows them
    (not imported: every stage imports this module, and the zoo would make the corpora stage depend on it)."""
    out = [family]
    while True:
        spec = read_yaml(zoo / f"{out[-1]}.yaml") or {}
        parent = (spec.get("init_from") or {}).get("family")
        if not parent or parent in out:
            return out
        out.append(parent)


def _preset_weights(preset: str, zoo: Path) -> list[str]:
    """The pipeline output holding a conf/model preset's weights (``path: ${paths.models}/<name>`` →
    ``models/<name>``; a zoo checkpoint ``${zoo_checkpoint:${paths.models},<family>,…}`` → that family and its
    lineage); none for hub ids and served models."""
    path = str((read_yaml(CONF_DIR / "model" / f"{preset}.yaml") or {}).get("path") or "")
    checkpoint = ZOO_CHECKPOINT.match(path)
    if checkpoint:
        return [f"models/tiny-neox/{f}" for f in _zoo_lineage(checkpoint.group(1), zoo)]
    rel = path.removeprefix("${paths.models}/").strip("/").split("/") if path.startswith("${paths.models}/") else []
    return [f"models/{rel[0]}"] if rel and rel[0] else []


def _zoo_dir(cfg: Mapping) -> Path:
    """The run's zoo folder (``paths.zoo``: conf/zoo, or a test zoo); conf/zoo for a config not yet resolved."""
    zoo = (cfg.get("paths") or {}).get("zoo") if isinstance(cfg.get("paths"), Mapping) else None
    return Path(str(zoo)) if zoo and "${" not in str(zoo) else CONF_DIR / "zoo"


def required_models(cfg: Mapping) -> list[str]:
    """The model folders an experiment reads, as the pipeline outputs that build them, in the order its config
    names them — derived from the config (issue 30), so no ``requires.models`` list can disagree with it:

    * a conf/model preset named in ``params``/``method`` under :data:`MODEL_KEYS` or in the top-level ``models``
      list (the models under test): its weights (:func:`_preset_weights`: ``models/<preset>``, or the zoo family
      a tiny preset points into, as RECAP's tiny target);
    * a zoo family (a conf/zoo/<family>.yaml stem) named in ``params``/``method`` under :data:`FAMILY_KEYS`:
      ``models/tiny-neox/<family>`` and those of the families it continues from (``init_from``, e.g. pearl's base).

    The ``model`` group is not read: it is the template of zoo checkpoints or the base of ``model=``/``models=``
    choices (mapping entries of ``models`` are such choices, not pipeline outputs). A ``requires.models`` left in the
    config is refused."""
    req = cfg.get("requires") or {}
    derived = [k for k in DERIVED_REQUIRES if k in req]
    if derived:
        raise ConfigError(f"experiment {cfg.get('experiment_name')}: requires.{derived[0]} is derived from the config "
                          f"({DERIVED_BY[derived[0]]}); remove it")
    zoo = _zoo_dir(cfg)
    out: list[str] = []
    for key, name in named(cfg, {*MODEL_KEYS, *FAMILY_KEYS}):
        if key in MODEL_KEYS and name in preset_names():
            out.extend(_preset_weights(name, zoo))
        elif key in FAMILY_KEYS and (zoo / f"{name}.yaml").exists():
            out.extend(f"models/tiny-neox/{f}" for f in _zoo_lineage(name, zoo))
    return list(dict.fromkeys(out))


def preset_names() -> set[str]:
    """The conf/model presets (file stems)."""
    return {p.stem for p in (CONF_DIR / "model").glob("*.yaml")}


def named(cfg: Mapping, keys) -> list[tuple[str, str]]:
    """(key, name) for every string a config's ``params``, ``method`` and top-level ``models`` hold under one of
    ``keys`` (directly, or in a list under it), in the order the config names them — the one walk that finds the
    presets and zoo families an experiment names (:data:`MODEL_KEYS`, :data:`FAMILY_KEYS`)."""
    out: list[tuple[str, str]] = []

    def walk(node, key: str | None) -> None:
        if isinstance(node, Mapping):
            for k, v in node.items():
                walk(v, str(k))
        elif isinstance(node, (list, tuple)):
            for v in node:
                walk(v, key)
        elif isinstance(node, str) and key in keys:
            out.append((key, node))

    walk({"params": cfg.get("params"), "method": cfg.get("method"), "models": cfg.get("models")}, None)
    return out


def required_model_setting(cfg: Mapping, key: str, fallback):
    """One setting (``key``, e.g. ``threads`` or ``dtype``) of each model a run reads (derived from its config:
    :func:`required_models`), by model name: a model converted into ``models/<name>`` takes it from
    ``conf/model/<name>.yaml``; zoo checkpoints (``models/tiny-neox/<family>``) from the run's model template
    (``model.<key>``); ``fallback`` where the config leaves it empty. A run with a ``models`` list (the models under
    test, memlab.model_use) takes those models' settings from their nodes instead of their presets."""
    out: dict = {}
    template = (cfg.get("model") or {}).get(key) or fallback
    tested = cfg.get("models") is not None and cfg.get("paths") is not None
    if tested:  # the models under test, as this run chose them (memlab.model_use), then the zoo beside them
        out.update({n["name"]: n.get(key) or fallback for n in target_nodes(cfg)})
    for path in required_models(cfg):
        parts = str(path).rstrip("/").split("/")
        if len(parts) >= 3 and parts[1] == "tiny-neox":
            out[parts[2]] = template
        elif tested:
            continue
        elif (CONF_DIR / "model" / f"{parts[-1]}.yaml").exists():
            out[parts[-1]] = preset_setting(cfg, parts[-1], key) or fallback
    return out


def preset_setting(cfg: Mapping, name: str, key: str):
    """``key`` of the model preset ``conf/model/<name>.yaml``, resolved against the run's ``paths`` and
    ``numerics`` (a preset's dtype follows the numeric path: ``${numerics.pretrained_dtype}``)."""
    from omegaconf import OmegaConf

    node = OmegaConf.load(CONF_DIR / "model" / f"{name}.yaml")
    scope = OmegaConf.create({"paths": to_plain(cfg.get("paths") or {}), "numerics": to_plain(cfg.get("numerics") or {}),
                              "model": node})
    return OmegaConf.select(scope, f"model.{key}", throw_on_missing=False)


def required_threads(cfg: Mapping) -> dict[str, int]:
    """Torch threads of each model a run reads (:func:`required_model_setting`). ``make reproduce`` packs
    stages onto cores by the largest of these, and ``run.json`` records them."""
    return {name: int(n) for name, n in required_model_setting(cfg, "threads", 1).items()}
