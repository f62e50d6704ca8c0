"""Release-note passages: the changelog parsers on small texts written here, then the real corpus.

The real corpus needs the pinned sdists in ``.cache/sdists`` (the data stage's cache); on a fresh checkout
the first run downloads them from PyPI once (``pip download --no-deps --no-binary :all:``, ~30-60 s).
"""

from __future__ import annotations

import hashlib
from datetime import date

from memlab.data.sources.release_notes import debian_entries, dated_sections, read_pins, split_passages

RST = """Changelog
=========

Intro text without a date.

2.1 (2025-03-04)
================

Features
--------

- one new thing

2.0 (2024-12-30)
================

- an old thing

Release 1.9 (released Feb 03, 2025)
===================================

- out of order but dated
"""

MD = """# Changes

## [3.0.0](https://example.org/3.0.0) - 2026-01-15

- markdown section

## v2.9 (2025-12-01)

text
"""

DEB = """hello (2.10-3) unstable; urgency=medium

  * A change made here.

 -- Some One <one@example.org>  Mon, 06 Jan 2025 10:00:00 +0100

hello (2.10-2) unstable; urgency=low

  * Older.

 -- Some One <one@example.org>  Fri, 01 Mar 2024 10:00:00 +0100
"""


def test_dated_sections_rst_and_markdown():
    secs = dated_sections(RST)
    assert [(t, d) for t, d, _ in secs] == [("2.1 (2025-03-04)", date(2025, 3, 4)),
                                           ("2.0 (2024-12-30)", date(2024, 12, 30)),
                                           ("Release 1.9 (released Feb 03, 2025)", date(2025, 2, 3))]
    assert "one new thing" in secs[0][2] and "old thing" not in secs[0][2]  # "Features" is not a release
    md = dated_sections(MD)
    assert [d for _, d, _ in md] == [date(2026, 1, 15), date(2025, 12, 1)]


def test_debian_entries():
    entries = debian_entries(DEB)
    assert [(v, d) for v, d, _ in entries] == [("2.10-3", date(2025, 1, 6)), ("2.10-2", date(2024, 3, 1))]
    assert entries[0][2].startswith("hello (2.10-3)") and entries[0][2].endswith("+0100")


def test_split_passages_lengths():
    paras = [" ".join(["w"] * 70)] * 10  # 700 words in paragraphs of 70
    out = split_passages("\n\n".join(paras), 300)
    assert [len(p.split()) for p in out] == [350, 350]
    assert split_passages("too short", 300) == []


def test_real_release_notes_are_post_2024_with_sha256(repo_root):
    from memlab.data.corpora import load_corpus

    docs = load_corpus("release_notes", download=True)  # the data stage's download, once
    pins, cfg = read_pins()
    assert len(docs) >= 60
    assert len({d.id for d in docs}) == len(docs)
    assert len({d.meta["sha256"] for d in docs}) == len(docs)  # no duplicate passages
    for d in docs:
        assert d.date >= "2025-01-01" and d.meta["n_tokens"] >= cfg["min_tokens"]
        assert d.meta["sha256"] == hashlib.sha256(d.text.encode("utf-8")).hexdigest() == d.sha256
        assert d.id.startswith("release_notes/") and d.source and d.licence
    packages = {d.meta["package"] for d in docs if d.meta["kind"] == "sdist"}
    assert packages == {p.name for p in pins}
    assert docs == load_corpus("release_notes", download=False)  # offline reload: identical
