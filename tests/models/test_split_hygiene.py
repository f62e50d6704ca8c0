"""Split hygiene and training lineage of zoo families (issue 11): the shared word n-gram fraction, the build-time
guard (a planted near-duplicate non-member is refused before any training), every conf/zoo family passing it,
the lineage in membership.json of an init_from chain, and per-size training overrides."""

from __future__ import annotations

import copy
import json
from collections import Counter

import pytest

from memlab.data.overlap import NgramIndex, shared_ngram_fraction, words
from memlab.data.records import Document
from memlab.errors import ConfigError
from memlab.models.zoo import family_files, load_family

# the limit every conf/zoo family writes (memlab.models.zoo's docstring: set from the measured maxima)
LIMIT = 0.05


def _doc(i, text):
    return Document(id=i, text=text, source="test", licence="test")


@pytest.fixture(autouse=True)
def _writer(zoo_writer):
    global _write_family
    _write_family = zoo_writer


def _write(zoo, cfg):
    _write_family(zoo, cfg)


def test_shared_ngram_fraction_definition():
    assert words("The LORD's house, O Israel!\nPraise ye") == ["the", "lords", "house", "o", "israel", "praise", "ye"]
    ten = "one two three four five six seven eight nine ten"
    assert shared_ngram_fraction(ten, [ten.upper() + "."], 8) == 1.0  # case and punctuation never hide a copy
    assert shared_ngram_fraction(ten, ["one two three four five six seven eight"], 8) == 1 / 3  # 1 of 3 8-grams
    assert shared_ngram_fraction("too short", [ten], 6) == 0.0
    idx = NgramIndex([_doc("a", ten), _doc("b", "alpha beta gamma delta epsilon zeta eta theta")])
    o = idx.overlap(_doc("q", ten + " eleven"))
    assert o.closest == "a" and o.ngram8 == 3 / 4 and o.ngram6 == 5 / 6  # "eleven" ends one new n-gram
    assert idx.overlap(_doc("r", "nothing in common with anything here at all")).closest is None


PLANTED = {
    "name": "planted", "description": "Psalm 14 trained, its near copy Psalm 53 held out",
    "members": [{"corpus": "kjv", "options": {"unit": "chapter"}, "ids": ["kjv/chapter/Psalms/14"]}],
    "nonmembers": [{"corpus": "kjv", "options": {"unit": "chapter"},
                    "ids": ["kjv/chapter/Psalms/1", "kjv/chapter/Psalms/53"]}],
    "tokenizer": {"vocab_size": 300, "train_on": "members"},
    "sizes": {"a": {"hidden": 32, "layers": 1, "heads": 2, "ffn": 64}},
    "train": {"epochs": 1, "seq_len": 32, "batch_size": 8, "lr": 5e-3, "warmup_steps": 1},
}


def test_planted_near_duplicate_nonmember_is_refused_before_training(tmp_path):
    from memlab.models.build import main

    zoo, models = tmp_path / "zoo", tmp_path / "models"
    _write(zoo, PLANTED)
    with pytest.raises(ConfigError) as err:
        main.__wrapped__(["--zoo", str(zoo), "--out", str(models), "--only", "planted", "--no-convert"])
    msg = str(err.value)
    assert "\n" not in msg
    assert "kjv/chapter/Psalms/53" in msg and "kjv/chapter/Psalms/14" in msg and "max_shared_8gram" in msg
    assert "fix:" in msg and "%" in msg
    assert not (models / "tiny-neox" / "planted").exists()  # refused before any training
    fam = load_family("planted", zoo, models)
    with pytest.raises(ConfigError, match="Psalms/53"):
        fam.build("a", progress=False)  # Family.build checks too (used by tests and studies directly)
    over = fam.split_overlap()
    assert over["kjv/chapter/Psalms/53"].ngram8 > 0.2 and over["kjv/chapter/Psalms/1"].ngram8 < 0.05

    # a member chapter repeated with one word changed is caught the same way
    edited = copy.deepcopy(PLANTED)
    edited["name"] = "edited"
    _write(zoo, edited)
    fam = load_family("edited", zoo, models)
    member = fam.members[0]  # Psalm 14; the planted copy is added to the (cached) non-member list
    fam.nonmembers.append(_doc("planted/psalm14-edited", member.text.replace("fool", "wise man", 1)))
    fam.nonmembers[:] = [d for d in fam.nonmembers if d.id != "kjv/chapter/Psalms/53"]
    with pytest.raises(ConfigError, match="planted/psalm14-edited .*kjv/chapter/Psalms/14"):
        fam.check_split()

    # raising the limit (with a comment saying why) lets it through
    _write(zoo, {**PLANTED, "split": {"max_shared_8gram": 0.5}})
    assert load_family("planted", zoo, models).check_split()
    _write(zoo, {**PLANTED, "split": {"max_shared_6gram": 0.5}})
    with pytest.raises(ConfigError, match=r"split: missing keys \['max_shared_8gram'\]; unknown keys"):
        load_family("planted", zoo, models).check_split()


def test_every_zoo_family_passes_the_guard(repo_root):
    zoo, models = repo_root / "conf" / "zoo", repo_root / "models"
    for name in family_files(zoo):
        fam = load_family(name, zoo, models)
        over = fam.check_split()  # the check alone: no training, no built model needed
        limit = fam.recipe.split.max_shared_8gram
        assert limit <= LIMIT, f"{name}: a raised limit needs a reason"
        assert all(o.ngram8 <= limit for o in over.values())
        assert set(over) == {d.id for d in fam.nonmembers}
        assert not {d.id for d in fam.nonmembers} & set(fam.training_ids()), name


def test_pearl_split_is_clean_and_long(repo_root):
    zoo, models = repo_root / "conf" / "zoo", repo_root / "models"
    base, pearl = load_family("pearl_base", zoo, models), load_family("pearl", zoo, models)
    assert [f.name for f in pearl.lineage()] == ["pearl_base"]
    chapters = [d for d in base.members if not d.id.startswith(("kjv/chapter/Proverbs/", "kjv/chapter/Ecclesiastes/"))]
    assert [d.id for d in chapters] == [d.id for d in pearl.members] and len(chapters) == 36
    assert [d.id for d in base.nonmembers] == [d.id for d in pearl.nonmembers] and len(pearl.nonmembers) == 66
    books = lambda docs: Counter(d.id.split("/")[2] for d in docs)  # noqa: E731
    assert books(pearl.members) == {"Job": 10, "Psalms": 18, "Isaiah": 8}          # both splits mix the books alike
    assert books(pearl.nonmembers) == {"Job": 19, "Psalms": 31, "Isaiah": 16}
    assert "kjv/chapter/Psalms/53" not in {d.id for d in pearl.nonmembers}
    assert all(len(d.text.split()) >= 250 for d in pearl.members + pearl.nonmembers)  # >= 300 tokens
    assert base.recipe.tokenizer.train_on == "all" and pearl.recipe.tokenizer is None
    # the fine-tuned family's ground truth includes the pretraining text
    assert "kjv/chapter/Proverbs/1" in pearl.training_ids() and "kjv/chapter/Ecclesiastes/12" in pearl.training_ids()
    over = pearl.split_overlap()
    assert max(o.ngram8 for o in over.values()) < 0.02 and max(o.ngram6 for o in over.values()) < 0.05
    med = lambda docs: sorted(len(d.text.split()) for d in docs)[len(docs) // 2]  # noqa: E731
    assert abs(med(pearl.members) - med(pearl.nonmembers)) < 50  # similar length distributions


def test_lineage_in_membership_json_and_per_size_lr(tmp_path, zoo_builder, one_chapter_family):
    base = {**one_chapter_family, "name": "base", "train_by_size": {"xs": {"lr": 2e-3}}}
    child = {k: v for k, v in one_chapter_family.items() if k not in ("sizes", "tokenizer")}
    child.update(name="child", description="test: continues base on Ruth 2",
                 init_from={"family": "base", "epoch": "final"},
                 members=[{"corpus": "kjv", "options": {"unit": "chapter"}, "ids": ["kjv/chapter/Ruth/2"]}],
                 nonmembers=[{"corpus": "kjv", "options": {"unit": "chapter"}, "ids": ["kjv/chapter/Jonah/2"]}])
    zoo_builder(tmp_path, base)
    zoo_builder(tmp_path, child)
    zoo, models = tmp_path / "conf", tmp_path / "models"
    fam = load_family("child", zoo, models)
    rec = json.loads((fam.model_dir("xs") / "membership.json").read_text())
    assert rec["members"] == ["kjv/chapter/Ruth/2"]
    assert rec["lineage"] == [{"family": "base", "members": ["kjv/chapter/Ruth/1"],
                               "sha256": {"kjv/chapter/Ruth/1": load_family("base", zoo, models).members[0].sha256}}]
    assert rec["training_ids"] == fam.training_ids() == ["kjv/chapter/Ruth/2", "kjv/chapter/Ruth/1"]
    assert set(rec["nonmember_overlap"]) == {"kjv/chapter/Jonah/2"}
    assert set(rec["nonmember_overlap"]["kjv/chapter/Jonah/2"]) == {"ngram6", "ngram8", "closest_member"}
    assert rec["split"]["max_shared_8gram"] == LIMIT
    assert json.loads((tmp_path / "models" / "tiny-neox" / "base" / "xs" / "membership.json").read_text())[
        "lineage"] == []

    # per-size training override: reaches the spec (and so the fingerprint), spec.json and the trained model
    b = load_family("base", zoo, models)
    assert b.spec("xs").recipe.lr == 2e-3 and b.train_for("xs").lr == 2e-3 and b.recipe.train.lr == 1e-2
    assert json.loads((b.model_dir("xs") / "spec.json").read_text())["lr"] == 2e-3
    assert fam.spec("xs").recipe.lr == 1e-2  # overrides are per family: child keeps its own train.lr
    log = [json.loads(x) for x in (b.model_dir("xs") / "train_log.jsonl").read_text().splitlines()]
    assert b.final_loss("xs") == log[-1]["loss"]
    assert json.loads((b.model_dir("xs") / "done.json").read_text())["final_loss"] == log[-1]["loss"]
    fp = b.spec("xs").fingerprint()
    _write(zoo, {**base, "train_by_size": {"xs": {"lr": 3e-3}}})
    assert load_family("base", zoo, models).spec("xs").fingerprint() != fp
    assert not load_family("base", zoo, models).is_built()
    for bad, match in (({"xs": {"epochs": 3}}, "epochs are shared"), ({"zz": {"lr": 1e-3}}, "unknown sizes")):
        _write(zoo, {**base, "train_by_size": bad})
        with pytest.raises(ConfigError, match=match):
            load_family("base", zoo, models).spec("xs")
