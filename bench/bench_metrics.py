"""Benchmarks for memlab.metrics (issue 3): ROUGE-L vs rouge-score, bootstrap, RECAP passage matching.

``run(quick=False) -> dict`` returns flat JSON-able numbers:
  * ROUGE-L on 10,000 (reference, candidate) pairs of 40–500 KJV word tokens (quick: 30), stemmed and
    not: our time, rouge-score's time, the speed ratio and the max |difference| over P, R and F1
    (must be 0.0);
  * book-level bootstrap, 1,000 resamples over 35 books (+ paired variant, + a stratified ROC-AUC CI);
  * passage matching of a 100k-token book against a 100k-token generation set (quick: 10k/10k), m = 5,
    plus the full m = 0..5 sweep.
Text is read at run time from the Debian KJV (via memlab.data.corpora); nothing is committed.
"""

from __future__ import annotations

import random
import time

import numpy as np


def _kjv_words() -> tuple[list[str], list[str]]:
    """(Old Testament words, New Testament words) from the installed KJV."""
    from memlab.data.corpora import load_corpus

    books = load_corpus("kjv", unit="book")
    ot, nt = [], []
    for i, d in enumerate(books):
        (ot if i < 39 else nt).extend(d.text.split())
    return ot, nt


def _noisy(words: list[str], rng: random.Random, vocab: list[str], rate: float) -> list[str]:
    out = []
    for w in words:
        r = rng.random()
        if r < rate / 3:
            continue  # deletion
        if r < 2 * rate / 3:
            out.append(rng.choice(vocab))  # substitution
            continue
        out.append(w)
        if r < rate:
            out.append(rng.choice(vocab))  # insertion
    return out


def _rouge_pairs(words: list[str], n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        length = rng.randint(40, 500)
        a = rng.randrange(len(words) - length)
        ref = words[a : a + length]
        kind = rng.random()
        if kind < 0.6:  # a noisy reproduction (what extraction produces)
            cand = _noisy(ref, rng, words[:5000], rng.uniform(0.0, 0.5))
        else:  # an unrelated passage of another length
            m = rng.randint(40, 500)
            b = rng.randrange(len(words) - m)
            cand = words[b : b + m]
        pairs.append((" ".join(ref), " ".join(cand)))
    return pairs


def _bench_rouge(words: list[str], n_pairs: int) -> dict:
    from rouge_score import rouge_scorer

    from memlab.metrics.rouge import _stemmer, rouge_l

    _stemmer()  # equal footing: rouge-score builds its Porter stemmer before its timer starts too
    pairs = _rouge_pairs(words, n_pairs, seed=0)
    out: dict = {"rouge_pairs": len(pairs)}
    for stem in (False, True):
        tag = "stem" if stem else "nostem"
        t0 = time.perf_counter()
        ours = [rouge_l(r, c, stem=stem) for r, c in pairs]  # cold stem cache: ours runs first
        t_ours = time.perf_counter() - t0
        scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=stem)
        t0 = time.perf_counter()
        ref = [scorer.score(r, c)["rougeL"] for r, c in pairs]
        t_ref = time.perf_counter() - t0
        diff = max(
            max(abs(a.precision - b.precision), abs(a.recall - b.recall), abs(a.f1 - b.fmeasure))
            for a, b in zip(ours, ref)
        )
        out[f"rouge_{tag}_ours_s"] = round(t_ours, 4)
        out[f"rouge_{tag}_rouge_score_s"] = round(t_ref, 3)
        out[f"rouge_{tag}_speedup"] = round(t_ref / t_ours, 1)
        out[f"rouge_{tag}_max_abs_diff"] = float(diff)
        out[f"rouge_{tag}_pairs_per_s"] = round(len(pairs) / t_ours, 1)
    out["rouge_speedup_min"] = min(out["rouge_nostem_speedup"], out["rouge_stem_speedup"])
    out["rouge_max_abs_diff"] = max(out["rouge_nostem_max_abs_diff"], out["rouge_stem_max_abs_diff"])
    return out


def _bench_bootstrap() -> dict:
    from memlab.metrics.bootstrap import bootstrap_mean, paired_bootstrap
    from memlab.metrics.detection import roc_auc_ci

    rng = np.random.default_rng(0)
    books = rng.beta(2, 3, size=35)
    other = np.clip(books + rng.normal(0.03, 0.05, size=35), 0, 1)
    t0 = time.perf_counter()
    r = bootstrap_mean(books, n_resamples=1000, seed=0)
    t_boot = time.perf_counter() - t0
    t0 = time.perf_counter()
    p = paired_bootstrap(other, books, n_resamples=1000, seed=0)
    t_paired = time.perf_counter() - t0
    y = np.r_[np.ones(200, int), np.zeros(200, int)]
    s = np.r_[rng.normal(0.5, 1, 200), rng.normal(0, 1, 200)]
    t0 = time.perf_counter()
    auc = roc_auc_ci(y, s, n_resamples=1000, seed=0)
    t_auc = time.perf_counter() - t0
    return {
        "bootstrap_35books_1000_s": round(t_boot, 5),
        "bootstrap_mean": round(r.mean, 4),
        "bootstrap_sd": round(r.sd, 4),
        "paired_bootstrap_35books_1000_s": round(t_paired, 5),
        "paired_diff_mean": round(p.diff.mean, 4),
        "paired_p_le_zero": p.p_le_zero,
        "auc_ci_400scores_1000_s": round(t_auc, 4),
        "auc_estimate": round(auc.estimate, 4),
    }


def _bench_passages(ot: list[str], nt: list[str], n_book: int, n_gen: int) -> dict:
    from memlab.metrics.passages import count_passages, mismatch_sweep, normalize_tokens

    book_words = ot[:n_book]
    book = " ".join(book_words)
    rng = random.Random(1)
    gens, total = [], 0
    while total < n_gen:
        length = rng.randint(100, 800)
        if rng.random() < 0.5:  # a noisy copy of a book passage (memorized)
            a = rng.randrange(len(book_words) - length)
            g = _noisy(book_words[a : a + length], rng, book_words[:5000], rng.uniform(0.0, 0.1))
        else:  # text from elsewhere (the New Testament: not this book)
            a = rng.randrange(len(nt) - length)
            g = nt[a : a + length]
        gens.append(" ".join(g))
        total += len(g)
    n_book_tokens = len(normalize_tokens(book))
    n_gen_tokens = sum(len(normalize_tokens(g)) for g in gens)
    t0 = time.perf_counter()
    rep = count_passages(book, gens, max_mismatch=5)
    t_one = time.perf_counter() - t0
    t0 = time.perf_counter()
    sweep = mismatch_sweep(book, gens, mismatches=range(6))
    t_sweep = time.perf_counter() - t0
    out = {
        "passages_book_tokens": n_book_tokens,
        "passages_generation_tokens": n_gen_tokens,
        "passages_generations": len(gens),
        "passages_m5_s": round(t_one, 3),
        "passages_m5_count": rep.n_passages,
        "passages_m5_spans": len(rep.spans),
        "passages_m5_ref_tokens_covered": rep.ref_tokens_covered,
        "passages_sweep_m0_5_s": round(t_sweep, 3),
    }
    out.update({f"passages_m{m}_count_sweep": n for m, n in sweep.items()})
    return out


def run(quick: bool = False) -> dict:
    """Run all metric benchmarks; ``quick`` shrinks sizes (30 ROUGE pairs, 10k-token passage matching)."""
    import rapidfuzz

    ot, nt = _kjv_words()
    out: dict = {"quick": quick, "rapidfuzz": rapidfuzz.__version__}
    out.update(_bench_rouge(ot + nt, 30 if quick else 10_000))
    out.update(_bench_bootstrap())
    n = 10_000 if quick else 100_000
    out.update(_bench_passages(ot, nt, n, n))
    return out


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run(quick="--quick" in sys.argv), indent=1))
