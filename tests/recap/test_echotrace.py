"""EchoTrace format, loaders, coverage, EchoTrace-mini from packages."""

import logging

import pytest

from memlab.errors import MemlabError
from memlab.data.echotrace import (Book, book_from_text, coverage_report, echotrace_mini, load_books,
                                   load_gutenberg, load_plain_text, save_books)
from memlab.methods.recap.study import segment_books

GUT = """The Project Gutenberg eBook of A Test Book
Title: A Test Book
*** START OF THE PROJECT GUTENBERG EBOOK A TEST BOOK ***

CHAPTER I

Mara walked to the river. She saw Tobin waiting there with a small boat. They crossed quietly before dawn.
The water was cold and grey. Tobin rowed while Mara watched the far bank grow near.

CHAPTER II

At the mill the keeper asked for their names. Mara lied and Tobin laughed at her boldness.

*** END OF THE PROJECT GUTENBERG EBOOK A TEST BOOK ***
License boilerplate that must go.
"""


def test_gutenberg_strip_and_chapters(tmp_path, recap):
    p = tmp_path / "pg1.txt"
    p.write_text(GUT, encoding="utf-8")
    b = load_gutenberg(p)
    assert b.title == "A Test Book" and b.category == "public_domain"
    assert [c.title for c in b.chapters] == ["CHAPTER I", "CHAPTER II"]
    assert "START OF" not in b.text and "boilerplate" not in b.text and "Title:" not in b.text
    segment_books([b], recap.summary(target_words=15, min_words=5), None)
    rows = coverage_report([b])
    assert rows[0]["coverage"] == 1.0 and rows[0]["events"] >= 3
    for e in b.events:
        assert e.text.startswith(e.first_sentence) and e.text.endswith(e.last_sentence)
        assert e.reference and not e.reference.startswith(e.first_sentence)
    save_books([b], tmp_path / "b.jsonl")
    assert load_books(tmp_path / "b.jsonl")[0].to_dict() == b.to_dict()


def test_non_utf8_file_is_decoded_and_logged(tmp_path, caplog):
    p = tmp_path / "cp.txt"
    p.write_bytes(("Caf\u00e9 au lait \u2014 \u201cquoted\u201d words here. " * 10).encode("cp1252"))
    with caplog.at_level(logging.WARNING):
        b = load_plain_text(p, category="copyrighted")
    assert "Café au lait — “quoted” words here." in b.text
    assert any("not UTF-8" in r.message for r in caplog.records)


def test_empty_and_short_books(caplog, recap):
    empty = book_from_text("", book_id="e", title="e", category="non_training")
    short = book_from_text("Too short.", book_id="s", title="s", category="non_training")
    one = book_from_text("Anna met Boris at the gate. They talked about the harvest and the rain all evening.",
                         book_id="o", title="o", category="non_training")
    with caplog.at_level(logging.WARNING):
        segment_books([empty, short, one], recap.summary(target_words=200, min_words=8), None)
    assert empty.events == [] and short.events == []
    assert len(one.events) == 1 and one.events[0].text == one.text  # shorter than one event: one event
    assert any("no events" in r.message for r in caplog.records)


def test_echotrace_mini_from_packages():
    books, notes = echotrace_mini({"public_domain": {"kjv_books": ["Ruth"], "max_chapters": 2}})
    assert [b.id for b in books] == ["kjv/Ruth"] and len(books[0].chapters) == 2
    assert isinstance(books[0], Book) and books[0].licence
    assert any("papers" in n for n in notes)  # said honestly: no LaTeX papers offline


def test_user_books_by_config(tmp_path):
    (tmp_path / "pg1.txt").write_text(GUT, encoding="utf-8")
    (tmp_path / "novel.txt").write_bytes(("Chapter 1\n\nZo\u00eb ran. " + "She ran on and on. " * 12).encode("cp1252"))
    books, notes = echotrace_mini({"files": [
        {"path": str(tmp_path / "pg1.txt"), "format": "gutenberg"},
        {"path": str(tmp_path / "novel.txt"), "category": "copyrighted", "title": "Novel"},
        {"path": str(tmp_path / "missing.txt"), "category": "copyrighted"}]})
    assert [(b.title, b.category) for b in books] == [("A Test Book", "public_domain"), ("Novel", "copyrighted")]
    assert "Zoë ran." in books[1].text and any("missing.txt" in n for n in notes)


@pytest.mark.parametrize("garbage", ["binary", "empty", "four words"])
def test_garbage_book_files_are_refused_never_scored(tmp_path, garbage):
    import random

    p = tmp_path / "book.txt"
    if garbage == "binary":  # decodes as latin-1 into ~150 "words": must not pass as a book
        p.write_bytes(bytes(random.Random(0).randrange(256) for _ in range(1200)))
    elif garbage == "empty":
        p.write_bytes(b"")
    else:
        p.write_text("Just four words here.")
    with pytest.raises(MemlabError) as e:
        load_plain_text(p, category="copyrighted")
    assert "\n" not in str(e.value) and str(p) in str(e.value)
    books, notes = echotrace_mini({"files": [{"path": str(p), "category": "copyrighted", "title": "G"}]})
    assert books == [] and any(str(p) in n and "skipped" in n for n in notes)  # the coverage notes say why


def test_wikipedia_articles_are_copyrighted_books_cut_to_their_start():
    """The copyrighted category's Wikipedia articles (the aligned target's n = 15 per split): named by title, the
    article's first wiki_max_words words, a missing title noted rather than dropped in silence."""
    from memlab.data.corpora import load_corpus

    books, notes = echotrace_mini({"copyrighted": {"wiki": ["Aardvark", "Algeria", "No_Such_Article"],
                                                   "wiki_max_words": 120}})
    assert [b.id for b in books] == ["wiki/Aardvark", "wiki/Algeria"]
    assert {b.category for b in books} == {"copyrighted"} and books[0].title == "Aardvark"
    whole = {d.id: d.text for d in load_corpus("wiki")}
    cut = {d.id: d.text for d in load_corpus("wiki", max_words=120)}   # as the zoo family trains on them
    for b in books:
        assert b.text == cut[b.id] and whole[b.id].startswith(b.text) and 120 <= len(b.text.split()) < 400
        assert len(whole[b.id].split()) > 400 and b.licence == "CC-BY-SA-3.0"
    assert any("No_Such_Article" in n for n in notes)
