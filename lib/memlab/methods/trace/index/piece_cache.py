"""Byte-level BPE encoding with a pre-token cache: the same ids as the fast tokenizer, several times faster.

A byte-level BPE tokenizer (GPT-2, GPT-NeoX/Pythia, the zoo's) first splits a text into pre-tokens with one
fixed regex, then runs BPE on each pre-token alone: the ids of a text are the concatenation of the ids of its
pre-tokens. Corpora repeat their pre-tokens (words with their leading space) endlessly, so
:class:`PieceCachedEncoder` splits texts itself, encodes each distinct pre-token once with the tokenizer, and
lays out the ids of a batch of documents with one vectorized gather.

The split reproduces the tokenizer's own regex (``'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+|
?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+``) with an ASCII ``re`` pattern (:class:`Splitter`). A document
is handed to the tokenizer whole when the shortcut could differ: when it contains the text of an added
(special) token, which the tokenizer matches before splitting, or when the tokenizer normalizes (NFC) and the
document is not already NFC.
Tokenizers of any other shape (another pre-tokenizer, a prefix space, BPE dropout, another normalizer) are
not handled here: :func:`piece_cache_applicable` says so and callers encode with the tokenizer.
"""

from __future__ import annotations

import array
import itertools
import json
import re
import unicodedata

import numpy as np

_AWS = r"\t\n\x0b\x0c\r "  # ASCII whitespace (\s of the tokenizer's regex, restricted to ASCII)
_ASCII_SPLIT = re.compile(
    rf"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^{_AWS}A-Za-z0-9]+|[{_AWS}]+(?![^{_AWS}])|[{_AWS}]+""")
# A non-ASCII character plays in the regex only through its class, and is never one of the characters the regex
# names (' s t r e v m l d, space): it splits like the ASCII stand-in of its class.
_STAND_IN = {"letter": "x", "digit": "0", "space": "\t", "other": "#"}
_SEP_KEY = ""  # the separator's cache entry: a split never yields an empty piece
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
    """Splits texts into pre-tokens exactly as a tokenizer's byte-level pre-tokenizer does. ASCII texts go
    through :data:`_ASCII_SPLIT`; in other texts, each non-ASCII character is first replaced by the ASCII
    stand-in of its class (letter, digit, whitespace, other), the class being asked of the tokenizer's own
    pre-tokenizer once per distinct character (its Unicode tables, not Python's: they differ on recent
    characters). ``None`` for a text with a character the probes cannot place."""

    def __init__(self, pre_tokenizer):
        self.pre = pre_tokenizer
        self.table: dict[int, str | None] = {}

    def _class_of(self, ch: str) -> str | None:
        for stand_in in _STAND_IN.values():
            if len(self.pre.pre_tokenize_str(stand_in + ch)) == 1:  # it continues the stand-in's run
                return stand_in
        return None

    def split(self, text: str) -> list[str] | None:
        if text.isascii():
            return _ASCII_SPLIT.findall(text)
        table = self.table
        for code in set(map(ord, set(text))).difference(table):
            if code > 127:
                table[code] = self._class_of(chr(code))
        mapped = text.translate(table)
        if len(mapped) != len(text):  # a character without a class was deleted (None)
            return None
        ends = list(itertools.accumulate(map(len, _ASCII_SPLIT.findall(mapped))))
        return list(map(text.__getitem__, map(slice, [0] + ends[:-1], ends)))


class PieceCachedEncoder:
    """Encodes documents with a ``tokenizers.Tokenizer`` of the shape :func:`piece_cache_applicable` accepts,
    caching the ids of every distinct pre-token (up to :data:`MAX_PIECES`)."""

    def __init__(self, tokenizer, tokenizer_json: str):
        spec = json.loads(tokenizer_json)
        self.tok = tokenizer
        self.splitter = Splitter(tokenizer.pre_tokenizer)
        self.nfc = (spec.get("normalizer") or {}).get("type") == "NFC"
        self.added = [t["content"] for t in spec.get("added_tokens", []) if t.get("content")]
        self.index: dict[str, int] = {}
        self.flat = array.array("q")         # ids of every cached piece, back to back
        self.offsets = array.array("q", [0])  # piece k is flat[offsets[k]:offsets[k + 1]]

    def _whole(self, text: str) -> bool:
        """A text the tokenizer must see whole (see the module docstring)."""
        return any(a in text for a in self.added) or (self.nfc and not unicodedata.is_normalized("NFC", text))

    def _add(self, pieces) -> None:
        for piece, enc in zip(pieces, self.tok.encode_batch_fast(pieces, add_special_tokens=False)):
            self.index[piece] = len(self.offsets) - 1
            self.flat.extend(enc.ids)
            self.offsets.append(len(self.flat))

    def _drop_after(self, n: int, pieces) -> None:
        """Forget ``pieces``, the cache entries from number ``n`` on (the last ones added)."""
        for piece in pieces:
            del self.index[piece]
        del self.flat[self.offsets[n]:]
        del self.offsets[n + 1:]

    def encode_block(self, texts: list[str], sep: int, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        """(tokens per text, ``SEP + ids`` of every text back to back, in ``dtype``): the layout of
        ``[e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)]`` with a separator before
        each text."""
        keys: list[str] = []           # the pieces of every text, each text's led by _SEP_KEY
        firsts = np.empty(len(texts), dtype=np.int64)  # where each text's pieces start in keys
        whole: dict[int, list[int]] = {}  # text number -> its ids, for texts encoded whole
        for i, text in enumerate(texts):
            firsts[i] = len(keys)
            keys.append(_SEP_KEY)
            pieces = None if self._whole(text) else self.splitter.split(text)
            if pieces is None:
                whole[i] = self.tok.encode(text, add_special_tokens=False).ids
            else:
                keys.extend(pieces)
        index = self.index
        if _SEP_KEY not in index:
            index[_SEP_KEY] = len(self.offsets) - 1
            self.flat.append(sep)
            self.offsets.append(len(self.flat))
        new = sorted(set(keys).difference(index))  # sorted: the cache's order does not depend on hashing
        n_kept = len(self.offsets) - 1
        self._add(new)
        flat, offsets = np.frombuffer(self.flat, dtype=np.int64), np.frombuffer(self.offsets, dtype=np.int64)
        k = np.fromiter(map(index.__getitem__, keys), dtype=np.int64, count=len(keys))
        starts = offsets[k]
        n = offsets[k + 1] - starts
        block = flat[np.repeat(starts - (np.cumsum(n) - n), n) + np.arange(int(n.sum()))].astype(dtype)
        lengths = np.add.reduceat(n, firsts) - 1 if len(keys) else np.empty(0, dtype=np.int64)
        del flat, offsets  # release the arrays' buffers so that they may grow again
        if len(index) > MAX_PIECES:  # keep the cache bounded: forget this batch's new pieces
            self._drop_after(n_kept, new)
        if whole:  # splice in the texts encoded whole, each right after its separator
            ends = np.cumsum(lengths + 1)
            cuts = [int(ends[i] - lengths[i]) for i in sorted(whole)]
            pieces = np.split(block, cuts)
            block = np.concatenate([pieces[0]] + [x for i, rest in zip(sorted(whole), pieces[1:])
                                                  for x in (np.asarray(whole[i], dtype=dtype), rest)])
            for i, ids in whole.items():
                lengths[i] = len(ids)
        return lengths, block
