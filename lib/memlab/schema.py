"""Typed config: a YAML node → a frozen dataclass, checked before any model is loaded.

The YAML is the single source of every value: schema dataclasses declare fields **without defaults**, so a
missing key is an error, never a silent fallback. A field's allowed range goes in its metadata::

    @dataclass(frozen=True)
    class PerturbationConfig:
        unit: str = field(metadata=check(choices=("token", "byte", "bit")))
        rate: float = field(metadata=check(gt=0, le=1))
        levels: list[int]

    cfg = typed(PearlConfig, node, "method")         # → PearlConfig, or ConfigError in one line:
    # "config key method.perturbation.rate=5: must be ≤ 1"

A config node may name its schema with ``_schema_: package.module.ClassName``; :func:`validate_tree` finds
every such node in a resolved config and builds it, so the runner refuses a bad value at compose time.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import types
import typing
from typing import Any, Literal, Mapping, Sequence, TypeVar, Union, get_args, get_origin, get_type_hints

from memlab.errors import ConfigError

T = TypeVar("T")
SCHEMA_KEY = "_schema_"
_MISSING = dataclasses.MISSING


def check(*, ge: float | None = None, gt: float | None = None, le: float | None = None,
          lt: float | None = None, choices: Sequence[Any] | None = None, nonempty: bool = False) -> dict:
    """Field metadata: the allowed range of a value (for a list: of each item)."""
    return {"check": {k: v for k, v in dict(ge=ge, gt=gt, le=le, lt=lt, choices=choices,
                                             nonempty=nonempty).items() if v is not None and v is not False}}


def typed(cls: type[T], node: Any, where: str) -> T:
    """Build dataclass ``cls`` from ``node`` (a mapping or OmegaConf node). ``where`` names the node in errors."""
    from memlab.config import to_plain

    return _build(cls, to_plain(node), where)


def validate_tree(tree: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """Build every node of a resolved config that names a ``_schema_``; returns {dotted key: instance}."""
    found: dict[str, Any] = {}
    if isinstance(tree, Mapping):
        if SCHEMA_KEY in tree:
            found[where or "<root>"] = typed(schema_class(tree[SCHEMA_KEY], where), tree, where)
        for k, v in tree.items():
            if isinstance(v, Mapping):
                found.update(validate_tree(v, f"{where}.{k}" if where else str(k)))
    return found


# Ranges that hold wherever a key of this name appears in an experiment's ``params`` (all methods use these names
# in one sense only); a key's typed schema, where one exists, is checked as well.
KEY_RANGES: dict[str, dict] = {
    "target_fpr": check(ge=0, le=1)["check"], "target_fprs": check(ge=0, le=1)["check"],
    "alpha": check(ge=0, le=1)["check"], "alphas": check(ge=0, le=1)["check"],
    "tau_b": check(ge=0, le=1)["check"],
    "temperature": check(ge=0)["check"], "top_p": check(gt=0, le=1)["check"], "samples": check(ge=1)["check"],
    "split": check(gt=0, lt=1)["check"], "min_k": check(gt=0, le=1)["check"],
    "max_new_tokens": check(ge=1)["check"], "stop_score": check(ge=0, le=1)["check"],
    "min_gain": check(ge=0, le=1)["check"], "max_rounds": check(ge=1)["check"],
}


def check_like_defaults(default: Any, given: Any, where: str) -> None:
    """Every value of ``given`` keeps the type of the experiment's own default (a number stays a number, a list a
    list, a flag a flag) and every key in KEY_RANGES stays in its range: a typo'd override fails at compose time,
    before any model loads, in one line naming the key, the value and what is allowed."""
    if isinstance(given, Mapping):
        for k, v in given.items():
            key = f"{where}.{k}" if where else str(k)
            if k == SCHEMA_KEY:
                continue
            d = default.get(k) if isinstance(default, Mapping) else None
            if d is not None:
                check_like_defaults(d, v, key)
            if k in KEY_RANGES:
                _check_range(KEY_RANGES[k], _numbers_only(v, key), key)
        return
    if default is None or given is None:
        return
    want = _kind(default)
    if isinstance(default, list) and isinstance(given, list):
        if default and len({_kind(x) for x in default}) == 1 and not isinstance(default[0], (list, dict)):
            for i, x in enumerate(given):
                check_like_defaults(default[0], x, f"{where}[{i}]")
        return
    if _kind(given) != want and not (want == "number" and _kind(given) == "integer"):
        raise ConfigError(f"config key {where}={given!r}: must be {_ARTICLE[want]} (the default is {default!r})")


_ARTICLE = {"integer": "an integer", "number": "a number", "flag": "true or false", "string": "a string",
            "list": "a list", "mapping": "a mapping"}


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "flag"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (list, tuple)):
        return "list"
    if isinstance(v, Mapping):
        return "mapping"
    return type(v).__name__


def _numbers_only(v: Any, key: str) -> Any:
    items = v if isinstance(v, (list, tuple)) else [v]
    for x in items:
        if x is not None and (isinstance(x, bool) or not isinstance(x, (int, float))):
            raise ConfigError(f"config key {key}={v!r}: must be a number")
    return v


def schema_class(dotted: str, where: str = "") -> type:
    module, _, name = str(dotted).rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        raise ConfigError(f"config key {where}.{SCHEMA_KEY}={dotted}: no such class") from None
    if not dataclasses.is_dataclass(cls):
        raise ConfigError(f"config key {where}.{SCHEMA_KEY}={dotted}: not a dataclass")
    return cls


def method_config(method: str, overrides: Sequence[str] = ()):
    """``conf/method/<method>.yaml`` (with Hydra-style ``overrides`` such as ``"method.samples=5"``) as its typed
    dataclass — what a run gets, for tests and interactive use."""
    from memlab.config import CONF_DIR, compose, to_plain

    known = sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml"))
    if method not in known:
        raise ConfigError(f"unknown method {method!r}; known (conf/method/): {', '.join(known)}")
    node = to_plain(compose(overrides=[f"method={method}", *overrides]).method)
    return typed(schema_class(node[SCHEMA_KEY], "method"), node, "method")


# -- internals -----------------------------------------------------------------------------------------------

def _build(cls: type, node: Any, where: str) -> Any:
    if not isinstance(node, Mapping):
        raise ConfigError(f"config key {where}: expected a mapping for {cls.__name__}, got {node!r}")
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    given = {k: v for k, v in node.items() if k != SCHEMA_KEY}
    unknown = sorted(set(given) - set(fields))
    if unknown:
        raise ConfigError(f"config key {where}.{unknown[0]}: unknown option; known: {', '.join(sorted(fields))}")
    kwargs = {}
    for name, f in fields.items():
        key = f"{where}.{name}" if where else name
        if name not in given:
            if f.default is not _MISSING or f.default_factory is not _MISSING:  # type: ignore[misc]
                continue  # derived fields may default; config values may not (schemas give them none)
            raise ConfigError(f"config key {key}: missing (set it in the YAML)")
        value = _coerce(hints[name], given[name], key)
        _check_range(f.metadata.get("check", {}), value, key)
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as err:
        raise ConfigError(f"config key {where}: {str(err).splitlines()[0]}") from None


def _coerce(tp: Any, value: Any, key: str) -> Any:
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(a, value, key)
            except ConfigError as err:
                errors.append(str(err))
        raise ConfigError(errors[0] if errors else f"config key {key}={value!r}: invalid")
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"config key {key}={value!r}: must be one of {', '.join(map(str, args))}")
        return value
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, key)
    if origin in (list, tuple, Sequence, typing.Sequence) or tp in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"config key {key}={value!r}: must be a list")
        item = args[0] if args else Any
        out = [_coerce(item, v, f"{key}[{i}]") for i, v in enumerate(value)]
        return tuple(out) if origin is tuple or tp is tuple else out
    if origin in (dict, Mapping, typing.Mapping) or tp is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"config key {key}={value!r}: must be a mapping")
        vt = args[1] if len(args) == 2 else Any
        return {k: _coerce(vt, v, f"{key}.{k}") for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"config key {key}={value!r}: must be true or false")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"config key {key}={value!r}: must be an integer")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"config key {key}={value!r}: must be a number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"config key {key}={value!r}: must be a string")
        return value
    return value


def _check_range(rule: Mapping[str, Any], value: Any, key: str) -> None:
    if not rule or value is None:
        return
    if rule.get("nonempty") and hasattr(value, "__len__") and len(value) == 0:
        raise ConfigError(f"config key {key}: must not be empty")
    items = value if isinstance(value, (list, tuple)) else [value]
    for v in items:
        if "choices" in rule and v not in rule["choices"]:
            raise ConfigError(f"config key {key}={v!r}: must be one of {', '.join(map(str, rule['choices']))}")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            for op, bound, ok in (("≥", rule.get("ge"), lambda a, b: a >= b), ("≤", rule.get("le"), lambda a, b: a <= b),
                                  (">", rule.get("gt"), lambda a, b: a > b), ("<", rule.get("lt"), lambda a, b: a < b)):
                if bound is not None and not ok(v, bound):
                    raise ConfigError(f"config key {key}={v!r}: must be {op} {bound}")
