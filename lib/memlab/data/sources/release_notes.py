"""Release-note passages written after 2024 (non-member controls for models with a 2024 cutoff).

Two sources, both read at run time:

1. **Pinned sdists** listed in ``conf/corpora/release_notes.yaml`` (name, version, sha256 of the sdist and
   the changelog file(s) inside it). The data stage downloads them once with
   ``pip download --no-deps --no-binary :all:`` into a cache folder (default ``<repo>/.cache/sdists``) and
   verifies the sha256; later loads are offline.
2. **Debian changelogs** ``/usr/share/doc/*/changelog.Debian.gz`` of the installed packages — a named variant,
   off by default (``debian_changelogs: false``): what is installed differs per machine, so the corpus would too.

Sectioning: a changelog is cut at every heading that carries a release date (reST title lines such as
``26.3 (2026-11-02)``, ``Version 7.17.3 — 2026-11-11``, ``Release 9.0.4 (released Dec 04, 2025)``; Debian
entries end with their ``-- maintainer  <RFC 2822 date>`` line). Sections dated before ``min_date`` are
dropped. A section is then cut at blank lines into passages of ``min_tokens`` to ``< 2·min_tokens``
whitespace tokens (the tail joins the previous passage); sections shorter than ``min_tokens`` are dropped.
"Tokens" here are whitespace-separated words, a lower bound on any subword tokenizer's count.

Ids: ``release_notes/<package>/<version>/<k>``; ``date`` = the release date; ``meta.sha256`` = sha256 of the
passage text (UTF-8), ``meta.n_tokens`` = its word count.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from datetime import date
from email.utils import parsedate_to_datetime
from pathlib import Path

from memlab.config import CONF_DIR
from memlab.data import sdists
from memlab.data.corpora import corpus_loader
from memlab.data.records import Document, unique_docs
from memlab.data.sdists import DEFAULT_CACHE, Pin

DEFAULT_PINS = CONF_DIR / "corpora" / "release_notes.yaml"
DEBIAN_DOC = Path("/usr/share/doc")

_MONTHS = {m: i + 1 for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])}
_ISO = re.compile(r"(?<!\d)(20\d\d)-(\d\d)-(\d\d)(?!\d)")
_MDY = re.compile(r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.? (\d{1,2}),? (20\d\d)\b")
_VERSION = re.compile(r"\bv?(\d+(?:\.\d+)+(?:[a-z]+\d*)?)\b")
_UNDERLINE = re.compile(r"^([=\-~^*#+])\1{2,}\s*$")


def read_pins(path: str | Path = DEFAULT_PINS) -> tuple[list[Pin], dict]:
    """Pins (``fields["files"]``: changelog paths inside the sdist, relative to its top folder) and the file."""
    return sdists.read_pins(path, "release_notes", required=("files",))


def _parse_date(line: str) -> date | None:
    m = _ISO.search(line)
    if m:
        try:
            return date(int(m[1]), int(m[2]), int(m[3]))
        except ValueError:
            return None
    m = _MDY.search(line)
    if m:
        return date(int(m[3]), _MONTHS[m[1].lower()[:3]], int(m[2]))
    return None


def dated_sections(text: str) -> list[tuple[str, date, str]]:
    """Cut a reST/markdown changelog at dated headings -> [(heading, date, section text incl. heading)]."""
    lines = text.splitlines()
    starts: list[tuple[int, str, date]] = []
    for i, line in enumerate(lines):
        title = None
        if i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1]) and line.strip() and not _UNDERLINE.match(line):
            title = line.strip()
        elif line.startswith("#") and line.lstrip("#").startswith(" "):
            title = line.lstrip("#").strip()
        if title is None:
            continue
        d = _parse_date(title)
        if d is not None and _VERSION.search(_ISO.sub("", _MDY.sub("", title))):
            starts.append((i, title, d))
    out = []
    for k, (i, title, d) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(lines)
        out.append((title, d, "\n".join(lines[i:end]).strip()))
    return out


def debian_entries(text: str) -> list[tuple[str, date, str]]:
    """Entries of a Debian changelog -> [(version, date, entry text)]."""
    out = []
    cur: list[str] = []
    version = ""
    for line in text.splitlines():
        if line and not line[0].isspace() and "(" in line and ")" in line and not cur:
            version = line[line.index("(") + 1: line.index(")")]
        if line or cur:
            cur.append(line)
        if line.startswith(" -- "):
            stamp = line.split(">", 1)[-1].strip()
            try:
                d = parsedate_to_datetime(stamp).date()
            except (TypeError, ValueError, IndexError):
                d = None
            if d is not None and version:
                out.append((version, d, "\n".join(cur).strip()))
            cur, version = [], ""
    return out


def split_passages(text: str, min_tokens: int) -> list[str]:
    """Paragraph-aligned passages of min_tokens to < 2·min_tokens words; the short tail joins the last one."""
    paras = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    out: list[list[str]] = []
    cur: list[str] = []
    n = 0
    for p in paras:
        cur.append(p)
        n += len(p.split())
        if n >= min_tokens:
            out.append(cur)
            cur, n = [], 0
    if cur:
        if out:
            out[-1].extend(cur)
        else:
            return []
    return ["\n\n".join(ps) for ps in out]


def _passage_docs(package: str, version: str, d: date, text: str, min_tokens: int, source: str,
                  licence: str, kind: str) -> list[Document]:
    docs = []
    for k, passage in enumerate(split_passages(text, min_tokens)):
        sha = hashlib.sha256(passage.encode("utf-8")).hexdigest()
        docs.append(Document(id=f"release_notes/{package}/{version}/{k}", text=passage, source=source,
                             licence=licence, date=d.isoformat(),
                             meta={"corpus": "release_notes", "kind": kind, "package": package, "version": version,
                                   "passage": k, "sha256": sha, "n_tokens": len(passage.split())}))
    return docs


@corpus_loader("release_notes")
def load_release_notes(pins_file: str | Path = DEFAULT_PINS, cache_dir: str | Path = DEFAULT_CACHE,
                       min_date: str | None = None, min_tokens: int | None = None, download: bool = False,
                       debian: bool | None = None, debian_doc: str | Path = DEBIAN_DOC) -> list[Document]:
    """Passages dated ``>= min_date`` from the pinned sdists (+ Debian changelogs when ``debian`` is on), ids
    unique, sorted; offline unless ``download`` (the data stage's). ``debian=None`` takes ``debian_changelogs``
    from the pin file (off by default: the installed packages differ per machine, so the corpus — and every DVC
    hash downstream — would too)."""
    pins, cfg = read_pins(pins_file)
    if debian is None:
        debian = bool(cfg["debian_changelogs"])
    min_d = date.fromisoformat(str(min_date or cfg.get("min_date", "2025-01-01")))
    min_tokens = int(min_tokens or cfg.get("min_tokens", 300))
    archives = sdists.archives(pins, cache_dir, "release_notes", download=download)
    docs: list[Document] = []
    for pin in pins:
        for inner in pin.fields["files"]:
            text = sdists.read_member(archives[pin.name], inner, "release_notes")
            for title, d, section in dated_sections(text):
                if d < min_d:
                    continue
                version = _VERSION.search(_ISO.sub("", _MDY.sub("", title)))[1]
                docs += _passage_docs(pin.name, version, d, section, min_tokens,
                                      source=f"pypi:{pin.spec}:{inner}", licence=f"see {pin.name} {pin.version} sdist",
                                      kind="sdist")
    if debian:
        for path in sorted(Path(debian_doc).glob("*/changelog.Debian.gz")):
            try:
                text = gzip.open(path, "rt", encoding="utf-8", errors="replace").read()
            except OSError:
                continue
            pkg = path.parent.name
            for version, d, entry in debian_entries(text):
                if d < min_d:
                    continue
                docs += _passage_docs(f"debian-{pkg}", version, d, entry, min_tokens, source=f"debian:{pkg}:{path}",
                                      licence=f"see /usr/share/doc/{pkg}/copyright", kind="debian")
    # Debian binary packages built from one source ship the same changelog (linux-libc-dev/linux-perf):
    # keep each passage text once (first id in sorted order), and each id once.
    return unique_docs(docs)
