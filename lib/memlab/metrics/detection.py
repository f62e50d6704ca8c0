"""Detector statistics for membership / memorization detectors.

Conventions (one set, used everywhere in memlab):
  * ``labels``: 1 (True) = member / memorized = the positive class, 0 = non-member.
  * ``scores``: higher = more likely member. (Loss-like scores must be negated first; see
    :mod:`memlab.metrics.mia`.)
  * decision rule at threshold t: predict member iff ``score > t`` — the form of PEARL's rule
    "memorized iff sensitivity(X) > α" (seed 001 §3.3) and of GFD's τ (seed 003 eq. 3).

Definitions::

    TPR(t) = #{members with s > t} / #members          FPR(t) = #{non-members with s > t} / #non-members
    ROC-AUC = P(s_member > s_nonmember) + ½·P(equal)   (Mann–Whitney U / (n₊ n₋); = trapezoidal area)
    TPR@FPR=α = max{TPR(t) : FPR(t) ≤ α}               (the low-FPR operating point of Carlini et al. 2022)
    Youden J = max_t TPR(t) − FPR(t)
    precision(t) = TP / (TP + FP)   (0/0 → 0.0), recall(t) = TPR(t)

Threshold calibration on known non-members (PEARL's α / seed 003's τ chosen for a target FPR):
:func:`threshold_at_fpr` returns the smallest t among the non-member scores (or −inf) such that the
fraction of non-members with score > t is ≤ the target. With n non-members and target α it is the
(⌊α·n⌋ + 1)-th largest non-member score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from memlab.metrics.bootstrap import BootstrapResult

__all__ = [
    "RocCurve",
    "Rates",
    "roc_curve",
    "roc_auc",
    "roc_auc_ci",
    "tpr_at_fpr",
    "threshold_at_fpr",
    "youden_j",
    "rates_at_threshold",
]


@dataclass(frozen=True)
class RocCurve:
    """TPR/FPR for every distinct threshold, thresholds decreasing (first point (0, 0), last (1, 1))."""

    thresholds: np.ndarray
    fpr: np.ndarray
    tpr: np.ndarray


@dataclass(frozen=True)
class Rates:
    threshold: float
    tpr: float  # = recall
    fpr: float
    precision: float
    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def recall(self) -> float:
        return self.tpr


def _check(labels: object, scores: object, *, need_both: bool = True) -> tuple[np.ndarray, np.ndarray]:
    for name, v in (("labels", labels), ("scores", scores)):
        if v is None or isinstance(v, (str, bytes)):
            raise TypeError(f"{name} must be a sequence, got {type(v).__name__}")
    y = np.asarray(labels)
    s = np.asarray(scores, dtype=float)
    if y.ndim != 1 or s.ndim != 1 or y.shape != s.shape:
        raise ValueError(f"labels and scores must be 1-D of equal length, got {y.shape} and {s.shape}")
    if y.size and not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0/1 (1 = member)")
    y = y.astype(bool)
    if not np.all(np.isfinite(s)):
        raise ValueError("scores contain NaN or inf")
    if need_both and (y.all() or not y.any()):
        raise ValueError("need at least one member (label 1) and one non-member (label 0)")
    return y, s


def roc_curve(labels: Sequence[int], scores: Sequence[float]) -> RocCurve:
    """FPR and TPR at every distinct threshold (rule ``score > t``), thresholds decreasing.

    The thresholds are the distinct scores in decreasing order followed by −inf; at the first (the
    maximum) nothing is predicted member, at −inf everything is.
    """
    y, s = _check(labels, scores)
    order = np.argsort(-s, kind="mergesort")
    s_sorted, y_sorted = s[order], y[order]
    # index of the last element of each run of equal scores
    last = np.r_[np.nonzero(np.diff(s_sorted))[0], s_sorted.size - 1]
    tp = np.cumsum(y_sorted)[last]
    fp = np.cumsum(~y_sorted)[last]
    n_pos, n_neg = y.sum(), (~y).sum()
    thresholds = np.r_[s_sorted[last], -np.inf]
    tpr = np.r_[0.0, tp / n_pos]
    fpr = np.r_[0.0, fp / n_neg]
    return RocCurve(thresholds=thresholds, fpr=fpr, tpr=tpr)


def _auc_from_ranks(y: np.ndarray, s: np.ndarray) -> np.ndarray | float:
    """Mann–Whitney AUC along the last axis (ties count ½); works on 1-D or B×n arrays."""
    from scipy.stats import rankdata

    ranks = rankdata(s, axis=-1)
    n_pos = y.sum(axis=-1)
    n_neg = y.shape[-1] - n_pos
    u = (ranks * y).sum(axis=-1) - n_pos * (n_pos + 1) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        return u / (n_pos * n_neg)


def roc_auc(labels: Sequence[int], scores: Sequence[float]) -> float:
    """ROC-AUC = P(member score > non-member score) + ½ P(tie); 0.5 = chance, 1 = perfect."""
    y, s = _check(labels, scores)
    return float(_auc_from_ranks(y, s))


def roc_auc_ci(
    labels: Sequence[int],
    scores: Sequence[float],
    *,
    n_resamples: int,
    seed: int = 0,
    ci: float = 0.95,
) -> BootstrapResult:
    """ROC-AUC with a stratified percentile bootstrap CI.

    Members and non-members are resampled separately (with replacement, keeping both counts), so every
    resample has both classes; vectorized over resamples, seeded with ``np.random.default_rng(seed)``.
    """
    y, s = _check(labels, scores)
    if int(n_resamples) < 2 or not 0 < ci < 1:
        raise ValueError("n_resamples must be >= 2 and ci in (0, 1)")
    pos, neg = s[y], s[~y]
    rng = np.random.default_rng(seed)
    b = int(n_resamples)
    chunk = max(1, 4_000_000 // s.size)
    lab = np.r_[np.ones(pos.size, bool), np.zeros(neg.size, bool)]
    stats = []
    for start in range(0, b, chunk):
        k = min(chunk, b - start)
        sp = pos[rng.integers(0, pos.size, size=(k, pos.size))]
        sn = neg[rng.integers(0, neg.size, size=(k, neg.size))]
        stats.append(_auc_from_ranks(np.broadcast_to(lab, (k, lab.size)), np.hstack([sp, sn])))
    st = np.concatenate(stats)
    lo, hi = np.quantile(st, [(1 - ci) / 2, 1 - (1 - ci) / 2])
    return BootstrapResult(
        estimate=float(_auc_from_ranks(y, s)),
        mean=float(st.mean()),
        sd=float(st.std(ddof=1)),
        ci_low=float(lo),
        ci_high=float(hi),
        ci=float(ci),
        n_units=int(s.size),
        n_resamples=b,
        seed=seed,
    )


def tpr_at_fpr(labels: Sequence[int], scores: Sequence[float], fpr: float = 0.01) -> float:
    """Highest TPR over thresholds whose FPR ≤ ``fpr`` (e.g. 0.01, 0.05); 0.0 if only t = max qualifies."""
    if not 0 <= fpr <= 1:
        raise ValueError(f"fpr must be in [0, 1], got {fpr}")
    c = roc_curve(labels, scores)
    ok = c.fpr <= fpr + 1e-12
    return float(c.tpr[ok].max())


def threshold_at_fpr(nonmember_scores: Sequence[float], target_fpr: float) -> float:
    """Calibrate t on known non-members: the smallest candidate t with #{s > t}/n ≤ ``target_fpr``.

    Candidates are the non-member scores and −inf; returns the (⌊α·n⌋+1)-th largest score, or −inf when
    α·n ≥ n. The FPR achieved on these non-members is ≤ α (lower when ties straddle the cut).
    """
    if nonmember_scores is None or isinstance(nonmember_scores, (str, bytes)):
        raise TypeError("nonmember_scores must be a sequence of numbers")
    s = np.asarray(nonmember_scores, dtype=float)
    if s.ndim != 1 or s.size == 0:
        raise ValueError("nonmember_scores must be a non-empty 1-D sequence")
    if not np.all(np.isfinite(s)):
        raise ValueError("nonmember_scores contain NaN or inf")
    if not 0 <= target_fpr <= 1:
        raise ValueError(f"target_fpr must be in [0, 1], got {target_fpr}")
    k = int(np.floor(target_fpr * s.size + 1e-9))  # allowed false positives
    if k >= s.size:
        return float("-inf")
    return float(np.sort(s)[::-1][k])


def youden_j(labels: Sequence[int], scores: Sequence[float]) -> tuple[float, float]:
    """(J, threshold) maximizing J = TPR − FPR (first, i.e. highest, threshold on ties)."""
    c = roc_curve(labels, scores)
    j = c.tpr - c.fpr
    i = int(np.argmax(j))
    return float(j[i]), float(c.thresholds[i])


def rates_at_threshold(labels: Sequence[int], scores: Sequence[float], threshold: float) -> Rates:
    """Confusion counts, TPR (= recall), FPR and precision at rule ``score > threshold``.

    Works with one class only (the undefined rate is reported as 0.0).
    """
    y, s = _check(labels, scores, need_both=False)
    pred = s > threshold
    tp = int(np.sum(pred & y))
    fp = int(np.sum(pred & ~y))
    fn = int(np.sum(~pred & y))
    tn = int(np.sum(~pred & ~y))
    return Rates(
        threshold=float(threshold),
        tpr=tp / (tp + fn) if tp + fn else 0.0,
        fpr=fp / (fp + tn) if fp + tn else 0.0,
        precision=tp / (tp + fp) if tp + fp else 0.0,
        tp=tp,
        fp=fp,
        fn=fn,
        tn=tn,
    )
