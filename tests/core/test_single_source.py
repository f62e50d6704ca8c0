"""A method's settings are written once: in conf/method/<m>.yaml. Experiments and profile files only override what
differs; the same experiment setting is not repeated across a method's experiment files."""

from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from memlab.config import CONF_DIR
from memlab.schema import method_config

METHODS = sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml"))
PROFILES = sorted(p.stem for p in (CONF_DIR / "profile").glob("*.yaml"))


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
        for profile in PROFILES:
            scale = CONF_DIR / "scale" / f"{name}_{profile}.yaml"
            if scale.exists() and _load(scale).get("method"):
                yield (f"scale/{scale.name}", method, _load(scale)["method"],
                       {**group, **dict(_leaves(exp.get("method") or {}))})
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


def _dataclasses_under(cls, seen=None):
    """``cls`` and every dataclass its fields hold (nested settings, lists and dicts of them)."""
    import dataclasses
    import typing

    seen = set() if seen is None else seen
    if cls in seen:
        return seen
    seen.add(cls)
    for tp in typing.get_type_hints(cls).values():
        todo = [tp]
        while todo:
            t = todo.pop()
            todo.extend(typing.get_args(t))
            if dataclasses.is_dataclass(t):
                _dataclasses_under(t, seen)
    return seen


@pytest.mark.parametrize("method", METHODS)
def test_typed_method_settings_have_no_default_in_code(method):
    """The YAML is the single source: a field default would be a second value nobody sees disagree."""
    import dataclasses

    classes = _dataclasses_under(type(method_config(method)))
    assert type(method_config(method)) in classes
    assert method != "pearl" or {"PearlStudy", "TaskConfig"} <= {c.__name__ for c in classes}  # nested ones too
    with_default = [f"{c.__name__}.{f.name}" for c in classes for f in dataclasses.fields(c)
                    if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING]
    assert not with_default, f"defaults in code for settings of conf/method/{method}.yaml: {with_default}"


# every module of a method's code (lib/memlab/methods/<m>/, recursively), checked against the keys of its method
# group and of its experiments' params (issue 30: "no literal default in lib/ for any key that exists in conf/")
METHOD_MODULES = {str(p.relative_to(CONF_DIR.parent)): m for m in METHODS
                  for p in sorted((CONF_DIR.parent / "lib" / "memlab" / "methods" / m).rglob("*.py"))}
# the demo's modules (no method group): checked against its experiment's params
METHOD_MODULES.update({f"lib/memlab/methods/{f}.py": "memorization_curve"
                       for f in ("memorization_curve", "memorization_claims")})
# a parameter named differently from its conf key (scores.sensitivity(mode) is method.sensitivity_mode)
ALIASES = {"pearl": {"mode": "sensitivity_mode", "unit": "gfd_unit", "score": "decision_score"},
           "trace": {"min_words": "min_full_match_words", "eps": "propensity_eps"}}


def _signature_defaults(path: Path):
    import ast

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            positional = a.posonlyargs + a.args
            pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults))
            pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
            for arg, default in pairs:
                yield node.name, arg.arg, default


def _method_keys(method: str) -> set[str]:
    group = CONF_DIR / "method" / f"{method}.yaml"
    keys = {k.rsplit(".", 1)[-1] for k, _ in _leaves(_load(group))} if group.exists() else set()
    for name, exp in _experiments().items():
        if _method_of(exp) == method or name == method:
            keys |= {k.rsplit(".", 1)[-1] for k, _ in _leaves(exp.get("params") or {})}
    return keys


def test_every_method_module_is_checked():
    assert set(METHOD_MODULES.values()) == {*METHODS, "memorization_curve"}
    assert "lib/memlab/methods/trace/index/__init__.py" in METHOD_MODULES   # sub-packages too


@pytest.mark.parametrize("module", sorted(METHOD_MODULES))
def test_method_modules_default_no_setting_of_conf(module):
    import ast

    method = METHOD_MODULES[module]
    keys = _method_keys(method)
    root = CONF_DIR.parent
    # a None default is "no override: the config's value" (TraceConfig.index(backend=None)), not a second value
    found = [f"{fn}({arg}=...)" for fn, arg, default in _signature_defaults(root / module)
             if ALIASES.get(method, {}).get(arg, arg) in keys
             and not (isinstance(default, ast.Constant) and default.value is None)]
    assert not found, f"{module}: literal defaults for keys of conf/method/{method}.yaml or its experiments: {found}"


# values the YAML holds (params.min_k of pearl_mia and params.mia.min_k of the audit, n_resamples of recap's
# method.bootstrap and pearl_mia's params) and the offline rule (a loader downloads only when the data or model
# stage asks it to): no function of lib/memlab may default them (issue 48)
def _config_valued_default(arg: str, default) -> bool:
    import ast

    value = default.value if isinstance(default, ast.Constant) else None
    return ((arg in ("k", "min_k") and isinstance(value, float))
            or (arg == "n_resamples" and value is not None)
            or (arg == "download" and value is True))


def test_lib_defaults_no_configured_value_and_loaders_are_offline():
    import ast

    lib = CONF_DIR.parent / "lib" / "memlab"
    modules = sorted(lib.rglob("*.py"))
    assert lib / "metrics" / "mia.py" in modules and lib / "data" / "sdists.py" in modules
    found = [f"{p.relative_to(lib)}: {fn}({arg}={ast.unparse(d)})" for p in modules
             for fn, arg, d in _signature_defaults(p) if _config_valued_default(arg, d)]
    assert not found, f"defaults in code for values written in conf/ (or downloads by default): {found}"


def test_the_scan_sees_each_kind_of_default(tmp_path):
    """The scan above is not vacuous: each default it forbids is found in a module that has it."""
    mod = tmp_path / "m.py"
    mod.write_text("def a(ts, k: float = 0.2): ...\ndef b(*, n_resamples=1000): ...\ndef c(x, download=True): ...\n"
                   "def d(ts, k: int = 5, n_resamples=None, download=False): ...\n")
    hits = [(fn, arg) for fn, arg, d in _signature_defaults(mod) if _config_valued_default(arg, d)]
    assert hits == [("a", "k"), ("b", "n_resamples"), ("c", "download")]
