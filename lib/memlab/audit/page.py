"""The audit table as a model owner reads it on the page: one row per finding, counts as counts ("2/2 (100 %)"),
rates rounded, the control and the difference in percentage points with its interval, the conclusion in words and
the ground truth's recall and FPR with their n — or why it was not measured, in full. Only what the page shows:
``tables/audit.csv`` keeps every column at full precision (:func:`memlab.audit.study.summary_result`)."""

from __future__ import annotations

import math

import pandas as pd

from memlab.audit.ground_truth import LOW_FPRS

NONE = "—"
LOW_FPR = f"zoo TPR at {' / '.join(f'{100 * t:g} %' for t in LOW_FPRS)} FPR; AUC"
COLUMNS = ["method", "source: finding", "found on this model", "same-domain control", "difference (95 % CI)",
           "conclusion", "zoo recall (members)", "zoo FPR (non-members)", "zoo n / why none", LOW_FPR]


class AuditTable:
    """The readable audit table: HTML on the page (no index, nothing cut), plain text elsewhere."""

    def __init__(self, frame: pd.DataFrame):
        self.frame = frame

    def _repr_html_(self) -> str:
        return self.frame.to_html(index=False, border=0, na_rep=NONE, classes="audit")

    def __repr__(self) -> str:
        return self.frame.to_string(index=False, na_rep=NONE)


def owner_table(summary: pd.DataFrame) -> AuditTable:
    """The rows of the ``audit`` table (as the study builds it, or as tables/audit.csv reads back) in words."""
    rows = [_row(r) for r in summary.to_dict("records")]
    return AuditTable(pd.DataFrame(rows, columns=COLUMNS))


def _row(r: dict) -> dict:
    control, diff = _control(r)
    measured = _number(r.get("gt_recall")) is not None or _number(r.get("gt_fpr")) is not None
    return {"method": r["method"], "source: finding": r["finding"], "found on this model": count(r.get("k"), r.get("n")),
            "same-domain control": control, "difference (95 % CI)": diff, "conclusion": _conclusion(r),
            "zoo recall (members)": _rate(r.get("gt_recall"), r.get("gt_recall_low"), r.get("gt_recall_high")),
            "zoo FPR (non-members)": _rate(r.get("gt_fpr"), r.get("gt_fpr_low"), r.get("gt_fpr_high")),
            "zoo n / why none": _text(r.get("gt_n")) if measured else _text(r.get("gt_run")),
            LOW_FPR: _low_fpr(r)}


def _low_fpr(r: dict) -> str:
    """The attack's TPR at 1 % and 0.1 % FPR with exact intervals and its AUC on the zoo family sized for them
    (mia_low_fpr); "not resolvable" where that FPR can't be read; "—" for a rule it does not run."""
    auc = _number(r.get("gt_auc"))
    if auc is None:
        return NONE
    tprs = [_rate(r.get(f"gt_tpr_at_fpr_{t}"), r.get(f"gt_tpr_at_fpr_{t}_low"), r.get(f"gt_tpr_at_fpr_{t}_high"))
            .replace("not measured", "not resolvable") for t in (f"{t:g}" for t in LOW_FPRS)]
    return f"{' / '.join(tprs)}; AUC {auc:.3f} ({_text(r.get('gt_low_fpr_n'))})"


def _control(r: dict) -> tuple[str, str]:
    """(the control and its count, the difference with its interval) of a judged row; a control's own row says so."""
    name = _text(r.get("control"))
    if r.get("conclusion") == "known-unseen control (its FPR)":
        return "this row is the control", NONE
    if name == NONE:
        return NONE, NONE
    found = count(r.get("control_k"), r.get("control_n"))
    diff = _number(r.get("diff"))
    if diff is None:
        return f"{name}: {found}", NONE
    lo, hi = _number(r.get("diff_low")), _number(r.get("diff_high"))
    interval = f" ({_points(lo)} to {_points(hi)})" if lo is not None and hi is not None else ""
    return f"{name}: {found}", f"{_points(diff)} pp{interval}"


def _conclusion(r: dict) -> str:
    """The conclusion in words, with the row's note beside it when the note says something else (RECAP's ROUGE-L,
    SimpleTrace's span length, why a score is unavailable)."""
    said = [t for t in (_text(r.get("conclusion")), _text(r.get("note"))) if t != NONE]
    return "; ".join(dict.fromkeys(said)) or NONE


def count(k, n) -> str:
    """``k/n (share %)``; "—" when nothing was counted."""
    k, n = _number(k), _number(n)
    if k is None or not n:
        return NONE
    return f"{int(round(k))}/{int(round(n))} ({percent(k / n)})"


def percent(share: float) -> str:
    """A share as a percentage rounded to one decimal, trailing ".0" dropped: 0.2407 → "24.1 %", 1.0 → "100 %"."""
    return f"{_round1(100 * share)} %"


def _rate(value, low, high) -> str:
    v = _number(value)
    if v is None:
        return "not measured"
    lo, hi = _number(low), _number(high)
    return percent(v) + (f" ({_round1(100 * lo)}–{_round1(100 * hi)} %)" if lo is not None and hi is not None else "")


def _points(share_diff: float) -> str:
    """A difference of shares in percentage points, signed (the minus sign typeset)."""
    p = _round1(100 * share_diff)
    return ("+" + p if not p.startswith("-") and p != "0" else p).replace("-", "−")


def _round1(x: float) -> str:
    s = f"{x:.1f}"
    s = s[:-2] if s.endswith(".0") else s
    return "0" if s == "-0" else s


def _number(x) -> float | None:
    if x is None or isinstance(x, str):
        return None
    x = float(x)
    return None if math.isnan(x) else x


def _text(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return NONE
    return str(x)
