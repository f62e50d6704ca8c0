"""SimpleTrace (seed 002, §2): attribute generations to a training corpus, deterministically.

Steps, for one generation of ``L`` tokens (token ids of the index's tokenizer):

1. **Maximal span extraction.** For every start ``i``, the longest prefix of ``g[i:]`` that occurs verbatim
   in the corpus (matching statistics, :meth:`TokenIndex.longest_matches`, which uses the bound
   ``len(i+1) >= len(i) - 1``), backed off so the span **respects word boundaries**: it must start and end
   where the generation text has a word boundary (the characters on the two sides of the cut are not both
   alphanumeric, or the cut is at the text's start/end). Only *maximal* spans are kept (not contained in a
   span starting earlier), and spans shorter than ``min_span_tokens`` are dropped.
2. **Unigram rarity filter.** Span rarity = Σ_t log(c(t)/N) over the span's tokens, with ``c`` the corpus
   unigram counts precomputed at index time and ``N`` the corpus token count (a matched token always has
   c(t) > 0). The ``K = ⌈k_frac · L⌉`` rarest spans (lowest sum; ties → earlier start) are kept,
   ``k_frac = 0.05`` as in the paper.
3. **Document retrieval.** Each kept span is looked up; up to ``doc_cap`` (default 10) documents per span
   are retrieved (distinct documents, lowest index first, among the first ``max_scan`` occurrences). Each
   (generation, document) pair is classified — see :func:`classify_match`:
   ``full_raw`` (one text contains the other verbatim), ``full_normalized`` (the same after
   :func:`normalize_text`), else ``partial`` (they share a kept span only).
4. **Merging.** Kept spans are greedily merged (sorted by start; a span overlapping or touching the
   current segment extends it) into non-redundant segments; ``memorized_tokens`` = their total length.

Near-verbatim statistics per (generation, document) pair (:func:`nv_stats`) align the document to the
generation at the pair's longest kept span and count near-verbatim word runs, see :class:`NVStats`.
"""

from __future__ import annotations

import difflib
import math
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from memlab.errors import MemlabError
from memlab.methods.trace.index import TokenIndex

_WORD = re.compile(r"\w+")
NV_MIN_BLOCK = 3  # words: the shortest run that counts as near-verbatim (see NVStats)


# --------------------------------------------------------------------------------------------- records

@dataclass
class Span:
    """A kept verbatim span ``generation_tokens[start:end]``."""

    start: int
    end: int
    text: str
    rarity: float          # Σ log unigram probability (lower = rarer)
    count: int = 0         # occurrences in the corpus
    n_docs: int = 0        # distinct documents among the scanned occurrences (k-eidetic uses this)
    exhaustive: bool = True  # False when count > max_scan (n_docs is then a lower bound)
    doc_ixs: list[int] = field(default_factory=list)

    @property
    def length(self) -> int:
        return self.end - self.start


@dataclass
class NVStats:
    """Near-verbatim comparison of a generation (candidate) with the aligned document window (reference).

    Words = ``\\w+`` runs of the NFKC-casefolded text. The reference is the document's word window that
    lines up with the generation when the pair's longest span is aligned: ``min(|generation|, |document|)``
    words, shifted inside the document when the alignment runs over one of its ends (so a generation
    that reproduces a whole short document has recall 1, and a one-word coincidence near a document's
    edge does not). ``matched`` = words in the in-order matching blocks (``difflib.SequenceMatcher``,
    no autojunk) of at least ``NV_MIN_BLOCK`` = 3 consecutive identical words — near-verbatim: it
    tolerates edits between blocks but not isolated function words matching by chance.
    ``recall = matched / reference`` (nv_recall), ``missing = reference − matched``,
    ``additional = candidate − matched``.
    """

    matched: int
    reference: int
    candidate: int

    @property
    def recall(self) -> float:
        return self.matched / self.reference if self.reference else 0.0

    @property
    def missing(self) -> int:
        return self.reference - self.matched

    @property
    def additional(self) -> int:
        return self.candidate - self.matched


@dataclass
class DocMatch:
    doc_ix: int
    doc_id: str
    kind: str              # "full_raw" | "full_normalized" | "partial"
    n_spans: int           # kept spans of the generation that retrieved this document
    nv: NVStats
    reference_text: str = ""  # the aligned document window (for ROUGE-L)


@dataclass
class GenerationTrace:
    """Everything SimpleTrace found for one generation."""

    text: str
    n_tokens: int
    n_candidate_spans: int            # maximal spans before the rarity filter
    spans: list[Span]                 # kept spans (after the rarity filter), by start
    segments: list[tuple[int, int]]   # merged spans, token ranges
    docs: list[DocMatch]
    meta: dict = field(default_factory=dict)

    @property
    def longest_span(self) -> int:
        return max((s.length for s in self.spans), default=0)

    @property
    def memorized_tokens(self) -> int:
        return sum(e - s for s, e in self.segments)

    @property
    def full_match(self) -> bool:
        return any(d.kind == "full_raw" for d in self.docs)

    @property
    def full_normalized_match(self) -> bool:
        """Inclusive: a raw full match is also a normalized one."""
        return any(d.kind in ("full_raw", "full_normalized") for d in self.docs)

    @property
    def nv_recall(self) -> float:
        """Best nv_recall over the retrieved documents (0 when none)."""
        return max((d.nv.recall for d in self.docs), default=0.0)

    @property
    def best_doc(self) -> DocMatch | None:
        return max(self.docs, key=lambda d: (d.nv.recall, -d.doc_ix), default=None)


# ------------------------------------------------------------------------------------------- helpers

def normalize_text(text: str) -> str:
    """NFKC, casefold, every run of non-alphanumeric characters → one space, stripped."""
    t = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_WORD.findall(t.replace("_", " ")))


def words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def classify_match(generation: str, document: str, normalized_document: str | None = None, *,
                   min_words: int) -> str:
    """``full_raw`` if one stripped text contains the other verbatim (the generation is entirely
    training text, or it reproduces a whole document); ``full_normalized`` if that holds after
    :func:`normalize_text`; else ``partial``. A generation of fewer than ``min_words`` words counts as a full match
    only when it contains the whole document (a one-word answer found in a document is not a full match).
    ``normalized_document`` may pass a cached ``normalize_text(document)``."""
    g, d = generation.strip(), document.strip()
    long_enough = len(words(g)) >= min_words
    if g and d and ((g in d and long_enough) or d in g):
        return "full_raw"
    gn = normalize_text(g)
    dn = normalized_document if normalized_document is not None else normalize_text(d)
    if gn and dn and ((gn in dn and long_enough) or dn in gn):
        return "full_normalized"
    return "partial"


def nv_stats(generation: str, document: str, gen_char: int, doc_char: int) -> tuple[NVStats, str]:
    """Near-verbatim statistics with the generation's char ``gen_char`` aligned to the document's
    ``doc_char`` (see :class:`NVStats`). Returns the stats and the reference window as text."""
    cand = words(generation)
    # only a window of the document can line up (the generation's length on each side, in characters);
    # cutting it keeps long documents cheap and gives the same window as the whole document
    pad = len(generation) + 1
    a = max(0, doc_char - gen_char - pad)
    document, doc_char = document[a:doc_char + (len(generation) - gen_char) + pad], doc_char - a
    doc_words = words(document)
    gw = len(words(generation[:gen_char]))
    dw = len(words(document[:doc_char]))
    # window of min(|cand|, |doc|) words starting where the generation's first word lines up, shifted
    # inside the document when the alignment runs over one of its ends
    width = min(len(cand), len(doc_words))
    start = min(max(dw - gw, 0), len(doc_words) - width)
    ref = doc_words[start:start + width]
    matched = 0
    if ref and cand:
        sm = difflib.SequenceMatcher(None, ref, cand, autojunk=False)
        matched = sum(b.size for b in sm.get_matching_blocks() if b.size >= NV_MIN_BLOCK)
    return NVStats(matched=matched, reference=len(ref), candidate=len(cand)), " ".join(ref)


def merge_spans(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Greedy merge of token ranges: sort by start, extend the current segment while ranges overlap or
    touch, else open a new one."""
    out: list[list[int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(a, b) for a, b in out]


def word_boundaries(text: str, offsets: Sequence[tuple[int, int]]) -> np.ndarray:
    """``ok[j]`` (j = 0..L) is True when a cut before token j is a word boundary in ``text``."""
    L = len(offsets)
    ok = np.ones(L + 1, dtype=bool)
    for j in range(1, L):
        c = offsets[j][0]
        if 0 < c < len(text) and text[c - 1].isalnum() and text[c].isalnum():
            ok[j] = False
        elif offsets[j][0] == offsets[j - 1][0]:  # two tokens inside one character (byte-level split)
            ok[j] = False
    return ok


# --------------------------------------------------------------------------------------------- tracer

class Tracer:
    """SimpleTrace over one :class:`TokenIndex` with the tokenizer the index was built with. The settings of
    ``conf/method/trace.yaml`` have no default here: build it with :meth:`TraceConfig.tracer
    <memlab.methods.trace.config.TraceConfig.tracer>`."""

    def __init__(self, index: TokenIndex, tokenizer, *, k_frac: float, doc_cap: int, min_span_tokens: int,
                 min_full_match_words: int, max_scan: int = 1000, word_boundaries: bool = True,
                 on_empty: str = "error"):
        index.check_tokenizer(tokenizer)
        if not getattr(tokenizer, "is_fast", False):
            raise MemlabError("SimpleTrace needs a fast (Rust) tokenizer for character offsets; "
                              "load it with AutoTokenizer.from_pretrained(..., use_fast=True)")
        if on_empty not in ("error", "zero"):
            raise MemlabError(f"on_empty must be 'error' or 'zero', got {on_empty!r}")
        if not 0 < k_frac <= 1 or doc_cap < 1 or min_span_tokens < 1:
            raise MemlabError("need 0 < k_frac <= 1, doc_cap >= 1 and min_span_tokens >= 1")
        self.index, self.tok = index, tokenizer
        self.k_frac, self.doc_cap, self.max_scan = k_frac, doc_cap, max_scan
        self.min_span_tokens, self.word_boundaries, self.on_empty = min_span_tokens, word_boundaries, on_empty
        self.min_full_match_words = min_full_match_words
        self._docs: dict[int, tuple[str, str]] = {}
        total = max(int(index.unigram.sum()), 1)
        with np.errstate(divide="ignore"):
            self._logp = np.where(index.unigram > 0, np.log(np.maximum(index.unigram, 1) / total), -10000.0)

    def _doc(self, doc_ix: int) -> tuple[str, str]:
        """(raw text, normalized text) of a document, memoized (recent documents recur across spans)."""
        hit = self._docs.get(doc_ix)
        if hit is None:
            text = self.index.doc_text(doc_ix)
            hit = (text, normalize_text(text))
            if len(self._docs) >= 512:
                self._docs.pop(next(iter(self._docs)))
            self._docs[doc_ix] = hit
        return hit

    # -- step 1
    def candidate_spans(self, ids: np.ndarray, text: str, offsets) -> list[tuple[int, int]]:
        """Maximal, word-boundary-respecting verbatim spans (token ranges), by start."""
        L = len(ids)
        ms = self.index.longest_matches(ids)
        ok = word_boundaries(text, offsets) if self.word_boundaries else np.ones(L + 1, dtype=bool)
        # prev_ok[e] = largest e' <= e with ok[e']
        idx = np.where(ok, np.arange(L + 1), -1)
        prev_ok = np.maximum.accumulate(idx)
        spans, reach = [], 0
        for i in range(L):
            if ms[i] == 0 or not ok[i]:
                continue
            e = int(prev_ok[i + ms[i]])
            if e - i < self.min_span_tokens or e <= reach:
                continue
            spans.append((i, e))
            reach = e
        return spans

    # -- steps 1–4 for one text
    def trace_one(self, text: str, meta: dict | None = None) -> GenerationTrace:
        if not isinstance(text, str):
            raise MemlabError(f"a generation must be text, got {type(text).__name__}")
        enc = self.tok(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        ids = np.asarray(enc["input_ids"], dtype=np.int64)
        if not text.strip() or len(ids) == 0:
            if self.on_empty == "error":
                raise MemlabError("empty generation: nothing to trace (pass on_empty='zero' to score it as 0)")
            return GenerationTrace(text=text, n_tokens=0, n_candidate_spans=0, spans=[], segments=[], docs=[],
                                   meta=dict(meta or {}))
        offsets = enc["offset_mapping"]
        L = len(ids)
        cands = self.candidate_spans(ids, text, offsets)
        # step 2: rarity filter
        K = math.ceil(self.k_frac * L)
        scored = [(float(self._logp[ids[s:e]].sum()), s, e) for s, e in cands]
        kept = sorted(sorted(scored)[:K], key=lambda x: x[1])
        spans: list[Span] = []
        for rarity, s, e in kept:
            occ = self.index.occurrences(ids[s:e], cap=self.doc_cap, max_scan=self.max_scan)
            spans.append(Span(start=s, end=e, text=text[offsets[s][0]:offsets[e - 1][1]], rarity=rarity,
                              count=occ.count, n_docs=occ.n_docs_scanned, exhaustive=occ.count <= self.max_scan,
                              doc_ixs=occ.doc_ixs))
        # step 3: documents
        by_doc: dict[int, list[Span]] = {}
        for sp in spans:
            for d in sp.doc_ixs:
                by_doc.setdefault(d, []).append(sp)
        docs = []
        for d, sps in sorted(by_doc.items()):
            doc_text, doc_norm = self._doc(d)
            anchor = max(sps, key=lambda sp: (sp.length, -sp.start))
            doc_char = doc_text.find(anchor.text)
            nv, ref = nv_stats(text, doc_text, offsets[anchor.start][0], max(doc_char, 0))
            docs.append(DocMatch(doc_ix=d, doc_id=self.index.doc_id(d), kind=classify_match(text, doc_text, doc_norm,
                                                                                      min_words=self.min_full_match_words),
                                 n_spans=len(sps), nv=nv, reference_text=ref))
        # step 4: merge
        segments = merge_spans([(sp.start, sp.end) for sp in spans])
        return GenerationTrace(text=text, n_tokens=L, n_candidate_spans=len(cands), spans=spans,
                               segments=segments, docs=docs, meta=dict(meta or {}))

    def trace(self, texts: Sequence[str], metas: Sequence[dict] | None = None, *,
              progress: bool = False) -> list[GenerationTrace]:
        from tqdm.auto import tqdm

        metas = metas or [{} for _ in texts]
        return [self.trace_one(t, m) for t, m in tqdm(list(zip(texts, metas)), desc="SimpleTrace",
                                                        disable=not progress)]
