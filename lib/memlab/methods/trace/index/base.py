"""Shared parts of the token indexes: the :class:`TokenIndex` interface, :class:`Occurrences`, tokenizer
helpers, corpus validation, and the backend registry that :func:`~memlab.methods.trace.index.build_index`
and :func:`~memlab.methods.trace.index.load_index` pick a backend class from by name.

A backend is a :class:`TokenIndex` subclass that declares ``name`` (the ``backend`` argument of
``build_index`` and the ``"backend"`` field of ``meta.json``) and is decorated with
:func:`register_backend`, in one module of the plugin package :data:`KIND_PACKAGE` (:mod:`.kinds`; issue 48: the
style of the backend kinds and the MIA scores). :data:`BACKENDS` and :func:`backend_class` import every module of
that package (:func:`memlab.plugins.import_all`, in order of module name) before they answer; adding a backend =
one module there.
"""

from __future__ import annotations

import abc
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Sequence

import numpy as np

from memlab.errors import ConfigError, MemlabError
from memlab.plugins import import_all

FORMAT_VERSION = 1


@dataclass
class TokenizedCorpus:
    """What the backends build from: ``tokens_file`` holds every document as SEP + ids (``dtype``)."""

    tokens_file: Path
    dtype: np.dtype
    doc_lengths: np.ndarray  # tokens per document, SEP not counted
    text_bytes: int

    @property
    def n_docs(self) -> int:
        return len(self.doc_lengths)

    @property
    def n_tokens(self) -> int:
        return int(self.doc_lengths.sum())


# --------------------------------------------------------------------------------------------- tokenizers

# 2: the fast tokenizer's normalizer, pre-tokenizer and model settings (merges, unk, byte fallback) are hashed too,
# so a lowercasing tokenizer with the same vocabulary is refused; indexes recording no version hold version 1
FINGERPRINT_VERSION = 2
_PIPELINE_KEYS = ("normalizer", "pre_tokenizer", "added_tokens")  # post_processor/decoder: unused by encode_texts


def tokenizer_fingerprint(tokenizer) -> str:
    """SHA-256 (first 16 hex) of the tokenizer's full vocabulary (token → id), its class, special tokens and (fast
    tokenizers) its text pipeline: normalizer, pre-tokenizer, added tokens and model settings but the vocabulary.

    Two tokenizers with the same fingerprint map every text to the same ids, which is what tracing needs.
    """
    vocab = tokenizer.get_vocab()
    payload = json.dumps(
        {"class": type(tokenizer).__name__.replace("Fast", ""),
         "vocab": sorted(vocab.items(), key=lambda kv: kv[1]),
         "special": sorted(str(t) for t in getattr(tokenizer, "all_special_tokens", [])),
         "pipeline": _pipeline(tokenizer)},
        ensure_ascii=False, sort_keys=True,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def _pipeline(tokenizer) -> dict | None:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None  # a slow tokenizer: its class and vocabulary are all it records
    spec = json.loads(backend.to_str())
    model = {k: v for k, v in (spec.get("model") or {}).items() if k != "vocab"}
    return {**{k: spec.get(k) for k in _PIPELINE_KEYS}, "model": model}


def vocab_size_of(tokenizer) -> int:
    return max(len(tokenizer), max(tokenizer.get_vocab().values()) + 1)


def token_dtype_for(vocab_size: int) -> np.dtype:
    """u16 when every id (and the separator 0xFFFF) fits, else u32."""
    return np.dtype(np.uint16) if vocab_size < 0xFFFF else np.dtype(np.uint32)


ENCODE_BATCH = 512  # texts per batched call of the fast tokenizer (bounded memory, same ids as one call per text)


def encode_texts(tokenizer, texts: Sequence[str]) -> list[np.ndarray]:
    """Token ids of each text, without special tokens (the same call is used for corpus and generations). Texts go to
    the tokenizer in batches of ``ENCODE_BATCH`` (a fast tokenizer encodes a batch in Rust, in parallel when
    ``TOKENIZERS_PARALLELISM`` allows); the ids are those of encoding each text alone."""
    out = []
    for i in range(0, len(texts), ENCODE_BATCH):
        batch = list(texts[i:i + ENCODE_BATCH])
        for ids in tokenizer(batch, add_special_tokens=False, verbose=False)["input_ids"]:
            out.append(np.asarray(ids, dtype=np.int64))
    return out


# ------------------------------------------------------------------------------------------- validation

def checked_doc(d) -> tuple[str, str, bytes]:
    """(id, text, its UTF-8) of a Document or an (id, text) pair, refusing invalid UTF-8 and empty texts with one
    line."""
    doc_id, text = (d.id, d.text) if hasattr(d, "text") else (str(d[0]), d[1])
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as err:
            raise MemlabError(f"document {doc_id!r} is not valid UTF-8 (byte {err.start}); "
                              "re-encode the corpus as UTF-8 before indexing") from None
    try:
        blob = text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise MemlabError(f"document {doc_id!r} holds invalid UTF-8 (surrogate at char {err.start}); "
                          "re-encode the corpus as UTF-8 before indexing") from None
    if not text or text.isspace():
        raise MemlabError(f"document {doc_id!r} is empty; drop empty documents before indexing")
    return doc_id, text, blob


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
    name: ClassVar[str]  # backend name: ``backend=`` of build_index, ``"backend"`` in meta.json

    # ---- per-backend build and layout (used by build_index / load_index)
    @classmethod
    @abc.abstractmethod
    def build(cls, corpus: TokenizedCorpus, out: Path, base_meta: dict, **options) -> None:
        """Write this backend's own files into ``out`` from the streamed token file of ``corpus``
        (``build_index`` writes the shared ones: unigram counts, texts, ids and, last, ``meta.json``); may add
        backend fields to ``base_meta``. ``options`` are build_index's backend options (``shards``,
        ``shard_tokens``, ``mem_gb``); unused ones are ignored."""

    @classmethod
    def check_path(cls, path: Path) -> None:
        """Refuse, in one line and before any work, a folder this backend cannot build into or open."""

    @classmethod
    def shard_streamer(cls, out: Path, width: int, **options):
        """What builds this backend's index while the corpus is tokenized (its ``written(tokens_file, lengths)`` is
        called after every chunk, its ``close()`` on failure, and it is handed to :meth:`build` as ``streamer``);
        None: everything is built after tokenizing."""
        return None

    @classmethod
    @abc.abstractmethod
    def required_files(cls, meta: dict) -> list[str]:
        """Files a complete index directory of this backend holds besides ``meta.json``, in the order
        :func:`load_index` reports the missing ones."""

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
        version = self.meta.get("tokenizer_fingerprint_version", 1)
        if version != FINGERPRINT_VERSION:
            raise MemlabError(
                f"index {self.path} records a version-{version} tokenizer fingerprint, which ignores the normalizer "
                f"and pre-tokenizer (version {FINGERPRINT_VERSION} does not); rebuild the index: delete {self.path} "
                "and run again")
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


# ------------------------------------------------------------------------------------------ registry

KIND_PACKAGE = "memlab.methods.trace.index.kinds"   # every module in it is imported when a backend is looked up
_CLASSES: dict[str, type[TokenIndex]] = {}           # backend name → class, in registration order


class _Backends(Mapping):
    """Backend name → class, read-only: every read first imports every module of :data:`KIND_PACKAGE` (once per
    process: :func:`memlab.plugins.import_all`), so a module dropped there is listed without another file edited."""

    def __getitem__(self, name: str) -> type[TokenIndex]:
        import_all(KIND_PACKAGE)
        return _CLASSES[name]

    def __iter__(self):
        import_all(KIND_PACKAGE)
        return iter(list(_CLASSES))

    def __len__(self) -> int:
        import_all(KIND_PACKAGE)
        return len(_CLASSES)

    def __repr__(self) -> str:
        return f"BACKENDS({dict(self)!r})"


BACKENDS: Mapping[str, type[TokenIndex]] = _Backends()


def register_backend(cls: type[TokenIndex]) -> type[TokenIndex]:
    """Class decorator: make ``cls`` buildable and loadable under the ``name`` it declares."""
    name = cls.__dict__.get("name")
    if not isinstance(name, str) or not name:
        raise TypeError(f"index backend {cls.__name__} must declare a class attribute name = \"...\"")
    known = _CLASSES.get(name, cls)
    if (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
        raise TypeError(f"index backend name {name!r} is taken by {known.__name__}")
    _CLASSES[name] = cls
    return cls


def unregister_backend(name: str) -> None:
    """Drop backend ``name`` (tests that add a toy backend undo it)."""
    _CLASSES.pop(name, None)


def backend_class(name: str) -> type[TokenIndex]:
    """The registered class of backend ``name``; an unknown name is one line naming the known ones."""
    if name not in BACKENDS:
        import_all(KIND_PACKAGE, again=True)   # a module added since the package was imported
    if name not in _CLASSES:
        raise ConfigError(f"unknown index backend {name!r}; use one of {sorted(BACKENDS)}")
    return _CLASSES[name]
