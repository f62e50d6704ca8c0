"""The audit's one figure: what each method found on the model under test (left) beside that method's recall and
false-positive rate on the tiny ground-truth zoo at the same rule (right); every share with its Wilson 95 % interval."""

from __future__ import annotations

import re

CAPTION = ("Left: share of documents (PEARL, MIA), books (RECAP) or generations (SimpleTrace) that each method "
           "flags on the model under test, Wilson 95 % intervals, n per row in the audit table; 'known-unseen' rows "
           "are the method's false-positive rate on this model, and a row judged against one is shown with that control's "
           "rate (grey); rows with no same-domain control are not judged (no marker). Right: the audit's own "
           "procedure run blind on zoo checkpoints whose training set is known (audit_selfcheck; SimpleTrace: "
           "trace_validation): recall on members and FPR on non-members at the same rule; where that run is missing "
           "the panel says 'not measured' and which run makes it.")

SELFCHECK_CAPTION = ("The audit run blind on zoo checkpoints whose training set is known: per method, the share of "
                     "members it flags (recall) and of non-members it flags (FPR) in the judged sources, pooled over "
                     "the checkpoints, Wilson 95 % intervals (n in selfcheck_rates); the pale bar under each marker "
                     "is the band the audit page prints: the central share of the rates single audits realized "
                     "(checkpoints × control draws; RECAP: targets × draws of the audit's few books per category). A method whose two markers overlap cannot tell members from "
                     "non-members of one domain; the blind baseline never looks at the model.")


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
    _not_measured(gt, y, rows)
    if "control_value" in rows and rows.control_value.notna().any():
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def _not_measured(ax, y, rows) -> None:
    """Say in words where the ground truth was not measured: across the panel when no row has it, else on each row
    without it — never a blank panel or a blank row."""
    import pandas as pd

    missing = (pd.to_numeric(rows.gt_recall, errors="coerce").isna()
               & pd.to_numeric(rows.gt_fpr, errors="coerce").isna()).to_numpy()
    if missing.all():
        ax.text(0.5, 0.5, "not measured —\n" + "\n".join(dict.fromkeys(map(not_measured, rows.gt_run))),
                ha="center", va="center", transform=ax.transAxes, fontsize=9, color="0.4", wrap=True)
        return
    for yi, why in zip(y[missing], rows.gt_run[missing]):
        ax.text(0.5, yi, f"not measured — {not_measured(why)}", ha="center", va="center", fontsize=6, color="0.4")
    ax.legend(fontsize=7, loc="lower right")


def not_measured(why) -> str:
    """What to run for a missing ground truth, from the row's ``gt_run`` (:func:`memlab.audit.ground_truth._run`
    names the run folder it looked for): "run `make reproduce` (audit_selfcheck)", else the reason as given."""
    found = re.search(r"results/([\w.-]+)/default has no run", str(why))
    if found:
        return f"run `make reproduce` ({found.group(1)})"
    return str(why).removeprefix("not measured: ") if isinstance(why, str) else "no zoo run"


def selfcheck(rates):
    """Recall and FPR per method of the audit run blind on the zoo (:mod:`memlab.audit.selfcheck`)."""
    import matplotlib.pyplot as plt
    import numpy as np

    rows = rates.reset_index(drop=True)
    y = np.arange(len(rows))[::-1]
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.3 * len(rows)))
    for what, dy, color in (("recall", 0.12, "C2"), ("fpr", -0.12, "C3")):
        ax.hlines(y + dy, rows[f"{what}_band_low"], rows[f"{what}_band_high"], color=color, alpha=0.25, lw=6)
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
