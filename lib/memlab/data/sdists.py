"""Pinned PyPI sdists: read the pin file, download once, verify, read members — shared by the corpora built from
sdists (:mod:`memlab.data.sources.release_notes`, :mod:`memlab.data.sources.post_cutoff_code`).

A pin file (``conf/corpora/<corpus>.yaml``) lists ``packages``: each with ``name``, ``version``, ``sha256`` of the
sdist archive and whatever the corpus needs (kept in :attr:`Pin.fields`). The data stage downloads missing sdists
with ``pip download --no-deps --no-binary :all:`` into a cache folder (default ``<repo>/.cache/sdists``); every load
checks the archive's sha256 against its pin, so later loads are offline and a changed archive is refused.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from memlab.config import cache_root
from memlab.data.records import sha256_file
from memlab.errors import ConfigError, MissingSourceError

DEFAULT_CACHE = cache_root() / "sdists"


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    sha256: str | None = None  # of the sdist archive
    fields: dict = field(default_factory=dict, compare=False, hash=False)  # the corpus's own keys

    @property
    def spec(self) -> str:
        return f"{self.name}=={self.version}"


def read_pins(path: str | Path, corpus: str, required: tuple[str, ...] = ()) -> tuple[list[Pin], dict]:
    """The pins of ``path`` and the whole file; a pin missing one of ``required`` keys is a one-line error."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{corpus}: pin file {path} not found; restore conf/corpora/{path.name}")
    cfg = yaml.safe_load(path.read_text()) or {}
    pins = []
    for p in cfg.get("packages", []):
        missing = [k for k in ("name", "version", *required) if p.get(k) in (None, "")]
        if missing:
            raise ConfigError(f"{corpus}: pin {p.get('name', '?')} in {path.name} lacks {', '.join(missing)}")
        rest = {k: v for k, v in p.items() if k not in ("name", "version", "sha256")}
        pins.append(Pin(name=p["name"], version=str(p["version"]), sha256=p.get("sha256"), fields=rest))
    return pins, cfg


def sdist_path(pin: Pin, cache_dir: Path) -> Path | None:
    stem = f"{pin.name}-{pin.version}".lower().replace("_", "-")
    for cand in sorted(cache_dir.glob("*.tar.gz")) + sorted(cache_dir.glob("*.zip")):
        if cand.name.lower().replace("_", "-").startswith(stem + "."):
            return cand
    return None


def download_command(pin: Pin, cache_dir: Path) -> list[str]:
    return [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
            "--disable-pip-version-check", "-d", str(cache_dir), pin.spec]


def _hint(pin: Pin, cache_dir: Path) -> str:
    return f"`pip download --no-deps --no-binary :all: -d {cache_dir} {pin.spec}`"


def _download(pin: Pin, cache_dir: Path, corpus: str, retries: int, timeout: float) -> Path:
    attempt = 0
    while True:
        attempt += 1
        try:
            ok = subprocess.run(download_command(pin, cache_dir), capture_output=True, text=True,
                                timeout=timeout).returncode == 0
        except subprocess.TimeoutExpired:
            ok = False
        path = sdist_path(pin, cache_dir)
        if path is not None:
            return path
        if attempt >= retries or ok:
            raise MissingSourceError(f"{corpus}: could not download {pin.spec}; run {_hint(pin, cache_dir)}")
        time.sleep(2 ** attempt)


def archives(pins: list[Pin], cache_dir: str | Path, corpus: str, download: bool = False, retries: int = 3,
             timeout: float = 300) -> dict[str, Path]:
    """{pin name: verified archive}: missing sdists are refused (offline, the default) or downloaded (``download``:
    the data stage only); an archive whose sha256 differs from its pin is deleted from the cache and refused, in one
    line."""
    cache_dir = Path(cache_dir)
    if download:
        cache_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for pin in pins:
        path = sdist_path(pin, cache_dir) if cache_dir.is_dir() else None
        if path is None and not download:
            raise MissingSourceError(f"{corpus}: {pin.spec} sdist not in {cache_dir} (loaders are offline); run the "
                                     f"data stage, `python -m memlab.data.prepare --only {corpus}` (it downloads "
                                     f"the pinned sdists once), or {_hint(pin, cache_dir)}")
        if path is None:
            path = _download(pin, cache_dir, corpus, retries, timeout)
        if pin.sha256 and sha256_file(path) != pin.sha256:
            path.unlink()
            raise MissingSourceError(f"{corpus}: {path.name} does not match its pinned sha256 (removed from the "
                                     f"cache); rerun {_hint(pin, cache_dir)}")
        paths[pin.name] = path
    return paths


def _top(tf: tarfile.TarFile) -> str:
    return tf.getnames()[0].split("/")[0]


def read_member(archive: Path, inner: str, corpus: str) -> str:
    """Text of ``inner`` (relative to the sdist's top folder)."""
    with tarfile.open(archive, "r:*") as tf:
        try:
            f = tf.extractfile(f"{_top(tf)}/{inner}")
        except KeyError:
            f = None
        if f is None:
            raise ConfigError(f"{corpus}: {archive.name} has no {inner}; fix the pin file")
        return f.read().decode("utf-8", errors="replace")


def members(archive: Path, suffix: str) -> Iterator[tuple[str, str]]:
    """(path relative to the top folder, text) of every regular file ending in ``suffix``, in path order."""
    with tarfile.open(archive, "r:*") as tf:
        top = _top(tf)
        found = sorted((m.name, m) for m in tf.getmembers() if m.isfile() and m.name.endswith(suffix)
                       and m.name.startswith(top + "/"))
        for name, m in found:
            yield name[len(top) + 1:], tf.extractfile(m).read().decode("utf-8", errors="replace")
