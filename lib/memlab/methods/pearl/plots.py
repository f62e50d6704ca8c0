"""PEARL's figures, each from a table of :mod:`memlab.methods.pearl.tables` (one function per figure)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from memlab.plots import dodge, reference, wilson_bounds, wilson_yerr


def n_text(frame, what: str = "documents") -> str:
    """"n = 6 documents per point" (or "n = 3–6 …") from a table's ``n`` column; "" when it has none."""
    if frame is None or "n" not in getattr(frame, "columns", ()) or not len(frame):
        return ""
    lo, hi = int(frame["n"].min()), int(frame["n"].max())
    return f"n = {lo} {what} per point" if lo == hi else f"n = {lo}–{hi} {what} per point"


def caption(fig, text: str):
    """The figure's caption (what is plotted, on what n), kept as its matplotlib label: Report.save writes it to
    figures/captions.json when the study gives none."""
    fig.set_label(text)
    return fig


def fpr_by_kind(fpr, target_fpr: float, paper: tuple[float, float, str] | None = None):
    """FPR of PEARL on non-members vs threshold α, one panel per score, one line per perturbation kind; ``paper``
    = (α, FPR, label): the paper's point, drawn as a star on the sensitivity panel."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=True)
    for ax, score in zip(axes, ["sensitivity", "gfd"]):
        for i, (kind, g) in enumerate(fpr[fpr.score == score].groupby("kind")):
            ax.plot(g.threshold, g.fpr, marker=".", label=kind, c=f"C{i}")
            ax.fill_between(g.threshold, *wilson_bounds(g.flagged, g.n), color=f"C{i}", alpha=0.15, lw=0)
        reference(ax.axhline(target_fpr, ls="--", c="grey", lw=1))
        if paper and score == "sensitivity":
            reference(*ax.plot([paper[0]], [paper[1]], marker="*", ms=12, ls="", c="k", label=paper[2]))
        ax.set_xlabel(f"threshold α on {score}")
        ax.set_title(f"FPR of PEARL ({score}) on non-members")
    axes[0].set_ylabel("false positive rate")
    axes[0].legend()
    fig.tight_layout()
    return caption(fig, f"False positive rate of PEARL on held-out non-members vs the threshold α, per score and "
                        f"perturbation kind; bands: 95 % Wilson intervals; dashed: the target FPR {target_fpr}"
                        f"{'; star: the paper’s FPR at α = ' + format(paper[0]) if paper else ''}; "
                        f"{n_text(fpr, 'non-members')}.")


def flagged_by_epoch(flags, kinds: Sequence[str], score: str, paper: tuple[float, str] | None = None):
    """% of documents flagged per fine-tuning epoch, members vs non-members, one panel per kind; ``paper`` =
    (share of members, label): the paper's share at the last epoch, drawn as a star."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(kinds), figsize=(5 * len(kinds), 3.5), sharey=True, squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        groups = list(flags[flags.kind == kind].groupby(["split", "alpha"]))
        for i, ((split, alpha), g) in enumerate(groups):
            ax.errorbar(g.epoch + dodge(i, len(groups), flags.epoch), 100 * g.share, yerr=wilson_yerr(g.flagged, g.n, 100), capsize=3,
                        marker="o" if split == "member" else "x", ls="-" if split == "member" else "--",
                        label=f"{split}, {score} > {alpha}")
        if paper:
            reference(*ax.plot([flags.epoch.max()], [100 * paper[0]], marker="*", ms=12, ls="", c="k", label=paper[1]))
        ax.set_title(f"{kind}: flagged as memorized")
        ax.set_xlabel("fine-tuning epoch")
    axes[0][0].set_ylabel("% of documents")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    return caption(fig, f"Share of members and non-members PEARL flags ({score} > α) per fine-tuning epoch of the "
                        f"tiny model, one panel per perturbation kind; bars: 95 % Wilson intervals"
                        f"{'; star: the paper’s share of members at its last epoch' if paper else ''}; {n_text(flags)}.")


def auc_bounds(scores, score: str, epochs, truth: str, *, n_resamples: int, seed: int):
    """Per epoch, the 95 % stratified percentile bootstrap interval of ``score``'s ROC-AUC against ``truth``
    (:func:`memlab.metrics.detection.roc_auc_ci`, ``n_resamples``, ``seed``) over the documents of ``scores`` (one
    row per document × epoch); NaN where an epoch lacks a class."""
    from memlab.metrics.detection import roc_auc_ci

    lo, hi = [], []
    for e in epochs:
        g = scores[scores.epoch == e]
        x = g[score].astype(float).to_numpy()
        ok = np.isfinite(x)
        y = g[truth].astype(int).to_numpy()[ok]
        if len(set(y.tolist())) < 2:
            lo.append(float("nan"))
            hi.append(float("nan"))
            continue
        b = roc_auc_ci(y, x[ok], n_resamples=n_resamples, seed=seed)
        lo.append(b.ci_low)
        hi.append(b.ci_high)
    return np.array(lo), np.array(hi)


def auc_by_epoch(auc, scores=None, *, n_resamples: int, truth: str = "member", seed: int | None = None):
    """ROC-AUC (members vs non-members) of every score per fine-tuning epoch; PEARL's scores drawn thick; bars,
    when ``scores`` (the per-document scores the AUCs come from) is given: 95 % bootstrap intervals
    (:func:`auc_bounds`, ``n_resamples`` resamples seeded with ``seed``, both the config's)."""
    import matplotlib.pyplot as plt

    if scores is not None and seed is None:
        raise ValueError("auc_by_epoch: bootstrap intervals need the config's seed")
    fig, ax = plt.subplots(figsize=(6, 3.5))
    groups = list(auc.groupby("score"))
    for i, (s, g) in enumerate(groups):
        lw = 2.5 if s in ("sensitivity", "gfd") else 1
        if scores is None:
            ax.plot(g.epoch, g.auc, marker=".", label=s, lw=lw)
            continue
        lo, hi = auc_bounds(scores, s, g.epoch, truth, n_resamples=n_resamples, seed=seed)
        mid = g.auc.to_numpy(float)
        yerr = [np.clip(np.nan_to_num(mid - lo), 0, None), np.clip(np.nan_to_num(hi - mid), 0, None)]
        ax.errorbar(g.epoch + dodge(i, len(groups), auc.epoch), g.auc, yerr=yerr, capsize=2, marker=".", label=s, lw=lw)
    reference(ax.axhline(0.5, c="grey", ls=":", lw=1))
    ax.set_xlabel("fine-tuning epoch")
    ax.set_ylabel("ROC-AUC (members vs non-members)")
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    bars = (f"bars: 95 % stratified percentile bootstrap intervals over documents ({n_resamples} resamples, seed "
            f"{seed}); " if scores is not None else "no intervals; ")
    return caption(fig, "ROC-AUC of every score separating members from non-members per fine-tuning epoch; dotted: "
                        f"chance (0.5); {bars}{n_text(auc) or 'n as in the detection table'}.")


def fpr_by_size(fpr, sizes: Sequence[str], score: str, alphas: Sequence[float]):
    """FPR on non-members vs threshold, one line per model size; dotted, each of ``alphas`` (the run's thresholds,
    ``params.alphas``, at which the flag table counts): where it sits on every size's curve."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for i, size in enumerate(sizes):
        g = fpr[fpr["size"] == size]
        ax.plot(g.threshold, g.fpr, marker=".", label=f"size {size}", c=f"C{i}")
        ax.fill_between(g.threshold, *wilson_bounds(g.flagged, g.n), color=f"C{i}", alpha=0.12, lw=0)
        if len(g) and len(alphas):  # each size's FPR at the run's thresholds (the grid's, interpolated between)
            reference(*ax.plot(alphas, np.interp(alphas, g.threshold, g.fpr), ls="", marker="D", ms=5, mfc="none",
                               c=f"C{i}"))
    for a in alphas:
        reference(ax.axvline(a, ls=":", c="grey", lw=1))
        ax.annotate(f"α = {a:g}", (a, 0.5), xycoords=("data", "axes fraction"), rotation=90, fontsize=7,
                    ha="right", va="center", c="grey")
    ax.set_xlabel(f"threshold on {score}")
    ax.set_ylabel("FPR on non-members")
    ax.legend()
    fig.tight_layout()
    marks = (f"; dotted, with each size's FPR there (diamonds): the run's thresholds α = "
             f"{', '.join(format(a, 'g') for a in alphas)}, at which the flagged counts are tabled" if len(alphas) else "")
    return caption(fig, f"False positive rate on non-members vs the threshold on {score}, one line per tiny-model "
                        f"size; bands: 95 % Wilson intervals{marks}; {n_text(fpr, 'non-members')}.")


def sensitivity_by_source(df, cal, models: Sequence[str], tasks: Sequence[str], sources: Sequence[str],
                          target_fprs: Sequence[float]):
    """Sensitivity per source (box + points), one colour per task, one panel per model; dashed, over each box: the
    α of that source's domain (``cal`` from :func:`tables.domain_calibration_table`) at the target FPR closest to
    0.1 — code and text sources are judged against different α."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 3.8), sharey=True, squeeze=False)
    near = min(target_fprs, key=lambda t: abs(t - 0.1))
    for ax, model in zip(axes[0], models):
        for j, task in enumerate(tasks):
            g = df[(df.model == model) & (df.task_kind == task)]
            data = [g[g.source == s].sensitivity.to_numpy() for s in sources]
            pos = [i * (len(tasks) + 1) + j for i in range(len(sources))]
            ax.boxplot(data, positions=pos, widths=0.8, patch_artist=True,
                       boxprops={"facecolor": f"C{j}", "alpha": 0.5}, label=task)
            for x, d in zip(pos, data):
                ax.scatter([x] * len(d), d, s=12, c=f"C{j}", zorder=3)
            for x, src in zip(pos, sources):
                domain = df.loc[df.source == src, "domain"]
                a = cal[(cal.model == model) & (cal.task_kind == task) & (cal.target_fpr == near)
                        & (cal.domain == (domain.iloc[0] if len(domain) else None))]
                if len(a):
                    reference(ax.hlines(float(a.alpha.iloc[0]), x - 0.5, x + 0.5, colors=f"C{j}", linestyles="--",
                                        lw=1))
        ax.set_xticks([i * (len(tasks) + 1) + (len(tasks) - 1) / 2 for i in range(len(sources))], sources,
                      rotation=30, ha="right")  # source names are long: level, they overlap
        ax.set_title(model)
    axes[0][0].set_ylabel("sensitivity (max adjacent falloff)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    counts = df.groupby(["model", "task_kind", "source"]).size() if len(df) else None
    n = (f"n = {int(counts.min())}–{int(counts.max())} documents per box" if counts is not None and len(counts)
         else "no documents")
    return caption(fig, "PEARL sensitivity per source and task (boxes and points), one panel per model; dashed: the "
                        f"α calibrated on the domain's known-unseen source at the FPR nearest 0.1; {n}.")


def mia_vs_pearl(table4):
    """% flagged per epoch by the perplexity MIA and by PEARL (fixed thresholds), members vs non-members."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    series = [(split, ls, what, c) for split, ls in (("member", "-"), ("nonmember", "--"))
              for what, c in (("mia", "C0"), ("memo", "C1"))]
    for i, (split, ls, what, c) in enumerate(series):
        col = f"{split}_{what}_pct"
        if col in table4:
            n = table4[f"{split}_n"]
            flagged = (table4[col] / 100 * n).round()
            ax.errorbar(table4.epoch + dodge(i, len(series), table4.epoch), table4[col],
                        yerr=wilson_yerr(flagged, n, 100), capsize=3, ls=ls, c=c,
                        marker="o" if split == "member" else "x",
                        label=f"{'MIA (perplexity)' if what == 'mia' else 'PEARL'} · {split}s")
    ax.set_xlabel("fine-tuning epoch")
    ax.set_ylabel("% flagged (thresholds fixed once)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return caption(fig, "Share of members and non-members flagged per fine-tuning epoch by the perplexity MIA and by "
                        f"PEARL, thresholds fixed once at the first epoch; bars: 95 % Wilson intervals; members n = "
                        f"{int(table4.member_n.max())}, non-members n = {int(table4.nonmember_n.max())} (the half not "
                        f"used to fix the thresholds).")
