"""Paper-shaped tables from RECAP event records (seed 000 Table 3, Figs. 6, 8, 13, 18, App. S, App. V).

All inputs are the records written by :mod:`memlab.methods.recap.pipeline` (numbers only where redacted);
every metric comes from :mod:`memlab.metrics`:

* book score = token-weighted ROUGE-L (``weighted_rouge_l``, seed 000 eq. 2) of the chosen variant
  (``method.recap.score_variant``: recall, stemmed word tokens) — Table 3 reports the book-level bootstrap
  (``bootstrap_mean``, ``method.bootstrap.n_resamples`` resamples of the books of a category) mean ± sd;
* passages = ``count_passages`` (ours: 40-token passages, mismatch tolerance m, no generation token counted
  twice), summed over a book's events; ``passages_overlap_m*`` = the authors' overlapping-span count
  (``count_passages_overlapping``); every table says which one it prints (column ``passage_rule``);
* floors: the ``echo`` / ``echo_fb`` rows score the hints the prompt gave (metadata; metadata + feedback)
  as if they were the output (``pipeline`` module docstring);
* books of targets with exact membership (the tiny model) are split into member and non-member rows
  (``group``); other targets' books keep their category;
* error events (a failed target call) are scored 0 for every method, never dropped;
* cost: target prompts/tokens as measured by the backend; agent tokens from the LLM calls actually made, per
  stage (0 with the deterministic agents, which send nothing); dollars = tokens × configured price per 1M.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from memlab.methods.recap.agents import REFUSAL_REASONS
from memlab.metrics.bootstrap import bootstrap_mean
from memlab.metrics.intervals import wilson
from memlab.metrics.rouge import weighted_rouge_l
from memlab.methods.recap.pipeline import METHODS

METHOD_NAMES = {"prefix": "Prefix-Probing", "dsp": "DSP", "dsp_jb": "DSP + Jailbreak", "recap": "RECAP",
                "echo": "Metadata echo (floor of DSP, DSP + JB)",
                "echo_fb": "Metadata + feedback echo (floor of RECAP)"}
BASELINES = ("echo", "echo_fb")
ROWS = METHODS + BASELINES
SPLIT_LABEL = {"member": "members", "nonmember": "non-members"}
PASSAGE_RULE = {"ours": "ours: non-overlapping spans (count_passages)",
                "overlap": "authors': overlapping spans from every start block (count_passages_overlapping)"}


def group_of(category: str, split) -> str:
    """Table row group: the category, split into members / non-members for targets with exact membership."""
    return f"{category} ({SPLIT_LABEL[split]})" if isinstance(split, str) and split in SPLIT_LABEL else category


def events_frame(records: Iterable[dict]) -> pd.DataFrame:
    """One row per (target, book, event, method) — the four methods and the two echo floors. Error events
    (``status: error``) get score 0 for every method (they are not dropped); ``summary_leakage`` = content-word
    coverage of the gold by the hints (title, characters, summary) — the deterministic agents' leakage."""
    rows = []
    for r in records:
        ok = r.get("status") == "ok"
        if not ok and "gold_tokens" not in r:  # an error record from before errors carried their size
            continue
        for m in ROWS:
            d = (r["methods"][m] if m in METHODS else r.get("baselines", {}).get(m)) if ok else {}
            if d is None:
                continue
            row = {"target": r["target"], "book": r["book_id"], "title": r.get("book_title", r["book_id"]),
                   "category": r["category"], "split": r.get("split"),
                   "group": group_of(r["category"], r.get("split")), "event": r["event_id"], "method": m,
                   "status": r.get("status"), "recall": d.get("recall", 0.0), "f1": d.get("f1", 0.0),
                   "raw_recall": d.get("raw_recall", d.get("recall", 0.0)), "blocked": d.get("blocked", False),
                   "refused": d.get("block_reason") in REFUSAL_REASONS,
                   "gold_tokens": r["gold_tokens"], "target_calls": d.get("target_calls", 0),
                   "prompt_tokens": d.get("prompt_tokens", 0), "completion_tokens": d.get("completion_tokens", 0),
                   "agent_calls": d.get("agent_calls", 0), "agent_prompt_chars": d.get("agent_prompt_chars", 0),
                   "agent_tokens_in": d.get("agent_tokens_in", 0.0),
                   "agent_tokens_out": d.get("agent_tokens_out", 0.0),
                   "summary_leakage": (r.get("hint_audit") or {}).get("metadata_overlap") if ok else None,
                   "feedback_rounds": len(r.get("rounds") or []), "feedback_skipped": r.get("feedback_skipped"),
                   "price_in": r.get("price_in", 0.0), "price_out": r.get("price_out", 0.0)}
            for tol, n in (d.get("passages") or {}).items():
                row[f"passages_m{tol}"] = n
            for tol, n in (d.get("passages_overlap") or {}).items():
                row[f"passages_overlap_m{tol}"] = n
            rows.append(row)
    df = pd.DataFrame(rows)
    pcols = [c for c in df.columns if c.startswith("passages_")]
    if pcols:
        df[pcols] = df[pcols].fillna(0).astype(int)
    return df


def events_table(df: pd.DataFrame, variant: str) -> pd.DataFrame:
    """Per (target, event): each method's score, the floors and the summary agent's leakage (one row each)."""
    if df.empty:
        return df
    wide = df.pivot_table(index=["target", "group", "book", "event"], columns="method", values=variant,
                          aggfunc="first").reindex(columns=list(ROWS)).reset_index()
    extra = (df[df.method == "recap"].set_index(["target", "event"])
             [["status", "gold_tokens", "summary_leakage", "feedback_rounds", "feedback_skipped"]])
    wide = wide.join(extra, on=["target", "event"])
    wide.insert(0, "statistic", f"event ROUGE-L {variant}; summary_leakage = share of the gold's content "
                                "words present in the hints (title, characters, summary)")
    return wide


def book_scores(df: pd.DataFrame, variant: str) -> pd.DataFrame:
    """Per (target, category, book, method): token-weighted ROUGE-L (eq. 2) and passage counts."""
    out = []
    pcols = [c for c in df.columns if c.startswith("passages_")]
    for key, g in df.groupby(["target", "category", "book", "split", "method"], dropna=False, sort=True):
        row = dict(zip(["target", "category", "book", "split", "method"], key))
        row["group"] = group_of(row["category"], row["split"])
        row["rouge_l"] = weighted_rouge_l(g[variant], g["gold_tokens"]) if g["gold_tokens"].sum() else 0.0
        row["events"] = len(g)
        for c in pcols:
            row[c] = int(g[c].sum())
        out.append(row)
    return pd.DataFrame(out)


def _groups(books: pd.DataFrame) -> list[str]:
    order = []
    for cat in ("public_domain", "copyrighted", "non_training", "papers"):
        for g in (cat, f"{cat} (members)", f"{cat} (non-members)"):
            if g in set(books["group"]):
                order.append(g)
    return order


def _cell(x: np.ndarray, n_resamples: int, seed: int) -> tuple[str, float]:
    b = bootstrap_mean(x, n_resamples=n_resamples, seed=seed)
    return f"{b.mean:.3f} ± {b.sd:.3f} [{b.ci_low:.3f}, {b.ci_high:.3f}] n={len(x)}", b.mean


def table3(books: pd.DataFrame, *, n_resamples: int, seed: int, targets: Sequence[str] | None, variant: str,
           stem: bool) -> pd.DataFrame:
    """Rows (group, method) incl. the two echo floors, columns = targets + Avg.: per target, the bootstrap mean
    ± sd [95 % percentile interval] over the books of the group, n = books (Table 3). Avg. = mean of the
    targets' bootstrap means."""
    targets = list(targets or sorted(books["target"].unique()))
    metric = (f"book token-weighted ROUGE-L {variant} ({'stemmed ' if stem else ''}word tokens)")
    statistic = f"bootstrap mean ± sd [95% CI] over books, {n_resamples} resamples; n = books"
    rows = []
    for grp in _groups(books):
        for m in ROWS:
            row = {"metric": metric, "statistic": statistic, "group": grp, "method": METHOD_NAMES[m]}
            means = []
            for t in targets:
                x = books[(books.group == grp) & (books.method == m) & (books.target == t)]["rouge_l"]
                if len(x) == 0:
                    row[t] = "n/a"
                    continue
                row[t], mean = _cell(x.to_numpy(float), n_resamples, seed)
                means.append(mean)
            row["Avg."] = f"{np.mean(means):.3f}" if means else "n/a"
            rows.append(row)
    return pd.DataFrame(rows)


def passages_per_book(books: pd.DataFrame, tolerance: int) -> pd.DataFrame:
    """Fig. 13: passages (40 tokens, ≤ m mismatches) per book, target and method — ours (the method columns)
    and the authors' overlapping count (``<method>_overlap``) side by side."""
    col, ocol = f"passages_m{tolerance}", f"passages_overlap_m{tolerance}"
    idx = ["group", "book", "target"]
    ours = books.pivot_table(index=idx, columns="method", values=col, aggfunc="sum").reindex(columns=list(ROWS))
    out = ours
    if ocol in books.columns:
        ov = books.pivot_table(index=idx, columns="method", values=ocol, aggfunc="sum").reindex(columns=list(ROWS))
        out = ours.join(ov.add_suffix("_overlap"))
    out = out.reset_index()
    out.insert(0, "passage_rule", f"m={tolerance}; <method> = {PASSAGE_RULE['ours']}; <method>_overlap = "
                                  f"{PASSAGE_RULE['overlap']}")
    return out


def tolerance_sweep(books: pd.DataFrame) -> pd.DataFrame:
    """Fig. 18: passages by mismatch tolerance m = 0..5, per target, group and method (ours, non-overlapping)."""
    pcols = sorted([c for c in books.columns if c.startswith("passages_m")], key=lambda c: int(c[10:]))
    g = books.groupby(["target", "group", "method"])[pcols].sum().reset_index()
    long = g.melt(id_vars=["target", "group", "method"], var_name="tolerance", value_name="passages")
    long["tolerance"] = long["tolerance"].str[10:].astype(int)
    long["passage_rule"] = PASSAGE_RULE["ours"]
    return long


def feedback_gains(records: Iterable[dict], *, variant: str, stop_score: float) -> pd.DataFrame:
    """Fig. 6: for events whose first valid attempt scored < stop_score, the best score after k rounds.

    Returns one row per (target, event, round k = 0..max) with ``best`` (best score after k rounds, carried
    forward when the loop stopped) and ``gain`` = best_k − best_0; ``split`` = member / nonmember for targets with
    exact membership (None otherwise).
    """
    recs = [r for r in records if r.get("status") == "ok"]
    max_k = max([len(r["rounds"]) for r in recs] + [0])
    rows = []
    for r in recs:
        start = r["methods"]["dsp_jb"][variant]
        if start >= stop_score or r.get("filtered") or r.get("feedback_skipped"):  # the loop never ran
            continue
        best = start
        for k in range(0, max_k + 1):
            if 1 <= k <= len(r["rounds"]) and r["rounds"][k - 1]["accepted"]:
                best = r["rounds"][k - 1][variant]
            rows.append({"target": r["target"], "category": r["category"], "split": r.get("split"),
                         "event": r["event_id"], "round": k,
                         "best": best, "gain": best - start,
                         "floor": (r.get("baselines") or {}).get("echo_fb", {}).get(variant)})
    return pd.DataFrame(rows)


def gains_summary(gains: pd.DataFrame, by: Sequence[str] = ("target",)) -> pd.DataFrame:
    """Per ``by`` (target; or target and split: members vs non-members of a target trained here) and round: mean gain
    and the share of events improved so far, with its 95 % Wilson interval."""
    if gains.empty:
        return gains
    keys = [*by, "round"]
    out = (gains.assign(split=gains["split"].fillna("unknown"), improved=gains["gain"] > 0).groupby(keys)
           .agg(events=("event", "count"), mean_best=("best", "mean"), mean_gain=("gain", "mean"),
                improved=("improved", "sum"), metadata_feedback_echo_floor=("floor", "mean"))
           .reset_index())
    out.insert(out.columns.get_loc("improved") + 1, "share_improved", out.improved / out.events)
    return _with_wilson(out, "improved", "share_improved").assign(
        statistic="plain mean over events of the best ROUGE-L after k rounds; share improved: 95% Wilson interval; "
                  "floor = the metadata + feedback echo of the same events")


def filtered_rouge(events: pd.DataFrame, signal: str, threshold: float, idx=None) -> np.ndarray:
    """The memorization-score filter rule, per event of ``events`` (:func:`filter_events`): RECAP's score where
    ``signal`` ≥ ``threshold`` (the event is refined), else DSP + JB's (it stops before the feedback loop).
    ``idx``: optional (resamples × events) positions to take the events at (one row per resample)."""
    def col(c):
        x = events[c].to_numpy(float)
        return x if idx is None else x[idx]
    return np.where(refined(events, signal, threshold, idx), col("recap"), col("dsp_jb"))


def refined(events: pd.DataFrame, signal: str, threshold: float, idx=None) -> np.ndarray:
    """The filter's decision per event: refined by the feedback loop iff ``signal`` ≥ ``threshold``."""
    s = events[signal].to_numpy(float)
    return (s if idx is None else s[idx]) >= threshold


def filter_tradeoff(events: pd.DataFrame, thresholds: Sequence[float]) -> pd.DataFrame:
    """Fig. 8 / App. U.2 analog (oracle, from unfiltered runs): refine only events whose signal ≥ threshold.

    ``events``: :func:`filter_events`. Signals: hybrid memorization score, ROUGE-L recall and cosine of the first
    valid attempt. For each threshold: share of feedback-loop target queries saved, and mean event ROUGE-L with
    filtering vs without (filtered events keep their DSP + JB score: :func:`filtered_rouge`).
    """
    rows = []
    if events.empty:
        return pd.DataFrame(rows)
    fb_calls, full = events["feedback_calls"].to_numpy(), events["recap"].to_numpy(float)
    for signal in ("hybrid", "rouge_l", "cosine"):
        for thr in thresholds:
            keep = refined(events, signal, thr)
            filt = filtered_rouge(events, signal, thr)
            rows.append({"signal": signal, "threshold": float(thr),
                         "queries_saved": float(fb_calls[~keep].sum() / fb_calls.sum()) if fb_calls.sum() else 0.0,
                         "rouge_l_filtered": float(filt.mean()), "rouge_l_unfiltered": float(full.mean()),
                         "rouge_l_lost": float(full.mean() - filt.mean())})
    return pd.DataFrame(rows)


def filter_tradeoff_by_target(events: pd.DataFrame, thresholds: Sequence[float]) -> pd.DataFrame:
    """:func:`filter_tradeoff` of each target's events apart (the filter against one target, e.g. the aligned
    one), with the number of events behind each row."""
    if events.empty:
        return pd.DataFrame()
    parts = [filter_tradeoff(g, thresholds).assign(target=t, events=len(g))
             for t, g in events.groupby("target", sort=False)]
    out = pd.concat(parts, ignore_index=True)
    return out[["target", "events", *out.columns[:-2]]]


def filter_events(records: Iterable[dict], *, variant: str) -> pd.DataFrame:
    """The events behind :func:`filter_tradeoff`, one row each: its target, book and split, feedback-loop target
    calls, RECAP's and DSP + JB's score, and the three filter signals (so a rule can resample events by book)."""
    recs = [r for r in records if r.get("status") == "ok" and r.get("memscore")]
    return pd.DataFrame([{"target": r["target"], "book": r["book_id"], "split": r.get("split"),
                          "feedback_calls": (r["methods"]["recap"]["target_calls"]
                                             - r["methods"]["dsp_jb"]["target_calls"]),
                          "recap": r["methods"]["recap"][variant], "dsp_jb": r["methods"]["dsp_jb"][variant],
                          "hybrid": r["memscore"]["score"], "rouge_l": r["memscore"]["rouge_l"],
                          "cosine": r["memscore"]["cosine"]} for r in recs])


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
        mj, fj = a.get("metadata_judge"), a.get("feedback_judge") or [None] * len(fo)
        meta_flag = mj if mj is not None else (a["metadata_overlap"] > overlap_threshold or a["metadata_leaks"] > 0)
        fb_flag = [j if j is not None else ((o > overlap_threshold) or (n > 0)) for o, n, j in zip(fo, fl, fj)]
        rows.append({"target": r["target"], "category": r["category"], "event": r["event_id"],
                     "metadata_overlap": a["metadata_overlap"], "metadata_flagged": bool(meta_flag),
                     "feedback_reports": len(fo), "feedback_flagged": sum(bool(x) for x in fb_flag),
                     "judged": int(mj is not None) + sum(j is not None for j in fj)})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    g = df.groupby(["target", "category"]).agg(events=("event", "count"), metadata_overlap=("metadata_overlap", "mean"),
                                               metadata_flagged=("metadata_flagged", "mean"),
                                               feedback_reports=("feedback_reports", "sum"),
                                               feedback_flagged_n=("feedback_flagged", "sum"),
                                               judged=("judged", "sum")).reset_index()
    g["feedback_flagged"] = np.where(g.feedback_reports > 0, g.feedback_flagged_n / g.feedback_reports.clip(lower=1), 0.0)
    g["rule"] = np.where(g.judged > 0, "App. S LLM judge (contamination_judge.txt); heuristic where it failed",
                         "heuristic: content-word overlap beyond the metadata (stock phrases stripped) or a "
                         "guarded n-gram")
    return g.drop(columns="feedback_flagged_n")


def cost_table(df: pd.DataFrame, *, agent_price_in: float, agent_price_out: float) -> pd.DataFrame:
    """App. V analog: prompts, tokens and dollars by target and method (totals over all events).

    Target tokens are measured by the backend; agent tokens are those of the LLM agent calls actually made
    (per stage in the event records; 0 with the deterministic agents, which send nothing — ``agent_calls``
    then counts the decisions a deterministic agent took). Verifier calls in feedback rounds are RECAP's.
    """
    d = df[df.method.isin(METHODS)]
    g = d.groupby(["target", "method"]).agg(
        target_prompts=("target_calls", "sum"), target_in=("prompt_tokens", "sum"),
        target_out=("completion_tokens", "sum"), agent_calls=("agent_calls", "sum"),
        agent_in=("agent_tokens_in", "sum"), agent_out=("agent_tokens_out", "sum"),
        price_in=("price_in", "first"), price_out=("price_out", "first")).reset_index()
    g["agent_in"] = g.agent_in.round().astype(int)
    g["agent_out"] = g.agent_out.round().astype(int)
    g["tokens"] = g.target_in + g.target_out + g.agent_in + g.agent_out
    g["usd"] = (g.target_in * g.price_in + g.target_out * g.price_out
                + g.agent_in * agent_price_in + g.agent_out * agent_price_out) / 1e6
    g["agent_tokens"] = np.where(g.agent_in + g.agent_out > 0, "measured (LLM agent calls)",
                                 "none sent (deterministic agents)")
    g["method"] = g["method"].map(METHOD_NAMES)
    return g.drop(columns=["price_in", "price_out"])


def cost_by_stage(records: Iterable[dict]) -> pd.DataFrame:
    """Agent calls and tokens per target and stage (summary, verifier of DSP / jailbreak / feedback rounds,
    jailbreak rewrite, feedback), summed over ok events; which methods pay for each stage."""
    from memlab.methods.recap.pipeline import AGENT_COST

    rows = []
    for r in records:
        if r.get("status") != "ok" or "agent_usage" not in r:
            continue
        for stage, u in r["agent_usage"].items():
            rows.append({"target": r["target"], "stage": stage, **u})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    g = df.groupby(["target", "stage"], sort=False).sum(numeric_only=True).reset_index()
    g["charged_to"] = g.stage.map(lambda s: ", ".join(METHOD_NAMES[m] for m in METHODS
                                                      if s in AGENT_COST[m] or (s == "summary" and m != "prefix")))
    return g


def membership_table(books: pd.DataFrame, *, tolerance: int, n_resamples: int, seed: int) -> pd.DataFrame:
    """Targets with exact membership (the tiny model): per method and split, n books / events, passages (ours and
    the authors' overlapping count), the plain mean of the books' ROUGE-L and its bootstrap mean ± sd and 95 %
    interval; the echo floors are rows of their own."""
    col, ocol = f"passages_m{tolerance}", f"passages_overlap_m{tolerance}"
    sub = books[books["split"].isin(["member", "nonmember"])]
    if sub.empty:
        return sub
    rows = []
    for (t, m, sp), g in sub.groupby(["target", "method", "split"], sort=False):
        b = bootstrap_mean(g["rouge_l"].to_numpy(float), n_resamples=n_resamples, seed=seed)
        rows.append({"target": t, "method": m, "split": sp, "books": g.book.nunique(), "events": int(g.events.sum()),
                     "passages": int(g[col].sum()), "passages_overlap": int(g[ocol].sum()) if ocol in g else None,
                     "rouge_l_mean": float(g.rouge_l.mean()), "rouge_l_boot_mean": b.mean, "rouge_l_boot_sd": b.sd,
                     "ci_low": b.ci_low, "ci_high": b.ci_high})
    out = pd.DataFrame(rows)
    out["method"] = pd.Categorical(out["method"], list(ROWS), ordered=True)
    out = out.sort_values(["target", "split", "method"]).reset_index(drop=True)
    out["method"] = out["method"].astype(str)
    out["statistic"] = (f"rouge_l_mean = plain mean over books; rouge_l_boot_* = bootstrap over books "
                        f"({n_resamples} resamples, 95% percentile CI); passages m={tolerance}: "
                        f"{PASSAGE_RULE['ours']}; passages_overlap: {PASSAGE_RULE['overlap']}")
    return out


def refusal_table(events: pd.DataFrame) -> pd.DataFrame:
    """Per target, category, split and method: events, the share blocked (any verifier verdict) and the share refused
    (a refusal, :data:`~memlab.methods.recap.agents.REFUSAL_REASONS`) with its 95 % Wilson interval."""
    keys = ["target", "category", "split", "method"]
    ev = events.assign(split=events["split"].fillna("unknown"))
    out = (ev.groupby(keys).agg(events=("event", "count"), blocked=("blocked", "mean"), refused_n=("refused", "sum"))
           .reset_index())
    return _with_wilson(out.assign(refused=out.refused_n / out.events), "refused_n", "refused").assign(
        statistic="blocked: share of events any verifier verdict blocked; refused: share refused (a refusal phrase "
                  "or the judge's no), 95% Wilson interval")


def _with_wilson(df: pd.DataFrame, count: str, share: str) -> pd.DataFrame:
    """``df`` with ``<share>_ci_low`` / ``<share>_ci_high``: the 95 % Wilson interval of ``count`` of ``events``."""
    ci = [wilson(int(k), int(n)) for k, n in zip(df[count], df["events"])]
    return df.assign(**{f"{share}_ci_low": [c[0] for c in ci], f"{share}_ci_high": [c[1] for c in ci]})
