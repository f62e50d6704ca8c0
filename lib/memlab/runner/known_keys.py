"""Every config key is known (issue 33): an override naming a key that no config of the run defines — with or
without ``+`` — is refused before anything runs, in one line naming the key, the nearest known keys and the file
that documents them; exit 2. A ``-m`` sweep is checked point by point (each combination of the swept config
groups): every bad point is reported and none runs.

Known keys of a run = the keys of its composed config, plus the optional keys of its model backend (the fields of
its kind's config dataclass: :mod:`memlab.backends.registry`) and the fields of a ``_schema_`` node's dataclass. An
optional key, or a known key given with ``+``, is passed to Hydra as ``++key`` (add or override), so it works
whether or not the chosen preset sets it. ``model.device`` naming a GPU (for a kind with a ``device`` key) is checked
against the machine here too.
"""

from __future__ import annotations

import difflib
import itertools
import sys
from typing import Any, Mapping, Sequence

from memlab.backends.registry import find_kind
from memlab.config import config_groups

GPU_DEVICES = ("cuda", "gpu")
_MAX_POINTS = 64  # sweep points composed for the check; beyond that only the first ones are checked
# the configs composed for the check, by their normalized group overrides: the runner reuses the experiment's
# default composition from here instead of composing conf/ again (issue 30; memlab.runner.plan.experiment_defaults)
COMPOSED: dict[tuple[str, ...], Any] = {}


class _Point:
    """One combination of config-group choices: its composed tree and Hydra's group choices."""

    def __init__(self, groups: list[str]):
        from omegaconf import OmegaConf

        from memlab.config import hydra_composition, normalize_overrides

        overrides = normalize_overrides(groups)
        cfg = hydra_composition(overrides, hydra_node=True)
        COMPOSED[tuple(overrides)] = cfg
        self.label = " ".join(groups)
        self.choices = {k: v for k, v in OmegaConf.to_container(cfg.hydra.runtime.choices).items() if v}
        tree = OmegaConf.to_container(cfg, resolve=False)
        tree.pop("hydra", None)
        self.tree: dict = tree


def check_overrides(argv: Sequence[str]) -> list[str]:
    """``argv`` with optional keys turned into ``++key=value``; prints one line per unknown key (per sweep point)
    or unusable device and exits 2 if there is any. Parse errors are left to the caller's own check."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    parser = OverridesParser.create()
    groups = config_groups() | {"hydra"}
    group_args: list[list[str]] = []
    keyed: list[tuple[int, Any]] = []
    for pos, arg in enumerate(argv):
        if arg.startswith("-") or "=" not in arg and not arg.startswith("~"):
            continue
        ov = parser.parse_overrides([arg])[0]
        key = ov.key_or_group
        if key == "hydra" or key.startswith(("hydra.", "hydra/")):
            continue
        if "." not in key and key.split("/")[0] in groups:  # a config group choice: one axis of the sweep
            values = list(ov.sweep_string_iterator()) if ov.is_sweep_override() else [ov.value()]
            group_args.append([f"~{key}"] if ov.is_delete() else
                              [f"{'+' if ov.is_add() else ''}{key}={v}" for v in values])
            continue
        if ov.is_delete():
            continue
        keyed.append((pos, ov))
    if not keyed and not any("device" in a for a in argv):
        return list(argv)
    try:
        points = [_Point(list(c)) for c in itertools.islice(itertools.product(*group_args), _MAX_POINTS)]
    except (HydraException, OmegaConfBaseException):
        return list(argv)  # a bad group choice: the runner's own checks say it in one line
    out, errors = list(argv), []
    for point in points:
        for pos, ov in keyed:
            status, message = _judge(point, ov.key_or_group)
            if status == "unknown":
                where = f" (sweep point {point.label})" if len(points) > 1 else ""
                errors.append(f"unknown config key {ov.key_or_group}{where}: {message}")
            elif (status == "optional" or ov.is_add()) and not ov.is_force_add():
                out[pos] = "++" + ov.input_line.lstrip("+")  # add or override: right at every sweep point
        errors += _device_errors(point, keyed, len(points) > 1)
    for line in dict.fromkeys(errors):
        print(f"memlab: error: {line}", file=sys.stderr)
    if errors:
        if len(points) > 1:
            print(f"memlab: error: no job of the sweep ran ({len(points)} points checked)", file=sys.stderr)
        sys.exit(2)
    return out


def _judge(point: _Point, key: str) -> tuple[str, str]:
    """("known" | "optional" | "unknown", the unknown key's hint)."""
    parts = key.split(".")
    node: Any = point.tree
    for depth, part in enumerate(parts):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
            continue
        parent = ".".join(parts[:depth])
        siblings = sorted(str(k) for k in node if k != "_schema_") if isinstance(node, Mapping) else []
        optional = _optional_keys(point, parent, node) if depth == len(parts) - 1 else ()
        if part in optional:
            return "optional", ""
        known = sorted(set(siblings) | set(optional))
        near = difflib.get_close_matches(part, known, n=3, cutoff=0.6)
        if not near:
            near = difflib.get_close_matches(key, _leaf_keys(point.tree), n=3, cutoff=0.6)
        else:
            near = [f"{parent}.{k}" if parent else k for k in near]
        hint = f"did you mean {', '.join(near)}? " if near else ""
        return "unknown", f"{hint}known keys of {parent or 'the top level'} are documented in {_docs(point, parent)}"
    return "known", ""


def _optional_keys(point: _Point, parent: str, node: Any) -> tuple[str, ...]:
    if not isinstance(node, Mapping):
        return ()
    if parent == "model":
        kind = find_kind(node.get("backend"))
        return kind.keys if kind else ()
    if "_schema_" in node:
        import dataclasses

        from memlab.schema import schema_class

        return tuple(f.name for f in dataclasses.fields(schema_class(node["_schema_"], parent)) if f.init)
    return ()


def _docs(point: _Point, parent: str) -> str:
    top = parent.split(".")[0]
    if top == "params" and "experiment" in point.choices:
        return f"conf/experiment/{point.choices['experiment']}.yaml"
    if top in point.choices:
        extra = ""
        if top == "model":
            kind = find_kind(point.tree.get("model", {}).get("backend"))
            extra = f" and {kind.docs if kind else 'conf/model/'}"
        return f"conf/{top}/{point.choices[top]}.yaml{extra}"
    return "conf/config.yaml"


def _leaf_keys(tree: Mapping, prefix: str = "") -> list[str]:
    out = []
    for k, v in tree.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        out += _leaf_keys(v, key) if isinstance(v, Mapping) else [key]
    return out


def _device_errors(point: _Point, keyed: list[tuple[int, Any]], sweep: bool) -> list[str]:
    model = point.tree.get("model") or {}
    given = [ov for _, ov in keyed if ov.key_or_group == "model.device"]
    values = ([str(v) for ov in given for v in (ov.sweep_string_iterator() if ov.is_sweep_override() else [ov.value()])]
              if given else [str(model.get("device", "cpu"))])
    bad = [v for v in values if v.split(":")[0].lower() in GPU_DEVICES]
    kind = find_kind(model.get("backend"))
    if not bad or kind is None or "device" not in kind.keys or _has_cuda():
        return []
    where = f" (sweep point {point.label})" if sweep else ""
    return [f"model.device={v}{where}, but this machine has no CUDA GPU (torch.cuda.is_available() is False); use "
            "model.device=cpu" for v in bad]


def _has_cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())
