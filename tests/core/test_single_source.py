"""A method's settings are written once: in conf/method/<m>.yaml. Experiments and profile files only override what
differs; the same experiment setting is not repeated across a method's experiment files."""

from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from memlab.config import CONF_DIR
from memlab.schema import method_config

METHODS = sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml"))


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


def _leaves(node, prefix=""):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix, node


def _method_of(exp: dict) -> str | None:
    for d in exp.get("defaults") or []:
        if isinstance(d, dict) and "override /method" in d:
            return d["override /method"]
    return None


def _experiments():
    return {p.stem: _load(p) for p in sorted((CONF_DIR / "experiment").glob("*.yaml"))}


def _overrides_files():
    """(file, method, its `method:` block, what it overrides: {key: value}) for every experiment and profile file
    that overrides a method; an experiment's profile file overrides the group as the experiment changed it."""
    exps = _experiments()
    for name, exp in exps.items():
        method = _method_of(exp)
        if method is None:
            continue
        group = dict(_leaves(_load(CONF_DIR / "method" / f"{method}.yaml")))
        if exp.get("method"):
            yield f"experiment/{name}.yaml", method, exp["method"], group
        scale = CONF_DIR / "scale" / f"{name}_full.yaml"
        if scale.exists() and _load(scale).get("method"):
            yield f"scale/{scale.name}", method, _load(scale)["method"], {**group, **dict(_leaves(exp.get("method") or {}))}
    for p in sorted((CONF_DIR / "scale" / "method").glob("*.yaml")):
        method = p.stem.rsplit("_", 1)[0]
        group = dict(_leaves(_load(CONF_DIR / "method" / f"{method}.yaml")))
        yield f"scale/method/{p.name}", method, _load(p).get("method") or {}, group


@pytest.mark.parametrize("method", METHODS)
def test_method_group_builds_its_typed_dataclass(method):
    cfg = method_config(method)
    assert type(cfg).__module__.startswith(f"memlab.methods.{method}")


def test_every_override_names_a_method_key_and_changes_its_value():
    seen = 0
    for where, method, block, base in _overrides_files():
        assert method in METHODS, f"{where} overrides method {method!r}, which has no conf/method file"
        for key, value in _leaves(block):
            assert key in base, f"{where}: method.{key} is not a setting of conf/method/{method}.yaml"
            assert value != base[key], f"{where}: method.{key}={value!r} restates the value it overrides"
            seen += 1
    assert seen >= 5


def test_experiment_params_do_not_repeat_method_settings_or_each_other():
    by_method = defaultdict(list)
    for name, exp in _experiments().items():
        method = _method_of(exp)
        if method is None:
            continue
        top = set(_load(CONF_DIR / "method" / f"{method}.yaml"))
        study = _load(CONF_DIR / "method" / f"{method}.yaml").get("study") or {}
        params = {k: v for k, v in (exp.get("params") or {}).items() if k != "_schema_"}
        clash = sorted((set(params) & top) | (set(params) & set(study)) | ({method} & set(params)))
        assert not clash, f"experiment {name}: params {clash} belong in conf/method/{method}.yaml"
        by_method[method].append((name, params))
    for method, exps in by_method.items():
        values = defaultdict(list)
        for name, params in exps:
            for k, v in params.items():
                values[(k, yaml.safe_dump(v))].append(name)
        repeated = {k: names for (k, _), names in values.items() if len(names) > 1}
        assert not repeated, f"{method}: the same value written in several experiments: {repeated}"
