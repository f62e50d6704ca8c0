"""The audit's one figure: what each method found on the model under test (left) beside that method's recall and
false-positive rate on the tiny ground-truth zoo at the same rule (right); every share with its Wilson 95 % interval."""

from __future__ import annotations

CAPTION = ("Left: share of documents (PEARL, MIA), books (RECAP) or generations (SimpleTrace) that each method "
           "flags on the model under test, Wilson 95 % intervals, n per row in the audit table; 'known-unseen' rows "
           "are the method's false-positive rate on this model. Right: the same rule's recall on members and FPR "
           "on non-members of the tiny ground-truth zoo (the run named in the table); no marker = not measured.")


def findings(summary, model: str):
    import matplotlib.pyplot as plt
    import numpy as np

    rows = summary.reset_index(drop=True)
    y = np.arange(len(rows))[::-1]
    fig, (ax, gt) = plt.subplots(1, 2, figsize=(11, 1.2 + 0.26 * len(rows)), sharey=True,
                                 gridspec_kw={"width_ratios": [3, 2]})
    _dots(ax, y, rows.value, rows.ci_low, rows.ci_high, "C0", "o", "this model")
    _dots(gt, y + 0.15, rows.gt_recall, rows.gt_recall_low, rows.gt_recall_high, "C2", "o", "zoo recall (members)")
    _dots(gt, y - 0.15, rows.gt_fpr, rows.gt_fpr_low, rows.gt_fpr_high, "C3", "x", "zoo FPR (non-members)")
    ax.set_yticks(y, [f"{m} — {f}" for m, f in zip(rows.method, rows.finding)], fontsize=7)
    for a, title in ((ax, f"found on {model}"), (gt, "same rule on the ground-truth zoo")):
        a.set_xlim(-0.02, 1.02)
        a.set_xlabel("share (Wilson 95 % interval)")
        a.set_title(title, fontsize=9)
        a.grid(axis="x", alpha=0.3)
    gt.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def _dots(ax, y, value, low, high, color, marker, label):
    import numpy as np

    v = np.asarray(value, dtype=float)
    ok = ~np.isnan(v)
    if not ok.any():
        return
    lo = np.clip(v - np.asarray(low, dtype=float), 0, None)
    hi = np.clip(np.asarray(high, dtype=float) - v, 0, None)
    ax.errorbar(v[ok], np.asarray(y)[ok], xerr=[lo[ok], hi[ok]], fmt=marker, color=color, ms=4, capsize=2, label=label)
