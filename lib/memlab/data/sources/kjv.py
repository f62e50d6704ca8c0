"""King James Version (1611) read at run time from Debian ``bible-kjv`` (+ ``bible-kjv-text``).

``bible -f gen1:1-rev22:21`` prints every verse on one line (``Ge1:1 In the beginning ...``); we parse that
output, so the text itself is never stored in this repository. Public domain.

Units and ids (book names use underscores for spaces, e.g. ``Song_of_Solomon``):

- ``book``:    ``kjv/book/Genesis``          text = chapters separated by a blank line, one verse a line
- ``chapter``: ``kjv/chapter/Genesis/1``     text = one verse a line
- ``verse``:   ``kjv/verse/Genesis/1/1``     text = the verse
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess

from memlab.data.corpora import corpus_loader
from memlab.data.records import Document
from memlab.errors import ConfigError, MissingSourceError

# The 66 books in the order `bible` prints them (Protestant canon); names are facts, not text.
BOOKS: tuple[str, ...] = (
    "Genesis", "Exodus", "Leviticus", "Numbers", "Deuteronomy", "Joshua", "Judges", "Ruth", "1_Samuel",
    "2_Samuel", "1_Kings", "2_Kings", "1_Chronicles", "2_Chronicles", "Ezra", "Nehemiah", "Esther", "Job",
    "Psalms", "Proverbs", "Ecclesiastes", "Song_of_Solomon", "Isaiah", "Jeremiah", "Lamentations", "Ezekiel",
    "Daniel", "Hosea", "Joel", "Amos", "Obadiah", "Jonah", "Micah", "Nahum", "Habakkuk", "Zephaniah",
    "Haggai", "Zechariah", "Malachi", "Matthew", "Mark", "Luke", "John", "Acts", "Romans", "1_Corinthians",
    "2_Corinthians", "Galatians", "Ephesians", "Philippians", "Colossians", "1_Thessalonians",
    "2_Thessalonians", "1_Timothy", "2_Timothy", "Titus", "Philemon", "Hebrews", "James", "1_Peter",
    "2_Peter", "1_John", "2_John", "3_John", "Jude", "Revelation",
)
UNITS = ("book", "chapter", "verse")
LICENCE = "public-domain"
DATE = "1611"
_LINE = re.compile(r"^(?P<abbr>\d?[A-Za-z]+)(?P<chapter>\d+):(?P<verse>\d+) (?P<text>.*)$")


@functools.lru_cache(maxsize=4)
def _verses(bible_cmd: str, data_dir: str | None) -> tuple[tuple[str, int, int, str], ...]:
    """All verses as (book, chapter, verse, text), in canonical order."""
    exe = shutil.which(bible_cmd)
    if exe is None:
        raise MissingSourceError(
            f"KJV corpus: command {bible_cmd!r} not found; install it with `apt-get install bible-kjv`")
    cmd = [exe, "-f"] + (["-p", data_dir] if data_dir else []) + ["gen1:1-rev22:21"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"})
    if proc.returncode != 0 or not proc.stdout.strip():
        raise MissingSourceError(
            "KJV corpus: `bible` could not read its data file; install it with `apt-get install bible-kjv-text`")
    out: list[tuple[str, int, int, str]] = []
    abbrs: list[str] = []
    for line in proc.stdout.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        if not abbrs or abbrs[-1] != m["abbr"]:
            abbrs.append(m["abbr"])
        if len(abbrs) > len(BOOKS):
            raise MissingSourceError("KJV corpus: unexpected `bible` output; reinstall with "
                                     "`apt-get install --reinstall bible-kjv bible-kjv-text`")
        out.append((BOOKS[len(abbrs) - 1], int(m["chapter"]), int(m["verse"]), m["text"].strip()))
    if len(abbrs) != len(BOOKS):
        raise MissingSourceError("KJV corpus: incomplete `bible` output; reinstall with "
                                 "`apt-get install --reinstall bible-kjv bible-kjv-text`")
    return tuple(out)


@corpus_loader("kjv")
def load_kjv(unit: str = "book", bible_cmd: str = "bible", data_dir: str | None = None) -> list[Document]:
    """The KJV as documents of one ``unit`` ("book" | "chapter" | "verse"), in canonical order.

    ``bible_cmd``/``data_dir`` point at another `bible` executable or data folder (tests use them to
    simulate a missing package).
    """
    if unit not in UNITS:
        raise ConfigError(f"kjv: unit must be one of {', '.join(UNITS)}, got {unit!r}")
    verses = _verses(bible_cmd, str(data_dir) if data_dir else None)
    source = "debian:bible-kjv-text:/usr/lib/bible.data"
    testament = {b: ("old" if i < 39 else "new") for i, b in enumerate(BOOKS)}

    def doc(id_: str, text: str, **meta) -> Document:
        return Document(id=id_, text=text, source=source, licence=LICENCE, date=DATE,
                        meta={"corpus": "kjv", "unit": unit, **meta})

    if unit == "verse":
        return [doc(f"kjv/verse/{b}/{c}/{v}", t, book=b, chapter=c, verse=v, testament=testament[b])
                for b, c, v, t in verses]
    chapters: dict[tuple[str, int], list[str]] = {}
    for b, c, _v, t in verses:
        chapters.setdefault((b, c), []).append(t)
    if unit == "chapter":
        return [doc(f"kjv/chapter/{b}/{c}", "\n".join(lines), book=b, chapter=c, n_verses=len(lines),
                    testament=testament[b]) for (b, c), lines in chapters.items()]
    books: dict[str, list[str]] = {}
    for (b, _c), lines in chapters.items():
        books.setdefault(b, []).append("\n".join(lines))
    return [doc(f"kjv/book/{b}", "\n\n".join(chs), book=b, n_chapters=len(chs), testament=testament[b])
            for b, chs in books.items()]
