"""Tracer validation (seed 002, Table 5 analog): documents of the index queried whole and in three windows must
come back — retrieved among the documents, or matched by a span covering the whole query."""

from __future__ import annotations

import random

import numpy as np

from memlab.methods.trace.simpletrace import Tracer

QUERY_TYPES = ("full", "partial_start", "partial_middle", "partial_end")


# ------------------------------------------------------------------------------------------ validation

def _word_start(text: str, offsets, j: int) -> bool:
    c = offsets[j][0]
    return j == 0 or c == 0 or text[c - 1].isspace() or text[c].isspace()


def query_windows(text: str, tok, partial_tokens: int) -> list[tuple[str, str]]:
    """(query type, text): the full text, and three ``partial_tokens``-token windows (start, middle, end) snapped to
    word starts/ends and cut from the raw text (the leading space kept, so the window tokenizes as it does inside
    the document)."""
    out = [("full", text)]
    off = tok(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)["offset_mapping"]
    n = len(off)
    w = min(partial_tokens, n)
    for qt, a0 in (("partial_start", 0), ("partial_middle", (n - w) // 2), ("partial_end", n - w)):
        a = a0
        while a < n - 1 and not _word_start(text, off, a):
            a += 1
        e = min(a + w, n)  # exclusive token end; snap back to a word end
        while e > a + 1 and e < n and not _word_start(text, off, e):
            e -= 1
        c0 = off[a - 1][1] if a > 0 else 0
        out.append((qt, text[c0:off[e - 1][1]]))
    return out


def validation_queries(tracer: Tracer, n_docs: int, partial_tokens: int, seed: int) -> list[dict]:
    """For ``n_docs`` documents drawn from the index: :func:`query_windows` of each."""
    index = tracer.index
    rng = random.Random(f"{seed}:validation")
    picks = sorted(rng.sample(range(index.n_docs), min(n_docs, index.n_docs)))
    return [{"doc_ix": d, "query_type": qt, "text": t} for d in picks
            for qt, t in query_windows(index.doc_text(d), tracer.tok, partial_tokens)]


def negative_control(tracer: Tracer, docs, partial_tokens: int) -> tuple[list[dict], list[dict]]:
    """Queries from documents that are NOT in the index: per query, whether a kept span covers the whole query
    (a false exact match) and how many documents came back; per query type, the false exact-match rate (should be
    ≈ 0; near-duplicate documents in the corpus are the legitimate exception)."""
    queries = [{"doc_id": d.id, "query_type": qt, "text": t} for d in docs
               for qt, t in query_windows(d.text, tracer.tok, partial_tokens)]
    traces = tracer.trace([q["text"] for q in queries])
    rows = [{"doc_id": q["doc_id"], "query_type": q["query_type"], "query_tokens": tr.n_tokens,
             "false_exact_match": any(sp.start == 0 and sp.end == tr.n_tokens for sp in tr.spans),
             "docs_returned": len(tr.docs), "longest_span": tr.longest_span} for q, tr in zip(queries, traces)]
    summary = [{"query_type": qt, "queries": len(sel), "false_exact_match_rate": float(np.mean(
        [r["false_exact_match"] for r in sel])), "mean_longest_span": float(np.mean([r["longest_span"] for r in sel]))}
        for qt in QUERY_TYPES if (sel := [r for r in rows if r["query_type"] == qt])]
    return rows, summary


def validate(tracer: Tracer, n_docs: int, partial_tokens: int, seed: int,
             progress: bool = False) -> tuple[list[dict], list[dict]]:
    """Per-query rows and per-query-type summary rows.

    retrieved: the source document is among the retrieved documents; exact_match: a kept span covers the
    whole query (start 0, end = its token count); passed: either (the paper's pass criterion)."""
    queries = validation_queries(tracer, n_docs, partial_tokens, seed)
    traces = tracer.trace([q["text"] for q in queries], progress=progress)
    rows = []
    for q, tr in zip(queries, traces):
        retrieved = any(m.doc_ix == q["doc_ix"] for m in tr.docs)
        exact = any(s.start == 0 and s.end == tr.n_tokens for s in tr.spans)
        rows.append({"doc_id": tracer.index.doc_id(q["doc_ix"]), "query_type": q["query_type"],
                     "query_tokens": tr.n_tokens, "retrieved": retrieved, "exact_match": exact,
                     "passed": retrieved or exact, "docs_returned": len(tr.docs),
                     "span_count": tr.spans[0].count if tr.spans else 0})
    summary = []
    for qt in QUERY_TYPES:
        sel = [r for r in rows if r["query_type"] == qt]
        if sel:
            summary.append({"query_type": qt, "queries": len(sel),
                            "retrieval_rate": float(np.mean([r["retrieved"] for r in sel])),
                            "exact_match_rate": float(np.mean([r["exact_match"] for r in sel])),
                            "pass_rate": float(np.mean([r["passed"] for r in sel]))})
    return rows, summary
