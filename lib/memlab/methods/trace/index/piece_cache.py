"""Byte-level BPE encoding with a pre-token cache: the same ids as the fast tokenizer, several times faster.

A byte-level BPE tokenizer (GPT-2, GPT-NeoX/Pythia, the zoo's) first splits a text into pre-tokens with one
fixed regex, then runs BPE on each pre-token alone: the ids of a text are the concatenation of the ids of its
pre-tokens. Corpora repeat their pre-tokens (words with their leading space) endlessly, so
:class:`PieceCachedEncoder` splits texts itself, encodes each distinct pre-token once with the tokenizer, and
lays out the ids of a batch of documents from the cache — the split, the lookups and the lay-out compiled
(:mod:`.piece_scan`, numba), on the code points of the batch with their classes as the tokenizer's pre-tokenizer
sees them (:class:`Splitter`). A document
is handed to the tokenizer whole when the shortcut could differ: when it contains the text of an added
(special) token, which the tokenizer matches before splitting, or when the tokenizer normalizes (NFC) and the
document is not already NFC.
Tokenizers of any other shape (another pre-tokenizer, a prefix space, BPE dropout, another normalizer) are
not handled here: :func:`piece_cache_applicable` says so and callers encode with the tokenizer.
"""

from __future__ import annotations

import itertools
import json
import unicodedata

import numpy as np

from memlab.methods.trace.index import piece_scan as scan

# classes of the ASCII characters in the tokenizer's regex (its whitespace in ASCII: tab, LF, VT, FF, CR, space)
_ASCII_CLASS = np.full(128, scan.OTHER, dtype=np.uint8)
_ASCII_CLASS[[ord(c) for c in "\t\n\x0b\x0c\r"]] = scan.WS
_ASCII_CLASS[ord(" ")] = scan.SPACE
_ASCII_CLASS[[ord(c) for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"]] = scan.LETTER
_ASCII_CLASS[[ord(c) for c in "0123456789"]] = scan.DIGIT
# A non-ASCII character plays in the regex only through its class, and is never one of the characters the regex
# names (' s t r e v m l d, space): its class is the one of the ASCII stand-in whose run it continues.
_STAND_IN = {"x": scan.LETTER, "0": scan.DIGIT, "\t": scan.WS, "#": scan.OTHER}
# distinct pre-tokens kept: ≈ 80 MB per process (≈ 155 MB per million, measured); later new ones are
# encoded each time
MAX_PIECES = 1 << 19


def piece_cache_applicable(tokenizer_json: str) -> bool:
    """Whether a fast tokenizer (its JSON) has the shape :class:`PieceCachedEncoder` reproduces."""
    spec = json.loads(tokenizer_json)
    pre, model, norm = spec.get("pre_tokenizer") or {}, spec.get("model") or {}, spec.get("normalizer")
    return (pre.get("type") == "ByteLevel" and pre.get("use_regex", True) and not pre.get("add_prefix_space")
            and model.get("type") == "BPE" and not model.get("dropout")
            and (norm is None or norm.get("type") == "NFC"))


class Splitter:
    """Classes of code points for :func:`.piece_scan.scan`, exactly as the tokenizer's byte-level pre-tokenizer
    sees them: ASCII from the regex's own classes, every other character asked of the tokenizer's pre-tokenizer
    once (its Unicode tables, not Python's: they differ on recent characters) by the ASCII stand-in whose run it
    continues (letter, digit, whitespace, other). :data:`~.piece_scan.UNKNOWN` for a character the probes
    cannot place (its text is then encoded whole)."""

    def __init__(self, pre_tokenizer):
        self.pre = pre_tokenizer
        self.known = np.empty(0, dtype=np.uint32)  # non-ASCII code points classified so far (sorted)
        self.known_cls = np.empty(0, dtype=np.uint8)

    def _class_of(self, ch: str) -> int:
        for stand_in, c in _STAND_IN.items():
            if len(self.pre.pre_tokenize_str(stand_in + ch)) == 1:  # it continues the stand-in's run
                return c
        return scan.UNKNOWN

    def classes(self, cps: np.ndarray) -> np.ndarray:
        cls = _ASCII_CLASS[np.minimum(cps, 127)]
        high = cps > 127
        if high.any():
            hi = cps[high]
            new = np.setdiff1d(hi, self.known)
            if len(new):
                keys = np.concatenate([self.known, new])
                vals = np.concatenate([self.known_cls, [self._class_of(chr(int(c))) for c in new]]).astype(np.uint8)
                order = np.argsort(keys)
                self.known, self.known_cls = keys[order], vals[order]
            cls[high] = self.known_cls[np.searchsorted(self.known, hi)]
        return cls


class _Grow:
    """A growing 1-D array (amortized doubling): ``view()`` is what was appended, ``truncate(n)`` forgets."""

    def __init__(self, dtype, first=()):
        self.arr, self.n = np.empty(1024, dtype=dtype), 0
        self.extend(np.asarray(first, dtype=dtype))

    def extend(self, values: np.ndarray) -> None:
        need = self.n + len(values)
        if need > len(self.arr):
            bigger = np.empty(max(need, 2 * len(self.arr)), dtype=self.arr.dtype)
            bigger[:self.n] = self.arr[:self.n]
            self.arr = bigger
        self.arr[self.n:need] = values
        self.n = need

    def view(self) -> np.ndarray:
        return self.arr[:self.n]

    def truncate(self, n: int) -> None:
        self.n = n


class PieceCachedEncoder:
    """Encodes documents with a ``tokenizers.Tokenizer`` of the shape :func:`piece_cache_applicable` accepts,
    caching the ids of every distinct pre-token (up to :data:`MAX_PIECES`); splitting, lookup and lay-out run
    compiled (:mod:`.piece_scan`)."""

    def __init__(self, tokenizer, tokenizer_json: str):
        spec = json.loads(tokenizer_json)
        self.tok = tokenizer
        self.splitter = Splitter(tokenizer.pre_tokenizer)
        self.nfc = (spec.get("normalizer") or {}).get("type") == "NFC"
        self.added = [t["content"] for t in spec.get("added_tokens", []) if t.get("content")]
        self.hashes = _Grow(np.uint64)           # entry k's piece hash (piece_scan's FNV-1a of its code points)
        self.slot_hash, self.slot_entry = scan.table_for(self.hashes.view())  # hash -> entry
        self.cps = _Grow(np.uint32)              # code points of every cached piece, back to back
        self.cp_offsets = _Grow(np.int64, [0])   # entry k is cps[cp_offsets[k]:cp_offsets[k + 1]]
        self.ids = _Grow(np.int64)               # ids of every cached piece, back to back
        self.id_offsets = _Grow(np.int64, [0])

    def __len__(self) -> int:
        return self.hashes.n

    def _whole(self, text: str) -> bool:
        """A text the tokenizer must see whole (see the module docstring)."""
        return any(a in text for a in self.added) or (self.nfc and not unicodedata.is_normalized("NFC", text))

    def pieces(self, text: str) -> list[str]:
        """The pre-tokens of ``text`` as the compiled scanner cuts them."""
        cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        _, ps, pe, _ = self._scan(cps, self.splitter.classes(cps), np.zeros(1, np.int64), np.array([len(cps)]))
        return [text[a:b] for a, b in zip(ps.tolist(), pe.tolist())]

    @staticmethod
    def _scan(cps, cls, starts, ends):
        ps, pe = np.empty(len(cps), np.int64), np.empty(len(cps), np.int64)
        per_text = np.empty(len(starts), np.int64)
        n = scan.scan(cps, cls, starts, ends, ps, pe, per_text)
        return n, ps[:n], pe[:n], per_text

    def _add(self, big: str, cps, ps, pe, hashes, where) -> None:
        """Cache the pieces ``where`` (not cached yet; each distinct one once, encoded by the tokenizer)."""
        _, first = np.unique(hashes[where], return_index=True)
        new = where[np.sort(first)]  # in text order: the cache's order does not depend on hashing
        starts, ends = ps[new], pe[new]
        encoded = self.tok.encode_batch_fast([big[a:b] for a, b in zip(starts.tolist(), ends.tolist())],
                                             add_special_tokens=False)
        id_lists = [e.ids for e in encoded]
        n_ids = np.fromiter(map(len, id_lists), dtype=np.int64, count=len(id_lists))
        n_cps = ends - starts
        if 2 * (self.hashes.n + len(new)) > len(self.slot_hash):  # keep the table at most half full
            self.slot_hash, self.slot_entry = scan.table_for(np.concatenate([self.hashes.view(), hashes[new]]))
        else:
            scan.insert(self.slot_hash, self.slot_entry, hashes[new], self.hashes.n)
        self.hashes.extend(hashes[new])
        self.cps.extend(cps[np.repeat(starts - (np.cumsum(n_cps) - n_cps), n_cps) + np.arange(int(n_cps.sum()))])
        self.cp_offsets.extend(self.cp_offsets.view()[-1] + np.cumsum(n_cps))
        self.ids.extend(np.fromiter(itertools.chain.from_iterable(id_lists), dtype=np.int64, count=int(n_ids.sum())))
        self.id_offsets.extend(self.id_offsets.view()[-1] + np.cumsum(n_ids))

    def _find(self, cps, ps, pe, hashes, entries, which=None) -> None:
        """Every piece's cache entry into ``entries``, or only the pieces ``which``."""
        if which is None:
            scan.find(cps, ps, pe, hashes, len(hashes), self.slot_hash, self.slot_entry, self.cps.view(),
                      self.cp_offsets.view(), entries)
        else:
            scan.find_again(cps, ps, pe, hashes, which, self.slot_hash, self.slot_entry, self.cps.view(),
                            self.cp_offsets.view(), entries)

    def _forget_after(self, k: int) -> None:
        """Forget the cache entries from number ``k`` on (the last ones added)."""
        self.hashes.truncate(k)
        self.slot_hash, self.slot_entry = scan.table_for(self.hashes.view())
        self.cps.truncate(int(self.cp_offsets.view()[k]))
        self.cp_offsets.truncate(k + 1)
        self.ids.truncate(int(self.id_offsets.view()[k]))
        self.id_offsets.truncate(k + 1)

    def encode_block(self, texts: list[str], sep: int, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        """(tokens per text, ``SEP + ids`` of every text back to back, in ``dtype``): the layout of
        ``[e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)]`` with a separator before
        each text."""
        big = "".join(texts)
        cps = np.frombuffer(big.encode("utf-32-le"), dtype=np.uint32)
        cls = self.splitter.classes(cps)
        lens = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        ends = np.cumsum(lens)
        starts = ends - lens
        whole = {i for i, t in enumerate(texts) if self._whole(t)}
        unknown = np.flatnonzero(cls == scan.UNKNOWN)
        whole.update(np.searchsorted(ends, unknown, side="right").tolist())
        n_kept = len(self.cp_offsets.view()) - 1
        while True:
            scan_ends = ends.copy()
            scan_ends[sorted(whole)] = starts[sorted(whole)]  # texts encoded whole are not scanned
            n, ps, pe, per_text = self._scan(cps, cls, starts, scan_ends)
            hashes = np.empty(n, np.uint64)
            scan.piece_hashes(cps, ps, pe, n, hashes)
            entries = np.empty(n, np.int64)
            self._find(cps, ps, pe, hashes, entries)
            missing = np.flatnonzero(entries == -1)
            if len(missing):
                self._add(big, cps, ps, pe, hashes, missing)
                self._find(cps, ps, pe, hashes, entries, missing)
            clash = np.flatnonzero(entries < 0)  # a hash naming another piece: encode that text whole
            if not len(clash):
                break
            piece_text = np.repeat(np.arange(len(texts)), per_text)
            whole.update(piece_text[clash].tolist())
        id_offsets = self.id_offsets.view()
        total = int((id_offsets[entries + 1] - id_offsets[entries]).sum()) + len(texts)
        block = np.empty(total, dtype=dtype)
        lengths = np.empty(len(texts), dtype=np.int64)
        scan.lay_out(entries, per_text, id_offsets, self.ids.view(), sep, block, lengths)
        if len(self) > MAX_PIECES:  # keep the cache bounded: forget this batch's new pieces
            self._forget_after(n_kept)
        if whole:  # splice in the texts encoded whole, each right after its separator
            ids = {i: self.tok.encode(texts[i], add_special_tokens=False).ids for i in sorted(whole)}
            bounds = np.cumsum(lengths + 1)
            cuts = [int(bounds[i] - lengths[i]) for i in sorted(ids)]
            parts = np.split(block, cuts)
            block = np.concatenate([parts[0]] + [x for i, rest in zip(sorted(ids), parts[1:])
                                                 for x in (np.asarray(ids[i], dtype=dtype), rest)])
            for i, got in ids.items():
                lengths[i] = len(got)
        return lengths, block
