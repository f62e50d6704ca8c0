"""Corpus indexes over token ids for SimpleTrace (seed 002, §2 "suffix-array indexing").

Two backends behind one interface (:class:`TokenIndex`):

* :class:`SuffixArrayIndex` — a suffix array (pydivsufsort) over the token ids of the whole corpus, with
  its LCP array (Kasai) and inverse suffix array. Saved as ``.npy`` files and memory-mapped on reload.
  Good default for local corpora (≈ 1.5 s per 5 M tokens to build).
* :class:`InfiniGramIndex` — infini-gram 2.6.0 (``infini_gram.indexing`` + ``InfiniGramEngine``), built
  from ``tokenized.<s>``/``offset.<s>`` files we write ourselves for any tokenizer, sharded on disk and
  queried memory-mapped: for corpora larger than RAM, or an existing infini-gram index directory.

Corpus layout (both backends): every document is written as ``SEP + tokens``, where ``SEP`` is the
all-ones value of the token dtype (0xFFFF for u16, 0xFFFFFFFF for u32, the infini-gram convention), and a
final ``SEP`` closes the corpus. ``SEP`` is larger than every real token id, so no match crosses a
document boundary. Every index records the fingerprint of the tokenizer it was built with
(:func:`tokenizer_fingerprint`); tracing with another tokenizer is refused.

An index directory is complete only when ``meta.json`` exists: it is written last, after every other file,
so a killed build leaves a directory that :func:`load_index` refuses with one clear line.
"""

from __future__ import annotations

import abc
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from memlab.errors import MemlabError

FORMAT_VERSION = 1
_SA_FILES = ("tokens.npy", "sa.npy", "isa.npy", "lcp.npy", "unigram.npy", "doc_starts.npy",
             "texts.bin", "text_offsets.npy", "ids.json")
_SMALL_INTERVAL = 64  # gather a whole SA interval at once below this size, binary-search above
_CACHED_PREFIX = 4    # memoize SA intervals of prefixes up to this many tokens
_STEPS65 = np.arange(65, dtype=np.int64)


# --------------------------------------------------------------------------------------------- tokenizers

def tokenizer_fingerprint(tokenizer) -> str:
    """SHA-256 (first 16 hex) of the tokenizer's full vocabulary (token → id), its class and special tokens.

    Two tokenizers with the same fingerprint map every text to the same ids, which is what tracing needs.
    """
    vocab = tokenizer.get_vocab()
    payload = json.dumps(
        {"class": type(tokenizer).__name__.replace("Fast", ""),
         "vocab": sorted(vocab.items(), key=lambda kv: kv[1]),
         "special": sorted(str(t) for t in getattr(tokenizer, "all_special_tokens", []))},
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def vocab_size_of(tokenizer) -> int:
    return max(len(tokenizer), max(tokenizer.get_vocab().values()) + 1)


def token_dtype_for(vocab_size: int) -> np.dtype:
    """u16 when every id (and the separator 0xFFFF) fits, else u32."""
    return np.dtype(np.uint16) if vocab_size < 0xFFFF else np.dtype(np.uint32)


def encode_texts(tokenizer, texts: Sequence[str]) -> list[np.ndarray]:
    """Token ids of each text, without special tokens (the same call is used for corpus and generations)."""
    out = []
    for t in texts:
        out.append(np.asarray(tokenizer(t, add_special_tokens=False, verbose=False)["input_ids"], dtype=np.int64))
    return out


# ------------------------------------------------------------------------------------------- validation

def _checked_texts(docs) -> tuple[list[str], list[str]]:
    """(ids, texts) of the documents, refusing empty corpora, empty documents and invalid UTF-8."""
    ids, texts = [], []
    for d in docs:
        doc_id, text = (d.id, d.text) if hasattr(d, "text") else (str(d[0]), d[1])
        if isinstance(text, (bytes, bytearray)):
            try:
                text = bytes(text).decode("utf-8")
            except UnicodeDecodeError as err:
                raise MemlabError(f"document {doc_id!r} is not valid UTF-8 (byte {err.start}); "
                                  "re-encode the corpus as UTF-8 before indexing") from None
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise MemlabError(f"document {doc_id!r} holds invalid UTF-8 (surrogate at char {err.start}); "
                              "re-encode the corpus as UTF-8 before indexing") from None
        if not text.strip():
            raise MemlabError(f"document {doc_id!r} is empty; drop empty documents before indexing")
        ids.append(doc_id)
        texts.append(text)
    if not texts:
        raise MemlabError("no documents to index; check the corpus name and options")
    if len(set(ids)) != len(ids):
        raise MemlabError("document ids are not unique; give every document a distinct id before indexing")
    return ids, texts


def read_jsonl_bytes(path: str | Path) -> list[tuple[str, str]]:
    """(id, text) pairs from a JSONL corpus file, decoding strictly so invalid UTF-8 is one clear error."""
    path = Path(path)
    if not path.exists():
        raise MemlabError(f"corpus file {path} does not exist; build the data stage first (make data)")
    out = []
    with path.open("rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise MemlabError(f"{path}:{n}: invalid UTF-8 at byte {err.start}; re-encode the corpus as UTF-8") from None
            if line.strip():
                rec = json.loads(line)
                out.append((str(rec.get("id", n)), rec["text"]))
    return out


# ------------------------------------------------------------------------------------------ interface

@dataclass
class Occurrences:
    """Where a token sequence occurs: total ``count`` and up to ``cap`` distinct document indices
    (ascending) among the first ``max_scan`` occurrences in suffix-array order."""

    count: int
    doc_ixs: list[int]
    n_docs_scanned: int = 0  # distinct documents among the scanned occurrences (before the cap)


class TokenIndex(abc.ABC):
    """A searchable token-level corpus: exact-match queries, unigram counts, document texts."""

    path: Path
    meta: dict
    unigram: np.ndarray  # counts per token id (int64), length = vocab size

    # ---- shared metadata helpers
    @property
    def tokenizer_fingerprint(self) -> str:
        return self.meta["tokenizer_fingerprint"]

    @property
    def n_docs(self) -> int:
        return int(self.meta["n_docs"])

    @property
    def n_tokens(self) -> int:
        return int(self.meta["n_tokens"])

    def check_tokenizer(self, tokenizer) -> None:
        fp = tokenizer_fingerprint(tokenizer)
        if fp != self.tokenizer_fingerprint:
            raise MemlabError(
                f"tokenizer mismatch: index {self.path} was built with tokenizer "
                f"{self.meta.get('tokenizer_name')!r} ({self.tokenizer_fingerprint}), got "
                f"{getattr(tokenizer, 'name_or_path', '?')!r} ({fp}); rebuild the index with this tokenizer")

    # ---- documents
    def _load_texts(self) -> None:
        if getattr(self, "_texts_blob", None) is None:
            self._texts_blob = np.load(self.path / "text_offsets.npy")
            self._texts_mm = np.memmap(self.path / "texts.bin", dtype=np.uint8, mode="r") \
                if os.path.getsize(self.path / "texts.bin") else np.zeros(0, np.uint8)
            self._ids = json.loads((self.path / "ids.json").read_text(encoding="utf-8"))

    def doc_text(self, doc_ix: int) -> str:
        self._load_texts()
        a, b = int(self._texts_blob[doc_ix]), int(self._texts_blob[doc_ix + 1])
        return bytes(self._texts_mm[a:b]).decode("utf-8")

    def doc_id(self, doc_ix: int) -> str:
        self._load_texts()
        return self._ids[doc_ix]

    def doc_index(self, doc_id: str) -> int:
        self._load_texts()
        if getattr(self, "_id_to_ix", None) is None:
            self._id_to_ix = {d: i for i, d in enumerate(self._ids)}
        return self._id_to_ix[doc_id]

    # ---- queries
    def check_ids(self, tokens: Sequence[int]) -> None:
        """Refuse token ids the index's tokenizer can't produce (another tokenizer's ids, negative numbers)."""
        vocab = int(self.meta["vocab_size"])
        bad = [int(t) for t in tokens if not 0 <= int(t) < vocab]
        if bad:
            raise MemlabError(f"token id {bad[0]} is outside the vocabulary of index {self.path} (ids 0..{vocab - 1}, "
                              f"tokenizer {self.meta.get('tokenizer_name')!r}); tokenize with the index's tokenizer")

    @abc.abstractmethod
    def count(self, tokens: Sequence[int]) -> int:
        """Number of occurrences of ``tokens`` in the corpus (0 for an empty or unseen sequence)."""

    @abc.abstractmethod
    def occurrences(self, tokens: Sequence[int], *, cap: int = 10, max_scan: int = 1000) -> Occurrences:
        """Count plus up to ``cap`` distinct documents containing ``tokens``."""

    def longest_matches(self, tokens: Sequence[int]) -> np.ndarray:
        """Matching statistics: ``out[i]`` = length of the longest prefix of ``tokens[i:]`` found verbatim.

        Default implementation for any backend with :meth:`count`: the match at ``i`` bounds the one at
        ``i+1`` from below (``out[i+1] >= out[i] - 1``: a suffix of a corpus substring is one too), so each
        start only tests extensions beyond that bound — about 2·L count queries per sequence instead of
        one search per (start, length).
        """
        self.check_ids(tokens)
        g = [int(t) for t in tokens]
        L = len(g)
        out = np.zeros(L, dtype=np.int64)
        lo = 0
        for i in range(L):
            lo = max(lo - 1, 0) if i else 0
            while i + lo < L and self.count(g[i:i + lo + 1]) > 0:
                lo += 1
            out[i] = lo
        return out

    def close(self) -> None:
        pass


# ------------------------------------------------------------------------------------ suffix array

class SuffixArrayIndex(TokenIndex):
    """Suffix array + LCP + inverse SA over the corpus token ids, memory-mapped from ``.npy`` files.

    :meth:`longest_matches` computes matching statistics with the bound from the previous start: after
    the longest match at ``i`` (length ``l``, one occurrence at corpus position ``p``), the suffix at
    ``p+1`` already matches ``l-1`` tokens of ``tokens[i+1:]``; its SA interval is found by walking the
    LCP array around rank ``ISA[p+1]`` (no binary search from scratch), then narrowed one token at a
    time. Short bounds (<= 4 tokens, where the LCP walk would cross huge intervals) use memoized SA
    intervals of short prefixes instead. Narrowing inside a wide interval cuts it 64-fold per vectorized
    gather. :meth:`longest_matches_naive` is the baseline: per start, narrow from the whole suffix array.
    """

    def __init__(self, path: Path, meta: dict):
        self.path, self.meta = path, meta
        # np.asarray drops the memmap subclass (slow scalar indexing) but keeps the file mapping
        mm = lambda n: np.asarray(np.load(path / n, mmap_mode="r"))  # noqa: E731
        self.T = mm("tokens.npy")
        self.SA = mm("sa.npy")
        self.ISA = mm("isa.npy")
        self.LCP = mm("lcp.npy")
        self.unigram = np.load(path / "unigram.npy")
        self.doc_starts = np.load(path / "doc_starts.npy")
        self.N = len(self.T)
        self.sep = int(np.iinfo(self.T.dtype).max)
        # SA is sorted by first token (separators, the largest value, come last), so the interval of a
        # single token t is [C[t], C[t+1]) with C the running sum of the unigram counts.
        self._bucket = np.concatenate([[0], np.cumsum(self.unigram)]).astype(np.int64)

    # -- build
    @classmethod
    def build(cls, ids: list[str], texts: list[str], token_lists: list[np.ndarray], out: Path,
              base_meta: dict) -> None:
        import pydivsufsort

        vocab = base_meta["vocab_size"]
        dt = token_dtype_for(vocab)
        sep = np.iinfo(dt).max
        total = sum(len(t) for t in token_lists) + len(token_lists) + 1
        T = np.empty(total, dtype=dt)
        doc_starts = np.empty(len(token_lists), dtype=np.int64)
        pos = 0
        for k, toks in enumerate(token_lists):
            T[pos] = sep
            T[pos + 1:pos + 1 + len(toks)] = toks
            doc_starts[k] = pos + 1
            pos += 1 + len(toks)
        T[pos] = sep
        sa = pydivsufsort.divsufsort(np.array(T))  # pydivsufsort refuses read-only arrays: pass a copy
        lcp = pydivsufsort.kasai(np.array(T), sa).astype(np.int32)
        sa = sa.astype(np.int32 if total < 2**31 else np.int64)
        isa = np.empty_like(sa)
        isa[sa] = np.arange(total, dtype=sa.dtype)
        np.save(out / "tokens.npy", T)
        np.save(out / "sa.npy", sa)
        np.save(out / "isa.npy", isa)
        np.save(out / "lcp.npy", lcp)
        np.save(out / "doc_starts.npy", doc_starts)

    # -- primitives
    def _tok(self, rank: int, off: int) -> int:
        p = int(self.SA[rank]) + off
        return int(self.T[p]) if p < self.N else self.sep

    def _bound(self, lo: int, hi: int, off: int, t: int, side: str) -> int:
        """First rank in [lo, hi) whose token at ``off`` is >= t (side 'left') or > t ('right'), else hi.

        Wide intervals are cut 64-fold per round by sampling 65 ranks in one vectorized gather (tokens at
        ``off`` are sorted within an interval whose suffixes share ``off`` tokens), then finished by one
        gather of the remaining <= 64 ranks."""
        SA, T, last = self.SA, self.T, self.N - 1
        while hi - lo > _SMALL_INTERVAL:
            idx = lo + (_STEPS65 * (hi - 1 - lo)) // 64
            vals = T[np.minimum(SA[idx] + off, last)]
            k = int(vals.searchsorted(t, side))
            if k == 0:
                return lo
            if k == len(idx):
                return hi
            lo, hi = int(idx[k - 1]) + 1, int(idx[k])  # idx[k] satisfies; idx[k-1] does not
        vals = T[np.minimum(SA[lo:hi] + off, last)]
        return lo + int(vals.searchsorted(t, side))

    def _narrow(self, lo: int, hi: int, off: int, t: int) -> tuple[int, int]:
        """Sub-interval of SA[lo:hi] (all sharing ``off`` tokens) whose token at ``off`` equals ``t``."""
        left = self._bound(lo, hi, off, t, "left")
        if left >= hi or self._tok(left, off) != t:  # no suffix continues with t: skip the right bound
            return left, left
        return left, self._bound(left, hi, off, t, "right")

    def _first_bucket(self, t: int) -> tuple[int, int]:
        if t < 0 or t >= len(self._bucket) - 1:
            return 0, 0
        return int(self._bucket[t]), int(self._bucket[t + 1])

    def _interval(self, tokens: Sequence[int]) -> tuple[int, int]:
        """SA interval [lo, hi) of suffixes starting with ``tokens``."""
        if len(tokens) == 0:
            return 0, self.N
        lo, hi = self._first_bucket(int(tokens[0]))
        for off in range(1, len(tokens)):
            if lo >= hi:
                break
            lo, hi = self._narrow(lo, hi, off, int(tokens[off]))
        return lo, hi

    def _expand(self, r: int, l: int, limit: int = 4096) -> tuple[int, int] | None:
        """SA interval of the length-``l`` prefix of the suffix at rank ``r``, via the LCP array.

        ``LCP[k]`` = common prefix of ranks k and k+1, so the interval is the maximal run around ``r``
        with LCP >= l. Returns ``None`` if it is wider than ``limit`` (then narrowing is cheaper).
        """
        LCP = self.LCP
        a = r
        step = 16
        while a > 0:
            lo = max(a - step, 0)
            seg = LCP[lo:a][::-1]
            bad = np.flatnonzero(seg < l)
            if len(bad):
                a = a - int(bad[0])
                break
            a = lo
            if r - a > limit:
                return None
            step *= 4
        c = r
        step = 16
        while c < self.N - 1:
            hi = min(c + step, self.N - 1)
            seg = LCP[c:hi]
            bad = np.flatnonzero(seg < l)
            if len(bad):
                c = c + int(bad[0])
                break
            c = hi
            if c - r > limit:
                return None
            step *= 4
        return a, c + 1

    # -- queries
    def count(self, tokens: Sequence[int]) -> int:
        self.check_ids(tokens)
        lo, hi = self._interval(tokens)
        return max(hi - lo, 0) if len(tokens) else 0

    def occurrences(self, tokens: Sequence[int], *, cap: int = 10, max_scan: int = 1000) -> Occurrences:
        self.check_ids(tokens)
        lo, hi = self._interval(tokens)
        n = max(hi - lo, 0) if len(tokens) else 0
        if n == 0:
            return Occurrences(0, [])
        pos = np.asarray(self.SA[lo:lo + min(n, max_scan)], dtype=np.int64)
        docs = np.unique(np.searchsorted(self.doc_starts, pos, "right") - 1)
        return Occurrences(n, [int(d) for d in docs[:cap]], len(docs))

    def _short_interval(self, g: np.ndarray, gl: list[int], i: int, k: int) -> tuple[int, int, int]:
        """Interval of the longest prefix of ``g[i:i+k]`` (k <= _CACHED_PREFIX) that occurs, via a memo of
        short-prefix intervals: ordinary text repeats its common 1–3-token prefixes at almost every start.
        Returns (lo, hi, matched length)."""
        lo, hi = self._first_bucket(int(g[i]))
        if lo >= hi:
            return 0, 0, 0
        l = 1
        while l < k:
            key = tuple(gl[i:i + l + 1])
            iv = self._pcache.get(key)
            if iv is None:
                iv = self._narrow(lo, hi, l, int(g[i + l]))
                if len(self._pcache) > 500_000:
                    self._pcache.clear()
                self._pcache[key] = iv
            if iv[0] >= iv[1]:
                break
            lo, hi = iv
            l += 1
        return lo, hi, l

    def longest_matches(self, tokens: Sequence[int]) -> np.ndarray:
        self.check_ids(tokens)
        g = np.asarray(tokens, dtype=np.int64)
        gl = g.tolist()
        L = len(g)
        out = np.zeros(L, dtype=np.int64)
        if not hasattr(self, "_pcache"):
            self._pcache: dict[tuple, tuple[int, int]] = {}
        l, p = 0, -1  # match length at the previous start, one corpus position of it
        for i in range(L):
            l = l - 1 if l > 0 else 0
            iv = None
            if l > _CACHED_PREFIX and p + 1 < self.N:
                iv = self._expand(int(self.ISA[p + 1]), l)
            if iv is not None:
                lo, hi = iv
            else:  # short bound (or a very wide interval): memoized short prefixes, then narrowing
                lo, hi, got = self._short_interval(g, gl, i, min(_CACHED_PREFIX, L - i))
                if got < min(l, _CACHED_PREFIX):
                    raise AssertionError("matching-statistics bound violated")  # pragma: no cover
                if l > got:  # known to match l tokens: narrow the rest of that known prefix
                    for off in range(got, l):
                        lo, hi = self._narrow(lo, hi, off, int(g[i + off]))
                else:
                    l = got
            if lo < hi:
                lo, hi, l = self._extend(g, i, lo, hi, l)
            out[i] = l
            p = int(self.SA[lo]) if l > 0 else -1
        return out

    def longest_matches_naive(self, tokens: Sequence[int]) -> np.ndarray:
        """Baseline for the benchmark: per start, narrow from the whole suffix array (no bound)."""
        g = np.asarray(tokens, dtype=np.int64)
        L = len(g)
        out = np.zeros(L, dtype=np.int64)
        for i in range(L):
            out[i] = self._extend(g, i, 0, self.N, 0)[2]
        return out

    def _extend(self, g: np.ndarray, i: int, lo: int, hi: int, l: int) -> tuple[int, int, int]:
        """Grow the match of ``g[i:i+l]`` (SA interval [lo, hi)) token by token while the corpus agrees."""
        while i + l < len(g):
            nlo, nhi = self._narrow(lo, hi, l, int(g[i + l]))
            if nlo >= nhi:
                break
            lo, hi = nlo, nhi
            l += 1
        return lo, hi, l


# --------------------------------------------------------------------------------------- infini-gram

class InfiniGramIndex(TokenIndex):
    """infini-gram (v4 index) queried through ``InfiniGramEngine``; memory-mapped, sharded on disk."""

    def __init__(self, path: Path, meta: dict):
        from infini_gram.engine import InfiniGramEngine

        self.path, self.meta = path, meta
        self.unigram = np.load(path / "unigram.npy")
        self.token_dtype = meta["token_dtype"]
        self.engine = InfiniGramEngine(
            index_dir=str(path), eos_token_id=int(meta.get("eos_token_id") or 0),
            vocab_size=int(meta["vocab_size"]), version=4, token_dtype=self.token_dtype)
        self._shard_docs = [int(n) for n in meta["docs_per_shard"]]

    @classmethod
    def build(cls, ids: list[str], texts: list[str], token_lists: list[np.ndarray], out: Path,
              base_meta: dict, shards: int = 1, mem_gb: int = 2) -> None:
        vocab = base_meta["vocab_size"]
        dt = token_dtype_for(vocab)
        width = dt.itemsize
        sep = (b"\xff" * width)
        shards = max(1, min(int(shards), len(token_lists)))
        per = -(-len(token_lists) // shards)
        docs_per_shard = []
        for s in range(shards):
            chunk = token_lists[s * per:(s + 1) * per]
            docs_per_shard.append(len(chunk))
            offs, pos = [], 0
            with open(out / f"tokenized.{s}", "wb") as f:
                for toks in chunk:
                    content = sep + np.asarray(toks, dtype=dt).astype(dt.newbyteorder("<")).tobytes()
                    offs.append(pos)
                    f.write(content)
                    pos += len(content)
            np.asarray(offs, dtype=np.uint64).tofile(out / f"offset.{s}")
        base_meta["docs_per_shard"] = docs_per_shard
        base_meta["token_dtype"] = {2: "u16", 4: "u32"}[width]
        cmd = [sys.executable, "-m", "infini_gram.indexing", "--data_dir", str(out), "--save_dir", str(out),
               "--token_dtype", base_meta["token_dtype"], "--shards", str(shards), "--cpus", "1",
               "--mem", str(mem_gb), "--ulimit", "20000"]
        env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
        res = subprocess.run(cmd, capture_output=True, text=True, env=env)
        missing = [s for s in range(shards) if not (out / f"table.{s}").exists()]
        if res.returncode != 0 or missing:
            tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
            raise MemlabError(f"infini-gram indexing failed in {out} ({tail[0][:200]}); "
                              "check free disk space and memory (param mem_gb)")

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


class ExternalInfiniGramIndex(InfiniGramIndex):
    """An infini-gram index directory built elsewhere (e.g. a public prebuilt index, or one made with
    ``python -m infini_gram.indexing`` and its own tokenizer) — real-scale tracing by config.

    Such a directory records no tokenizer, so the caller names the one it was built with; we trust it and
    record its fingerprint. Unigram counts come from the engine (once, per shard) and are cached in
    ``cache_dir``; document texts are the decoded token ids; ids come from the index metadata when present.
    """

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
        self.engine = InfiniGramEngine(index_dir=str(path), eos_token_id=int(tokenizer.eos_token_id or 0),
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
        self.meta = {"format_version": FORMAT_VERSION, "backend": "infini_gram_external",
                     "tokenizer_fingerprint": tokenizer_fingerprint(tokenizer),
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


# ------------------------------------------------------------------------------------- build / load

BACKENDS = {"suffix_array": SuffixArrayIndex, "infini_gram": InfiniGramIndex}


def build_index(docs, tokenizer, out_dir: str | Path, *, backend: str = "suffix_array",
                tokenizer_name: str | None = None, shards: int = 1, mem_gb: int = 2,
                overwrite: bool = False) -> TokenIndex:
    """Tokenize ``docs`` (Documents or (id, text) pairs) and build an index in ``out_dir``.

    Built in ``<out_dir>.tmp`` and renamed at the end; ``meta.json`` is the last file written. Returns the
    loaded index. Refuses empty corpora, empty documents and invalid UTF-8 with one line.
    """
    if backend not in BACKENDS:
        raise MemlabError(f"unknown index backend {backend!r}; use one of {sorted(BACKENDS)}")
    out = Path(out_dir)
    if (out / "meta.json").exists() and not overwrite:
        return load_index(out)
    ids, texts = _checked_texts(docs)
    t0 = time.perf_counter()
    token_lists = encode_texts(tokenizer, texts)
    t_tok = time.perf_counter() - t0
    for doc_id, toks in zip(ids, token_lists):
        if len(toks) == 0:
            raise MemlabError(f"document {doc_id!r} has no tokens; drop it before indexing")
    vocab = vocab_size_of(tokenizer)
    meta = {
        "format_version": FORMAT_VERSION, "backend": backend,
        "tokenizer_fingerprint": tokenizer_fingerprint(tokenizer),
        "tokenizer_name": tokenizer_name or getattr(tokenizer, "name_or_path", None),
        "vocab_size": vocab, "eos_token_id": tokenizer.eos_token_id if tokenizer.eos_token_id is not None
        and tokenizer.eos_token_id < vocab else 0,
        "n_docs": len(texts), "n_tokens": int(sum(len(t) for t in token_lists)),
        "text_bytes": int(sum(len(t.encode("utf-8")) for t in texts)),
    }
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    t1 = time.perf_counter()
    if backend == "suffix_array":
        SuffixArrayIndex.build(ids, texts, token_lists, tmp, meta)
    else:
        InfiniGramIndex.build(ids, texts, token_lists, tmp, meta, shards=shards, mem_gb=mem_gb)
    uni = np.bincount(np.concatenate(token_lists).astype(np.int64), minlength=vocab)[:max(vocab, 1)]
    np.save(tmp / "unigram.npy", uni.astype(np.int64))
    blobs = [t.encode("utf-8") for t in texts]
    with open(tmp / "texts.bin", "wb") as f:
        for b in blobs:
            f.write(b)
    np.save(tmp / "text_offsets.npy", np.concatenate([[0], np.cumsum([len(b) for b in blobs])]).astype(np.int64))
    (tmp / "ids.json").write_text(json.dumps(ids, ensure_ascii=False), encoding="utf-8")
    meta["build_seconds"] = {"tokenize": round(t_tok, 3), "index": round(time.perf_counter() - t1, 3)}
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
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
    if backend == "suffix_array":
        needed = list(_SA_FILES)
    elif backend == "infini_gram":
        shards = len(meta.get("docs_per_shard", []))
        needed = ["unigram.npy", "texts.bin", "text_offsets.npy", "ids.json"] + [
            f"{k}.{s}" for s in range(shards) for k in ("tokenized", "offset", "table")]
    else:
        raise MemlabError(f"index {path} names unknown backend {backend!r}; rebuild it")
    missing = [n for n in needed if not (path / n).exists()]
    if missing:
        raise MemlabError(f"index directory {path} is incomplete (missing {', '.join(missing[:3])}); "
                          "delete it and rebuild the index")
    return BACKENDS[backend](path, meta)
