"""infini-gram backends: :class:`InfiniGramIndex` (``backend="infini_gram"``) — an infini-gram 2.6.0 index
queried through ``InfiniGramEngine``, built from ``tokenized.<s>``/``offset.<s>``/``table.<s>`` files we write
ourselves for any tokenizer (the tables as ``infini_gram.indexing`` writes them, byte for byte), sharded on disk
and queried memory-mapped: for corpora larger than RAM — and
:class:`ExternalInfiniGramIndex`, an existing infini-gram index directory built elsewhere.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

import numpy as np

from memlab.errors import MemlabError
from memlab.methods.trace.index.corpus_stream import available_cores
from memlab.methods.trace.index.base import (FINGERPRINT_VERSION, FORMAT_VERSION, Occurrences, TokenIndex,
                                             register_backend, tokenizer_fingerprint, vocab_size_of)

_SHARED_FILES = ("unigram.npy", "texts.bin", "text_offsets.npy", "ids.json")  # written by build_index
# infini-gram 2.6.0's engine picks its files by substring of their whole path: a folder whose path contains one of
# these words makes it read the wrong files and crash (segmentation fault; measured)
_ENGINE_PATH_WORDS = ("tokenized", "table", "metadata")


def engine_dir(path: Path) -> str:
    """``path`` as the engine is given it (absolute), refused in one line when the engine cannot open it."""
    full = str(Path(path).absolute())
    if bad := [w for w in _ENGINE_PATH_WORDS if w in full]:
        raise MemlabError(f"infini-gram's engine cannot open an index whose path contains {bad[0]!r} ({full}): it "
                          f"would crash; move the index to a folder without {', '.join(map(repr, _ENGINE_PATH_WORDS))} "
                          "in its path")
    return full


@register_backend
class InfiniGramIndex(TokenIndex):
    """infini-gram (v4 index) queried through ``InfiniGramEngine``; memory-mapped, sharded on disk."""

    name = "infini_gram"

    def __init__(self, path: Path, meta: dict):
        from infini_gram.engine import InfiniGramEngine

        self.path, self.meta = path, meta
        self.unigram = np.load(path / "unigram.npy")
        self.token_dtype = meta["token_dtype"]
        self.engine = InfiniGramEngine(
            index_dir=engine_dir(path), eos_token_id=int(meta.get("eos_token_id") or 0),
            vocab_size=int(meta["vocab_size"]), version=4, token_dtype=self.token_dtype)
        self._shard_docs = [int(n) for n in meta["docs_per_shard"]]

    @classmethod
    def check_path(cls, path: Path) -> None:
        engine_dir(path)

    @classmethod
    def required_files(cls, meta: dict) -> list[str]:
        shards = len(meta.get("docs_per_shard", []))
        return list(_SHARED_FILES) + [f"{k}.{s}" for s in range(shards) for k in ("tokenized", "offset", "table")]

    @classmethod
    def shard_streamer(cls, out: Path, width: int, shard_tokens: int | None = None, mem_gb: int = 2,
                       **options) -> "ShardStream | None":
        return ShardStream(out, shard_tokens, width, mem_gb) if shard_tokens else None

    @classmethod
    def build(cls, corpus, out: Path, base_meta: dict, shards: int = 1, shard_tokens: int | None = None,
              mem_gb: int = 2, streamer: "ShardStream | None" = None, **options) -> None:
        """infini-gram shards: with ``shard_tokens``, those ``streamer`` cut while the corpus was tokenized
        (:class:`ShardStream`); else ``shards`` shards of equal document counts, copied out of the token file and
        sorted now, as many at once as there are cores and ``mem_gb`` of memory holds. Either way peak memory is
        bounded by the shard size, not the corpus size."""
        width = corpus.dtype.itemsize
        base_meta["token_dtype"] = {2: "u16", 4: "u32"}[width]
        if streamer is not None:
            base_meta["docs_per_shard"] = streamer.finish(corpus.tokens_file)
            return
        plan = _equal_doc_shards(corpus.n_docs, shards)
        doc_bytes = (corpus.doc_lengths + 1) * width
        with ShardStream(out, None, width, mem_gb, parallel_for=int(doc_bytes.sum()) // len(plan)) as stream, \
                open(corpus.tokens_file, "rb") as src:
            first = 0
            for n in plan:
                stream.cut(src, doc_bytes[first:first + n])
                first += n
            base_meta["docs_per_shard"] = stream.finish(corpus.tokens_file)

    def count(self, tokens: Sequence[int]) -> int:
        self.check_ids(tokens)
        if len(tokens) == 0:
            return 0
        return int(self.engine.count([int(t) for t in tokens])["count"])

    def occurrences(self, tokens: Sequence[int], *, cap: int = 10, max_scan: int = 1000) -> Occurrences:
        self.check_ids(tokens)
        if len(tokens) == 0:
            return Occurrences(0, [])
        r = self.engine.find([int(t) for t in tokens])
        docs: set[int] = set()
        scanned = 0
        for s, (lo, hi) in enumerate(r["segment_by_shard"]):
            for rank in range(lo, min(hi, lo + max_scan - scanned)):
                d = self.engine.get_doc_by_rank(s=s, rank=rank, max_disp_len=1)
                docs.add(int(d["doc_ix"]))
            scanned += min(hi - lo, max_scan - scanned)
            if scanned >= max_scan:
                break
        return Occurrences(int(r["cnt"]), sorted(docs)[:cap], len(docs))

    def attribute(self, tokens: Sequence[int], *, min_len: int = 1, max_cnt: int = 10):
        """infini-gram's own ``attribute`` (OLMoTrace primitive), for the benchmark comparison."""
        return self.engine.attribute(input_ids=[int(t) for t in tokens], delim_ids=[], min_len=min_len,
                                     max_cnt=max_cnt, enforce_bow=False)


# bytes of memory per byte of a shard while its table is sorted: the shard, and divsufsort's int32 suffix array
_SORT_BYTES_PER_BYTE = 5
_TABLE_BLOCK = 1 << 22  # suffixes converted per step when writing a table


def write_table(tokenized: Path, table: Path, width: int) -> None:
    """infini-gram's ``table.<s>`` for ``tokenized.<s>``: the byte offsets of its token-aligned suffixes in the
    byte order of the suffixes (the engine compares token bytes as stored, little-endian), each in
    ``ceil(log2(size) / 8)`` little-endian bytes — what ``infini_gram.indexing`` writes (byte-identical, tested
    against it), from one divsufsort pass over the shard's bytes instead of its parts, merge and concat steps
    (≈ 3× less CPU, measured in ``make bench``). Memory ≈ 5 bytes per shard byte (the shard and an int32 suffix
    array; 9 past 2 GB)."""
    import pydivsufsort

    data = np.fromfile(tokenized, dtype=np.uint8)
    ptr = max(1, int(np.ceil(np.log2(len(data)) / 8)))
    byte_sa = pydivsufsort.divsufsort(data)
    del data
    with open(table, "wb") as f:
        for a in range(0, len(byte_sa), _TABLE_BLOCK):
            b = byte_sa[a:a + _TABLE_BLOCK]
            keep = b[(b & (width - 1)) == 0].astype("<u8")
            f.write(keep.view(np.uint8).reshape(-1, 8)[:, :ptr].tobytes())


def _shard_names(n: int) -> list[str]:
    """File suffixes of shards 0..n-1 in document order: the engine opens shards in the lexicographic order
    of their names (``tokenized.10`` before ``tokenized.2``), so document order follows that order."""
    return sorted(str(s) for s in range(n))


def _equal_doc_shards(n_docs: int, shards: int) -> list[int]:
    """Documents per shard for ``shards`` shards of equal document counts (the last one shorter)."""
    per = -(-n_docs // max(1, min(int(shards), n_docs)))
    return [min(per, n_docs - first) for first in range(0, n_docs, per)]


class ShardStream:
    """infini-gram shards cut while the corpus is tokenized: a shard is documents up to the one that brings it to
    ``shard_tokens`` tokens (with their separators), the last shard the rest; as soon as a shard's documents are in
    the token file it is copied out and its table sorted (:func:`write_table`) in a background thread, so sorting
    overlaps tokenizing. Up to as many shards are sorted at once as there are cores and ``mem_gb`` holds. Shards are
    written under temporary names and renamed in :meth:`finish`, once their number, and so the engine's name order
    (:func:`_shard_names`), is known."""

    def __init__(self, out: Path, shard_tokens: int | None, width: int, mem_gb: int, parallel_for: int = 0):
        self.out, self.width = out, width
        self.shard_tokens = int(shard_tokens) if shard_tokens else None
        shard_bytes = max(1, parallel_for or width * (self.shard_tokens or 1))
        parallel = max(1, min(available_cores(), int(mem_gb * 2**30) // (_SORT_BYTES_PER_BYTE * shard_bytes)))
        self.pool = ThreadPoolExecutor(parallel)
        self.futures: list = []
        self.docs_per_shard: list[int] = []
        self.pending = np.empty(0, dtype=np.int64)  # bytes of each document written but not yet in a shard
        self.src = None

    def _part(self, kind: str, k: int) -> Path:
        return self.out / f"{kind}.part{k}"

    def cut(self, src, doc_bytes: np.ndarray) -> None:
        """The next shard: documents of ``doc_bytes`` bytes each, read from ``src`` where the last shard ended."""
        k = len(self.docs_per_shard)
        np.concatenate([[0], np.cumsum(doc_bytes[:-1])]).astype(np.uint64).tofile(self._part("offset", k))
        with open(self._part("tokenized", k), "wb") as dst:
            _copy(src, dst, int(doc_bytes.sum()))
        self.docs_per_shard.append(len(doc_bytes))
        self.futures.append(self.pool.submit(write_table, self._part("tokenized", k), self._part("table", k),
                                             self.width))

    def written(self, tokens_file: Path, lengths: np.ndarray) -> None:
        """``tokens_file`` (flushed) now also holds documents of ``lengths`` tokens: cut the shards they complete."""
        if self.src is None:
            self.src = open(tokens_file, "rb")
        self.pending = np.concatenate([self.pending, (np.asarray(lengths, dtype=np.int64) + 1) * self.width])
        ends = np.cumsum(self.pending) // self.width  # tokens up to each pending document's end
        first = 0
        while True:
            last = int(np.searchsorted(ends, (ends[first - 1] if first else 0) + self.shard_tokens, side="left"))
            if last >= len(ends):
                break
            self.cut(self.src, self.pending[first:last + 1])
            first = last + 1
        self.pending = self.pending[first:]

    def finish(self, tokens_file: Path) -> list[int]:
        """Cut the last shard, wait for every table, give the shards their final names; documents per shard."""
        if len(self.pending):
            if self.src is None:
                self.src = open(tokens_file, "rb")
            self.cut(self.src, self.pending)
            self.pending = self.pending[:0]
        try:
            for f in self.futures:
                f.result()
        except (MemoryError, OSError) as err:
            raise MemlabError(f"infini-gram table build failed in {self.out} ({err}); check free disk space and "
                              "memory (param mem_gb, or smaller shards: shard_tokens)") from None
        finally:
            self.close()
        for k, name in enumerate(_shard_names(len(self.docs_per_shard))):
            for kind in ("tokenized", "offset", "table"):
                self._part(kind, k).rename(self.out / f"{kind}.{name}")
        return [int(n) for n in self.docs_per_shard]

    def close(self) -> None:
        """Stop: queued sorts are dropped, running ones awaited (a failed build then removes the folder)."""
        self.pool.shutdown(wait=True, cancel_futures=True)
        if self.src is not None:
            self.src.close()
            self.src = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _copy(src, dst, nbytes: int, block: int = 1 << 24) -> None:
    while nbytes > 0:
        buf = src.read(min(block, nbytes))
        if not buf:
            raise MemlabError(f"token file {src.name} ended early; rebuild the index")
        dst.write(buf)
        nbytes -= len(buf)


class ExternalInfiniGramIndex(InfiniGramIndex):
    """An infini-gram index directory built elsewhere (e.g. a public prebuilt index, or one made with
    ``python -m infini_gram.indexing`` and its own tokenizer) — real-scale tracing by config.

    Such a directory records no tokenizer, so the caller names the one it was built with; we trust it and
    record its fingerprint. Unigram counts come from the engine (once, per shard) and are cached in
    ``cache_dir``; document texts are the decoded token ids; ids come from the index metadata when present.
    """

    name = "infini_gram_external"  # not registered: opened with ExternalInfiniGramIndex(path, tokenizer)

    def __init__(self, path: Path, tokenizer, *, token_dtype: str = "u16", cache_dir: str | Path | None = None):
        from infini_gram.engine import InfiniGramEngine

        path = Path(path)
        tables = sorted(path.glob("table.*"))
        if not path.is_dir() or not tables:
            raise MemlabError(f"{path} is not an infini-gram index directory (no table.* files); check the path")
        for t in tables:
            s = t.suffix[1:]
            if not (path / f"tokenized.{s}").exists() or not (path / f"offset.{s}").exists():
                raise MemlabError(f"infini-gram index {path} is incomplete (shard {s} lacks tokenized/offset files)")
        vocab = vocab_size_of(tokenizer)
        self.path, self.tok = path, tokenizer
        self.token_dtype = token_dtype
        self.engine = InfiniGramEngine(index_dir=engine_dir(path), eos_token_id=int(tokenizer.eos_token_id or 0),
                                       vocab_size=vocab, version=4, token_dtype=token_dtype)
        n_docs = int(self.engine.get_total_doc_cnt())
        cache = Path(cache_dir or path) / f"unigram-{tokenizer_fingerprint(tokenizer)}.npy"
        if cache.exists():
            self.unigram = np.load(cache)
        else:
            uni = np.zeros(vocab, dtype=np.int64)
            for s in range(len(tables)):
                for t, c in self.engine.compute_unigram_counts(s=s).items():  # {token id: count}
                    if 0 <= int(t) < vocab:
                        uni[int(t)] += int(c)
            self.unigram = uni
            cache.parent.mkdir(parents=True, exist_ok=True)
            np.save(cache, uni)
        self.meta = {"format_version": FORMAT_VERSION, "backend": self.name,
                     "tokenizer_fingerprint": tokenizer_fingerprint(tokenizer),
                     "tokenizer_fingerprint_version": FINGERPRINT_VERSION,
                     "tokenizer_name": getattr(tokenizer, "name_or_path", None), "vocab_size": vocab,
                     "n_docs": n_docs, "n_tokens": int(self.unigram.sum()), "token_dtype": token_dtype}

    def doc_text(self, doc_ix: int) -> str:
        d = self.engine.get_doc_by_ix(doc_ix=int(doc_ix), max_disp_len=10**9)
        return self.tok.decode(d["token_ids"])

    def doc_id(self, doc_ix: int) -> str:
        d = self.engine.get_doc_by_ix(doc_ix=int(doc_ix), max_disp_len=1)
        meta = d.get("metadata") or ""
        return f"{self.path.name}/{doc_ix}" + (f" {meta[:80]}" if meta else "")

    def doc_index(self, doc_id: str) -> int:
        raise NotImplementedError("an external infini-gram index has no id → index map")
