"""Compiled (numba) loops of the pre-token cache: split texts into byte-level BPE pre-tokens, find each piece in
the cache, lay out the ids — the per-piece work that costs ~0.6 µs a piece in Python.

Texts arrive as one array of code points (``cps``, the UTF-32 of the texts back to back) with a class per code point
(``cls``: :data:`LETTER`, :data:`DIGIT`, :data:`SPACE` (only U+0020), :data:`WS` (other whitespace),
:data:`OTHER`), classes the caller took from the tokenizer's own pre-tokenizer (:mod:`.piece_cache`).
:func:`scan` applies the tokenizer's regex ``'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|
\\s+(?!\\S)|\\s+`` as a leftmost-first scanner (the alternatives in order at each position). Pieces are found in
the cache by a 64-bit FNV-1a hash of their code points (an open-addressing table) and then compared code point by
code point, so a hash collision is caught (the text is then encoded whole), never answered wrong.
"""

from __future__ import annotations

import numpy as np
from numba import njit

LETTER, DIGIT, SPACE, WS, OTHER, UNKNOWN = 0, 1, 2, 3, 4, 255
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_APOSTROPHE, _S, _T, _M, _D, _R, _E, _V, _L = (ord(c) for c in "'stmdrevl")


@njit(cache=True, nogil=True)
def scan(cps, cls, starts, ends, piece_start, piece_end, pieces_per_text):
    """Pre-token boundaries of texts ``cps[starts[t]:ends[t]]`` into ``piece_start``/``piece_end`` (each as long as
    ``cps``); ``pieces_per_text[t]`` = the pieces of text t. Returns the number of pieces."""
    n = 0
    for t in range(len(starts)):
        p, e = starts[t], ends[t]
        first = n
        while p < e:
            q = -1
            if cps[p] == _APOSTROPHE and p + 1 < e:  # 's 't 'm 'd, then 're 've 'll
                a = cps[p + 1]
                if a == _S or a == _T or a == _M or a == _D:
                    q = p + 2
                elif p + 2 < e and ((a == _R and cps[p + 2] == _E) or (a == _V and cps[p + 2] == _E)
                                    or (a == _L and cps[p + 2] == _L)):
                    q = p + 3
            if q < 0:
                c = cls[p]
                run = -1
                if c == SPACE and p + 1 < e and (cls[p + 1] == LETTER or cls[p + 1] == DIGIT or cls[p + 1] == OTHER):
                    run, q = cls[p + 1], p + 2  # ' ?X+' with its leading space
                elif c == LETTER or c == DIGIT or c == OTHER:
                    run, q = c, p + 1
                if run >= 0:
                    while q < e and cls[q] == run:
                        q += 1
                else:  # whitespace: '\s+(?!\S)' (a run before non-space keeps its last character back), '\s+'
                    r = p + 1
                    while r < e and (cls[r] == SPACE or cls[r] == WS):
                        r += 1
                    q = r if r == e else (r - 1 if r - p >= 2 else p + 1)
            piece_start[n], piece_end[n] = p, q
            n += 1
            p = q
        pieces_per_text[t] = n - first
    return n


@njit(cache=True, nogil=True)
def piece_hashes(cps, piece_start, piece_end, n, out):
    for i in range(n):
        out[i] = hash_of(cps[piece_start[i]:piece_end[i]])


@njit(cache=True, nogil=True)
def hash_of(piece_cps):
    h = _FNV_OFFSET
    for c in piece_cps:
        h = (h ^ np.uint64(c)) * _FNV_PRIME
    return h


# The cache's hash table: open addressing with linear probing over two arrays of a power-of-two size, ``slot_hash``
# and ``slot_entry`` (-1: empty), at most half full; about 10× faster than a numba typed dict here.

@njit(cache=True, nogil=True)
def _slot(slot_hash, slot_entry, h):
    mask = len(slot_hash) - 1
    i = h & np.uint64(mask)
    while slot_entry[i] != -1 and slot_hash[i] != h:
        i = (i + np.uint64(1)) & np.uint64(mask)
    return i


@njit(cache=True, nogil=True)
def insert(slot_hash, slot_entry, hashes, first_entry):
    """Entries first_entry, first_entry+1, … under ``hashes`` (the table must have room: see :func:`table_for`)."""
    for i in range(len(hashes)):
        j = _slot(slot_hash, slot_entry, hashes[i])
        slot_hash[j], slot_entry[j] = hashes[i], first_entry + i


def table_for(entry_hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A table holding entries 0..n-1 under ``entry_hashes``, with room for as many again."""
    size = 1 << max(10, int(2 * len(entry_hashes) + 1).bit_length())
    slot_hash, slot_entry = np.zeros(size, np.uint64), np.full(size, -1, np.int64)
    insert(slot_hash, slot_entry, entry_hashes, 0)
    return slot_hash, slot_entry


@njit(cache=True, nogil=True)
def _entry(cps, s, e, h, slot_hash, slot_entry, cached_cps, cp_offsets):
    """The cache entry of the piece ``cps[s:e]`` (hash ``h``), -1 when not cached, -2 when ``h`` names another
    piece."""
    k = slot_entry[_slot(slot_hash, slot_entry, h)]
    if k >= 0:
        a, b = cp_offsets[k], cp_offsets[k + 1]
        if b - a != e - s:
            return -2
        for j in range(b - a):
            if cached_cps[a + j] != cps[s + j]:
                return -2
    return k


@njit(cache=True, nogil=True)
def find(cps, piece_start, piece_end, hashes, n, slot_hash, slot_entry, cached_cps, cp_offsets, out):
    """``out[i]``: the cache entry of piece i (see :func:`_entry`)."""
    for i in range(n):
        out[i] = _entry(cps, piece_start[i], piece_end[i], hashes[i], slot_hash, slot_entry, cached_cps, cp_offsets)


@njit(cache=True, nogil=True)
def find_again(cps, piece_start, piece_end, hashes, which, slot_hash, slot_entry, cached_cps, cp_offsets, out):
    """:func:`find` for the pieces ``which`` only (the ones just added to the cache)."""
    for i in which:
        out[i] = _entry(cps, piece_start[i], piece_end[i], hashes[i], slot_hash, slot_entry, cached_cps, cp_offsets)


@njit(cache=True, nogil=True)
def lay_out(entries, pieces_per_text, id_offsets, cached_ids, sep, block, lengths):
    """``block`` = for each text, ``sep`` then the ids of its pieces' cache entries; ``lengths[t]`` its id count.
    Returns the block's length."""
    pos, i = 0, 0
    for t in range(len(pieces_per_text)):
        block[pos] = sep
        pos += 1
        start = pos
        for _ in range(pieces_per_text[t]):
            k = entries[i]
            for j in range(id_offsets[k], id_offsets[k + 1]):
                block[pos] = cached_ids[j]
                pos += 1
            i += 1
        lengths[t] = pos - start
    return pos
