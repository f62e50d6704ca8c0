"""Stream a corpus through the tokenizer into the files every index is built from, in bounded memory.

Documents are read one at a time, checked (:func:`~.base.checked_doc`), grouped into chunks of about
``CHUNK_BYTES`` of text and tokenized by worker processes, one single-threaded fast tokenizer each (all
cores, whatever ``TOKENIZERS_PARALLELISM`` or ``RAYON_NUM_THREADS`` say in the caller — the bench and the
studies hold the tokenizer to one thread). Byte-level BPE tokenizers go through the pre-token cache of
:mod:`.piece_cache` (the same ids, each distinct word encoded once). Chunks are written back in input order,
so the files are the same for any number of workers. Only ids and per-document lengths stay in memory; texts
and token ids go straight to disk:

* ``tokens.raw`` — every document as ``SEP + token ids`` in the index's token dtype (the backends read it,
  then ``build_index`` deletes it), ``texts.bin`` / ``text_offsets.npy`` / ``ids.json`` / ``unigram.npy``
  — the shared files.
"""

from __future__ import annotations

import itertools
import json
import os
import pickle
import subprocess
import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memlab.errors import MemlabError
from memlab.methods.trace.index.base import checked_doc, encode_texts, token_dtype_for
from memlab.methods.trace.index.piece_cache import PieceCachedEncoder, piece_cache_applicable

CHUNK_BYTES = 1 << 18  # text per tokenization job: ~0.1 s of work; a worker peaks at ~80 bytes per text byte
TOKENS_FILE = "tokens.raw"


@dataclass
class TokenizedCorpus:
    """What the backends build from: ``tokens_file`` holds every document as SEP + ids (``dtype``)."""

    tokens_file: Path
    dtype: np.dtype
    doc_lengths: np.ndarray  # tokens per document, SEP not counted
    ids: list[str]
    text_bytes: int

    @property
    def n_docs(self) -> int:
        return len(self.doc_lengths)

    @property
    def n_tokens(self) -> int:
        return int(self.doc_lengths.sum())


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# ------------------------------------------------------------------------------ tokenizing one chunk

def _fast_tokenizer(tokenizer_json: str):
    """A standalone copy of the fast tokenizer, configured as ``tokenizer(texts, add_special_tokens=False)``
    calls it (no truncation, no padding)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer_json)
    tok.no_truncation()
    tok.no_padding()
    return tok


def _lay_out(lengths: np.ndarray, block: np.ndarray, vocab: int) -> tuple[np.ndarray, bytes, np.ndarray]:
    """(lengths, SEP + ids of every document as bytes, unigram counts) of one chunk laid out in ``block``."""
    sep = np.iinfo(block.dtype).max
    unigram = np.bincount(block[block != sep].astype(np.int64), minlength=vocab)[:vocab]
    return lengths, block.tobytes(), unigram


def _block(token_lists, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """(tokens per document, SEP + ids of every document back to back)."""
    lengths = np.fromiter((len(t) for t in token_lists), dtype=np.int64, count=len(token_lists))
    block = np.full(int(lengths.sum()) + len(lengths), np.iinfo(dtype).max, dtype=dtype)
    pos = 1
    for toks, n in zip(token_lists, lengths):
        block[pos:pos + n] = toks
        pos += n + 1
    return lengths, block


class _ChunkEncoder:
    """Encodes chunks with a standalone fast tokenizer: through :class:`PieceCachedEncoder` when the tokenizer
    has its shape (the same ids, faster), else with the tokenizer's batch call."""

    def __init__(self, tokenizer_json: str, dtype_str: str, vocab: int, piece_cache: bool):
        self.tok = _fast_tokenizer(tokenizer_json)
        self.dtype, self.vocab = np.dtype(dtype_str), vocab
        self.cached = (PieceCachedEncoder(self.tok, tokenizer_json)
                       if piece_cache and piece_cache_applicable(tokenizer_json) else None)

    def __call__(self, texts: list[str]):
        if self.cached is not None:
            lengths, block = self.cached.encode_block(texts, np.iinfo(self.dtype).max, self.dtype)
        else:
            lengths, block = _block([e.ids for e in self.tok.encode_batch_fast(texts, add_special_tokens=False)],
                                    self.dtype)
        return _lay_out(lengths, block, self.vocab)


# ------------------------------------------------------------------------------ worker processes

class _WorkerPool:
    """``n`` worker processes (:func:`_serve` in a fresh interpreter) fed over pipes, one
    chunk in flight each; results come back in submission order. Plain subprocesses, not multiprocessing:
    nothing re-imports the caller's ``__main__``, and nothing is forked from a process that may be running
    threads (torch, the tokenizer's own pool)."""

    def __init__(self, n: int, setup: tuple):
        env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
        cmd = [sys.executable, "-c", f"from {__name__} import _serve; _serve()"]
        self.procs = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env) for _ in range(n)]
        for p in self.procs:
            pickle.dump(setup, p.stdin)
            p.stdin.flush()

    def map_in_order(self, chunks):
        pending: deque = deque()  # (chunk, process), in submission order
        idle = deque(self.procs)
        for chunk in chunks:
            if not idle:
                yield self._result(*pending.popleft(), idle)
            p = idle.popleft()
            pickle.dump([t for _, t, _ in chunk], p.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            p.stdin.flush()
            pending.append((chunk, p))
        while pending:
            yield self._result(*pending.popleft(), idle)

    @staticmethod
    def _result(chunk, p, idle):
        try:
            out = pickle.load(p.stdout)
        except EOFError:
            raise MemlabError(f"a tokenizer worker process died (exit code {p.wait()}); see its error above") from None
        idle.append(p)
        return chunk, out

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            if exc[0] is not None:
                p.kill()
            try:
                p.stdin.close()
            except BrokenPipeError:  # a worker that died or was killed
                pass
        for p in self.procs:
            p.wait()


def _serve() -> None:
    """Worker process: a setup tuple, then lists of texts until end of input, each answered in turn."""
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    encode = _ChunkEncoder(*pickle.load(inp))
    while True:
        try:
            texts = pickle.load(inp)
        except EOFError:
            return
        pickle.dump(encode(texts), out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()


# ------------------------------------------------------------------------------ main side

def _chunks(docs):
    """Checked (id, text, UTF-8) triples grouped into lists of about CHUNK_BYTES of text."""
    chunk, size = [], 0
    for d in docs:
        doc = checked_doc(d)
        chunk.append(doc)
        size += len(doc[2])
        if size >= CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _encoded(chunks, tokenizer, dtype: np.dtype, vocab: int, workers: int, piece_cache: bool):
    """(chunk, encoded chunk) in input order; worker processes only when there is more than one chunk."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:  # a slow (Python) tokenizer: no Rust copy to hand to workers
        for chunk in chunks:
            yield chunk, _lay_out(*_block(encode_texts(tokenizer, [t for _, t, _ in chunk]), dtype), vocab)
        return
    tok_json = backend.to_str()
    head = list(itertools.islice(chunks, 2))
    chunks = itertools.chain(head, chunks)
    if len(head) < 2 or workers <= 1:
        encode = _ChunkEncoder(tok_json, dtype.str, vocab, piece_cache)
        for chunk in chunks:
            yield chunk, encode([t for _, t, _ in chunk])
        return
    with _WorkerPool(workers, (tok_json, dtype.str, vocab, piece_cache)) as pool:
        yield from pool.map_in_order(chunks)


def tokenize_corpus(docs, tokenizer, out: Path, vocab: int, *, workers: int | None = None,
                    piece_cache: bool = True, on_written=None) -> TokenizedCorpus:
    """Tokenize ``docs`` into ``out`` (the shared files plus ``tokens.raw``) with ``workers`` processes
    (all available cores when None), through the pre-token cache unless ``piece_cache`` is False (the same
    ids); ``on_written(tokens_file, lengths)`` after each chunk's tokens are flushed to the file (an index built
    meanwhile). Refuses empty corpora, empty or token-less documents, invalid UTF-8 and repeated ids with one
    line."""
    dtype = token_dtype_for(vocab)
    workers = available_cores() if workers is None else workers
    ids: list[str] = []
    seen: set[str] = set()
    lengths, text_offsets = [], [0]
    unigram = np.zeros(vocab, dtype=np.int64)
    with open(out / TOKENS_FILE, "wb") as ftok, open(out / "texts.bin", "wb") as ftxt:
        for chunk, (lens, block, uni) in _encoded(_chunks(docs), tokenizer, dtype, vocab, workers, piece_cache):
            for (doc_id, _, blob), n in zip(chunk, lens):
                if doc_id in seen:
                    raise MemlabError("document ids are not unique; give every document a distinct id before indexing")
                if n == 0:
                    raise MemlabError(f"document {doc_id!r} has no tokens; drop it before indexing")
                seen.add(doc_id)
                ids.append(doc_id)
                ftxt.write(blob)
                text_offsets.append(text_offsets[-1] + len(blob))
            lengths.append(lens)
            ftok.write(block)
            unigram += uni
            if on_written is not None:
                ftok.flush()
                on_written(out / TOKENS_FILE, lens)
    if not ids:
        raise MemlabError("no documents to index; check the corpus name and options")
    np.save(out / "unigram.npy", unigram)
    np.save(out / "text_offsets.npy", np.asarray(text_offsets, dtype=np.int64))
    (out / "ids.json").write_text(json.dumps(ids, ensure_ascii=False), encoding="utf-8")
    return TokenizedCorpus(out / TOKENS_FILE, dtype, np.concatenate(lengths), ids, text_offsets[-1])
