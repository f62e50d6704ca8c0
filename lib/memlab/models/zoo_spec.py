"""The typed form of a zoo family file (``conf/zoo/<family>.yaml``): frozen dataclasses, every key written in the
file and none defaulted in code (issue 30). :func:`parse_family` builds one from the parsed YAML or refuses it in
one line naming the file and what is wrong. The file format is documented in :mod:`memlab.models.zoo`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from memlab.errors import ConfigError
from memlab.models.tiny import Arch, TrainRecipe

# keys of a selection group: `corpus` and `options` always; a member group also says its `weight` (passes per
# epoch); `count` (a seeded sample) needs its `seed`; the others select, and are absent when unused
GROUP_REQUIRED = ("corpus", "options")
GROUP_SELECT = ("ids", "patterns", "exclude", "count", "seed")


@dataclass(frozen=True)
class TokenizerRecipe:
    vocab_size: int
    train_on: str            # members | all (members + nonmembers)


@dataclass(frozen=True)
class SplitRule:
    max_shared_8gram: float  # a non-member sharing more of its word 8-grams with the training text stops the build


@dataclass(frozen=True)
class InitFrom:
    family: str
    epoch: int | str         # an epoch number or "final"
    size: str | None         # None: each size continues the parent's same-named size


@dataclass(frozen=True)
class ZooFamily:
    name: str
    description: str
    members: tuple[Mapping, ...]
    nonmembers: tuple[Mapping, ...]
    tokenizer: TokenizerRecipe | None      # None: continued from `init_from`, whose tokenizer it inherits
    sizes: Mapping[str, Mapping[str, int]] | None   # None: the parent's sizes (init_from)
    train: TrainRecipe
    train_by_size: Mapping[str, Mapping]   # per-size overrides of `train` (any key but epochs); {} for none
    init_from: InitFrom | None
    split: SplitRule
    minutes: float | None                  # scheduling hint for make reproduce; no effect on the models

    def train_for(self, size: str) -> TrainRecipe:
        """``train`` with ``train_by_size[size]`` applied."""
        return dataclasses.replace(self.train, **dict(self.train_by_size.get(size) or {}))


def _keys(node, cls, where: str) -> dict:
    names = [f.name for f in dataclasses.fields(cls)]
    if not isinstance(node, Mapping):
        raise ConfigError(f"{where}: expected a mapping with keys {names}, got {node!r}")
    missing, unknown = [k for k in names if k not in node], sorted(set(node) - set(names))
    if missing or unknown:
        raise ConfigError(f"{where}: " + "; ".join(
            ([f"missing keys {missing}"] if missing else []) + ([f"unknown keys {unknown}"] if unknown else []))
            + f" (a zoo family file writes every key: {names})")
    return dict(node)


def _group(g, where: str, member: bool) -> Mapping:
    allowed = set(GROUP_REQUIRED) | set(GROUP_SELECT) | ({"weight"} if member else set())
    if not isinstance(g, Mapping) or not set(GROUP_REQUIRED) <= set(g) or set(g) - allowed:
        raise ConfigError(f"{where}: a group needs {list(GROUP_REQUIRED)}{' and weight' if member else ''} and takes "
                          f"only {sorted(allowed)}; got {sorted(g) if isinstance(g, Mapping) else g!r}")
    if member and "weight" not in g:
        raise ConfigError(f"{where}: a member group says its `weight` (passes over it per epoch, e.g. 1.0)")
    if g.get("count") is not None and "seed" not in g:
        raise ConfigError(f"{where}: a group with `count` says the `seed` of its sample")
    return dict(g)


def parse_family(name: str, raw, source: str) -> ZooFamily:
    """The typed family of ``raw`` (the parsed ``source`` file), or a one-line :class:`ConfigError`."""
    where = f"zoo family {name!r} ({source})"
    top = _keys(raw, ZooFamily, where)
    if top["name"] != name:
        raise ConfigError(f"{where}: `name` must equal the file name ({name!r})")
    # init_from's `size` may be left out: each size then continues the parent's same-named size
    init = InitFrom(**_keys({"size": None, **top["init_from"]}, InitFrom, f"{where} init_from")) \
        if top["init_from"] else None
    if init is None and (not top["sizes"] or top["tokenizer"] is None):
        raise ConfigError(f"{where}: a family trained from scratch (init_from: null) needs `sizes` "
                          f"(e.g. s: {{hidden: 64, layers: 2, heads: 2, ffn: 256}}) and a `tokenizer`")
    if init is not None and top["tokenizer"] is not None:
        raise ConfigError(f"{where}: `tokenizer` must be null: a continued family inherits {init.family!r}'s")
    for size, shape in (top["sizes"] or {}).items():
        _keys(shape, Arch, f"{where} sizes.{size}")
    train = TrainRecipe(**_keys(top["train"], TrainRecipe, f"{where} train"))
    by_size = dict(top["train_by_size"] or {})
    for size, over in by_size.items():
        bad = set(over or {}) - ({f.name for f in dataclasses.fields(TrainRecipe)} - {"epochs"})
        if bad:
            raise ConfigError(f"{where}: train_by_size.{size} may set any `train` key but epochs (epochs are shared "
                              f"by every size); got {sorted(bad)}")
    return ZooFamily(
        name=name, description=str(top["description"]),
        members=tuple(_group(g, f"{where} members", True) for g in top["members"] or ()),
        nonmembers=tuple(_group(g, f"{where} nonmembers", False) for g in top["nonmembers"] or ()),
        tokenizer=TokenizerRecipe(**_keys(top["tokenizer"], TokenizerRecipe, f"{where} tokenizer"))
        if top["tokenizer"] is not None else None,
        sizes=dict(top["sizes"]) if top["sizes"] else None, train=train, train_by_size=by_size, init_from=init,
        split=SplitRule(**_keys(top["split"], SplitRule, f"{where} split")), minutes=top["minutes"])

