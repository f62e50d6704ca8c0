"""SimpleTrace metrics (seed 002, App. H) at generation, document and corpus level, plus App. F extras.

All are computed from :class:`~memlab.methods.trace.simpletrace.GenerationTrace` records. Span lengths
are in tokens of the index's tokenizer; "words" are ``\\w+`` runs of the NFKC-casefolded text
(:func:`memlab.methods.trace.simpletrace.words`). A (generation, document) *pair* is one document
retrieved for one generation (at most ``doc_cap`` per kept span). Definitions, one per name:

Per pair (``nv_*``, see :class:`~memlab.methods.trace.simpletrace.NVStats`):
  nv_recall = nv_matched_words / nv_reference_words; nv_matched_words = words of the generation in
  in-order runs of >= 3 words identical to the aligned document window (near-verbatim); nv_reference_words = words in that window;
  nv_candidate_words = words in the generation; nv_missing_words = reference − matched;
  nv_additional_words = candidate − matched.

Corpus level (:func:`corpus_metrics`, over a batch of generations):
  total_generations            generations traced (empty ones included, with no spans)
  generations_with_spans       generations with ≥ 1 kept span
  total_spans                  kept spans (after the rarity filter), all generations
  min_span_length / max_span_length   shortest / longest kept span (0 if none)
  average_longest_span_length  ALS: mean over all generations of the longest kept span (0 if none)
  n_token_span_ratio           kept spans with length ≥ n_tokens / total_spans
  generations_with_n_token_span_ratio   generations with a kept span ≥ n_tokens / total_generations
  total_docs                   (generation, document) pairs
  unique_total_docs            distinct documents over all pairs
  full_exact_matches           pairs classified full_raw
  unique_full_matches          distinct documents in full_raw pairs
  unique_full_matches_ratio    unique_full_matches / unique_total_docs
  full_normalized_matches      pairs classified full_raw or full_normalized (inclusive)
  unique_full_normalized_matches / _ratio   distinct documents in those pairs / over unique_total_docs
  partial_matches              pairs classified partial; unique_partial_matches: their distinct documents
  generations_full_matches_ratio            FMR: generations with a full_raw pair / total_generations
  generations_full_normalized_matches_ratio generations with a full (normalized, inclusive) pair / total
  avg_nv_recall                NVR: mean over all generations of the best pair nv_recall (0 if no pair)
  max_nv_recall                max over generations of the best pair nv_recall
  total_nv_matched_words       Σ over generations of nv_matched_words of the best pair
  generations_with_nv_recall   generations with best nv_recall > 0; ``_ratio``: / total_generations
  nv_recall_threshold          the threshold τ used below (a parameter, reported for provenance)
  generations_above_nv_recall_threshold   generations with best nv_recall ≥ τ; ``_ratio``: / total
  docs_with_nv_recall          distinct documents with nv_recall > 0 in some pair
  docs_above_nv_recall_threshold   distinct documents with nv_recall ≥ τ in some pair
  spans_length_counts_distribution  {length: number of kept spans}
  spans_length_distribution    {length: share of kept spans} (sums to 1)

App. F extras:
  k_eidetic_generations(_ratio)   generations with a kept span of ≥ n_tokens tokens found in at most k
                                  distinct corpus documents (exhaustive scans only) (Carlini et al.)
  near_duplicate_count            pairs with nv_recall ≥ near_dup_threshold (the generation is a
                                  near-duplicate of that document window)
  rouge_l_recall / rouge_l_f1     mean over generations with a pair of ROUGE-L (word tokens, not stemmed;
                                  memlab.metrics.rouge) of the best pair's reference window vs generation
  token_accuracy                  (:func:`token_accuracy`) share of positions where the generated token
                                  equals the true continuation's token, for prefix prompts
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from memlab.methods.trace.simpletrace import GenerationTrace

SECTION_H = (
    "nv_recall", "nv_matched_words", "nv_reference_words", "min_span_length", "max_span_length",
    "nv_candidate_words", "nv_missing_words", "nv_additional_words", "total_generations",
    "generations_with_spans", "n_token_span_ratio", "generations_with_n_token_span_ratio",
    "generations_full_matches_ratio", "generations_full_normalized_matches_ratio", "total_spans", "total_docs",
    "average_longest_span_length", "unique_total_docs", "generations_above_nv_recall_threshold",
    "generations_above_nv_recall_threshold_ratio", "docs_above_nv_recall_threshold",
    "spans_length_counts_distribution", "spans_length_distribution", "full_exact_matches",
    "unique_full_matches", "unique_full_matches_ratio", "full_normalized_matches",
    "unique_full_normalized_matches", "unique_full_normalized_matches_ratio", "partial_matches",
    "unique_partial_matches", "avg_nv_recall", "max_nv_recall", "docs_with_nv_recall",
    "total_nv_matched_words", "generations_with_nv_recall", "generations_with_nv_recall_ratio",
    "nv_recall_threshold",
)


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def generation_metrics(tr: GenerationTrace, *, n_tokens: int, nv_recall_threshold: float,
                       k: int = 1, near_dup_threshold: float = 0.9) -> dict:
    """One row per generation: its spans, matches and the nv_* fields of its best pair."""
    best = tr.best_doc
    nv = best.nv if best else None
    lengths = [s.length for s in tr.spans]
    return {
        "n_tokens": tr.n_tokens,
        "n_candidate_spans": tr.n_candidate_spans,
        "total_spans": len(tr.spans),
        "min_span_length": min(lengths, default=0),
        "max_span_length": max(lengths, default=0),
        "longest_span_length": tr.longest_span,
        "memorized_tokens": tr.memorized_tokens,
        "has_n_token_span": any(x >= n_tokens for x in lengths),
        "total_docs": len(tr.docs),
        "full_match": tr.full_match,
        "full_normalized_match": tr.full_normalized_match,
        "best_doc_id": best.doc_id if best else None,
        "nv_recall": nv.recall if nv else 0.0,
        "nv_matched_words": nv.matched if nv else 0,
        "nv_reference_words": nv.reference if nv else 0,
        "nv_candidate_words": nv.candidate if nv else 0,
        "nv_missing_words": nv.missing if nv else 0,
        "nv_additional_words": nv.additional if nv else 0,
        "above_nv_recall_threshold": bool(nv and nv.recall >= nv_recall_threshold),
        "k_eidetic": any(s.length >= n_tokens and s.exhaustive and s.n_docs <= k for s in tr.spans),
        "near_duplicates": sum(d.nv.recall >= near_dup_threshold for d in tr.docs),
        **tr.meta,
    }


def document_metrics(traces: Sequence[GenerationTrace], *, nv_recall_threshold: float) -> list[dict]:
    """One row per retrieved document: how many generations hit it, how, and its best nv_recall."""
    rows: dict[int, dict] = {}
    for g, tr in enumerate(traces):
        for d in tr.docs:
            r = rows.setdefault(d.doc_ix, {"doc_id": d.doc_id, "generations": 0, "full_exact_matches": 0,
                                           "full_normalized_matches": 0, "partial_matches": 0,
                                           "max_nv_recall": 0.0, "total_nv_matched_words": 0})
            r["generations"] += 1
            r["full_exact_matches"] += d.kind == "full_raw"
            r["full_normalized_matches"] += d.kind in ("full_raw", "full_normalized")
            r["partial_matches"] += d.kind == "partial"
            r["max_nv_recall"] = max(r["max_nv_recall"], d.nv.recall)
            r["total_nv_matched_words"] += d.nv.matched
    for r in rows.values():
        r["above_nv_recall_threshold"] = r["max_nv_recall"] >= nv_recall_threshold
    return [rows[k] for k in sorted(rows)]


def corpus_metrics(traces: Sequence[GenerationTrace], *, n_tokens: int, nv_recall_threshold: float,
                   k: int = 1, near_dup_threshold: float = 0.9, with_rouge: bool = True) -> dict:
    """Every App. H metric over a batch (see the module docstring), plus the App. F extras."""
    n = len(traces)
    lengths = [s.length for tr in traces for s in tr.spans]
    pairs = [(tr, d) for tr in traces for d in tr.docs]
    best_docs = [tr.best_doc for tr in traces]
    counts = Counter(lengths)
    out = {
        **_span_metrics(traces, lengths, n_tokens),
        **_doc_match_metrics(traces, pairs),
        **_nv_recall_metrics(traces, best_docs, pairs, nv_recall_threshold),
        "spans_length_counts_distribution": {int(k_): int(v) for k_, v in sorted(counts.items())},
        "spans_length_distribution": {int(k_): v / len(lengths) for k_, v in sorted(counts.items())},
        # App. F extras
        "k": k,
        "k_eidetic_generations": sum(any(s.length >= n_tokens and s.exhaustive and s.n_docs <= k
                                         for s in tr.spans) for tr in traces),
        "near_dup_threshold": near_dup_threshold,
        "near_duplicate_count": sum(d.nv.recall >= near_dup_threshold for _, d in pairs),
    }
    out["k_eidetic_generations_ratio"] = _ratio(out["k_eidetic_generations"], n)
    out.update(_best_pair_nv_means(best_docs))
    if with_rouge:
        out.update(_best_pair_rouge(traces, best_docs))
    return out


def _span_metrics(traces: Sequence[GenerationTrace], lengths: list[int], n_tokens: int) -> dict:
    """Span counts and lengths over the batch (``lengths``: every span's length, in order)."""
    n = len(traces)
    return {
        "total_generations": n,
        "generations_with_spans": sum(bool(tr.spans) for tr in traces),
        "total_spans": len(lengths),
        "min_span_length": min(lengths, default=0),
        "max_span_length": max(lengths, default=0),
        "average_longest_span_length": _ratio(sum(tr.longest_span for tr in traces), n),
        "n_token_span_ratio": _ratio(sum(x >= n_tokens for x in lengths), len(lengths)),
        "generations_with_n_token_span_ratio": _ratio(
            sum(any(s.length >= n_tokens for s in tr.spans) for tr in traces), n),
    }


def _doc_match_metrics(traces: Sequence[GenerationTrace], pairs: list) -> dict:
    """Matched documents (``pairs``: every (generation, matched document)) by kind: full raw, full normalized,
    partial; totals and unique documents."""
    n = len(traces)
    full = {d.doc_ix for _, d in pairs if d.kind == "full_raw"}
    fulln = {d.doc_ix for _, d in pairs if d.kind in ("full_raw", "full_normalized")}
    part = {d.doc_ix for _, d in pairs if d.kind == "partial"}
    uniq = {d.doc_ix for _, d in pairs}
    return {
        "total_docs": len(pairs),
        "unique_total_docs": len(uniq),
        "full_exact_matches": sum(d.kind == "full_raw" for _, d in pairs),
        "unique_full_matches": len(full),
        "unique_full_matches_ratio": _ratio(len(full), len(uniq)),
        "full_normalized_matches": sum(d.kind in ("full_raw", "full_normalized") for _, d in pairs),
        "unique_full_normalized_matches": len(fulln),
        "unique_full_normalized_matches_ratio": _ratio(len(fulln), len(uniq)),
        "partial_matches": sum(d.kind == "partial" for _, d in pairs),
        "unique_partial_matches": len(part),
        "generations_full_matches_ratio": _ratio(sum(tr.full_match for tr in traces), n),
        "generations_full_normalized_matches_ratio": _ratio(sum(tr.full_normalized_match for tr in traces), n),
    }


def _nv_recall_metrics(traces: Sequence[GenerationTrace], best_docs: list, pairs: list,
                       nv_recall_threshold: float) -> dict:
    """Near-verbatim recall: of each generation's best pair (``best_docs``: None without one), and of the
    matched documents (``pairs``)."""
    n = len(traces)
    best = [tr.nv_recall for tr in traces]
    return {
        "avg_nv_recall": _ratio(sum(best), n),
        "max_nv_recall": max(best, default=0.0),
        "total_nv_matched_words": sum(b.nv.matched for b in best_docs if b is not None),
        "generations_with_nv_recall": sum(x > 0 for x in best),
        "generations_with_nv_recall_ratio": _ratio(sum(x > 0 for x in best), n),
        "nv_recall_threshold": nv_recall_threshold,
        "generations_above_nv_recall_threshold": sum(x >= nv_recall_threshold for x in best),
        "generations_above_nv_recall_threshold_ratio": _ratio(sum(x >= nv_recall_threshold for x in best), n),
        "docs_with_nv_recall": len({d.doc_ix for _, d in pairs if d.nv.recall > 0}),
        "docs_above_nv_recall_threshold": len({d.doc_ix for _, d in pairs if d.nv.recall >= nv_recall_threshold}),
    }


def _best_pair_nv_means(best_docs: list) -> dict:
    """nv_* of the best pair, averaged over generations with a pair (pair-level names, batch means)."""
    have = [b for b in best_docs if b is not None]
    out = {}
    for name, get in (("nv_matched_words", lambda b: b.nv.matched), ("nv_reference_words", lambda b: b.nv.reference),
                      ("nv_candidate_words", lambda b: b.nv.candidate), ("nv_missing_words", lambda b: b.nv.missing),
                      ("nv_additional_words", lambda b: b.nv.additional), ("nv_recall", lambda b: b.nv.recall)):
        out[name] = _ratio(sum(get(b) for b in have), len(have))
    return out


def _best_pair_rouge(traces: Sequence[GenerationTrace], best_docs: list) -> dict:
    """ROUGE-L of each generation against its best pair's reference text, averaged over generations with one."""
    from memlab.metrics.rouge import rouge_l

    scores = [rouge_l(b.reference_text, tr.text) for tr, b in zip(traces, best_docs) if b is not None]
    return {"rouge_l_recall": _ratio(sum(s.recall for s in scores), len(scores)),
            "rouge_l_f1": _ratio(sum(s.f1 for s in scores), len(scores))}


def token_accuracy(reference_ids: Sequence[int], generated_ids: Sequence[int]) -> float:
    """Share of the reference continuation's positions where the generated token is identical
    (position-wise; a shorter generation counts its missing positions as wrong). 0 for an empty reference."""
    if not reference_ids:
        return 0.0
    hits = sum(1 for a, b in zip(reference_ids, generated_ids) if int(a) == int(b))
    return hits / len(reference_ids)


def span_lengths(traces: Sequence[GenerationTrace]) -> list[int]:
    """All kept span lengths (for the span-length histograms, Figs. 5/8/10)."""
    return [s.length for tr in traces for s in tr.spans]
