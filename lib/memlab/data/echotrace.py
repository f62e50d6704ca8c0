"""EchoTrace: the benchmark format of seed 000 (§3.1.1, App. B/C) and its loaders.

A :class:`Book` (a novel, a licence text, release notes or a paper) has a ``category`` in
:data:`CATEGORIES` and a list of :class:`Chapter`; each chapter is segmented into :class:`Event` records by the
section summary agent (``memlab.methods.recap.agents``), which also writes the event metadata the paper's
code stores per event::

    {title, characters, detailed_summary: [bullets],
     segmentation_boundaries: {first_sentence, last_sentence}, text_segment}

Loaders: :func:`load_plain_text`, :func:`load_gutenberg` (Project Gutenberg header/footer stripped),
:func:`load_latex_paper` (arXiv LaTeX archive/folder via :mod:`memlab.data.latex`, sections = chapters), and
:func:`echotrace_mini` (the embedded benchmark read from installed packages at run time). Text is never
stored in this repository; books are built when a run starts.

Coverage (:func:`coverage_report`): share of a book's word tokens that fall inside some event,
``Σ_events words(event.text) / words(book text)``.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

from memlab.data.records import Document, head_words
from memlab.errors import ConfigError, MemlabError

log = logging.getLogger(__name__)

CATEGORIES = ("public_domain", "copyrighted", "non_training", "papers")

_GUT_START = re.compile(r"^\s*\*\*\*\s*START OF (THE|THIS) PROJECT GUTENBERG.*?\*\*\*\s*$", re.M | re.I)
_GUT_END = re.compile(r"^\s*\*\*\*\s*END OF (THE|THIS) PROJECT GUTENBERG.*$", re.M | re.I)
_GUT_END_OLD = re.compile(r"^\s*End of (the )?Project Gutenberg", re.M | re.I)
_CHAPTER = re.compile(r"^[ \t]*((CHAPTER|Chapter|BOOK|Book|PART|Part|STAVE|Stave)\s+([0-9]+|[IVXLCDM]+|[A-Z][a-z]+)\b.*)$",
                      re.M)


@dataclass
class Event:
    """One self-contained segment of a chapter with its metadata (the dynamic soft prompt)."""

    id: str
    title: str
    characters: list[str]
    detailed_summary: list[str]
    first_sentence: str
    last_sentence: str
    text: str

    @property
    def reference(self) -> str:
        """The gold text the target must produce: the event after its opening line (given in every prompt)."""
        return self.text[len(self.first_sentence):].strip() if self.text.startswith(self.first_sentence) \
            else self.text

    def metadata(self) -> dict:
        return {"title": self.title, "characters": list(self.characters),
                "detailed_summary": list(self.detailed_summary),
                "segmentation_boundaries": {"first_sentence": self.first_sentence,
                                            "last_sentence": self.last_sentence}}


@dataclass
class Chapter:
    id: str
    title: str
    text: str
    events: list[Event] = field(default_factory=list)


@dataclass
class Book:
    """A document of the benchmark. ``split``: membership for models trained here ("member"/"nonmember")."""

    id: str
    title: str
    category: str
    chapters: list[Chapter]
    source: str = ""
    licence: str = ""
    date: str | None = None
    split: str | None = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ConfigError(f"EchoTrace category must be one of {', '.join(CATEGORIES)}, got {self.category!r}")

    @property
    def text(self) -> str:
        return "\n\n".join(c.text for c in self.chapters)

    @property
    def events(self) -> list[Event]:
        return [e for c in self.chapters for e in c.events]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Book":
        chapters = [Chapter(id=c["id"], title=c["title"], text=c["text"],
                            events=[Event(**e) for e in c.get("events", [])]) for c in d["chapters"]]
        return cls(**{**d, "chapters": chapters})


def save_books(books: Iterable[Book], path: str | Path) -> Path:
    """JSONL, one book a line, written atomically."""
    from memlab.data.records import write_jsonl_rows

    return write_jsonl_rows((b.to_dict() for b in books), path)


def load_books(path: str | Path) -> list[Book]:
    with Path(path).open(encoding="utf-8") as f:
        return [Book.from_dict(json.loads(line)) for line in f if line.strip()]


# ---------------------------------------------------------------------------------------------- text files
# a book file shorter than this is refused, never scored: it can't hold one event (an empty file, a stray line)
MIN_BOOK_WORDS = 50
_TEXT_CONTROLS = {9, 10, 12, 13, 27}  # tab, newline, form feed, carriage return, escape (ANSI in some texts)


def read_text(path: str | Path) -> str:
    """Read a text file: UTF-8 (BOM tolerated), else cp1252, else latin-1 — logged, never a crash, no byte lost."""
    path = Path(path)
    if not path.is_file():
        raise MemlabError(f"book file {path} does not exist; fix the path in the config")
    raw = path.read_bytes()
    control = sum(1 for b in raw[:65536] if b < 32 and b not in _TEXT_CONTROLS)
    if b"\x00" in raw[:65536] or control > 0.01 * min(len(raw), 65536):
        raise MemlabError(f"book file {path} is not text ({control} control bytes in its first "
                          f"{min(len(raw), 65536)}); give a plain-text, Gutenberg or LaTeX file")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        for enc in ("cp1252", "latin-1"):
            try:
                text = raw.decode(enc)
                log.warning("%s is not UTF-8 (%s); decoded as %s", path, err.reason, enc)
                return text
            except UnicodeDecodeError:
                continue
    raise AssertionError("latin-1 decodes every byte")  # pragma: no cover


def _long_enough(text: str, path: Path) -> str:
    """A user's book file must hold at least MIN_BOOK_WORDS words: an empty or stray file is refused, never scored."""
    words = len(text.split())
    if words < MIN_BOOK_WORDS:
        raise MemlabError(f"book file {path} has {words} words; a book needs at least {MIN_BOOK_WORDS} to be cut "
                          "into events — fix the file or remove it from method.echotrace.files")
    return text


def strip_gutenberg(text: str) -> str:
    """Drop the Project Gutenberg header (up to the ``*** START OF ...`` line) and footer (from ``*** END OF``)."""
    m = _GUT_START.search(text)
    if m:
        text = text[m.end():]
    else:
        log.warning("no Project Gutenberg START marker; keeping the header")
    m = _GUT_END.search(text) or _GUT_END_OLD.search(text)
    if m:
        text = text[: m.start()]
    return text.strip()


def split_chapters(text: str, *, book_id: str) -> list[Chapter]:
    """Split at chapter headings (CHAPTER/BOOK/PART/STAVE + number); no heading → one chapter."""
    text = text.replace("\r\n", "\n").strip()
    heads = list(_CHAPTER.finditer(text))
    chapters: list[Chapter] = []
    if len(heads) >= 2:
        pre = text[: heads[0].start()].strip()
        if len(pre.split()) > 50:  # a real prologue, not a table of contents line
            chapters.append(Chapter(f"{book_id}/ch0", "Prologue", pre))
        for k, h in enumerate(heads):
            end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
            body = text[h.end():end].strip()
            if body:
                chapters.append(Chapter(f"{book_id}/ch{len(chapters) + 1}", h.group(1).strip(), body))
    if not chapters and text:
        chapters = [Chapter(f"{book_id}/ch1", "Chapter 1", text)]
    return chapters


def book_from_text(text: str, *, book_id: str, title: str, category: str, source: str = "", licence: str = "",
                   date: str | None = None, split: str | None = None, meta: dict | None = None) -> Book:
    """A book from plain text (chapters detected; an empty text gives a book with no chapters, logged)."""
    chapters = split_chapters(text, book_id=book_id)
    if not chapters:
        log.warning("book %s is empty; it will have no events", book_id)
    return Book(id=book_id, title=title, category=category, chapters=chapters, source=source, licence=licence,
                date=date, split=split, meta=dict(meta or {}))


def load_plain_text(path: str | Path, *, category: str, title: str | None = None, book_id: str | None = None,
                    licence: str = "unknown", date: str | None = None) -> Book:
    path = Path(path)
    return book_from_text(_long_enough(read_text(path), path), book_id=book_id or f"file/{path.stem}", title=title or path.stem,
                          category=category, source=str(path), licence=licence, date=date)


def load_gutenberg(path: str | Path, *, category: str = "public_domain", title: str | None = None,
                   book_id: str | None = None) -> Book:
    """A Project Gutenberg plain-text file (header and footer stripped; title from the ``Title:`` line)."""
    path = Path(path)
    raw = read_text(path)
    m = re.search(r"^Title:\s*(.+)$", raw, flags=re.M)
    return book_from_text(_long_enough(strip_gutenberg(raw), path), book_id=book_id or f"gutenberg/{path.stem}",
                          title=title or (m.group(1).strip() if m else path.stem), category=category,
                          source=str(path), licence="public-domain (Project Gutenberg)")


def load_latex_paper(path: str | Path, *, max_depth: int, max_chars: int, book_id: str | None = None,
                     date: str | None = None) -> Book:
    """An arXiv LaTeX source (archive, folder or .tex) as a ``papers`` book, one chapter per section
    (``\\input`` inlining bounded by ``max_depth`` levels and ``max_chars`` characters)."""
    from memlab.data.latex import parse_latex_source

    path = Path(path)
    doc = parse_latex_source(path, max_depth=max_depth, max_chars=max_chars)
    bid = book_id or f"paper/{path.name.split('.')[0]}"
    chapters = [Chapter(f"{bid}/sec{k + 1}", s.title, s.text) for k, s in enumerate(doc.sections)]
    return Book(id=bid, title=doc.title, category="papers", chapters=chapters, source=str(path),
                licence="see source", date=date, meta={"main_file": doc.main_file, "files": doc.files_used})


def book_from_documents(docs: list[Document], *, book_id: str, title: str, category: str,
                        chapter_titles: list[str] | None = None) -> Book:
    """A book whose chapters are given documents (e.g. KJV chapters); licence/source/split from the first."""
    if not docs:
        raise MemlabError(f"book {book_id}: no documents given")
    chapters = [Chapter(f"{book_id}/ch{k + 1}", (chapter_titles[k] if chapter_titles else f"Chapter {k + 1}"),
                        d.text.strip()) for k, d in enumerate(docs) if d.text.strip()]
    d0 = docs[0]
    return Book(id=book_id, title=title, category=category, chapters=chapters, source=d0.source,
                licence=d0.licence, date=d0.date, split=d0.split,
                meta={"doc_ids": [d.id for d in docs]})


# ---------------------------------------------------------------------------------------------- EchoTrace-mini
def kjv_books(names: list[str], max_chapters: int | None) -> list[Book]:
    from memlab.data.corpora import load_corpus

    chapters = load_corpus("kjv", unit="chapter")
    out = []
    for name in names:
        chs = [d for d in chapters if d.meta.get("book") == name]
        if not chs:
            raise ConfigError(f"EchoTrace-mini: no KJV book named {name!r} (use names like 'Genesis', 'Ruth')")
        chs = chs[:max_chapters] if max_chapters else chs
        out.append(book_from_documents(chs, book_id=f"kjv/{name}", title=name, category="public_domain",
                                       chapter_titles=[f"{name} {d.meta.get('chapter')}" for d in chs]))
    return out


def _doc_book(d: Document, category: str, max_words: int | None) -> Book:
    text = head_words(d.text, max_words)
    if d.meta.get("package"):  # release notes: "<package> <version> release notes"
        title = f"{d.meta['package']} {d.meta.get('version', '')} release notes".replace("  ", " ")
    else:
        title = str(d.meta.get("name") or d.meta.get("title") or d.id.split("/")[-1])
    return book_from_text(text, book_id=d.id, title=title, category=category, source=d.source,
                          licence=d.licence, date=d.date, split=d.split, meta=dict(d.meta))


def echotrace_mini(spec: dict) -> tuple[list[Book], list[str]]:
    """Build EchoTrace-mini from installed packages; returns (books, notes about missing parts).

    ``spec`` (the experiment's ``method.echotrace``)::

        public_domain: {kjv_books: [Ruth, Jonah], max_chapters: 2}
        copyrighted:   {licences: [GPL-3, Apache-2.0], max_words: 600, wiki: [Aardvark], wiki_max_words: 300}
        non_training:  {n_docs: 2, max_words: 600, min_date: "2025-01-01", download: false}
        papers:        {paths: [path/to/arxiv-source.tar.gz, ...]}
        files:         [{path: pg84.txt, category: public_domain, format: gutenberg}, ...]   # real books

    A category whose source package is missing is skipped with a note (not silently): the notebook shows
    the notes next to the tables.
    """
    books: list[Book] = []
    notes: list[str] = []
    pd = spec.get("public_domain") or {}
    if pd.get("kjv_books"):
        books += kjv_books(list(pd["kjv_books"]), pd.get("max_chapters"))
    cp = spec.get("copyrighted") or {}
    if cp.get("licences"):
        books += licence_books(cp, notes)
    if cp.get("wiki"):
        books += wiki_books(cp, notes)
    nt = spec.get("non_training") or {}
    if nt.get("n_docs"):
        books += _release_note_books(nt, notes)
    books += _file_books(spec.get("files") or [], notes)
    books += _paper_books(spec.get("papers") or {}, notes)
    for n in notes:
        log.warning("EchoTrace-mini: %s", n)
    return books, notes


def licence_books(cp: dict, notes: list[str]) -> list[Book]:
    """The copyrighted category: the licence texts named in ``cp["licences"]`` (missing ones noted)."""
    from memlab.data.corpora import load_corpus

    books: list[Book] = []
    try:
        docs = load_corpus("licences")
    except MemlabError as err:
        notes.append(f"copyrighted: skipped ({err})")
        docs = []
    for name in cp["licences"]:
        hit = [d for d in docs if d.id.split("/")[-1] == name or d.meta.get("name") == name]
        if hit:
            books.append(_doc_book(hit[0], "copyrighted", cp.get("max_words")))
        elif docs:
            notes.append(f"copyrighted: licence {name!r} not found")
    return books


def wiki_books(cp: dict, notes: list[str]) -> list[Book]:
    """The copyrighted category's Wikipedia articles (CC BY-SA): the gensim sample's articles named in
    ``cp["wiki"]`` (titles with underscores, e.g. ``Aardvark``; first ``cp["wiki_max_words"]`` words each)."""
    from memlab.data.corpora import load_corpus

    try:
        docs = {d.id.split("/", 1)[1]: d for d in load_corpus("wiki")}
    except MemlabError as err:
        notes.append(f"copyrighted: Wikipedia articles skipped ({err})")
        return []
    missing = [name for name in cp["wiki"] if name not in docs]
    if missing:
        notes.append(f"copyrighted: Wikipedia article(s) {', '.join(map(repr, missing))} not in the gensim sample")
    return [_doc_book(docs[name], "copyrighted", cp.get("wiki_max_words")) for name in cp["wiki"] if name in docs]


def _release_note_books(nt: dict, notes: list[str]) -> list[Book]:
    """The non_training category: the first ``nt["n_docs"]`` release notes (by id) dated ``min_date`` or later."""
    from memlab.data.corpora import load_corpus

    books: list[Book] = []
    try:
        opts = {k: nt[k] for k in ("min_date", "cache_dir", "download") if nt.get(k) is not None}
        docs = load_corpus("release_notes", **opts)
        min_date = str(nt.get("min_date") or "")
        docs = [d for d in docs if not min_date or (d.date or "") >= min_date]
        docs = sorted(docs, key=lambda d: d.id)
        if len(docs) < nt["n_docs"]:
            notes.append(f"non_training: only {len(docs)} release-note documents available")
        for d in docs[: nt["n_docs"]]:
            books.append(_doc_book(d, "non_training", nt.get("max_words")))
    except MemlabError as err:
        notes.append(f"non_training: skipped ({err})")
    return books


def _file_books(files: list, notes: list[str]) -> list[Book]:
    """User-supplied books: ``{path, category, format: plain|gutenberg, title}`` each (unreadable ones noted)."""
    books: list[Book] = []
    for f in files:
        try:
            if f.get("format", "plain") == "gutenberg":
                books.append(load_gutenberg(f["path"], category=f.get("category", "public_domain"),
                                            title=f.get("title")))
            else:
                books.append(load_plain_text(f["path"], category=f["category"], title=f.get("title"),
                                             licence=f.get("licence", "unknown"), date=f.get("date")))
        except MemlabError as err:
            notes.append(f"files: {f.get('path')} skipped ({err})")
    return books


def _paper_books(pp: dict, notes: list[str]) -> list[Book]:
    """LaTeX papers from the arXiv source archives in ``pp["paths"]`` (none given, or unreadable: noted)."""
    books: list[Book] = []
    for p in pp.get("paths") or []:
        try:
            books.append(load_latex_paper(p, max_depth=pp["max_input_depth"], max_chars=pp["max_source_chars"]))
        except MemlabError as err:
            notes.append(f"papers: {p} skipped ({err})")
    if not pp.get("paths"):
        notes.append("papers: no LaTeX paper sources ship offline here; pass arXiv source archives via "
                     "method.echotrace.papers.paths")
    return books


def coverage_report(books: Iterable[Book]) -> list[dict]:
    """Per book: words in the text, words inside events, coverage share, number of chapters and events."""
    rows = []
    for b in books:
        total = len(b.text.split())
        covered = sum(len(e.text.split()) for e in b.events)
        row = {"book": b.id, "category": b.category, "chapters": len(b.chapters), "events": len(b.events),
               "words": total, "words_in_events": covered, "coverage": (covered / total) if total else 0.0}
        if "segmented_words" in b.meta:  # set by the summary step when only some events are kept
            row["segmentation_coverage"] = b.meta["segmented_words"] / total if total else 0.0
        rows.append(row)
    return rows
