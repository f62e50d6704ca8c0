"""Corpus indexes over token ids for SimpleTrace (seed 002, §2 "suffix-array indexing").

Two backends behind one interface (:class:`TokenIndex`):

* :class:`SuffixArrayIndex` — a suffix array (pydivsufsort) over the token ids of the whole corpus, with
  its LCP array (Kasai) and inverse suffix array. Saved as ``.npy`` files and memory-mapped on reload.
  Good default for local corpora (≈ 1.5 s per 5 M tokens to build).
* :class:`InfiniGramIndex` — infini-gram 2.6.0 (``InfiniGramEngine``), built from ``tokenized.<s>``/
  ``offset.<s>``/``table.<s>`` files we write ourselves for any tokenizer (tables byte-identical to
  ``infini_gram.indexing``'s), sharded on disk and queried memory-mapped: for corpora larger than RAM, or an
  existing infini-gram index directory.

Builds stream the documents (:mod:`.corpus_stream`): tokenized in chunks by worker processes on all cores
(byte-level BPE through the pre-token cache of :mod:`.piece_cache`) and written to disk as they come, so only
ids and lengths are held; the suffix array is then built in memory from the token file, infini-gram shard by
shard in bounded memory (``shard_tokens``), shards side by side on all cores.

Corpus layout (both backends): every document is written as ``SEP + tokens``, where ``SEP`` is the
all-ones value of the token dtype (0xFFFF for u16, 0xFFFFFFFF for u32, the infini-gram convention), and a
final ``SEP`` closes the corpus. ``SEP`` is larger than every real token id, so no match crosses a
document boundary. Every index records the fingerprint of the tokenizer it was built with
(:func:`tokenizer_fingerprint`); tracing with another tokenizer is refused.

An index directory is complete only when ``meta.json`` exists: it is written last, after every other file,
so a killed build leaves a directory that :func:`load_index` refuses with one clear line.

This package: :mod:`.base` (interface, tokenizer helpers, validation, backend registry), :mod:`.kinds` (the
backends' plugin package: :mod:`.kinds.suffix_array`, :mod:`.kinds.infini_gram`, each registered by name with
:func:`register_backend`; the registry imports every module of it when a backend is looked up, as the backend kinds
and the MIA scores are found — adding a backend = one module there), :mod:`.corpus_stream` and :mod:`.piece_cache`
(tokenizing the corpus), and here :func:`build_index` / :func:`load_index`, which pick the backend class by name
from :data:`BACKENDS`. The backend classes stay importable from here by name (:data:`_PUBLIC`, imported on first
use).
"""

from __future__ import annotations

import importlib
import json
import shutil
import time
from pathlib import Path

from memlab.errors import MemlabError
from memlab.methods.trace.index.base import (BACKENDS, FINGERPRINT_VERSION, FORMAT_VERSION, KIND_PACKAGE, Occurrences,
                                             TokenIndex, backend_class, encode_texts, read_jsonl_bytes,
                                             register_backend, token_dtype_for, tokenizer_fingerprint,
                                             unregister_backend, vocab_size_of)
from memlab.methods.trace.index.corpus_stream import tokenize_corpus

__all__ = ["BACKENDS", "FORMAT_VERSION", "KIND_PACKAGE", "ExternalInfiniGramIndex", "InfiniGramIndex", "Occurrences",
           "SuffixArrayIndex", "TokenIndex", "backend_class", "build_index", "encode_texts", "load_index",
           "read_jsonl_bytes", "register_backend", "token_dtype_for", "tokenizer_fingerprint", "unregister_backend",
           "vocab_size_of"]

# public backend classes → their module in the plugin package (imported on first use: module __getattr__)
_PUBLIC = {"SuffixArrayIndex": "memlab.methods.trace.index.kinds.suffix_array",
           "InfiniGramIndex": "memlab.methods.trace.index.kinds.infini_gram",
           "ExternalInfiniGramIndex": "memlab.methods.trace.index.kinds.infini_gram"}


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ------------------------------------------------------------------------------------- build / load

def build_index(docs, tokenizer, out_dir: str | Path, *, backend: str,
                tokenizer_name: str | None = None, shards: int = 1, shard_tokens: int | None = None,
                mem_gb: int = 2, overwrite: bool = False, tokenize_workers: int | None = None,
                piece_cache: bool = True) -> TokenIndex:
    """Tokenize ``docs`` (an iterable of Documents or (id, text) pairs, read once) and build an index in
    ``out_dir``.

    Documents are streamed: tokenized in chunks by ``tokenize_workers`` processes (all cores when None; the
    index is the same for any number; byte-level BPE through the pre-token cache unless ``piece_cache`` is False,
    the same ids) and written to disk as they come (:mod:`.corpus_stream`). infini-gram
    indexes are split into shards of about ``shard_tokens`` tokens when it is given, else into ``shards``
    shards of equal document counts. Built in ``<out_dir>.tmp`` and
    renamed at the end; ``meta.json`` is the last file written. Returns the loaded index. Refuses empty
    corpora, empty documents and invalid UTF-8 with one line (and leaves nothing behind).
    """
    backend_cls = backend_class(backend)
    out = Path(out_dir)
    backend_cls.check_path(out)
    if (out / "meta.json").exists() and not overwrite:
        return load_index(out)
    vocab = vocab_size_of(tokenizer)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    streamer = backend_cls.shard_streamer(tmp, token_dtype_for(vocab).itemsize, shard_tokens=shard_tokens,
                                          mem_gb=mem_gb)
    try:
        t0 = time.perf_counter()
        corpus = tokenize_corpus(docs, tokenizer, tmp, vocab, workers=tokenize_workers, piece_cache=piece_cache,
                                 on_written=streamer.written if streamer else None)
        t_tok = time.perf_counter() - t0
        meta = {
            "format_version": FORMAT_VERSION, "backend": backend,
            "tokenizer_fingerprint": tokenizer_fingerprint(tokenizer),
            "tokenizer_fingerprint_version": FINGERPRINT_VERSION,
            "tokenizer_name": tokenizer_name or getattr(tokenizer, "name_or_path", None),
            "vocab_size": vocab, "eos_token_id": tokenizer.eos_token_id if tokenizer.eos_token_id is not None
            and tokenizer.eos_token_id < vocab else 0,
            "n_docs": corpus.n_docs, "n_tokens": corpus.n_tokens, "text_bytes": corpus.text_bytes,
        }
        t1 = time.perf_counter()
        backend_cls.build(corpus, tmp, meta, shards=shards, shard_tokens=shard_tokens, mem_gb=mem_gb,
                          streamer=streamer)
        corpus.tokens_file.unlink()
        meta["build_seconds"] = {"tokenize": round(t_tok, 3), "index": round(time.perf_counter() - t1, 3)}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    except BaseException:
        if streamer is not None:
            streamer.close()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return load_index(out)


def load_index(path: str | Path) -> TokenIndex:
    """Open an index directory; a missing or half-built one is refused with one clear line."""
    path = Path(path)
    if not path.is_dir():
        raise MemlabError(f"index directory {path} does not exist; build it with memlab.methods.trace.index.build_index")
    meta_file = path / "meta.json"
    if not meta_file.exists():
        raise MemlabError(f"index directory {path} is incomplete (no meta.json: the build did not finish); "
                          "delete it and rebuild the index")
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    if meta.get("format_version") != FORMAT_VERSION:
        raise MemlabError(f"index {path} has format {meta.get('format_version')}, expected {FORMAT_VERSION}; rebuild it")
    backend = meta.get("backend")
    backend_cls = BACKENDS.get(backend) if isinstance(backend, str) else None
    if backend_cls is None:
        raise MemlabError(f"index {path} names unknown backend {backend!r}; rebuild it")
    needed = backend_cls.required_files(meta)
    missing = [n for n in needed if not (path / n).exists()]
    if missing:
        raise MemlabError(f"index directory {path} is incomplete (missing {', '.join(missing[:3])}); "
                          "delete it and rebuild the index")
    return backend_cls(path, meta)
