"""RECAP passage matching: how many 40-token book passages a set of generations reproduces.

Seed 000 §4.1 and App. T: model outputs are broken into 40-token segments and a passage counts as
memorized if it matches the reference with at most five token mismatches (App. T sweeps the tolerance
down to 0). The authors' code (RESEARCH.md §1) lower-cases, strips punctuation, tokenizes, merges matching
blocks while the accumulated gap stays ≤ max_mismatch, and counts ⌊len/40⌋ passages for a span of ≥ 40
matched tokens. This module implements that definition, made precise as follows.

Normalization (:func:`normalize_tokens`): ``text.lower()``, delete every character that is neither a
word character (``\\w``) nor whitespace (so "don't" → "dont", "—" disappears), split on whitespace.

Span: an alignment of ``reference[ref_start:ref_end]`` with ``candidate[cand_start:cand_end]`` (within one
generation) built from exact matching blocks b_1..b_r, increasing in both sequences. Between consecutive
blocks the gap of g_ref reference and g_cand candidate tokens costs::

    mismatches(gap) = max(g_ref, g_cand) − LCS(gap_ref, gap_cand)

(a substitution, an insertion or a deletion each cost 1; short exact matches inside the gap are counted
as matched). A span has ``matched`` = Σ|b_i| + Σ LCS(gaps) and ``mismatches`` = Σ mismatches(gap) ≤ m
(accumulated over the whole span, as in the authors' code). It counts ⌊matched / min_tokens⌋ passages
when matched ≥ min_tokens (40).

Search (fast, not O(n·m) DP): every qualifying span has ≤ m gaps, hence ≤ m+1 blocks, so one of its blocks
has ≥ s = ⌈min_tokens/(m+1)⌉ tokens (s = 7 for m = 5). We therefore (1) find all maximal exact matches of
≥ s tokens by joining exact s-gram hits (numpy: s-grams as fixed-width byte rows, ``np.unique``,
``searchsorted``), (2) per generation, scan blocks by candidate position (longest first at a tie) and
extend each greedily to the right, always taking the reachable next block with the fewest gap mismatches
(then the longest), while the budget lasts, (3) keep the chain if matched ≥ min_tokens and mark its
candidate range as used, so no generation token is counted in two spans. Spans start and end with a block
of ≥ s tokens. The result is deterministic; it is a greedy alignment (like difflib's matching blocks in
the authors' code), not a global optimum.

Because the budget is accumulated per span and a span closes when it runs out, the passage count is
not monotone in m on every input (e.g. blocks of 20|29|29|39 tokens give 2 passages at m = 1 but 1 at
m = 2); the App. T sweep on real data is still expected to rise with m.

Passages are counted per book over a set of generations (:func:`count_passages`): the sum over spans.
``ref_tokens_covered`` is the size of the union of the spans' reference ranges (distinct book text
reproduced).
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from memlab.metrics.rouge import lcs_length

__all__ = [
    "Span",
    "PassageReport",
    "normalize_tokens",
    "find_spans",
    "count_passages",
    "mismatch_sweep",
    "seed_length",
    "count_passages_overlapping",
]

_PUNCT = re.compile(r"[^\w\s]+")
_MAX_HITS = 20_000_000  # exact s-gram hits held at once (~1.3 GB of int64 work arrays at the cap)


@dataclass(frozen=True)
class Span:
    """One aligned span. Ranges are half-open token positions; ``generation`` indexes the generation set."""

    generation: int
    ref_start: int
    ref_end: int
    cand_start: int
    cand_end: int
    matched: int
    mismatches: int
    passages: int


@dataclass
class PassageReport:
    spans: list[Span]
    n_passages: int
    ref_tokens: int
    ref_tokens_covered: int
    min_tokens: int
    max_mismatch: int
    per_generation: list[int] = field(default_factory=list)  # passages found in each generation


def normalize_tokens(text: str) -> list[str]:
    """Lower-case, strip punctuation (delete ``[^\\w\\s]``), split on whitespace. Non-str → TypeError."""
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    return _PUNCT.sub("", text.lower()).split()


def seed_length(min_tokens: int, max_mismatch: int) -> int:
    """s = ⌈min_tokens / (max_mismatch + 1)⌉: a qualifying span always contains a block this long."""
    return max(1, math.ceil(min_tokens / (max_mismatch + 1)))


# ---------------------------------------------------------------------------------------------- blocks


def _kgram_rows(ids: np.ndarray, k: int) -> np.ndarray:
    """Each k-gram of ``ids`` (int32) as one fixed-width opaque row, for exact hashing-free equality."""
    win = np.lib.stride_tricks.sliding_window_view(ids, k)
    return np.ascontiguousarray(win).view(np.dtype((np.void, 4 * k))).ravel()


def _maximal_blocks(ref: np.ndarray, cand: np.ndarray, gen_of: np.ndarray, k: int) -> np.ndarray:
    """All maximal exact matches of ≥ k tokens between ``ref`` and ``cand`` not crossing generations.

    Returns an int64 array of rows (i, j, length), sorted by (j, −length).
    """
    if ref.size < k or cand.size < k:
        return np.zeros((0, 3), dtype=np.int64)
    rrows, crows = _kgram_rows(ref, k), _kgram_rows(cand, k)
    _, inv = np.unique(np.concatenate([rrows, crows]), return_inverse=True)
    inv = inv.ravel()
    rid, cid = inv[: rrows.size], inv[rrows.size :]
    # candidate k-grams that cross a generation boundary never match
    valid = gen_of[: cid.size] == gen_of[k - 1 : k - 1 + cid.size]
    order = np.argsort(rid, kind="stable")
    rid_sorted = rid[order]
    lo = np.searchsorted(rid_sorted, cid, side="left")
    hi = np.searchsorted(rid_sorted, cid, side="right")
    counts = np.where(valid, hi - lo, 0)
    total = int(counts.sum())
    if total > _MAX_HITS:
        raise ValueError(
            f"{total:,} seed hits of length {k}: too repetitive for this seed length; "
            "lower max_mismatch or pass a larger seed_len"
        )
    if total == 0:
        return np.zeros((0, 3), dtype=np.int64)
    j = np.repeat(np.arange(cid.size, dtype=np.int64), counts)
    starts = np.repeat(lo, counts)
    offs = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    i = order[starts + offs].astype(np.int64)
    # join hits on the same diagonal at consecutive candidate positions into maximal runs
    d = i - j
    o = np.lexsort((j, d))
    d, j, i = d[o], j[o], i[o]
    new_run = np.r_[True, (np.diff(d) != 0) | (np.diff(j) != 1)]
    run_id = np.cumsum(new_run) - 1
    first = np.nonzero(new_run)[0]
    n_hits = np.bincount(run_id)
    blocks = np.stack([i[first], j[first], n_hits + k - 1], axis=1)
    o = np.lexsort((-blocks[:, 2], blocks[:, 1]))
    return blocks[o]


# ---------------------------------------------------------------------------------------------- spans


def _gap_cost(ref: np.ndarray, cand: np.ndarray, i0: int, i1: int, j0: int, j1: int) -> tuple[int, int]:
    """(mismatches, matched) of the gap ref[i0:i1] vs cand[j0:j1]."""
    gr, gc = i1 - i0, j1 - j0
    if gr == 0 or gc == 0:
        return max(gr, gc), 0
    lcs = lcs_length(ref[i0:i1].tolist(), cand[j0:j1].tolist())
    return max(gr, gc) - lcs, lcs


def _chain_spans(
    ref: np.ndarray,
    cand: np.ndarray,
    blocks: np.ndarray,
    gen_start: int,
    gen_end: int,
    min_tokens: int,
    max_mismatch: int,
    k: int,
) -> list[tuple[int, int, int, int, int, int]]:
    """Greedy right-extension of blocks inside one generation [gen_start, gen_end)."""
    if blocks.size == 0:
        return []
    bi, bj, bl = blocks[:, 0].tolist(), blocks[:, 1].tolist(), blocks[:, 2].tolist()
    js = bj  # sorted ascending
    out = []
    used_until = gen_start  # candidate tokens before this are already in an emitted span
    for idx in range(len(bi)):
        i, j, length = bi[idx], bj[idx], bl[idx]
        if j + length <= used_until:
            continue
        if j < used_until:  # trim the block to start after the used range
            cut = used_until - j
            i, j, length = i + cut, j + cut, length - cut
            if length < k:
                continue
        span_i0, span_j0 = i, j
        ie, je = i + length, j + length
        matched, budget = length, max_mismatch
        while True:
            # reachable next blocks: start within the window after the current end in both sequences
            window = budget * k + k + budget
            lo = bisect.bisect_left(js, je - window)  # blocks overlapping the end may be trimmed
            hi = bisect.bisect_right(js, je + window)
            best = None
            for n in range(lo, hi):
                ni, nj, nl = bi[n], bj[n], bl[n]
                cut = max(0, je - nj, ie - ni)
                ni, nj, nl = ni + cut, nj + cut, nl - cut
                if nl <= 0 or nj + nl > gen_end or ni - ie > window or nj - je > window:
                    continue
                if ni < ie or nj < je:
                    continue
                cost, gap_match = _gap_cost(ref, cand, ie, ni, je, nj)
                if cost > budget:
                    continue
                key = (cost, -(nl + gap_match))
                if best is None or key < best[0]:
                    best = (key, ni, nj, nl, cost, gap_match)
            if best is None:
                break
            _, ni, nj, nl, cost, gap_match = best
            budget -= cost
            matched += gap_match + nl
            ie, je = ni + nl, nj + nl
        if matched >= min_tokens:
            out.append((span_i0, ie, span_j0, je, matched, max_mismatch - budget))
            used_until = je
    return out


def _check_params(min_tokens: int, max_mismatch: int) -> None:
    if int(min_tokens) < 1:
        raise ValueError(f"min_tokens must be >= 1, got {min_tokens}")
    if int(max_mismatch) < 0:
        raise ValueError(f"max_mismatch must be >= 0, got {max_mismatch}")


def find_spans(
    reference: Sequence[str],
    generations: Sequence[Sequence[str]],
    *,
    min_tokens: int = 40,
    max_mismatch: int = 5,
    seed_len: int | None = None,
) -> list[Span]:
    """Spans (see module docstring) between a tokenized reference and tokenized generations.

    ``reference``: tokens of the book; ``generations``: one token list per generation. Tokens are any
    hashables compared by equality (words from :func:`normalize_tokens`, or model token ids).
    ``seed_len`` overrides s (a larger s is faster but may miss spans whose blocks are all shorter).
    """
    _check_params(min_tokens, max_mismatch)
    if reference is None or isinstance(reference, str):
        raise TypeError("reference must be a list of tokens (use normalize_tokens or count_passages)")
    if generations is None or isinstance(generations, str):
        raise TypeError("generations must be a list of token lists")
    gens = [list(g) for g in generations]
    if any(isinstance(g, str) for g in generations):
        raise TypeError("each generation must be a list of tokens, not a str")
    k = int(seed_len) if seed_len is not None else seed_length(min_tokens, max_mismatch)
    vocab: dict = {}
    ref = np.fromiter((vocab.setdefault(t, len(vocab)) for t in reference), dtype=np.int32)
    flat = [t for g in gens for t in g]
    cand = np.fromiter((vocab.setdefault(t, len(vocab)) for t in flat), dtype=np.int32, count=len(flat))
    lengths = np.array([len(g) for g in gens], dtype=np.int64)
    bounds = np.r_[0, np.cumsum(lengths)]
    gen_of = np.repeat(np.arange(len(gens)), lengths)
    blocks = _maximal_blocks(ref, cand, gen_of, k)
    spans: list[Span] = []
    if blocks.size == 0:
        return spans
    block_gen = gen_of[blocks[:, 1]]
    for g in np.unique(block_gen).tolist():
        sel = blocks[block_gen == g]
        g0, g1 = int(bounds[g]), int(bounds[g + 1])
        for i0, i1, j0, j1, matched, mism in _chain_spans(
            ref, cand, sel, g0, g1, int(min_tokens), int(max_mismatch), k
        ):
            spans.append(
                Span(
                    generation=g,
                    ref_start=i0,
                    ref_end=i1,
                    cand_start=j0 - g0,
                    cand_end=j1 - g0,
                    matched=matched,
                    mismatches=mism,
                    passages=matched // int(min_tokens),
                )
            )
    return spans


def _union_size(ranges: Iterable[tuple[int, int]]) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(ranges):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def count_passages(
    book: str,
    generations: Sequence[str],
    *,
    min_tokens: int = 40,
    max_mismatch: int = 5,
) -> PassageReport:
    """RECAP passage count for one book: normalize, :func:`find_spans`, sum ⌊matched/min_tokens⌋.

    ``book``: the reference text; ``generations``: the model outputs for this book. Raises TypeError for
    non-str input. An empty book or empty generations give 0 passages.
    """
    if not isinstance(book, str):
        raise TypeError(f"book must be str, got {type(book).__name__}")
    if generations is None or isinstance(generations, str):
        raise TypeError("generations must be a list of str")
    ref = normalize_tokens(book)
    gens = [normalize_tokens(g) for g in generations]
    spans = find_spans(ref, gens, min_tokens=min_tokens, max_mismatch=max_mismatch)
    per_gen = [0] * len(gens)
    for s in spans:
        per_gen[s.generation] += s.passages
    return PassageReport(
        spans=spans,
        n_passages=sum(per_gen),
        ref_tokens=len(ref),
        ref_tokens_covered=_union_size((s.ref_start, s.ref_end) for s in spans),
        min_tokens=int(min_tokens),
        max_mismatch=int(max_mismatch),
        per_generation=per_gen,
    )


def mismatch_sweep(
    book: str,
    generations: Sequence[str],
    *,
    mismatches: Iterable[int] = range(6),
    min_tokens: int = 40,
) -> dict[int, int]:
    """Passages per mismatch tolerance (seed 000 App. T, Fig. 18): {m: n_passages}."""
    return {
        int(m): count_passages(book, generations, min_tokens=min_tokens, max_mismatch=int(m)).n_passages
        for m in mismatches
    }


def count_passages_overlapping(
    book: str,
    generations: Sequence[str],
    *,
    min_tokens: int = 40,
    max_mismatch: int = 5,
) -> int:
    """The RECAP authors' passage count (their ``_get_contiguous_spans``), offered beside :func:`count_passages`.

    Per generation: difflib matching blocks of the normalized tokens (:func:`normalize_tokens`, autojunk off);
    from *every* block a span is grown over the following blocks while the accumulated gap cost
    Σ max(gap_ref, gap_cand) stays ≤ ``max_mismatch``; a span whose matched tokens (gaps excluded) reach
    ``min_tokens`` counts ⌊matched / min_tokens⌋ passages. Spans started from consecutive blocks overlap, so the
    same book text can be counted several times — the difference from :func:`count_passages`, which never
    counts a generation token twice.
    """
    import difflib

    if not isinstance(book, str):
        raise TypeError(f"book must be str, got {type(book).__name__}")
    if generations is None or isinstance(generations, str):
        raise TypeError("generations must be a list of str")
    _check_params(min_tokens, max_mismatch)
    ref = normalize_tokens(book)
    total = 0
    for g in generations:
        cand = normalize_tokens(g)
        raw = difflib.SequenceMatcher(None, ref, cand, autojunk=False).get_matching_blocks()[:-1]
        for i, (gi, ci, size) in enumerate(raw):
            end_g, end_c, mism, matched = gi + size, ci + size, 0, size
            for ng, nc, nsz in raw[i + 1:]:
                gap = max(ng - end_g, nc - end_c)
                if mism + gap > max_mismatch:
                    break
                mism += gap
                matched += nsz
                end_g, end_c = ng + nsz, nc + nsz
            if matched >= min_tokens:
                total += matched // int(min_tokens)
    return total
