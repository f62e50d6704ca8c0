"""Python code first published after the models' training cutoff (the code domain's known-unseen set, as LBPP in
seed 003 §4.4).

Pinned sdists listed in ``conf/corpora/post_cutoff_code.yaml`` (name, version, sha256 of the sdist, licence, the
package's first release on PyPI and the pinned version's release date), fetched and verified by
:mod:`memlab.data.sdists`. A pin whose ``first_release`` is before ``min_first_release`` is refused: no version of
the package can then be in a model's training data (for the models trained before that day).

One document per top-level function or class (decorators included) of every ``.py`` file not matched by
``exclude``, of ``min_words`` to ``max_words`` whitespace tokens; a file that does not parse is a one-line error.
A text that occurs twice is kept once (first id in sorted order).

Ids: ``post_cutoff_code/<package>/<version>/<path>:<name>``; ``date`` = the pinned version's release date;
``meta``: package, version, path, qualname, kind ("function" | "class"), first_release, released,
``sha256`` of the text (UTF-8), ``n_words``.
"""

from __future__ import annotations

import ast
import hashlib
from datetime import date
from fnmatch import fnmatch
from pathlib import Path

from memlab.config import CONF_DIR
from memlab.data import sdists
from memlab.data.corpora import corpus_loader
from memlab.data.records import Document, unique_docs
from memlab.data.sdists import DEFAULT_CACHE
from memlab.errors import ConfigError

CORPUS = "post_cutoff_code"
DEFAULT_PINS = CONF_DIR / "corpora" / f"{CORPUS}.yaml"
PIN_KEYS = ("sha256", "first_release", "released", "licence")


def read_pins(path: str | Path = DEFAULT_PINS) -> tuple[list[sdists.Pin], dict]:
    """The pins and the file; a pin without every key of :data:`PIN_KEYS` or first released before
    ``min_first_release`` is a one-line error."""
    pins, cfg = sdists.read_pins(path, CORPUS, required=PIN_KEYS)
    floor = date.fromisoformat(str(cfg["min_first_release"]))
    for pin in pins:
        first, released = (date.fromisoformat(str(pin.fields[k])) for k in ("first_release", "released"))
        if first < floor or released < first:
            raise ConfigError(f"{CORPUS}: {pin.spec} first released {first}, pinned release {released}: needs "
                              f"min_first_release {floor} ≤ first_release ≤ released")
    return pins, cfg


def top_level_units(source: str) -> list[tuple[str, str, str]]:
    """[(name, "function" | "class", source text incl. decorators)] of a module's top-level definitions."""
    lines = source.splitlines()
    out = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            text = "\n".join(lines[start - 1:node.end_lineno]).rstrip()
            out.append((node.name, "class" if isinstance(node, ast.ClassDef) else "function", text))
    return out


@corpus_loader("post_cutoff_code")
def load_post_cutoff_code(pins_file: str | Path = DEFAULT_PINS, cache_dir: str | Path = DEFAULT_CACHE,
                          min_words: int | None = None, max_words: int | None = None,
                          download: bool = False) -> list[Document]:
    """One document per top-level function/class of the pinned sdists' Python files, ids unique, sorted; offline
    unless ``download`` (the data stage's)."""
    pins, cfg = read_pins(pins_file)
    lo = int(cfg["min_words"] if min_words is None else min_words)
    hi = int(cfg["max_words"] if max_words is None else max_words)
    exclude = list(cfg["exclude"])
    archives = sdists.archives(pins, cache_dir, CORPUS, download=download)
    docs: list[Document] = []
    for pin in pins:
        f = pin.fields
        for path, source in sdists.members(archives[pin.name], ".py"):
            if any(fnmatch(path, pat) for pat in exclude):
                continue
            try:
                units = top_level_units(source)
            except SyntaxError as err:
                raise ConfigError(f"{CORPUS}: {pin.spec} {path} does not parse ({err.msg}, line {err.lineno}); "
                                  "add it to `exclude` in the pin file") from None
            for name, kind, text in units:
                n = len(text.split())
                if not lo <= n <= hi:
                    continue
                docs.append(Document(
                    id=f"{CORPUS}/{pin.name}/{pin.version}/{path}:{name}", text=text,
                    source=f"pypi:{pin.spec}:{path}", licence=str(f["licence"]), date=str(f["released"]),
                    meta={"corpus": CORPUS, "package": pin.name, "version": pin.version, "path": path,
                          "qualname": name, "kind": kind, "first_release": str(f["first_release"]),
                          "released": str(f["released"]), "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
                          "n_words": n}))
    return unique_docs(docs)
