"""How the audit judges a source (issue 47): every finding against a known-unseen control of the same domain.

A *decision* is one document's flag under one method's rule (PEARL: score > α; an MIA score or the blind baseline:
score above the threshold fitted at the target FPR on the control's calibration half). A judged source is compared
with its control's evaluation half: the finding is the difference of flag rates with Newcombe's interval
(:func:`memlab.metrics.intervals.mover_contrast`), and the audit says in words whether the source is distinguishable
from unseen text. A source with no same-domain control is not judged (no count is printed for it)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from memlab.metrics.intervals import mover_contrast, wilson

NOT_JUDGED = "no same-domain control: not judged"
ABOVE = "flags more than on unseen text of its domain"
SAME = "not distinguishable from unseen text of its domain"
CONTROL = "known-unseen control (its FPR)"
DECISION_COLUMNS = ["method", "rule", "source", "doc_id", "half", "flagged"]


def fitted_flags(df: pd.DataFrame, score: str, control: str, target_fpr: float, method: str) -> pd.DataFrame:
    """Decisions of ``score`` (higher = member) with its threshold fitted at ``target_fpr`` on the calibration half
    of ``control``; returns the decisions (rows of every source) — the threshold is in ``rule``."""
    from memlab.methods.pearl.calibration import calibrate_alpha

    cal = df[(df.source == control) & (df.half == "calibration")][score].dropna().to_numpy()
    cut = calibrate_alpha(cal, target_fpr, floor=float("-inf"))
    d = df[df[score].notna()]
    return _decisions(d, d[score] > cut, method, f"{score} > {cut:.4g} (FPR {target_fpr} on {control}'s calibration half)")


def fixed_flags(df: pd.DataFrame, score: str, alpha: float, method: str) -> pd.DataFrame:
    """Decisions of ``score`` > ``alpha`` (PEARL's fixed threshold)."""
    return _decisions(df, df[score] > alpha, method, f"{score} > {alpha}")


def _decisions(df: pd.DataFrame, flagged: pd.Series, method: str, rule: str) -> pd.DataFrame:
    out = df[["source", "doc_id", "half"]].copy()
    out["flagged"], out["method"], out["rule"] = flagged.astype(bool).to_numpy(), method, rule
    return out[DECISION_COLUMNS]


def judged_rows(decisions: pd.DataFrame, controls: Mapping[str, str | None]) -> list[dict]:
    """One row per (method, source): a control's own FPR on its evaluation half; a judged source's flag rate, its
    difference from its control's rate with the 95 % interval and the conclusion in words; or "not judged"."""
    rows = []
    for (method, source), g in decisions.groupby(["method", "source"], sort=False):
        rule, row = g.rule.iloc[0], {"method": method, "source": source}
        if source in set(controls.values()):
            ev = g[g.half == "evaluation"]
            rows.append({**row, **_rate(int(ev.flagged.sum()), len(ev)), "rule": rule, "control": source,
                         "conclusion": CONTROL})
            continue
        control = controls.get(source)
        if control is None:
            rows.append({**row, **_rate(None, None), "rule": rule, "control": None, "conclusion": NOT_JUDGED})
            continue
        c = decisions[(decisions.method == method) & (decisions.source == control) & (decisions.half == "evaluation")]
        k, n, k0, n0 = int(g.flagged.sum()), len(g), int(c.flagged.sum()), len(c)
        diff, lo, hi = mover_contrast(k, n, k0, n0) if n and n0 else (None, None, None)
        rows.append({**row, **_rate(k, n), "rule": rule, "control": control, "control_k": k0, "control_n": n0,
                     "diff": diff, "diff_low": lo, "diff_high": hi,
                     "conclusion": ABOVE if lo is not None and lo > 0 else SAME})
    return rows


def _rate(k: int | None, n: int | None) -> dict:
    if k is None or not n:
        return {"k": None, "n": None, "value": None, "ci_low": None, "ci_high": None}
    lo, hi = wilson(k, n)
    return {"k": k, "n": n, "value": k / n, "ci_low": lo, "ci_high": hi}
