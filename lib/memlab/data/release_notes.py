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
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from datetime import date
from email.utils import parsedate_to_datetime
from pathlib import Path

from memlab.config import repo_root
from memlab.data.records import sha256_file
from memlab.data.records import Document
from memlab.errors import ConfigError, MissingSourceError

REPO_ROOT = repo_root()
DEFAULT_PINS = REPO_ROOT / "conf" / "corpora" / "release_notes.yaml"
DEFAULT_CACHE = REPO_ROOT / ".cache" / "sdists"
DEBIAN_DOC = Path("/usr/share/doc")

_MONTHS = {m: i + 1 for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])}
_ISO = re.compile(r"(?<!\d)(20\d\d)-(\d\d)-(\d\d)(?!\d)")
_MDY = re.compile(r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.? (\d{1,2}),? (20\d\d)\b")
_VERSION = re.compile(r"\bv?(\d+(?:\.\d+)+(?:[a-z]+\d*)?)\b")
_UNDERLINE = re.compile(r"^([=\-~^*#+])\1{2,}\s*$")


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    files: tuple[str, ...]  # changelog paths inside the sdist, relative to its top folder
    sha256: str | None = None  # of the sdist archive

    @property
    def spec(self) -> str:
        return f"{self.name}=={self.version}"


def read_pins(path: str | Path = DEFAULT_PINS) -> tuple[list[Pin], dict]:
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"release_notes: pin file {path} not found; restore conf/corpora/release_notes.yaml")
    cfg = yaml.safe_load(path.read_text()) or {}
    pins = [Pin(name=p["name"], version=str(p["version"]), files=tuple(p["files"]), sha256=p.get("sha256"))
            for p in cfg.get("packages", [])]
    return pins, cfg


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


def sdist_path(pin: Pin, cache_dir: Path) -> Path | None:
    stem = f"{pin.name}-{pin.version}"
    for cand in sorted(cache_dir.glob("*.tar.gz")) + sorted(cache_dir.glob("*.zip")):
        if cand.name.lower().replace("_", "-").startswith(stem.lower().replace("_", "-") + "."):
            return cand
    return None


def download_command(pin: Pin, cache_dir: Path) -> list[str]:
    return [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
            "--disable-pip-version-check", "-d", str(cache_dir), pin.spec]


def fetch_sdists(pins: list[Pin], cache_dir: str | Path = DEFAULT_CACHE, retries: int = 3,
                 timeout: float = 300) -> dict[str, Path]:
    """Download missing pinned sdists into ``cache_dir`` (skips present ones), verify sha256 when pinned."""
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for pin in pins:
        path = sdist_path(pin, cache_dir)
        attempt = 0
        while path is None:
            attempt += 1
            cmd = download_command(pin, cache_dir)
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
                ok = proc.returncode == 0
            except subprocess.TimeoutExpired:
                ok = False
            path = sdist_path(pin, cache_dir)
            if path is None and (attempt >= retries or ok):
                raise MissingSourceError(
                    f"release_notes: could not download {pin.spec}; run `pip download --no-deps --no-binary :all: "
                    f"-d {cache_dir} {pin.spec}`")
            if path is None:
                time.sleep(2 ** attempt)
        if pin.sha256 and sha256_file(path) != pin.sha256:
            path.unlink()
            raise MissingSourceError(f"release_notes: {path.name} does not match its pinned sha256; rerun "
                                     f"`pip download --no-deps --no-binary :all: -d {cache_dir} {pin.spec}`")
        paths[pin.name] = path
    return paths


def _read_member(archive: Path, inner: str) -> str:
    with tarfile.open(archive, "r:*") as tf:
        top = tf.getnames()[0].split("/")[0]
        try:
            f = tf.extractfile(f"{top}/{inner}")
        except KeyError:
            f = None
        if f is None:
            raise ConfigError(f"release_notes: {archive.name} has no {inner}; fix `files` in the pin file")
        return f.read().decode("utf-8", errors="replace")


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


def load_release_notes(pins_file: str | Path = DEFAULT_PINS, cache_dir: str | Path = DEFAULT_CACHE,
                       min_date: str | None = None, min_tokens: int | None = None, download: bool = True,
                       debian: bool | None = None, debian_doc: str | Path = DEBIAN_DOC) -> list[Document]:
    """Passages dated ``>= min_date`` from the pinned sdists (+ Debian changelogs when ``debian`` is on), ids
    unique, sorted. ``debian=None`` takes ``debian_changelogs`` from the pin file (off by default: the installed
    packages differ per machine, so the corpus — and every DVC hash downstream — would too)."""
    pins, cfg = read_pins(pins_file)
    if debian is None:
        debian = bool(cfg["debian_changelogs"])
    min_d = date.fromisoformat(str(min_date or cfg.get("min_date", "2025-01-01")))
    min_tokens = int(min_tokens or cfg.get("min_tokens", 300))
    cache_dir = Path(cache_dir)
    if download:
        archives = fetch_sdists(pins, cache_dir)
    else:
        archives = {}
        for pin in pins:
            p = sdist_path(pin, cache_dir) if cache_dir.is_dir() else None
            if p is None:
                raise MissingSourceError(
                    f"release_notes: {pin.spec} sdist not in {cache_dir}; run `pip download --no-deps "
                    f"--no-binary :all: -d {cache_dir} {pin.spec}`")
            archives[pin.name] = p
    docs: list[Document] = []
    for pin in pins:
        for inner in pin.files:
            text = _read_member(archives[pin.name], inner)
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
    uniq: dict[str, Document] = {}
    seen_text: set[str] = set()
    for doc in sorted(docs, key=lambda x: x.id):
        if doc.id in uniq or doc.meta["sha256"] in seen_text:
            continue
        seen_text.add(doc.meta["sha256"])
        uniq[doc.id] = doc
    return list(uniq.values())
