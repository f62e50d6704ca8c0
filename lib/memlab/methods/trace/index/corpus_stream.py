"""Stream a corpus through the tokenizer into the files every index is built from, in bounded memory.

Documents are read one at a time, checked (:func:`~.base.checked_doc`), grouped into chunks of about
``CHUNK_BYTES`` of text and tokenized by worker processes, one single-threaded fast tokenizer each (all
cores, whatever ``TOKENIZERS_PARALLELISM`` or ``RAYON_NUM_THREADS`` say in the caller — the bench and the
studies hold the tokenizer to one thread). Byte-level BPE tokenizers go through the pre-token cache of
:mod:`.piece_cache` (the same ids, each distinct word encoded once). Chunks are written back in input order,
so the files are the same for any number of workers. Texts, token ids and document ids go straight to disk; in
memory stay each document's token count and text offset, and a 64-bit hash of its id (:class:`SeenIds`): 24 bytes a
document. A repeated id is found, and named, as soon as it comes:

* ``tokens.raw`` — every document as ``SEP + token ids`` in the index's token dtype (the backends read it,
  then ``build_index`` deletes it), ``texts.bin`` / ``text_offsets.npy`` / ``ids.json`` / ``unigram.npy``
  — the shared files.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import pickle
import subprocess
import sys
from collections import deque
from pathlib import Path

import numpy as np

from memlab.errors import MemlabError
from memlab.methods.trace.index.base import TokenizedCorpus, checked_doc, encode_texts, token_dtype_for  # noqa: F401
from memlab.methods.trace.index.piece_cache import PieceCachedEncoder, piece_cache_applicable

CHUNK_BYTES = 1 << 18  # text per tokenization job: ~0.1 s of work; a worker peaks at ~80 bytes per text byte
TOKENS_FILE = "tokens.raw"


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


# ------------------------------------------------------------------------------ repeated ids

def _hashes(ids: list[str]) -> np.ndarray:
    """64-bit BLAKE2b hash of each id."""
    return np.frombuffer(b"".join(hashlib.blake2b(i.encode("utf-8", "surrogatepass"), digest_size=8).digest()
                                  for i in ids), dtype="<u8")


class SeenIds:
    """The document ids seen so far, as 64-bit hashes (8 bytes an id) in sorted runs, each more than twice as
    long as the next (a run is merged into the one before while that one is at most twice its length; so
    ≈ log₂ n runs): a new id whose hash is in a run is looked up in ``earlier()``, the ids before it (read back
    only then), so it is named when it repeats and a mere hash collision passes (≈ n² / 2⁶⁵ of them)."""

    def __init__(self, earlier=None):
        self.runs: list[np.ndarray] = []
        self.earlier = earlier
        self.n = 0

    def add(self, ids: list[str]) -> str | None:
        """Add ``ids``; the first one seen before (or twice among them), else None."""
        h = _hashes(ids)
        order = np.argsort(h, kind="stable")
        run = h[order]
        hit = np.zeros(len(ids), dtype=bool)
        hit[order[1:][run[1:] == run[:-1]]] = True  # a later copy within the new ids
        for r in self.runs:
            pos = np.minimum(np.searchsorted(r, h), len(r) - 1)
            hit |= r[pos] == h
        if hit.any():
            before: set[str] | None = None
            for k in np.flatnonzero(hit):
                if ids[k] in ids[:k]:
                    return ids[k]
                if before is None:
                    before = set(self.earlier()) if self.earlier is not None else set()
                if ids[k] in before:
                    return ids[k]
        self.runs.append(run)
        while len(self.runs) > 1 and len(self.runs[-2]) <= 2 * len(self.runs[-1]):
            last = self.runs.pop()
            self.runs[-1] = np.sort(np.concatenate([self.runs[-1], last]), kind="stable")
        self.n += len(ids)
        return None


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


def _read_ids(path: Path) -> list[str]:
    """The ids written so far to ``path`` (a JSON list still open)."""
    return json.loads(path.read_text(encoding="utf-8") + "]")


def tokenize_corpus(docs, tokenizer, out: Path, vocab: int, *, workers: int | None = None,
                    piece_cache: bool = True, on_written=None) -> TokenizedCorpus:
    """Tokenize ``docs`` into ``out`` (the shared files plus ``tokens.raw``) with ``workers`` processes
    (all available cores when None), through the pre-token cache unless ``piece_cache`` is False (the same
    ids); ``on_written(tokens_file, lengths)`` after each chunk's tokens are flushed to the file (an index built
    meanwhile). Refuses empty corpora, empty or token-less documents, invalid UTF-8 and repeated ids with one
    line."""
    dtype = token_dtype_for(vocab)
    workers = available_cores() if workers is None else workers
    seen = SeenIds(earlier=lambda: _read_ids(out / "ids.json"))
    lengths, ends = [], []  # per chunk: tokens per document, end offset of each text in texts.bin
    text_bytes = 0
    unigram = np.zeros(vocab, dtype=np.int64)
    with open(out / TOKENS_FILE, "wb") as ftok, open(out / "texts.bin", "wb") as ftxt, \
            open(out / "ids.json", "w", encoding="utf-8") as fids:
        fids.write("[")  # json.dumps(ids, ensure_ascii=False), written as the ids come
        for chunk, (lens, block, uni) in _encoded(_chunks(docs), tokenizer, dtype, vocab, workers, piece_cache):
            chunk_ids = [doc_id for doc_id, _, _ in chunk]
            if (again := seen.add(chunk_ids)) is not None:
                raise MemlabError(f"document ids are not unique ({again!r} comes twice); give every document a "
                                  "distinct id before indexing")
            if (empty := np.flatnonzero(lens == 0)).size:
                raise MemlabError(f"document {chunk_ids[empty[0]]!r} has no tokens; drop it before indexing")
            fids.write(", " * bool(lengths) + json.dumps(chunk_ids, ensure_ascii=False)[1:-1])  # one call a chunk
            fids.flush()  # SeenIds reads it back on a hash hit
            blobs = [blob for _, _, blob in chunk]
            ftxt.write(b"".join(blobs))
            ends.append(text_bytes + np.cumsum([len(b) for b in blobs], dtype=np.int64))
            text_bytes = int(ends[-1][-1])
            lengths.append(lens)
            ftok.write(block)
            unigram += uni
            if on_written is not None:
                ftok.flush()
                on_written(out / TOKENS_FILE, lens)
        fids.write("]")
    if not lengths:
        raise MemlabError("no documents to index; check the corpus name and options")
    np.save(out / "unigram.npy", unigram)
    np.save(out / "text_offsets.npy", np.concatenate([np.zeros(1, dtype=np.int64), *ends]))
    return TokenizedCorpus(out / TOKENS_FILE, dtype, np.concatenate(lengths), text_bytes)
