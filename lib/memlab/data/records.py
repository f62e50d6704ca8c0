"""The one document record every corpus, method and experiment uses."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, asdict
from pathlib import Path
from typing import Iterable, Iterator


@dataclass
class Document:
    """One document.

    ``id``: stable, unique within a corpus (e.g. ``kjv/book/Genesis``). ``source``: where the text was read
    at run time (package + path). ``licence``: SPDX-like id or a short phrase. ``date``: ISO date of the text
    when known, else ``None``. ``split``: membership label for models we trained ourselves —
    ``"member"`` | ``"nonmember"`` | ``None`` (unknown, e.g. third-party models). ``meta``: anything else
    (book name, chapter number, ...).
    """

    id: str
    text: str
    source: str
    licence: str
    date: str | None = None
    split: str | None = None
    meta: dict = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def to_dict(self) -> dict:
        return asdict(self)


def unique_docs(docs: Iterable[Document]) -> list[Document]:
    """Documents in id order, each id once and each text once (``meta["sha256"]``; the first id keeps it)."""
    uniq: dict[str, Document] = {}
    seen: set[str] = set()
    for doc in sorted(docs, key=lambda d: d.id):
        if doc.id in uniq or doc.meta["sha256"] in seen:
            continue
        seen.add(doc.meta["sha256"])
        uniq[doc.id] = doc
    return list(uniq.values())


def write_jsonl(docs: Iterable[Document], path: str | Path) -> Path:
    """Write documents as JSONL atomically (tmp file + rename), so a killed run leaves no half file."""
    return write_jsonl_rows((d.to_dict() for d in docs), path)


def write_jsonl_rows(rows: Iterable[dict], path: str | Path) -> Path:
    """Write JSON-ready dicts one a line, atomically (tmp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def sha256_file(path: str | Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_jsonl(path: str | Path) -> list[Document]:
    return list(iter_jsonl(path))


def iter_jsonl(path: str | Path) -> Iterator[Document]:
    with Path(path).open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield Document(**json.loads(line))


def head_words(text: str, max_words: int | None) -> str:
    """The start of ``text`` up to about ``max_words`` words, cut at the first line end after the word budget
    (the whole text when it is shorter, or ``max_words`` is None)."""
    words = text.split()
    if not max_words or len(words) <= max_words:
        return text
    cut = len(" ".join(words[:max_words]))
    nl = text.find("\n", cut)
    return text[: nl if nl > 0 else None]
