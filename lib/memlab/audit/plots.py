"""The audit's one figure: what each method found on the model under test (left) beside that method's recall and
false-positive rate on the tiny ground-truth zoo at the same rule (right); every share with its Wilson 95 % interval."""

from __future__ import annotations

CAPTION = ("Left: share of documents (PEARL, MIA), books (RECAP) or generations (SimpleTrace) that each method "
           "flags on the model under test, Wilson 95 % intervals, n per row in the audit table; 'known-unseen' rows "
           "are the method's false-positive rate on this model, and a row judged against one is shown with that control's "
           "rate (grey); rows with no same-domain control are not judged (no marker). Right: the audit's own "
           "procedure run blind on zoo checkpoints whose training set is known (audit_selfcheck): recall on members "
           "and FPR on non-members at the same rule; no marker = not measured.")

SELFCHECK_CAPTION = ("The audit run blind on zoo checkpoints whose training set is known: per method, the share of "
                     "members it flags (recall) and of non-members it flags (FPR) in the judged sources, pooled over "
                     "the checkpoints, Wilson 95 % intervals (n in selfcheck_rates). A method whose two markers "
                     "overlap cannot tell members from non-members of one domain; the blind baseline never looks at "
                     "the model.")


def findings(summary, model: str):
    import matplotlib.pyplot as plt
    import numpy as np

    rows = summary.reset_index(drop=True)
    y = np.arange(len(rows))[::-1]
    fig, (ax, gt) = plt.subplots(1, 2, figsize=(11, 1.2 + 0.26 * len(rows)), sharey=True,
                                 gridspec_kw={"width_ratios": [3, 2]})
    _dots(ax, y, rows.value, rows.ci_low, rows.ci_high, "C0", "o", "this model")
    if "control_value" in rows:
        _dots(ax, y - 0.2, rows.control_value, rows.control_value, rows.control_value, "0.5", "|",
              "its same-domain control")
    _dots(gt, y + 0.15, rows.gt_recall, rows.gt_recall_low, rows.gt_recall_high, "C2", "o", "zoo recall (members)")
    _dots(gt, y - 0.15, rows.gt_fpr, rows.gt_fpr_low, rows.gt_fpr_high, "C3", "x", "zoo FPR (non-members)")
    ax.set_yticks(y, [f"{m} — {f}" for m, f in zip(rows.method, rows.finding)], fontsize=7)
    for a, title in ((ax, f"found on {model}"), (gt, "same rule on the ground-truth zoo")):
        a.set_xlim(-0.02, 1.02)
        a.set_xlabel("share (Wilson 95 % interval)")
        a.set_title(title, fontsize=9)
        a.grid(axis="x", alpha=0.3)
    if rows.gt_recall.isna().all() and rows.gt_fpr.isna().all():
        gt.text(0.5, 0.5, "not measured:\nrun make reproduce\n(audit_selfcheck)", ha="center", va="center",
                transform=gt.transAxes, fontsize=9, color="0.4")
    else:
        gt.legend(fontsize=7, loc="lower right")
    if "control_value" in rows and rows.control_value.notna().any():
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def selfcheck(rates):
    """Recall and FPR per method of the audit run blind on the zoo (:mod:`memlab.audit.selfcheck`)."""
    import matplotlib.pyplot as plt
    import numpy as np

    rows = rates.reset_index(drop=True)
    y = np.arange(len(rows))[::-1]
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.3 * len(rows)))
    _dots(ax, y + 0.12, rows.recall, rows.recall_low, rows.recall_high, "C2", "o", "recall (members)")
    _dots(ax, y - 0.12, rows.fpr, rows.fpr_low, rows.fpr_high, "C3", "x", "FPR (non-members)")
    ax.set_yticks(y, list(rows.method), fontsize=8)
    ax.set_xlim(-0.02, 1.02)
    ax.set_xlabel("share of documents flagged (Wilson 95 % interval)")
    ax.set_title("the audit, blind, on zoo checkpoints with known members", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
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
