"""Figures for the RECAP notebooks (matplotlib; each function returns a Figure for ``rep.figure``)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from memlab.methods.recap.evaluate import METHOD_NAMES, filtered_rouge  # noqa: E402
from memlab.methods.recap.pipeline import METHODS  # noqa: E402
from memlab.plots import bootstrap_yerr, dodge, paper_line, wilson_yerr  # noqa: E402


def passages_per_book(ppb: pd.DataFrame, tolerance: int):
    """Fig. 13 analog: passages per book (bars = methods), one panel per target."""
    targets = list(ppb["target"].unique())
    fig, axes = plt.subplots(len(targets), 1, figsize=(9, 2.6 * max(1, len(targets))), squeeze=False)
    for ax, t in zip(axes[:, 0], targets):
        sub = ppb[ppb.target == t].set_index("book")[list(METHODS)].rename(columns=METHOD_NAMES)
        sub.plot.bar(ax=ax, width=0.8)
        ax.set_title(f"{t}: 40-token passages per book (≤ {tolerance} mismatches)")
        ax.set_ylabel("passages")
        ax.tick_params(axis="x", labelrotation=30)
        ax.legend(fontsize=7)
    fig.tight_layout()
    n = ppb.groupby("target").book.nunique()
    fig.set_label(f"Verbatim 40-token passages (at most {tolerance} mismatching tokens) each method extracted per "
                  f"book, one panel per target; counts, not rates; n = {_span(n)} books per target. No intervals: "
                  "each bar is one book's count from one deterministic run, with no sample below the book to resample. "
                  "No paper value: conf/paper holds no passages-per-book count for these books (its at-most-one-"
                  "passage bound on non-training books is judged in recap_feedback).")
    return fig


def _span(counts) -> str:
    """"4" or "2–31" from a Series of counts."""
    lo, hi = int(counts.min()), int(counts.max())
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


def tolerance_sweep(sweep: pd.DataFrame, method: str = "recap"):
    """Fig. 18 analog: passages vs mismatch tolerance, one line per (target, group)."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    sub = sweep[sweep.method == method]
    for (t, c), g in sub.groupby(["target", "group"]):
        ax.plot(g["tolerance"], g["passages"], marker="o", label=f"{t} / {c}")
    ax.set_xlabel("max mismatches per 40-token passage")
    ax.set_ylabel(f"passages ({METHOD_NAMES[method]})")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.set_label(f"Verbatim 40-token passages {METHOD_NAMES[method]} extracted vs the mismatching tokens a passage "
                  f"may hold (0–{int(sub.tolerance.max()) if len(sub) else 0}), one line per target and book group; "
                  "total counts over the group's books. No intervals: a total count of one deterministic run. No "
                  "paper value: conf/paper gives no passage count against the tolerance.")
    return fig


def feedback_gains(summary: pd.DataFrame, events: pd.DataFrame, *, n_resamples: int, seed: int):
    """Fig. 6 analog: mean best ROUGE-L recall (bars: percentile bootstrap over events, ``n_resamples``, ``seed``) and
    share of events improved (bars: 95 % Wilson) by feedback round; ``events`` = one row per (target, event, round)
    (:func:`memlab.methods.recap.evaluate.feedback_gains`), the rows ``summary`` averages."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.2))
    targets = list(summary.groupby("target"))
    for i, (t, g) in enumerate(targets):
        ev = events[events.target == t].groupby("round")
        samples = [ev.get_group(k)["best"] if k in ev.groups else [] for k in g["round"]]
        x = g["round"] + dodge(i, len(targets), summary["round"])
        a1.errorbar(x, g["mean_best"], yerr=bootstrap_yerr(samples, n_resamples=n_resamples, seed=seed), capsize=3,
                    marker="o", label=t)
        improved = (g["share_improved"] * g["events"]).round()
        a2.errorbar(x, g["share_improved"], yerr=wilson_yerr(improved, g["events"]), capsize=3, marker="o", label=t)
    a1.set_xlabel("feedback rounds")
    a1.set_ylabel("mean best ROUGE-L recall")
    a2.set_xlabel("feedback rounds")
    a2.set_ylabel("share of events improved")
    a1.legend(fontsize=7)
    fig.tight_layout()
    fig.set_label("Mean best ROUGE-L recall (left) and share of events improved so far (right) after k feedback "
                  "rounds, one line per target; plain means over events; bars: 95 % percentile bootstrap intervals "
                  f"over events ({n_resamples} resamples, seed {seed}) on the left, 95 % Wilson intervals on the "
                  f"right; n = {_span(summary.groupby('target').events.max())} events per target. The paper's Fig. 6 "
                  "number (recap_feedback_one_round) is the share of events still improving after round 1, not the "
                  "share improved so far plotted here: not drawn.")
    return fig


def filter_tradeoff(tr: pd.DataFrame, events: pd.DataFrame, *, n_resamples: int, seed: int,
                    paper: tuple[float, str] | None = None):
    """Fig. 8 / App. U.2 analog: queries saved vs ROUGE-L kept, one curve per filter signal; bars: percentile
    bootstrap over ``events`` (:func:`memlab.methods.recap.evaluate.filter_events`, the events ``tr`` averages) of
    the filtered mean; ``paper`` = (value, label) of the paper's hybrid-filtered ROUGE-L, drawn dotted."""
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    for s, g in tr.groupby("signal"):
        samples = [filtered_rouge(events, s, thr) for thr in g["threshold"]]
        ax.errorbar(g["queries_saved"], g["rouge_l_filtered"], capsize=3, marker="o", label=s,
                    yerr=bootstrap_yerr(samples, n_resamples=n_resamples, seed=seed))
    paper_line(ax, paper)
    ax.set_xlabel("share of feedback queries saved")
    ax.set_ylabel("mean event ROUGE-L recall")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.set_label("Memorization-score filter: share of feedback queries saved vs the mean event ROUGE-L recall kept, "
                  "one curve per filter signal, one point per threshold (Fig. 8 / App. U.2 analog); bars: 95 % "
                  f"percentile bootstrap intervals of the mean over events ({n_resamples} resamples, seed {seed}), "
                  f"n = {len(events)} events"
                  + (f"; dotted: the paper's hybrid-filtered ROUGE-L ({paper[0]:g}, at about half the queries saved; "
                     f"{paper[1]})." if paper else "."))
    return fig
