"""Paper-shaped tables from RECAP event records (seed 000 Table 3, Figs. 6, 8, 13, 18, App. S, App. V).

All inputs are the records written by :mod:`memlab.methods.recap.pipeline` (numbers only where redacted);
every metric comes from :mod:`memlab.metrics`:

* book score = token-weighted ROUGE-L (``weighted_rouge_l``, seed 000 eq. 2) of the chosen variant
  (``method.recap.score_variant``: recall, stemmed word tokens) — Table 3 reports the book-level bootstrap
  (``bootstrap_mean``, ``method.bootstrap.n_resamples`` resamples of the books of a category) mean ± sd;
* passages = ``count_passages`` (40-token passages, mismatch tolerance m), summed over a book's events;
* cost: target prompts/tokens as measured by the backend; agent prompts counted, agent tokens estimated as
  characters / 4 (no agent tokenizer offline), dollars = tokens × configured price per 1M tokens.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from memlab.metrics.bootstrap import bootstrap_mean
from memlab.metrics.rouge import weighted_rouge_l
from memlab.methods.recap.pipeline import METHODS

METHOD_NAMES = {"prefix": "Prefix-Probing", "dsp": "DSP", "dsp_jb": "DSP + Jailbreak", "recap": "RECAP"}
CHARS_PER_TOKEN = 4.0


def events_frame(records: Iterable[dict]) -> pd.DataFrame:
    """One row per (target, book, event, method)."""
    rows = []
    for r in records:
        if r.get("status") != "ok":
            continue
        for m in METHODS:
            d = r["methods"][m]
            row = {"target": r["target"], "book": r["book_id"], "title": r["book_title"],
                   "category": r["category"], "split": r.get("split"), "event": r["event_id"], "method": m,
                   "recall": d["recall"], "f1": d["f1"], "blocked": d["blocked"], "gold_tokens": r["gold_tokens"],
                   "target_calls": d["target_calls"], "prompt_tokens": d["prompt_tokens"],
                   "completion_tokens": d["completion_tokens"], "agent_calls": d.get("agent_calls", 0),
                   "agent_prompt_chars": d.get("agent_prompt_chars", 0),
                   "price_in": r.get("price_in", 0.0), "price_out": r.get("price_out", 0.0)}
            for tol, n in d["passages"].items():
                row[f"passages_m{tol}"] = n
            rows.append(row)
    return pd.DataFrame(rows)


def book_scores(df: pd.DataFrame, variant: str) -> pd.DataFrame:
    """Per (target, category, book, method): token-weighted ROUGE-L (eq. 2) and passage counts."""
    out = []
    pcols = [c for c in df.columns if c.startswith("passages_m")]
    for key, g in df.groupby(["target", "category", "book", "split", "method"], dropna=False, sort=True):
        row = dict(zip(["target", "category", "book", "split", "method"], key))
        row["rouge_l"] = weighted_rouge_l(g[variant], g["gold_tokens"]) if g["gold_tokens"].sum() else 0.0
        row["events"] = len(g)
        for c in pcols:
            row[c] = int(g[c].sum())
        out.append(row)
    return pd.DataFrame(out)


def table3(books: pd.DataFrame, *, n_resamples: int, seed: int, targets: Sequence[str] | None, variant: str,
           stem: bool) -> pd.DataFrame:
    """Rows (category, method), columns = targets + Avg.: bootstrap mean ± sd over the books (Table 3)."""
    targets = list(targets or sorted(books["target"].unique()))
    metric = (f"book token-weighted ROUGE-L {variant} ({'stemmed ' if stem else ''}word tokens), "
              f"bootstrap mean ± sd over books ({n_resamples} resamples)")
    rows = []
    for cat in [c for c in ("public_domain", "copyrighted", "non_training", "papers") if c in set(books["category"])]:
        for m in METHODS:
            row = {"metric": metric, "category": cat, "method": METHOD_NAMES[m]}
            means = []
            for t in targets:
                x = books[(books.category == cat) & (books.method == m) & (books.target == t)]["rouge_l"]
                if len(x) == 0:
                    row[t] = "n/a"
                    continue
                b = bootstrap_mean(x.to_numpy(), n_resamples=n_resamples, seed=seed)
                row[t] = f"{b.mean:.3f} ± {b.sd:.3f}"
                means.append(b.mean)
            row["Avg."] = f"{np.mean(means):.3f}" if means else "n/a"
            rows.append(row)
    return pd.DataFrame(rows)


def passages_per_book(books: pd.DataFrame, tolerance: int) -> pd.DataFrame:
    """Fig. 13: passages (40 tokens, ≤ m mismatches) per book, target and method."""
    col = f"passages_m{tolerance}"
    return books.pivot_table(index=["category", "book", "target"], columns="method", values=col,
                             aggfunc="sum").reindex(columns=list(METHODS)).reset_index()


def tolerance_sweep(books: pd.DataFrame) -> pd.DataFrame:
    """Fig. 18: passages by mismatch tolerance m = 0..5, per target, category and method."""
    pcols = sorted([c for c in books.columns if c.startswith("passages_m")], key=lambda c: int(c[10:]))
    g = books.groupby(["target", "category", "method"])[pcols].sum().reset_index()
    long = g.melt(id_vars=["target", "category", "method"], var_name="tolerance", value_name="passages")
    long["tolerance"] = long["tolerance"].str[10:].astype(int)
    return long


def feedback_gains(records: Iterable[dict], *, variant: str, stop_score: float) -> pd.DataFrame:
    """Fig. 6: for events whose first valid attempt scored < stop_score, the best score after k rounds.

    Returns one row per (target, event, round k = 0..max) with ``best`` (best score after k rounds, carried
    forward when the loop stopped) and ``gain`` = best_k − best_0.
    """
    recs = [r for r in records if r.get("status") == "ok"]
    max_k = max([len(r["rounds"]) for r in recs] + [0])
    rows = []
    for r in recs:
        start = r["methods"]["dsp_jb"][variant]
        if start >= stop_score or r.get("filtered"):
            continue
        best = start
        for k in range(0, max_k + 1):
            if 1 <= k <= len(r["rounds"]) and r["rounds"][k - 1]["accepted"]:
                best = r["rounds"][k - 1][variant]
            rows.append({"target": r["target"], "category": r["category"], "event": r["event_id"], "round": k,
                         "best": best, "gain": best - start})
    return pd.DataFrame(rows)


def gains_summary(gains: pd.DataFrame) -> pd.DataFrame:
    """Per target and round: mean gain and share of events improved so far."""
    if gains.empty:
        return gains
    return (gains.groupby(["target", "round"])
            .agg(events=("event", "count"), mean_best=("best", "mean"), mean_gain=("gain", "mean"),
                 share_improved=("gain", lambda g: float((g > 0).mean())))
            .reset_index())


def filter_tradeoff(records: Iterable[dict], thresholds: Sequence[float], *, variant: str) -> pd.DataFrame:
    """Fig. 8 / App. U.2 analog (oracle, from unfiltered runs): refine only events whose signal ≥ threshold.

    Signals: hybrid memorization score, ROUGE-L recall and cosine of the first valid attempt. For each
    threshold: share of feedback-loop target queries saved, and mean event ROUGE-L with filtering vs without
    (filtered events keep their DSP + JB score).
    """
    recs = [r for r in records if r.get("status") == "ok" and r.get("memscore")]
    rows = []
    if not recs:
        return pd.DataFrame(rows)
    fb_calls = np.array([r["methods"]["recap"]["target_calls"] - r["methods"]["dsp_jb"]["target_calls"] for r in recs])
    full = np.array([r["methods"]["recap"][variant] for r in recs])
    base = np.array([r["methods"]["dsp_jb"][variant] for r in recs])
    for signal, key in (("hybrid", "score"), ("rouge_l", "rouge_l"), ("cosine", "cosine")):
        s = np.array([r["memscore"][key] for r in recs])
        for thr in thresholds:
            keep = s >= thr
            filt = np.where(keep, full, base)
            rows.append({"signal": signal, "threshold": float(thr),
                         "queries_saved": float(fb_calls[~keep].sum() / fb_calls.sum()) if fb_calls.sum() else 0.0,
                         "rouge_l_filtered": float(filt.mean()), "rouge_l_unfiltered": float(full.mean()),
                         "rouge_l_lost": float(full.mean() - filt.mean())})
    return pd.DataFrame(rows)


def contamination(records: Iterable[dict], *, overlap_threshold: float) -> pd.DataFrame:
    """App. S analog: are the hints (metadata, feedback) too detailed? Per target and category.

    ``metadata_overlap`` = share of the reference's distinct content words present in the metadata;
    feedback overlap = share of the content words *not already in the metadata* that a report reveals. A hint
    is flagged "too detailed" when that share exceeds ``overlap_threshold`` or it shares a guarded n-gram.
    """
    rows = []
    for r in records:
        if r.get("status") != "ok":
            continue
        a = r["hint_audit"]
        fo, fl = a["feedback_overlap"], a["feedback_leaks"]
        rows.append({"target": r["target"], "category": r["category"], "event": r["event_id"],
                     "metadata_overlap": a["metadata_overlap"],
                     "metadata_flagged": a["metadata_overlap"] > overlap_threshold or a["metadata_leaks"] > 0,
                     "feedback_reports": len(fo),
                     "feedback_flagged": sum((o > overlap_threshold) or (n > 0) for o, n in zip(fo, fl))})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    g = df.groupby(["target", "category"]).agg(events=("event", "count"), metadata_overlap=("metadata_overlap", "mean"),
                                               metadata_flagged=("metadata_flagged", "mean"),
                                               feedback_reports=("feedback_reports", "sum"),
                                               feedback_flagged_n=("feedback_flagged", "sum")).reset_index()
    g["feedback_flagged"] = np.where(g.feedback_reports > 0, g.feedback_flagged_n / g.feedback_reports.clip(lower=1), 0.0)
    return g.drop(columns="feedback_flagged_n")


def cost_table(df: pd.DataFrame, *, agent_price_in: float, agent_price_out: float,
               agent_output_tokens_per_call: int) -> pd.DataFrame:
    """App. V analog: prompts, tokens and dollars by target and method (totals over all events).

    Target tokens are measured; agent input tokens are estimated as characters / 4 and agent output tokens
    as ``agent_output_tokens_per_call`` per agent call (deterministic agents send nothing: this is what an
    LLM agent would have cost).
    """
    g = df.groupby(["target", "method"]).agg(
        target_prompts=("target_calls", "sum"), target_in=("prompt_tokens", "sum"),
        target_out=("completion_tokens", "sum"), agent_prompts=("agent_calls", "sum"),
        agent_chars=("agent_prompt_chars", "sum"), price_in=("price_in", "first"),
        price_out=("price_out", "first")).reset_index()
    g["agent_in_est"] = (g.agent_chars / CHARS_PER_TOKEN).round().astype(int)
    g["agent_out_est"] = (g.agent_prompts * agent_output_tokens_per_call).round().astype(int)
    g["prompts"] = g.target_prompts + g.agent_prompts.round().astype(int)
    g["tokens"] = g.target_in + g.target_out + g.agent_in_est + g.agent_out_est
    g["usd"] = (g.target_in * g.price_in + g.target_out * g.price_out
                + g.agent_in_est * agent_price_in + g.agent_out_est * agent_price_out) / 1e6
    g["method"] = g["method"].map(METHOD_NAMES)
    return g.drop(columns=["agent_chars", "price_in", "price_out"])


def membership_table(books: pd.DataFrame, *, tolerance: int) -> pd.DataFrame:
    """Tiny models with exact membership: RECAP passages and ROUGE-L on member vs non-member books."""
    col = f"passages_m{tolerance}"
    sub = books[books["split"].isin(["member", "nonmember"])]
    if sub.empty:
        return sub
    return (sub.groupby(["target", "method", "split"])
            .agg(books=("book", "nunique"), events=("events", "sum"), passages=(col, "sum"),
                 rouge_l_mean=("rouge_l", "mean")).reset_index())
