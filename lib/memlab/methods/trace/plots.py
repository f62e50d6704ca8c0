"""SimpleTrace / PROPME figures, each from a table of :mod:`memlab.methods.trace.study`."""

from __future__ import annotations

from typing import Sequence


SETTINGS = ["generic", "specific", "prefix"]


# each plotted metric and the per-generation column of ``generation_scores`` whose mean it is
PER_GENERATION = {"ALS": "longest_span", "FMR": "full_match", "NVR": "nv_recall"}
Y_LABEL = {"ALS": "longest span (tokens)", "FMR": "share of generations", "NVR": "mean nv_recall"}


def mean_bar(x) -> tuple[float, float]:
    """Distances below and above the mean of ``x`` to its 95 % interval: Wilson's for 0/1 values (a rate: FMR),
    else ± 1.96 standard errors (0 for fewer than two values). The ALS and FMR bars of the stage figures."""
    import numpy as np

    from memlab.metrics.intervals import wilson

    x = np.asarray(x, dtype=float)
    if len(x) < 2:
        return 0.0, 0.0
    if set(np.unique(x)) <= {0.0, 1.0}:
        lo, hi = wilson(int(x.sum()), len(x))
        return max(0.0, x.mean() - lo), max(0.0, hi - x.mean())
    half = float(1.96 * x.std(ddof=1) / np.sqrt(len(x)))
    return half, half


def _stage_bars(per, stages, metric: str, *, n_resamples: int, seed: int):
    """``yerr`` of one line of :func:`stage_metrics`: per stage, its generations' 95 % interval — NVR (a mean of
    per-generation shares, not a count ratio) by percentile bootstrap (:func:`memlab.plots.bootstrap_yerr`), ALS
    and FMR by :func:`mean_bar`; 0 for a stage without generations."""
    from memlab.plots import bootstrap_yerr

    col = PER_GENERATION[metric]
    samples = [per.get_group(st)[col] if st in per.groups else [] for st in stages]
    if metric == "NVR":
        return bootstrap_yerr(samples, n_resamples=n_resamples, seed=seed)
    bars = [mean_bar(x) if len(x) else (0.0, 0.0) for x in samples]
    return [b[0] for b in bars], [b[1] for b in bars]


def stage_metrics(summary, scores, paper: tuple[float, str] | None = None, max_new_tokens: int | None = None, *,
                  seed: int, n_resamples: int):
    """ALS, FMR and NVR per training stage, one line per prompt setting; rows = corpus A, B; bars: 95 % intervals
    of the mean over the stage's generations (:func:`_stage_bars`; ``scores``: one row per generation; ``seed``,
    ``n_resamples``: the config's, as the claims' bootstraps); ``paper`` = (value, label) of the paper's prefix ALS
    (tokens), drawn dotted on the ALS panels."""
    import matplotlib.pyplot as plt

    from memlab.plots import paper_line

    fig, axes = plt.subplots(2, 3, figsize=(12, 6), sharex=True)
    for i, c in enumerate(["A", "B"]):
        for j, m in enumerate(["ALS", "FMR", "NVR"]):
            ax = axes[i][j]
            for setting, g in summary[summary.corpus == c].groupby("setting"):
                per = scores[(scores.corpus == c) & (scores.setting == setting)].groupby("stage")
                ax.errorbar(g.stage, g[m], yerr=_stage_bars(per, g.stage, m, n_resamples=n_resamples, seed=seed),
                            capsize=3, marker="o", label=setting)
            if m == "ALS":
                paper_line(ax, paper and (paper[0], f"{paper[1]}, prefix"))
            ax.set_title(f"corpus {c}: {m}", fontsize=9)
            ax.set_ylabel(Y_LABEL[m], fontsize=8)
            if i == 1:
                ax.set_xlabel("training stage", fontsize=8)
    axes[0][0].legend()
    n = scores.groupby(["corpus", "stage", "setting"]).size()
    cap = f"ours have at most {max_new_tokens} new tokens, no longer span possible" if max_new_tokens else ""
    drawn = (f"dotted on the ALS panels: the paper's prefix ALS ({paper[0]:g} tokens, {paper[1]}; another model and "
             f"corpus, longer generations{': ' + cap if cap else ''}); " if paper else "")
    fig.set_label("SimpleTrace metrics (ALS, FMR, NVR) of each training stage's generations, one line per prompt "
                  "setting, corpus A (top) and B (bottom); each point is the mean over the stage's generations of "
                  "that setting; bars: 95 % intervals (Wilson for FMR, a rate; percentile bootstrap for NVR, a mean "
                  f"of per-generation shares, {n_resamples} resamples, seed {seed}; ± 1.96 standard errors for ALS); "
                  + drawn + (f"n = {n.min()}–{n.max()} generations per point." if n.min() != n.max()
                     else f"n = {n.min()} generations per point."))
    return fig


def stage_propensity(prop):
    """FMR and NVR propensity per stage and setting, one panel per corpus; 0.5 = propensity equals capability."""
    import matplotlib.pyplot as plt

    from memlab.plots import reference

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2), sharey=True)
    for ax, c in zip(axes, ["A", "B"]):
        long = prop[prop.corpus == c].melt(id_vars=["stage", "setting"], value_vars=["FMR_propensity", "NVR_propensity"])
        for (setting, m), g in long.groupby(["setting", "variable"]):
            ax.plot(g.stage, g.value, marker="o", label=f"{setting} {m.split('_')[0]}")
        reference(ax.axhline(0.5, color="grey", lw=0.8, ls="--"))
        ax.set_title(f"corpus {c}: propensity", fontsize=9)
    axes[0].legend(fontsize=7)
    fig.set_label("FMR and NVR propensity (non-adversarial over adversarial rate, with ε) per training stage and "
                  "prompt setting, one panel per corpus; dashed: 0.5, propensity equal to capability. No intervals: "
                  "propensity is a ratio of two settings' rates over different generations, and the table carries no "
                  "interval for it. No paper value: conf/paper gives no propensity number.")
    return fig


def stage_span_lengths(spans, stages: Sequence[str]):
    """Histograms of kept span lengths per corpus (rows) and stage (columns), one colour per setting."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(stages), figsize=(3.2 * len(stages), 5.5), sharey=True, squeeze=False)
    top = int(spans.span_length.max()) + 2 if len(spans) else 2
    for i, c in enumerate(["A", "B"]):
        for j, st in enumerate(stages):
            ax = axes[i][j]
            for setting in SETTINGS:
                x = spans[(spans.corpus == c) & (spans.stage == st) & (spans.setting == setting)].span_length
                if len(x):
                    ax.hist(x, bins=range(1, top), alpha=0.5, label=setting)
            ax.set_title(f"{c} · {st}", fontsize=9)
            ax.set_yscale("log")
    axes[0][0].legend(fontsize=7)
    fig.set_label(f"Lengths (tokens) of the rarest spans SimpleTrace keeps, per corpus (rows) and stage (columns), "
                  f"one colour per prompt setting, log counts; n = {len(spans)} spans in all. Counts of every kept "
                  "span, no intervals; the paper's ALS (propme_t1_als) is a mean of each generation's longest span, "
                  "another quantity: not drawn (see the stage_metrics figure).")
    return fig


def span_lengths(spans, groups: Sequence[tuple[str, str]]):
    """Histograms of kept span lengths per (model, corpus), one colour per setting."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(groups), figsize=(4.5 * len(groups), 3.2), squeeze=False)
    for ax, (m, c) in zip(axes[0], groups):
        sel = spans[(spans.model == m) & (spans.corpus == c)]
        for setting in SETTINGS:
            x = sel[sel.setting == setting].span_length
            if len(x):
                ax.hist(x, bins=range(1, int(spans.span_length.max()) + 2), alpha=0.5, label=setting)
        ax.set_title(f"{m}\n{c}", fontsize=9)
        ax.set_xlabel("span length (tokens)")
        ax.set_yscale("log")
    axes[0][0].set_ylabel("kept spans")
    axes[0][0].legend()
    fig.set_label(f"Lengths (tokens) of the rarest spans SimpleTrace keeps, per model and corpus, one colour per "
                  f"prompt setting, log counts; n = {len(spans)} spans in all. Counts of every kept span, no "
                  "intervals; the paper's ALS (propme_t1_als) is a mean of each generation's longest span, another quantity: not "
                  "drawn here (it is compared in the comparison table).")
    return fig
