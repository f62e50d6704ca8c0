"""Licence texts from ``/usr/share/common-licenses`` (Debian ``base-files``).

Symlinks (e.g. ``GPL`` -> ``GPL-3``) are skipped so each text appears once. Ids: ``licences/<file name>``.
These texts are copyrighted but may be copied verbatim; they are heavily duplicated on the web, which makes
them a likely-memorized control set.
"""

from __future__ import annotations

from pathlib import Path

from memlab.data.corpora import corpus_loader
from memlab.data.records import Document, head_words
from memlab.errors import MissingSourceError

ROOT = Path("/usr/share/common-licenses")


@corpus_loader("licences")
def load_licences(root: str | Path = ROOT, max_words: int | None = None) -> list[Document]:
    """Every licence text; ``max_words``: only its start (:func:`~memlab.data.records.head_words`, as EchoTrace-mini
    cuts its copyrighted books)."""
    root = Path(root)
    files = sorted(p for p in root.iterdir() if p.is_file() and not p.is_symlink()) if root.is_dir() else []
    if not files:
        raise MissingSourceError(f"licences: no texts in {root}; install them with `apt-get install base-files`")
    return [Document(id=f"licences/{p.name}",
                     text=head_words(p.read_text(encoding="utf-8", errors="replace"), max_words),
                     source=f"debian:base-files:{p}", licence="verbatim copying permitted (see the text)",
                     date=None, meta={"corpus": "licences", "name": p.name}) for p in files]
