"""SimpleTrace steps 1–4 and the App. H/F metrics on a generated corpus."""

from __future__ import annotations

import math
import random

import pytest

from memlab.errors import MemlabError
from memlab.methods.trace.metrics import SECTION_H, corpus_metrics, document_metrics, generation_metrics, token_accuracy
from dataclasses import replace

from memlab.methods.trace.simpletrace import classify_match, merge_spans, normalize_text, nv_stats
from memlab.schema import method_config

TRACE = method_config("trace")  # conf/method/trace.yaml: the settings the experiments trace with


@pytest.fixture(scope="module")
def tracer(sa_index, tokenizer):
    return TRACE.tracer(sa_index, tokenizer)


def _mixed_texts(corpus, n=10, seed=0):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        d = rng.choice(corpus).text.split()
        a = rng.randrange(max(1, len(d) - 20))
        out.append("Novel words here " + " ".join(d[a:a + 20]) + " and then zzqx wobble frump.")
    return out


def test_full_document_is_one_full_raw_span(tracer, corpus):
    tr = tracer.trace_one(corpus[4].text)
    assert len(tr.spans) == 1 and tr.spans[0].start == 0 and tr.spans[0].end == tr.n_tokens
    assert 4 in tr.spans[0].doc_ixs
    assert tr.full_match and tr.best_doc.doc_ix == 4 and tr.nv_recall == 1.0
    assert tr.segments == [(0, tr.n_tokens)] and tr.memorized_tokens == tr.n_tokens


def test_spans_respect_word_boundaries_and_are_maximal(tracer, corpus):
    for text in _mixed_texts(corpus):
        enc = tracer.tok(text, add_special_tokens=False, return_offsets_mapping=True)
        off = enc["offset_mapping"]
        cands = tracer.candidate_spans(__import__("numpy").asarray(enc["input_ids"]), text, off)
        for s, e in cands:
            a, b = off[s][0], off[e - 1][1]
            assert a == 0 or not (text[a - 1].isalnum() and text[a].isalnum())
            assert b == len(text) or not (text[b - 1].isalnum() and text[b].isalnum())
            assert tracer.index.count(enc["input_ids"][s:e]) > 0  # verbatim in the corpus
        ends = [e for _, e in cands]
        assert ends == sorted(ends) and len(set(ends)) == len(ends)  # none contained in an earlier one


def test_rarity_filter_keeps_k_rarest(tracer, corpus):
    text = _mixed_texts(corpus, n=1, seed=3)[0]
    tr = tracer.trace_one(text)
    K = math.ceil(0.05 * tr.n_tokens)
    assert len(tr.spans) == min(K, tr.n_candidate_spans)
    loose = replace(TRACE, k_frac=1.0).tracer(tracer.index, tracer.tok).trace_one(text)
    assert len(loose.spans) == loose.n_candidate_spans
    kept = sorted(s.rarity for s in tr.spans)
    assert kept == sorted(s.rarity for s in loose.spans)[:len(kept)]


def test_doc_cap_and_documents(tracer, corpus):
    capped = replace(TRACE, doc_cap=1, k_frac=1.0).tracer(tracer.index, tracer.tok)
    for tr in capped.trace(_mixed_texts(corpus, n=5)):
        assert all(len(s.doc_ixs) <= 1 for s in tr.spans)


def test_deterministic(tracer, corpus):
    texts = _mixed_texts(corpus, n=4)
    a = [generation_metrics(t, n_tokens=TRACE.n_tokens, nv_recall_threshold=TRACE.nv_recall_threshold)
         for t in tracer.trace(texts)]
    b = [generation_metrics(t, n_tokens=TRACE.n_tokens, nv_recall_threshold=TRACE.nv_recall_threshold)
         for t in tracer.trace(texts)]
    assert a == b


def test_empty_generation(tracer):
    with pytest.raises(MemlabError, match="empty generation"):
        tracer.trace_one("   ")
    z = TRACE.tracer(tracer.index, tracer.tok, on_empty="zero").trace_one("")
    assert z.n_tokens == 0 and z.spans == [] and z.longest_span == 0


def test_merge_and_classify():
    assert merge_spans([(5, 9), (0, 3), (2, 4), (9, 10), (12, 13)]) == [(0, 4), (5, 10), (12, 13)]
    assert classify_match("brown fox", "The quick brown fox.", min_words=1) == "full_raw"
    assert classify_match("The Quick,  brown FOX", "the quick brown fox jumps", min_words=1) == "full_normalized"
    assert classify_match("quick red fox", "the quick brown fox", min_words=1) == "partial"
    assert normalize_text("Ärger,  über—Alles!") == "ärger über alles"


def test_nv_stats_alignment():
    doc = "one two three four five six seven eight nine ten"
    nv, ref = nv_stats("four five six XX eight nine", doc, gen_char=0, doc_char=doc.index("four"))
    assert (nv.reference, nv.candidate, nv.matched) == (6, 6, 3)  # "four five six" counts, "eight nine" (2) does not
    assert ref == "four five six seven eight nine"
    whole, _ = nv_stats("intro one two three four five six seven eight nine ten outro", doc, 6, 0)
    assert whole.reference == 10 and whole.recall == 1.0


def test_corpus_metrics_by_hand(tracer, corpus):
    texts = [corpus[1].text, "zzqx wobble frump qqq", _mixed_texts(corpus, 1, seed=5)[0]]
    trs = tracer.trace(texts)
    m = corpus_metrics(trs, n_tokens=8, nv_recall_threshold=0.5)
    assert set(SECTION_H) <= set(m)
    assert m["total_generations"] == 3
    assert m["average_longest_span_length"] == pytest.approx(sum(t.longest_span for t in trs) / 3)
    assert m["generations_full_matches_ratio"] == pytest.approx(sum(t.full_match for t in trs) / 3)
    assert m["avg_nv_recall"] == pytest.approx(sum(t.nv_recall for t in trs) / 3)
    assert m["total_spans"] == sum(len(t.spans) for t in trs) == sum(m["spans_length_counts_distribution"].values())
    assert sum(m["spans_length_distribution"].values()) == pytest.approx(1.0)
    assert m["full_exact_matches"] + m["partial_matches"] + (m["full_normalized_matches"] - m["full_exact_matches"]) \
        == m["total_docs"]
    assert m["unique_full_matches"] <= m["unique_full_normalized_matches"] <= m["unique_total_docs"]
    assert 0.0 <= m["rouge_l_recall"] <= 1.0 and m["k_eidetic_generations"] >= 1
    rows = document_metrics(trs, nv_recall_threshold=0.5)
    assert sum(r["generations"] for r in rows) == m["total_docs"]
    assert m["generations_above_nv_recall_threshold"] == sum(t.nv_recall >= 0.5 for t in trs)


def test_token_accuracy():
    assert token_accuracy([1, 2, 3, 4], [1, 9, 3]) == 0.5
    assert token_accuracy([], [1]) == 0.0


def test_a_short_generation_is_not_a_full_match_unless_it_holds_the_document():
    assert classify_match("brown fox", "The quick brown fox.", min_words=8) == "partial"
    assert classify_match("The quick brown fox.", "brown fox", min_words=8) == "full_raw"  # holds the whole document
    assert classify_match("the quick brown fox jumps over the lazy dog", "So the quick brown fox jumps over the lazy dog "
                          "twice.", min_words=8) == "full_raw"
