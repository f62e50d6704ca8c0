"""Stream a corpus through the tokenizer into the files every index is built from, in bounded memory.

Documents are read one at a time, checked (:func:`~.base.checked_doc`), grouped into chunks of about
``CHUNK_BYTES`` of text and tokenized by a pool of worker processes, one single-threaded fast tokenizer each
(all cores, whatever ``TOKENIZERS_PARALLELISM`` or ``RAYON_NUM_THREADS`` say in the caller: a process pool
is measurably faster here than the tokenizer's own threads, see ``bench/bench_trace.py``). Chunks are
written back in input order, so the files are the same for any number of workers. Only ids and
per-document lengths stay in memory; texts and token ids go straight to disk:

* ``tokens.raw`` — every document as ``SEP + token ids`` in the index's token dtype (the backends read it
  and delete it), ``texts.bin`` / ``text_offsets.npy`` / ``ids.json`` / ``unigram.npy`` — the shared files.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memlab.errors import MemlabError
from memlab.methods.trace.index.base import checked_doc, encode_texts, token_dtype_for

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


# ------------------------------------------------------------------------------ worker side

_WORKER_TOKENIZER = None


def _fast_tokenizer(tokenizer_json: str):
    """A standalone copy of the fast tokenizer, configured as ``tokenizer(texts, add_special_tokens=False)``
    calls it (no truncation, no padding)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer_json)
    tok.no_truncation()
    tok.no_padding()
    return tok


def _init_worker(tokenizer_json: str) -> None:
    global _WORKER_TOKENIZER
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread per worker process: the pool is the parallelism
    _WORKER_TOKENIZER = _fast_tokenizer(tokenizer_json)


def _lay_out(token_lists, dtype: np.dtype, vocab: int) -> tuple[np.ndarray, bytes, np.ndarray]:
    """(lengths, SEP + ids of every document as bytes, unigram counts) of one chunk."""
    lengths = np.fromiter((len(t) for t in token_lists), dtype=np.int64, count=len(token_lists))
    block = np.full(int(lengths.sum()) + len(lengths), np.iinfo(dtype).max, dtype=dtype)
    pos = 1
    for toks, n in zip(token_lists, lengths):
        block[pos:pos + n] = toks
        pos += n + 1
    real = np.ones(len(block), dtype=bool)
    real[np.concatenate([[0], np.cumsum(lengths[:-1] + 1)])] = False
    unigram = np.bincount(block[real].astype(np.int64), minlength=vocab)[:vocab]
    return lengths, block.tobytes(), unigram


def _encode_chunk(texts: list[str], dtype_str: str, vocab: int, tokenizer=None):
    tok = tokenizer or _WORKER_TOKENIZER
    encs = tok.encode_batch_fast(texts, add_special_tokens=False)
    return _lay_out([e.ids for e in encs], np.dtype(dtype_str), vocab)


# ------------------------------------------------------------------------------ main side

def _chunks(docs):
    """Checked (id, text) pairs grouped into lists of about CHUNK_BYTES of text."""
    chunk, size = [], 0
    for d in docs:
        doc_id, text = checked_doc(d)
        chunk.append((doc_id, text))
        size += len(text)
        if size >= CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _encoded(chunks, tokenizer, dtype: np.dtype, vocab: int, workers: int):
    """(chunk, encoded chunk) in input order; a pool only when there is more than one chunk."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:  # a slow (Python) tokenizer: no Rust copy to hand to workers
        for chunk in chunks:
            yield chunk, _lay_out(encode_texts(tokenizer, [t for _, t in chunk]), dtype, vocab)
        return
    tok_json = backend.to_str()
    first = next(chunks, None)
    if first is None:
        return
    second = next(chunks, None)
    if second is None or workers <= 1:
        local = _fast_tokenizer(tok_json)
        for chunk in (c for c in (first, second) if c is not None):
            yield chunk, _encode_chunk([t for _, t in chunk], dtype.str, vocab, local)
        for chunk in chunks:
            yield chunk, _encode_chunk([t for _, t in chunk], dtype.str, vocab, local)
        return
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"), initializer=_init_worker,
                             initargs=(tok_json,)) as pool:
        pending: deque = deque()
        for chunk in _prepend((first, second), chunks):
            pending.append((chunk, pool.submit(_encode_chunk, [t for _, t in chunk], dtype.str, vocab)))
            if len(pending) >= 2 * workers:  # bounded: memory stays flat in corpus size
                c, fut = pending.popleft()
                yield c, fut.result()
        while pending:
            c, fut = pending.popleft()
            yield c, fut.result()


def _prepend(head, rest):
    yield from head
    yield from rest


def tokenize_corpus(docs, tokenizer, out: Path, vocab: int, *, workers: int | None = None) -> TokenizedCorpus:
    """Tokenize ``docs`` into ``out`` (the shared files plus ``tokens.raw``) with ``workers`` processes
    (all available cores when None). Refuses empty corpora, empty or token-less documents, invalid UTF-8
    and repeated ids with one line."""
    dtype = token_dtype_for(vocab)
    workers = available_cores() if workers is None else workers
    ids: list[str] = []
    seen: set[str] = set()
    lengths, text_offsets = [], [0]
    unigram = np.zeros(vocab, dtype=np.int64)
    with open(out / TOKENS_FILE, "wb") as ftok, open(out / "texts.bin", "wb") as ftxt:
        for chunk, (lens, block, uni) in _encoded(_chunks(docs), tokenizer, dtype, vocab, workers):
            for (doc_id, text), n in zip(chunk, lens):
                if doc_id in seen:
                    raise MemlabError("document ids are not unique; give every document a distinct id before indexing")
                if n == 0:
                    raise MemlabError(f"document {doc_id!r} has no tokens; drop it before indexing")
                seen.add(doc_id)
                ids.append(doc_id)
                blob = text.encode("utf-8")
                ftxt.write(blob)
                text_offsets.append(text_offsets[-1] + len(blob))
            lengths.append(lens)
            ftok.write(block)
            unigram += uni
    if not ids:
        raise MemlabError("no documents to index; check the corpus name and options")
    np.save(out / "unigram.npy", unigram)
    np.save(out / "text_offsets.npy", np.asarray(text_offsets, dtype=np.int64))
    (out / "ids.json").write_text(json.dumps(ids, ensure_ascii=False), encoding="utf-8")
    return TokenizedCorpus(out / TOKENS_FILE, dtype, np.concatenate(lengths), ids, text_offsets[-1])
