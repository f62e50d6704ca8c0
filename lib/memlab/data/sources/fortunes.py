"""Famous quotes from Debian ``fortunes`` (English) and ``fortunes-de`` (German).

Files live in ``/usr/share/games/fortunes/`` (English) and ``/usr/share/games/fortunes/de/`` (German); each
file holds entries separated by a line holding only ``%``. The offensive collection (``off/``) is never
read. Ids: ``fortunes/<lang>/<file>/<index>`` (index = position of the entry in its file, from 0).
"""

from __future__ import annotations

from pathlib import Path

from memlab.data.corpora import corpus_loader
from memlab.data.records import Document
from memlab.errors import ConfigError, MissingSourceError

ROOT = Path("/usr/share/games/fortunes")
PACKAGES = {"en": "fortunes", "de": "fortunes-de"}
_SKIP_DIRS = {"off", "de", "fr", "es", "it", "ru", "pl", "cs"}  # other languages and the offensive set


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and not p.is_symlink() and p.suffix not in (".dat", ".u8") and p.name not in _SKIP_DIRS)


@corpus_loader("fortunes")
def load_fortunes(lang: str = "en", root: str | Path = ROOT, min_chars: int = 1) -> list[Document]:
    """All entries of the ``lang`` collection, in file order; entries shorter than ``min_chars`` dropped."""
    if lang not in PACKAGES:
        raise ConfigError(f"fortunes: lang must be one of {', '.join(PACKAGES)}, got {lang!r}")
    folder = Path(root) / ("de" if lang == "de" else "")
    files = _files(folder) if folder.is_dir() else []
    if not files:
        raise MissingSourceError(
            f"fortunes ({lang}): no quote files in {folder}; install them with `apt-get install {PACKAGES[lang]}`")
    docs: list[Document] = []
    for path in files:
        raw = path.read_bytes().decode("utf-8", errors="replace").replace("\r\n", "\n")
        entries: list[list[str]] = [[]]
        for line in raw.split("\n"):  # a line holding only "%" ends an entry (empty entries happen: "%\n%")
            if line.rstrip() == "%":
                entries.append([])
            else:
                entries[-1].append(line)
        for i, lines in enumerate(entries):
            text = "\n".join(lines).strip("\n")
            if len(text.strip()) < min_chars:
                continue
            docs.append(Document(id=f"fortunes/{lang}/{path.name}/{i}", text=text,
                                 source=f"debian:{PACKAGES[lang]}:{path}",
                                 licence=f"fortunes collection (see /usr/share/doc/{PACKAGES[lang]}/copyright)",
                                 date=None, meta={"corpus": "fortunes", "lang": lang, "file": path.name, "index": i}))
    return docs
