"""Tiny-model families: declared one per YAML file in ``conf/zoo/<family>.yaml``, built into
``models/tiny-neox/<family>/<size>/`` (layout: :mod:`memlab.models.tiny`).

Family file format (every key is written in the file; the typed form is :class:`memlab.models.zoo_spec.ZooFamily`,
with no default in code)::

    name: kjv                    # = the file name; folder models/tiny-neox/<name>/
    description: one line
    members:                     # list of groups; the union of the groups is what the models train on
      - corpus: kjv              # a name for memlab.data.corpora.load_corpus
        options: {unit: book}    # its options
        ids: [kjv/book/Ruth]     # exact ids (order kept), and/or
        patterns: ["kjv/chapter/Ruth/*"]   # fnmatch patterns on ids, and/or nothing (= the whole corpus)
        exclude: [...]           # ids or patterns removed from the selection
        count: 10                # optional: a seeded random sample of this many of the selected docs
        seed: 0                  # the seed of that sample (required with count)
        weight: 1.0              # mixture weight = passes over this group per epoch (every member group)
    nonmembers:                  # same group format (no weight); member ids are always excluded
      - {corpus: kjv, options: {unit: book}, ids: [kjv/book/Micah]}
    tokenizer: {vocab_size: 2048, train_on: members}   # members | all (members + nonmembers); null when
                                 # init_from is set (the parent's tokenizer is inherited)
    sizes:                       # >= 1 named sizes (3 for size sweeps): GPT-NeoX shapes; null = the parent's
      s: {hidden: 64, layers: 2, heads: 2, ffn: 256}
    train: {epochs: 10, seq_len: 128, batch_size: 8, lr: 3.0e-3, min_lr_ratio: 0.1, warmup_steps: 10,
            weight_decay: 0.0, seed: 0, threads: 1}
    train_by_size:               # per-size overrides of `train` (any key but epochs; {} for none), part of
      l: {lr: 1.5e-3}            # the spec fingerprint: sizes trained to comparable final loss
    init_from: null              # or {family: kjv, epoch: final}: continue training each size from that
                                 # family's same-named size (its weights, architecture and tokenizer);
                                 # ``epoch`` = an int or "final"; ``size`` pins one source size for all.
    split: {max_shared_8gram: 0.05}   # split-hygiene limit, see below
    minutes: 4.3                 # the build's measured wall minutes (or null), a scheduling hint for
                                 # `make reproduce` (memlab.reproduce); no effect on the models

Split hygiene (checked by every build before any training, :meth:`Family.check_split`): for each non-member
the *shared word n-gram fraction* (:mod:`memlab.data.overlap`; n = 6 and 8) against the family's whole
training text — its members and the members of every family it continues from via ``init_from``,
recursively — is written to each size's ``membership.json`` (``nonmember_overlap``), with the closest
training document; a non-member whose 8-gram fraction exceeds ``split.max_shared_8gram`` stops the build
with one line naming it, its closest training document and the fraction. The limit 0.05 was set from the
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
    fam.recipe                      # the typed family file (memlab.models.zoo_spec.ZooFamily)
    fam.train_for("l")              # the size's training settings (train + train_by_size), a TrainRecipe
    fam.final_loss("l")             # mean training loss of the size's last epoch (train_log.jsonl)
"""

from __future__ import annotations

import dataclasses
import fnmatch
import random
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from memlab.config import CONF_DIR, repo_root
from memlab.data.records import Document
from memlab.errors import ConfigError, MissingSourceError
from memlab.zoo_layout import checkpoint_dir, checkpoint_name, family_dir
from memlab.models.zoo_spec import TrainRecipe, ZooFamily, parse_family

REPO_ROOT = repo_root()
ZOO_DIR = CONF_DIR / "zoo"
MODELS_DIR = REPO_ROOT / "models"


def family_files(zoo_dir: str | Path = ZOO_DIR) -> dict[str, Path]:
    return {p.stem: p for p in sorted(Path(zoo_dir).glob("*.yaml"))}


def _match(doc_id: str, pats: list[str]) -> bool:
    return any(doc_id == p or fnmatch.fnmatchcase(doc_id, p) for p in pats)


def select_group(group, exclude_ids: set[str], family: str) -> list[Document]:
    """Documents of one selection group (see module docstring; checked by :func:`zoo_spec.parse_family`), in a
    deterministic order."""
    from memlab.data.corpora import load_corpus

    docs = load_corpus(group["corpus"], **dict(group["options"] or {}))
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
        rng = random.Random(int(group["seed"]))
        keep = set(rng.sample(range(len(chosen)), n))
        chosen = [d for i, d in enumerate(chosen) if i in keep]
    return chosen


@dataclass
class Family:
    """One family of tiny models sharing members, nonmembers and tokenizer (see module docstring)."""

    name: str
    recipe: ZooFamily
    models_dir: Path
    zoo_dir: Path
    _groups: list | None = field(default=None, repr=False)

    @property
    def root(self) -> Path:
        return family_dir(self.models_dir, self.name)

    @cached_property
    def shapes(self) -> dict:
        """{size: its GPT-NeoX shape}: the family's own, or (``sizes: null``) the family it continues from."""
        if self.recipe.sizes is not None:
            return dict(self.recipe.sizes)
        return self.parent().shapes

    @property
    def sizes(self) -> list[str]:
        return list(self.shapes)

    def non_embedding_params(self, size: str) -> int:
        """``size``'s weights outside the embeddings (:attr:`memlab.models.tiny.Arch.non_embedding_params`)."""
        from memlab.models.tiny import Arch

        return Arch(**self.shapes[size]).non_embedding_params

    @property
    def epochs(self) -> int:
        return self.recipe.train.epochs

    def parent(self) -> "Family | None":
        """The family this one continues from (``init_from``), or None."""
        init = self.recipe.init_from
        return load_family(init.family, self.zoo_dir, self.models_dir) if init else None

    def train_for(self, size: str) -> TrainRecipe:
        """Training settings of ``size``: ``train`` overridden by ``train_by_size[size]``."""
        unknown = set(self.recipe.train_by_size) - set(self.sizes)
        if unknown:
            raise ConfigError(f"zoo family {self.name!r}: train_by_size names unknown sizes {sorted(unknown)}; "
                              f"sizes: {', '.join(self.sizes)}")
        return self.recipe.train_for(size)

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
        while fam.recipe.init_from is not None:
            fam = fam.parent()
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
        limit = self.recipe.split.max_shared_8gram
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
            "split": {"metric": METRIC, "reference": "training_ids", **dataclasses.asdict(self.recipe.split)},
            "nonmember_overlap": {i: {"ngram6": round(o.ngram6, 6), "ngram8": round(o.ngram8, 6),
                                      "closest_member": o.closest} for i, o in self.split_overlap().items()},
        }

    def model_dir(self, size: str) -> Path:
        if size not in self.shapes:
            raise ConfigError(f"zoo family {self.name!r} has no size {size!r}; sizes: {', '.join(self.sizes)}")
        return family_dir(self.models_dir, self.name) / size

    def checkpoint(self, size: str, epoch: int | str = "final") -> Path:
        """HF folder of ``size`` after ``epoch`` (1-based) or "final"; raises if not built."""
        self.model_dir(size)   # refuses an unknown size
        path = checkpoint_dir(self.models_dir, self.name, size, epoch)
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
            groups = []
            for g in self.recipe.members:
                docs = [dataclasses.replace(d, split="member") for d in select_group(g, set(), self.name)]
                groups.append((docs, float(g["weight"])))
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
        out: dict[str, Document] = {}
        for g in self.recipe.nonmembers:
            if set(g.get("ids") or []) & member_ids:
                raise ConfigError(f"zoo family {self.name!r}: ids listed as both member and nonmember: "
                                  f"{sorted(set(g['ids']) & member_ids)[:3]}")
            for d in select_group(g, member_ids, self.name):
                out.setdefault(d.id, dataclasses.replace(d, split="nonmember"))
        return list(out.values())

    # ---- training -----------------------------------------------------------------------------------
    def init_dir(self, size: str) -> str | None:
        init = self.recipe.init_from
        if init is None:
            return None
        return str(self.parent().checkpoint(init.size or size, init.epoch))

    def spec(self, size: str):
        from memlab.models.tiny import INHERITED_TOKENIZER, Arch, TrainRecipe, TrainSpec

        t = self.train_for(size)
        tok = self.recipe.tokenizer
        tokenizer = INHERITED_TOKENIZER if tok is None else {"vocab_size": tok.vocab_size, "tokenizer_on": tok.train_on}
        init = self.init_dir(size)
        arch = None if init else Arch(**{k: int(v) for k, v in self.shapes[size].items()})
        recipe = TrainRecipe(epochs=int(t.epochs), seq_len=int(t.seq_len), batch_size=int(t.batch_size),
                             lr=float(t.lr), min_lr_ratio=float(t.min_lr_ratio), warmup_steps=int(t.warmup_steps),
                             weight_decay=float(t.weight_decay), seed=int(t.seed), threads=int(t.threads))
        return TrainSpec(member_groups=self.member_groups(), nonmembers=self.nonmembers, arch=arch, **tokenizer,
                         recipe=recipe, init_from=init, meta={"family": self.name, "size": size},
                         record=self.membership_extra())

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
            template = yaml.safe_load((CONF_DIR / "model" / "tiny-neox.yaml").read_text())
        if epoch not in ("final", None) and int(epoch) == 0:
            path = self.init_dir(size)
            if path is None:
                raise ConfigError(f"zoo family {self.name!r} has no epoch 0 (it is not initialised from another "
                                  f"family); epochs are 1..{self.epochs}")
        else:
            path = str(self.checkpoint(size, epoch))
        return {**dict(template), "name": checkpoint_name(self.name, size, epoch), "path": path, "gguf_file": None,
                "revision": "auto"}


def load_family(name: str, zoo_dir: str | Path = ZOO_DIR, models_dir: str | Path = MODELS_DIR) -> Family:
    from memlab.config import read_yaml  # each family file parsed once per process

    files = family_files(zoo_dir)
    if name not in files:
        raise ConfigError(f"unknown zoo family {name!r}; families in {zoo_dir}: {', '.join(files) or 'none'}")
    recipe = parse_family(name, read_yaml(files[name]) or {}, files[name].name)
    if recipe.init_from is not None and recipe.init_from.family not in files:
        raise ConfigError(f"zoo family {name!r}: init_from names unknown family {recipe.init_from.family!r}; "
                          f"families in {zoo_dir}: {', '.join(files)}")
    return Family(name=name, recipe=recipe, models_dir=Path(models_dir), zoo_dir=Path(zoo_dir))
