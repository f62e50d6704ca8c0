"""Zoo family files: format validation, selection, the kjv family, and the build CLI on a temp zoo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from memlab.errors import ConfigError, MissingSourceError
from memlab.models.zoo import family_files, load_family, select_group


def test_kjv_family_declares_disjoint_members_and_three_sizes(repo_root):
    fam = load_family("kjv", repo_root / "conf" / "zoo", repo_root / "models")
    assert len(fam.sizes) >= 3
    mem, non = {d.id for d in fam.members}, {d.id for d in fam.nonmembers}
    assert mem and non and not mem & non
    assert all(d.split == "member" for d in fam.members) and all(d.split == "nonmember" for d in fam.nonmembers)
    assert fam.checkpoint.__doc__ and fam.tokenizer_dir == repo_root / "models" / "tiny-neox" / "kjv" / "tokenizer"
    # the member corpus is small enough for a minutes-long build (see the family file's comment)
    assert 5_000 < sum(len(d.text.split()) for d in fam.members) < 20_000


def test_every_family_file_is_valid(repo_root):
    files = family_files(repo_root / "conf" / "zoo")
    assert "kjv" in files
    for name in files:
        fam = load_family(name, repo_root / "conf" / "zoo", repo_root / "models")
        if fam.recipe.init_from is not None:
            continue  # needs the source family built; its own file is validated when it is loaded
        for size in fam.sizes:
            spec = fam.spec(size)
            assert spec.members and spec.recipe.epochs >= 1


@pytest.fixture(autouse=True)
def _writer(zoo_writer):
    global _write_family
    _write_family = zoo_writer


def _write(zoo, name, cfg):
    _write_family(zoo, cfg, name)


BASE = {
    "name": "base",
    "members": [{"corpus": "kjv", "options": {"unit": "chapter"}, "ids": ["kjv/chapter/Ruth/1", "kjv/chapter/Ruth/2"]}],
    "nonmembers": [{"corpus": "kjv", "options": {"unit": "chapter"}, "patterns": ["kjv/chapter/Ruth/*"]}],
    "tokenizer": {"vocab_size": 300, "train_on": "members"},
    "sizes": {"a": {"hidden": 32, "layers": 1, "heads": 2, "ffn": 64},
              "b": {"hidden": 48, "layers": 1, "heads": 2, "ffn": 96}},
    "train": {"epochs": 2, "seq_len": 32, "batch_size": 8, "lr": 5e-3, "warmup_steps": 1},
}


@pytest.mark.parametrize("patch,match", [
    ({"colour": 1}, "unknown keys"),
    ({"sizes": None}, "needs `sizes`"),
    ({"tokenizer": {"vocab_size": 300}}, r"tokenizer: missing keys \['train_on'\]"),
    ({"train": {"epochs": 2, "lr": 5e-3, "colour": 1}}, "train: unknown keys"),
    ({"members": [{"corpus": "kjv", "options": {"unit": "chapter"}, "patterns": ["kjv/chapter/Ruth/*"], "count": 2,
                   "weight": 1.0}]}, "says the `seed` of its sample"),
    ({"name": "other"}, "must equal the file name"),
    ({"members": [{"corpus": "kjv", "idz": []}]}, "a group needs"),
    ({"members": [{"corpus": "kjv", "options": {"unit": "chapter"}, "ids": ["kjv/chapter/Ruth/9"]}]}, "unknown kjv ids"),
    ({"members": [{"corpus": "kjv", "options": {"unit": "chapter"}, "patterns": ["kjv/chapter/Ruth/*"],
                   "count": 9, "seed": 0}]}, "count 9 > 4"),
    ({"nonmembers": [{"corpus": "kjv", "options": {"unit": "chapter"}, "ids": ["kjv/chapter/Ruth/1"]}]},
     "both member and nonmember"),
])
def test_bad_family_files_are_one_line_config_errors(tmp_path, patch, match):
    _write(tmp_path, "base", {**BASE, **patch})
    with pytest.raises(ConfigError, match=match) as err:
        fam = load_family("base", tmp_path, tmp_path / "models")
        fam.spec("a")
        fam.nonmembers
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="unknown zoo family 'nope'"):
        load_family("nope", tmp_path)


def test_a_family_file_writes_every_key(tmp_path):
    """No key of a family file has a default in code: leaving one out is refused in one line that names it."""
    import dataclasses

    from memlab.models.zoo_spec import InitFrom, SplitRule, TokenizerRecipe, TrainRecipe, ZooFamily

    for cls in (ZooFamily, TrainRecipe, TokenizerRecipe, SplitRule, InitFrom):
        assert all(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                   for f in dataclasses.fields(cls)), cls
    _write(tmp_path, "base", BASE)
    full = yaml.safe_load((tmp_path / "base.yaml").read_text())
    for key in ("split", "train_by_size", "minutes", "tokenizer"):
        (tmp_path / "base.yaml").write_text(yaml.safe_dump({k: v for k, v in full.items() if k != key}))
        with pytest.raises(ConfigError, match=rf"missing keys \['{key}'\]") as err:
            load_family("base", tmp_path, tmp_path / "models")
        assert "\n" not in str(err.value)
    # a member group says its weight; a continued family inherits its parent's tokenizer, so it writes null
    (tmp_path / "base.yaml").write_text(yaml.safe_dump({**full, "members": [
        {k: v for k, v in g.items() if k != "weight"} for g in full["members"]]}))
    with pytest.raises(ConfigError, match="says its `weight`"):
        load_family("base", tmp_path, tmp_path / "models")
    _write(tmp_path, "base", BASE)
    _write(tmp_path, "child", {"name": "child", "init_from": {"family": "base", "epoch": 1}, "members": BASE["members"],
                               "tokenizer": BASE["tokenizer"]})
    with pytest.raises(ConfigError, match="`tokenizer` must be null"):
        load_family("child", tmp_path, tmp_path / "models")


def test_selection_patterns_exclude_and_seeded_count():
    g = {"corpus": "kjv", "options": {"unit": "chapter"}, "patterns": ["kjv/chapter/Ruth/*", "kjv/chapter/Jonah/*"],
         "exclude": ["kjv/chapter/Jonah/4"], "count": 5, "seed": 3}
    a, b = select_group(g, set(), "t"), select_group(g, set(), "t")
    assert [d.id for d in a] == [d.id for d in b] and len(a) == 5
    assert "kjv/chapter/Jonah/4" not in {d.id for d in a}
    c = select_group({**g, "seed": 4}, set(), "t")
    assert {d.id for d in c} != {d.id for d in a}
    assert select_group({**g, "count": None}, {"kjv/chapter/Ruth/1"}, "t")[0].id == "kjv/chapter/Ruth/2"


def test_build_cli_builds_missing_skips_done_and_init_from(tmp_path, capsys):
    from memlab.models.build import main

    zoo, models = tmp_path / "zoo", tmp_path / "models"
    _write(zoo, "base", BASE)
    _write(zoo, "child", {"name": "child", "init_from": {"family": "base", "epoch": 1},
                          "members": [{"corpus": "kjv", "options": {"unit": "chapter"}, "ids": ["kjv/chapter/Ruth/3"],
                                       "weight": 2.0}],
                          "nonmembers": [{"corpus": "kjv", "options": {"unit": "chapter"}, "ids": ["kjv/chapter/Ruth/4"]}],
                          "train": {"epochs": 1, "seq_len": 32, "batch_size": 8, "lr": 1e-3, "warmup_steps": 1}})
    with pytest.raises(MissingSourceError, match="is not built"):
        load_family("base", zoo, models).final("a")
    main(["--zoo", str(zoo), "--out", str(models), "--only", "child", "--no-convert"])  # pulls in base first
    out = capsys.readouterr().out
    assert out.count("trained") == 4 and out.index("base/a") < out.index("child/a")
    base, child = load_family("base", zoo, models), load_family("child", zoo, models)
    assert base.is_built() and child.is_built() and child.sizes == ["a", "b"]
    assert sorted(base.checkpoints("a")) == [1, 2] and base.checkpoint("b", 2).is_dir()
    assert (base.tokenizer_dir / "tokenizer.json").read_bytes() == (child.tokenizer_dir / "tokenizer.json").read_bytes()
    assert [json.loads(x)["id"] for x in (models / "tiny-neox" / "base" / "members.jsonl").read_text().splitlines()] \
        == ["kjv/chapter/Ruth/1", "kjv/chapter/Ruth/2"]
    spec = json.loads((child.model_dir("b") / "spec.json").read_text())
    assert spec["init_from"] == str(base.checkpoint("b", 1))
    cfg = base.model_cfg("a", epoch=2)
    assert cfg["path"] == str(base.checkpoint("a", 2)) and cfg["backend"] == "hf"
    main(["--zoo", str(zoo), "--out", str(models), "--no-convert"])
    assert "0 model(s) built" in capsys.readouterr().out
    # editing a family file makes its models stale: the next build retrains them
    _write(zoo, "base", {**BASE, "train": {**BASE["train"], "epochs": 1}})
    assert not load_family("base", zoo, models).is_built()
    main(["--zoo", str(zoo), "--out", str(models), "--only", "base", "--no-convert"])
    assert capsys.readouterr().out.count("trained") == 2 and load_family("base", zoo, models).is_built()
    assert sorted(load_family("base", zoo, models).checkpoints("a")) == [1]
    with pytest.raises(ConfigError, match="not a model or family"):
        main.__wrapped__(["--zoo", str(zoo), "--out", str(models), "--only", "nope"])


def test_configs_name_checkpoints_by_family_size_and_epoch_never_by_folder(repo_root):
    """The zoo's folder layout is written once (memlab.zoo_layout): config files name a checkpoint by (family, size,
    epoch) through memlab.config's resolvers, and get the folder Family opens."""
    import re

    from memlab.config import compose
    from memlab.zoo_layout import checkpoint_dir

    written = [f"{p.relative_to(repo_root)}:{i}" for p in sorted((repo_root / "conf").rglob("*.yaml"))
               for i, line in enumerate(p.read_text().splitlines(), 1)
               if re.search(r"tiny-neox/\w", line.split("#")[0])]
    assert not written, f"hand-written zoo folders: {written}"
    cfg = compose("recap_table3")
    kjv = load_family("kjv", cfg.paths.zoo, cfg.paths.models)
    assert cfg.model.path == str(checkpoint_dir(cfg.paths.models, "kjv", "m", "final")) \
        == str(kjv.model_dir("m") / "final")
    assert cfg.method.targets["tiny-neox-kjv"].membership.file == str(kjv.model_dir("m") / "membership.json")
    assert checkpoint_dir("/z", "kjv", "s", 3) == Path("/z/tiny-neox/kjv/s/epoch-003")
