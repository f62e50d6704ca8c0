"""Tiny-model families: declared one per YAML file in ``conf/zoo/<family>.yaml``, built into
``models/tiny-neox/<family>/<size>/`` (layout: :mod:`memlab.models.tiny`).

Family file format (every key except ``members`` and ``sizes`` has a default)::

    name: kjv                    # = the file name; folder models/tiny-neox/<name>/
    description: one line
    members:                     # list of groups; the union of the groups is what the models train on
      - corpus: kjv              # a name for memlab.data.corpora.load_corpus
        options: {unit: book}    # its options
        ids: [kjv/book/Ruth]     # exact ids (order kept), and/or
        patterns: ["kjv/chapter/Ruth/*"]   # fnmatch patterns on ids, and/or nothing (= the whole corpus)
        exclude: [...]           # ids or patterns removed from the selection
        count: 10                # optional: a seeded random sample of this many of the selected docs
        seed: 0                  # seed of that sample (default: train.seed)
        weight: 1.0              # mixture weight = passes over this group per epoch (members only)
    nonmembers:                  # same group format (no weight); member ids are always excluded
      - {corpus: kjv, options: {unit: book}, ids: [kjv/book/Micah]}
    tokenizer: {vocab_size: 2048, train_on: members}   # members | all (members + nonmembers)
    sizes:                       # >= 1 named sizes (3 for size sweeps): GPT-NeoX shapes
      s: {hidden: 64, layers: 2, heads: 2, ffn: 256}
    train: {epochs: 10, seq_len: 128, batch_size: 8, lr: 3.0e-3, min_lr_ratio: 0.1, warmup_steps: 10,
            weight_decay: 0.0, seed: 0, threads: 1}
    train_by_size:               # optional per-size overrides of `train` (any key but epochs), part of
      l: {lr: 1.5e-3}            # the spec fingerprint: sizes trained to comparable final loss
    init_from: null              # or {family: kjv, epoch: final}: continue training each size from that
                                 # family's same-named size (its weights, architecture and tokenizer);
                                 # ``epoch`` = an int or "final"; ``size`` pins one source size for all.
    split: {max_shared_8gram: 0.05}   # split-hygiene limit (default 0.05), see below
    minutes: 4.3                 # optional: the build's measured wall minutes, a scheduling hint for
                                 # `make reproduce` (memlab.reproduce); no effect on the models

Split hygiene (checked by every build before any training, :meth:`Family.check_split`): for each non-member
the *shared word n-gram fraction* (:mod:`memlab.data.overlap`; n = 6 and 8) against the family's whole
training text — its members and the members of every family it continues from via ``init_from``,
recursively — is written to each size's ``membership.json`` (``nonmember_overlap``), with the closest
training document; a non-member whose 8-gram fraction exceeds ``split.max_shared_8gram`` stops the build
with one line naming it, its closest training document and the fraction. The default 0.05 was set from the
measured maxima of every family in conf/zoo (clean families: <= 0.009 shared 8-grams; the near copy Psalm 53
of member Psalm 14: 0.28). ``membership.json`` also lists the ancestors' members (``lineage``) and
``training_ids`` (= :meth:`Family.training_ids`), so a fine-tuned model's ground truth is complete.

API::

    fam = load_family("kjv")
    fam.sizes                       # ["s", "m", "l"]
    fam.checkpoint("m", 3)          # Path of epoch 3; fam.final("m") = the last epoch
    fam.members, fam.nonmembers     # list[Document] with split="member" / "nonmember"
    fam.tokenizer_dir               # the family's tokenizer (shared by every size)
    fam.model_cfg("m", epoch=3)     # a conf/model-style dict for memlab.backends.factory.build_backend
    fam.lineage()                   # [Family, ...]: the families it continues from, nearest first
    fam.training_ids()              # every document id any of its models was trained on (lineage included)
    fam.split_overlap()             # {nonmember id: Overlap(ngram6, ngram8, closest)}; fam.check_split()
    fam.train_for("l")              # the size's training settings (train + train_by_size)
    fam.final_loss("l")             # mean training loss of the size's last epoch (train_log.jsonl)
"""

from __future__ import annotations

import dataclasses
import fnmatch
import random
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from memlab.config import repo_root
from memlab.data.records import Document
from memlab.errors import ConfigError, MissingSourceError

REPO_ROOT = repo_root()
ZOO_DIR = REPO_ROOT / "conf" / "zoo"
MODELS_DIR = REPO_ROOT / "models"
TRAIN_DEFAULTS = dict(epochs=10, seq_len=128, batch_size=8, lr=3e-3, min_lr_ratio=0.1, warmup_steps=10,
                      weight_decay=0.0, seed=0, threads=1)
_GROUP_KEYS = {"corpus", "options", "ids", "patterns", "exclude", "count", "seed", "weight"}
_TOP_KEYS = {"name", "description", "members", "nonmembers", "tokenizer", "sizes", "train", "train_by_size",
             "init_from", "split", "minutes"}
SPLIT_DEFAULTS = dict(max_shared_8gram=0.05)


def family_files(zoo_dir: str | Path = ZOO_DIR) -> dict[str, Path]:
    return {p.stem: p for p in sorted(Path(zoo_dir).glob("*.yaml"))}


def _match(doc_id: str, pats: list[str]) -> bool:
    return any(doc_id == p or fnmatch.fnmatchcase(doc_id, p) for p in pats)


def select_group(group: dict, default_seed: int, exclude_ids: set[str] = frozenset(),
                 family: str = "?") -> list[Document]:
    """Documents of one selection group (see module docstring), in a deterministic order."""
    from memlab.data.corpora import load_corpus

    unknown = set(group) - _GROUP_KEYS
    if unknown or "corpus" not in group:
        raise ConfigError(f"zoo family {family!r}: a group needs `corpus` and only {sorted(_GROUP_KEYS)}; "
                          f"got {sorted(group)}")
    docs = load_corpus(group["corpus"], **dict(group.get("options") or {}))
    by_id = {d.id: d for d in docs}
    ids, pats = list(group.get("ids") or []), list(group.get("patterns") or [])
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise ConfigError(f"zoo family {family!r}: unknown {group['corpus']} ids {missing[:3]}")
    if ids or pats:
        chosen = [by_id[i] for i in ids] + [d for d in docs if d.id not in set(ids) and _match(d.id, pats)]
    else:
        chosen = list(docs)
    excl = list(group.get("exclude") or [])
    chosen = [d for d in chosen if d.id not in exclude_ids and not _match(d.id, excl)]
    if group.get("count") is not None:
        n = int(group["count"])
        if n > len(chosen):
            raise ConfigError(f"zoo family {family!r}: count {n} > {len(chosen)} available documents")
        rng = random.Random(int(group.get("seed", default_seed)))
        keep = set(rng.sample(range(len(chosen)), n))
        chosen = [d for i, d in enumerate(chosen) if i in keep]
    return chosen


@dataclass
class Family:
    """One family of tiny models sharing members, nonmembers and tokenizer (see module docstring)."""

    name: str
    cfg: dict
    models_dir: Path = MODELS_DIR
    zoo_dir: Path = ZOO_DIR
    _groups: list | None = field(default=None, repr=False)

    @property
    def root(self) -> Path:
        return self.models_dir / "tiny-neox" / self.name

    @property
    def sizes(self) -> list[str]:
        return list(self.cfg["sizes"])

    @property
    def train_cfg(self) -> dict:
        return {**TRAIN_DEFAULTS, **(self.cfg.get("train") or {})}

    @property
    def epochs(self) -> int:
        return int(self.train_cfg["epochs"])

    def train_for(self, size: str) -> dict:
        """Training settings of ``size``: ``train`` (with defaults) overridden by ``train_by_size[size]``."""
        by_size = self.cfg.get("train_by_size") or {}
        unknown = set(by_size) - set(self.cfg["sizes"])
        if unknown:
            raise ConfigError(f"zoo family {self.name!r}: train_by_size names unknown sizes {sorted(unknown)}; "
                              f"sizes: {', '.join(self.sizes)}")
        over = dict(by_size.get(size) or {})
        bad = set(over) - (set(TRAIN_DEFAULTS) - {"epochs"})
        if bad:
            raise ConfigError(f"zoo family {self.name!r}: train_by_size.{size} may set "
                              f"{sorted(set(TRAIN_DEFAULTS) - {'epochs'})} (epochs are shared by every size); "
                              f"got {sorted(bad)}")
        return {**self.train_cfg, **over}

    def final_loss(self, size: str) -> float:
        """Mean training loss over the last epoch of ``size`` (its train_log.jsonl; raises if not built)."""
        import json

        log = self.model_dir(size) / "train_log.jsonl"
        if not log.exists():
            raise MissingSourceError(f"model {self.model_dir(size)} is not built; run "
                                     f"`python -m memlab.models.build --only {self.name}`")
        by_epoch = {}
        for line in log.read_text().splitlines():  # a resumed epoch appears twice: the last line wins
            if line.strip():
                row = json.loads(line)
                by_epoch[int(row["epoch"])] = float(row["loss"])
        return by_epoch[max(by_epoch)]

    # ---- lineage and split hygiene ----------------------------------------------------------------------
    def lineage(self) -> list["Family"]:
        """The families this one continues from (``init_from``, recursively), nearest first."""
        out: list[Family] = []
        fam: Family = self
        while (fam.cfg.get("init_from") or {}).get("family"):
            fam = load_family(fam.cfg["init_from"]["family"], self.zoo_dir, self.models_dir)
            if fam.name == self.name or fam.name in {f.name for f in out}:
                raise ConfigError(f"zoo: init_from cycle through {fam.name!r}")
            out.append(fam)
        return out

    def training_docs(self) -> list[Document]:
        """Every document any model of this family was trained on: its members, then each ancestor's."""
        seen: dict[str, Document] = {}
        for fam in [self, *self.lineage()]:
            for d in fam.members:
                seen.setdefault(d.id, d)
        return list(seen.values())

    def training_ids(self) -> list[str]:
        """Ids of :meth:`training_docs` (the complete ground truth of a fine-tuned model)."""
        return [d.id for d in self.training_docs()]

    @property
    def split_cfg(self) -> dict:
        cfg = {**SPLIT_DEFAULTS, **(self.cfg.get("split") or {})}
        if set(cfg) != set(SPLIT_DEFAULTS):
            raise ConfigError(f"zoo family {self.name!r}: `split` takes only {sorted(SPLIT_DEFAULTS)}; "
                              f"got {sorted(self.cfg.get('split') or {})}")
        return cfg

    @cached_property
    def _overlap(self) -> dict:
        from memlab.data.overlap import NgramIndex

        idx = NgramIndex(self.training_docs())
        return {d.id: idx.overlap(d) for d in self.nonmembers}

    def split_overlap(self) -> dict:
        """{nonmember id: :class:`memlab.data.overlap.Overlap`} against :meth:`training_docs` (no training)."""
        return dict(self._overlap)

    def check_split(self) -> dict:
        """Refuse (one-line ConfigError) a non-member above ``split.max_shared_8gram``; returns the overlaps."""
        limit = float(self.split_cfg["max_shared_8gram"])
        over = self.split_overlap()
        bad = sorted(((o.ngram8, i) for i, o in over.items() if o.ngram8 > limit), reverse=True)
        if bad:
            frac, doc_id = bad[0]
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            raise ConfigError(
                f"zoo family {self.name!r}: non-member {doc_id} shares {frac:.1%} of its word 8-grams with the "
                f"training text (closest training document: {over[doc_id].closest}; limit "
                f"split.max_shared_8gram = {limit:g}){more}; fix: hold out another document, or raise the "
                f"limit in conf/zoo/{self.name}.yaml with a comment saying why")
        return over

    def membership_extra(self) -> dict:
        """What membership.json records beyond the model's own members: lineage and split hygiene."""
        from memlab.data.overlap import METRIC

        return {
            "lineage": [{"family": f.name, "members": [d.id for d in f.members],
                         "sha256": {d.id: d.sha256 for d in f.members}} for f in self.lineage()],
            "training_ids": self.training_ids(),
            "split": {"metric": METRIC, "reference": "training_ids", **self.split_cfg},
            "nonmember_overlap": {i: {"ngram6": round(o.ngram6, 6), "ngram8": round(o.ngram8, 6),
                                      "closest_member": o.closest} for i, o in self.split_overlap().items()},
        }

    def model_dir(self, size: str) -> Path:
        if size not in self.cfg["sizes"]:
            raise ConfigError(f"zoo family {self.name!r} has no size {size!r}; sizes: {', '.join(self.sizes)}")
        return self.root / size

    def checkpoint(self, size: str, epoch: int | str = "final") -> Path:
        """HF folder of ``size`` after ``epoch`` (1-based) or "final"; raises if not built."""
        d = self.model_dir(size)
        path = d / "final" if epoch in ("final", None) else d / f"epoch-{int(epoch):03d}"
        if epoch not in ("final", None) and not 1 <= int(epoch) <= self.epochs:
            raise ConfigError(f"zoo family {self.name!r}: epoch must be 1..{self.epochs}, got {epoch}")
        if not (path / "config.json").exists():
            raise MissingSourceError(f"model {path} is not built; run `python -m memlab.models.build --only {self.name}`")
        return path

    def final(self, size: str) -> Path:
        return self.checkpoint(size, "final")

    def checkpoints(self, size: str) -> dict[int, Path]:
        return {e: self.checkpoint(size, e) for e in range(1, self.epochs + 1)}

    @property
    def tokenizer_dir(self) -> Path:
        return self.root / "tokenizer"

    def is_built(self, size: str | None = None) -> bool:
        """Built from the current family file (a model built from an older version of it is not)."""
        import json

        for s in [size] if size else self.sizes:
            done = self.model_dir(s) / "done.json"
            if not done.exists():
                return False
            try:
                current = self.spec(s).fingerprint()
            except MissingSourceError:  # the family it continues from is not built (yet)
                return False
            if json.loads(done.read_text()).get("fingerprint") != current:
                return False
        return True

    # ---- data ---------------------------------------------------------------------------------------
    def member_groups(self) -> list[tuple[list[Document], float]]:
        if self._groups is None:
            seed = int(self.train_cfg["seed"])
            groups = []
            for g in self.cfg.get("members") or []:
                docs = [dataclasses.replace(d, split="member") for d in select_group(g, seed, family=self.name)]
                groups.append((docs, float(g.get("weight", 1.0))))
            if not groups or not any(docs for docs, _ in groups):
                raise ConfigError(f"zoo family {self.name!r}: `members` selects no documents")
            self._groups = groups
        return self._groups

    @cached_property
    def members(self) -> list[Document]:
        seen: dict[str, Document] = {}
        for docs, _w in self.member_groups():
            for d in docs:
                seen.setdefault(d.id, d)
        return list(seen.values())

    @cached_property
    def nonmembers(self) -> list[Document]:
        member_ids = {d.id for d in self.members}
        seed = int(self.train_cfg["seed"])
        out: dict[str, Document] = {}
        for g in self.cfg.get("nonmembers") or []:
            if set(g.get("ids") or []) & member_ids:
                raise ConfigError(f"zoo family {self.name!r}: ids listed as both member and nonmember: "
                                  f"{sorted(set(g['ids']) & member_ids)[:3]}")
            for d in select_group(g, seed, exclude_ids=member_ids, family=self.name):
                out.setdefault(d.id, dataclasses.replace(d, split="nonmember"))
        return list(out.values())

    # ---- training -----------------------------------------------------------------------------------
    def init_dir(self, size: str) -> str | None:
        init = self.cfg.get("init_from")
        if not init:
            return None
        src = load_family(init["family"], self.zoo_dir, self.models_dir)
        return str(src.checkpoint(init.get("size", size), init.get("epoch", "final")))

    def spec(self, size: str):
        from memlab.models.tiny import Arch, TrainSpec

        t = self.train_for(size)
        tok = self.cfg.get("tokenizer") or {}
        init = self.init_dir(size)
        arch = None if init else Arch(**{k: int(v) for k, v in self.cfg["sizes"][size].items()})
        return TrainSpec(member_groups=self.member_groups(), nonmembers=self.nonmembers, arch=arch,
                         vocab_size=int(tok.get("vocab_size", 2048)), tokenizer_on=tok.get("train_on", "members"),
                         epochs=int(t["epochs"]), seq_len=int(t["seq_len"]), batch_size=int(t["batch_size"]),
                         lr=float(t["lr"]), min_lr_ratio=float(t["min_lr_ratio"]),
                         warmup_steps=int(t["warmup_steps"]), weight_decay=float(t["weight_decay"]),
                         seed=int(t["seed"]), threads=int(t["threads"]), init_from=init,
                         meta={"family": self.name, "size": size}, record=self.membership_extra())

    def build(self, size: str, progress: bool = True) -> Path:
        """Train one size if missing (resumes a killed build); writes the family-level records too. Refuses
        (before any training) a split whose non-members overlap the training text (:meth:`check_split`)."""
        from memlab.models.tiny import train

        self.check_split()
        out = train(self.spec(size), self.model_dir(size), progress=progress)
        self.write_records(out / "tokenizer")
        return out

    def write_records(self, tokenizer_src: Path) -> None:
        """Family-level tokenizer copy + members/nonmembers JSONL; safe when sizes build in parallel."""
        import shutil

        from filelock import FileLock

        from memlab.data.records import write_jsonl

        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.root / ".records.lock")):
            have = self.tokenizer_dir / "tokenizer.json"
            if not have.exists() or have.read_bytes() != (Path(tokenizer_src) / "tokenizer.json").read_bytes():
                tmp = self.root / "tokenizer.tmp"
                shutil.rmtree(tmp, ignore_errors=True)
                shutil.copytree(tokenizer_src, tmp)
                shutil.rmtree(self.tokenizer_dir, ignore_errors=True)
                tmp.rename(self.tokenizer_dir)
            for split, docs in (("members", self.members), ("nonmembers", self.nonmembers)):
                write_jsonl(docs, self.root / f"{split}.jsonl")  # rewritten: the family file may have changed

    def model_cfg(self, size: str, epoch: int | str = "final", template: dict | None = None) -> dict:
        """The one way to name a checkpoint: a model node (the keys of conf/model/tiny-neox.yaml, or of the run's
        ``template`` node: device, dtype, threads, batch size) pointing at ``size`` after ``epoch`` and named
        ``tiny-neox-<family>-<size>-e<epoch>`` (or ``-final``). Epoch 0 is the model the family was initialised
        from (``init_from``: the pretrained model before fine-tuning)."""
        import yaml

        if template is None:
            template = yaml.safe_load((REPO_ROOT / "conf" / "model" / "tiny-neox.yaml").read_text())
        if epoch not in ("final", None) and int(epoch) == 0:
            path = self.init_dir(size)
            if path is None:
                raise ConfigError(f"zoo family {self.name!r} has no epoch 0 (it is not initialised from another "
                                  f"family); epochs are 1..{self.epochs}")
        else:
            path = str(self.checkpoint(size, epoch))
        return {**dict(template), "name": checkpoint_name(self.name, size, epoch), "path": path, "gguf_file": None,
                "revision": "auto"}


def checkpoint_name(family: str, size: str, epoch: int | str | None) -> str:
    """The model name of a zoo checkpoint, ``tiny-neox-<family>-<size>-e<epoch>`` (``-final`` for the last)."""
    return f"tiny-neox-{family}-{size}-{'final' if epoch in ('final', None) else f'e{int(epoch)}'}"


def load_family(name: str, zoo_dir: str | Path = ZOO_DIR, models_dir: str | Path = MODELS_DIR) -> Family:
    from memlab.config import read_yaml  # each family file parsed once per process

    files = family_files(zoo_dir)
    if name not in files:
        raise ConfigError(f"unknown zoo family {name!r}; families in {zoo_dir}: {', '.join(files) or 'none'}")
    cfg = read_yaml(files[name]) or {}
    unknown = set(cfg) - _TOP_KEYS
    if unknown:
        raise ConfigError(f"zoo family {name!r}: unknown keys {sorted(unknown)}; allowed: {sorted(_TOP_KEYS)}")
    if cfg.get("name", name) != name:
        raise ConfigError(f"zoo family file {files[name].name}: `name` must equal the file name ({name!r})")
    if not cfg.get("sizes") and not cfg.get("init_from"):
        raise ConfigError(f"zoo family {name!r}: `sizes` is required (e.g. s: {{hidden: 64, layers: 2, heads: 2, ffn: 256}})")
    if cfg.get("init_from") and not cfg.get("sizes"):
        src = read_yaml(files[cfg["init_from"]["family"]]) if cfg["init_from"]["family"] in files else None
        if src is None:
            raise ConfigError(f"zoo family {name!r}: init_from names unknown family {cfg['init_from']['family']!r}")
        cfg["sizes"] = dict(src["sizes"])
    return Family(name=name, cfg=cfg, models_dir=Path(models_dir), zoo_dir=Path(zoo_dir))
