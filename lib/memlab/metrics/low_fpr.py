"""Membership inference read at low false-positive rates (Carlini et al. 2022, "Membership inference attacks from
first principles"): TPR at a fixed FPR with its exact interval, a threshold fitted on held-out non-members, the
exact ROC curve and the AUC with a bootstrap interval, all from member and non-member scores (higher = member).

The rules are :mod:`memlab.metrics.detection`'s, which this module reads through (one definition each):

* decision rule at threshold t: member iff score > t (a score equal to t is a non-member call);
* threshold at target FPR α on n non-members: the smallest t such that #{non-members with score > t} / n ≤ α. The
  count only drops at non-member scores, so t is a non-member score (the (⌊α·n⌋ + 1)-th largest) or −inf when
  α·n ≥ n. Non-members tied with t are not counted, so the realized FPR is ≤ α, lower when ties straddle the cut;
* TPR = #{members with score > t} / #members, with a Clopper–Pearson interval
  (:func:`memlab.metrics.intervals.clopper_pearson`);
* resolution: n non-members show FPRs in steps of 1/n. When 1/n > α the only FPR ≤ α they can show is 0: the TPR
  read is the TPR at FPR 0, and the point says ``resolvable = False``;
* ROC: (FPR(t), TPR(t)) at every distinct score and −inf (:func:`memlab.metrics.detection.roc_curve`);
* AUC = P(member score > non-member score) + ½ P(tie) (Mann–Whitney), bootstrap percentile interval resampling
  members and non-members independently (:func:`memlab.metrics.detection.roc_auc_ci`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from memlab.metrics import detection
from memlab.metrics.bootstrap import BootstrapResult
from memlab.metrics.intervals import clopper_pearson

__all__ = ["OperatingPoint", "tpr_at_fpr", "tpr_at_fpr_held_out", "roc_curve", "auc_with_interval"]


@dataclass(frozen=True)
class OperatingPoint:
    """TPR at a target FPR. ``fpr`` is realized on the non-members the FPR is read on (the calibration ones for
    :func:`tpr_at_fpr`, the held-out ones for :func:`tpr_at_fpr_held_out`); ``tpr_ci``/``fpr_ci`` are exact
    (Clopper–Pearson) intervals at ``level``; ``resolvable`` is 1/n_calibration ≤ target_fpr (the calibration
    non-members can show an FPR above 0 and ≤ the target at all); ``min_fpr`` = 1/n_calibration."""

    target_fpr: float
    threshold: float
    tpr: float
    fpr: float
    tpr_ci: tuple[float, float]
    fpr_ci: tuple[float, float]
    tp: int
    n_members: int
    fp: int
    n_nonmembers: int
    n_calibration: int
    resolvable: bool
    min_fpr: float
    level: float


def _scores(x: Sequence[float], name: str) -> np.ndarray:
    if x is None or isinstance(x, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of numbers")
    s = np.asarray(x, dtype=float)
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence")
    if not np.isfinite(s).all():
        raise ValueError(f"{name} contain NaN or inf")
    return s


def _point(members: np.ndarray, calibration: np.ndarray, test: np.ndarray, fpr: float, level: float) -> OperatingPoint:
    t = detection.threshold_at_fpr(calibration, fpr)
    tp, fp = int(np.sum(members > t)), int(np.sum(test > t))
    return OperatingPoint(target_fpr=float(fpr), threshold=t, tpr=tp / members.size, fpr=fp / test.size,
                          tpr_ci=clopper_pearson(tp, members.size, level), fpr_ci=clopper_pearson(fp, test.size, level),
                          tp=tp, n_members=int(members.size), fp=fp, n_nonmembers=int(test.size),
                          n_calibration=int(calibration.size), resolvable=bool(1 / calibration.size <= fpr),
                          min_fpr=1 / calibration.size, level=float(level))


def tpr_at_fpr(member_scores: Sequence[float], nonmember_scores: Sequence[float], fpr: float, *,
               level: float) -> OperatingPoint:
    """TPR at the threshold t fitted on all the non-members (module docstring: the smallest t with
    #{non-members > t}/n ≤ ``fpr``; member iff score > t), the FPR realized on the same non-members, and exact
    ``level`` intervals. ``resolvable`` is False when 1/n > ``fpr``: then t is the top non-member score and the TPR
    is the TPR at FPR 0. Equals :func:`memlab.metrics.detection.tpr_at_fpr` (the highest TPR over thresholds with
    FPR ≤ fpr)."""
    m, n = _scores(member_scores, "member_scores"), _scores(nonmember_scores, "nonmember_scores")
    if not 0 <= fpr <= 1:
        raise ValueError(f"fpr must be in [0, 1], got {fpr}")
    return _point(m, n, n, fpr, level)


def tpr_at_fpr_held_out(member_scores: Sequence[float], nonmember_scores: Sequence[float], fpr: float, *,
                        calibration: Sequence[int] | None, seed: int | None, level: float) -> OperatingPoint:
    """The threshold fitted (as :func:`tpr_at_fpr`) on a calibration part of the non-members only; TPR over all
    members, FPR realized on the other non-members (an unbiased read of the FPR the threshold gives on new
    non-members). The calibration part is either ``calibration`` (indices into ``nonmember_scores``) or, with
    ``seed``, a random half: the first ⌊n/2⌋ of ``np.random.default_rng(seed).permutation(n)``. Give exactly one;
    both parts must be non-empty. ``resolvable`` refers to the calibration part's size."""
    m, n = _scores(member_scores, "member_scores"), _scores(nonmember_scores, "nonmember_scores")
    if not 0 <= fpr <= 1:
        raise ValueError(f"fpr must be in [0, 1], got {fpr}")
    if (calibration is None) == (seed is None):
        raise ValueError("give exactly one of calibration (indices) and seed (a random half)")
    if calibration is None:
        idx = np.random.default_rng(seed).permutation(n.size)[:n.size // 2]
    else:
        idx = np.unique(np.asarray(calibration, dtype=np.int64))
        if idx.size != len(calibration) or (idx < 0).any() or (idx >= n.size).any():
            raise ValueError("calibration must be distinct indices into nonmember_scores")
    in_cal = np.zeros(n.size, dtype=bool)
    in_cal[idx] = True
    if in_cal.all() or not in_cal.any():
        raise ValueError("the calibration part and the held-out part must both be non-empty")
    return _point(m, n[in_cal], n[~in_cal], fpr, level)


def roc_curve(member_scores: Sequence[float], nonmember_scores: Sequence[float]) -> detection.RocCurve:
    """The exact ROC step curve: (FPR(t), TPR(t)) for t = every distinct score, decreasing, then −inf (rule
    score > t; first point (0, 0), last (1, 1)). :func:`memlab.metrics.detection.roc_curve` on labels 1 =
    member."""
    m, n = _scores(member_scores, "member_scores"), _scores(nonmember_scores, "nonmember_scores")
    return detection.roc_curve(np.r_[np.ones(m.size, int), np.zeros(n.size, int)], np.r_[m, n])


def auc_with_interval(member_scores: Sequence[float], nonmember_scores: Sequence[float], *, n_resamples: int,
                      seed: int, level: float) -> BootstrapResult:
    """AUC = P(member score > non-member score) + ½ P(tie), with a ``level`` percentile bootstrap interval over
    ``n_resamples`` resamples that draw members and non-members independently with replacement (each keeping its
    count), seeded with ``np.random.default_rng(seed)`` (:func:`memlab.metrics.detection.roc_auc_ci`)."""
    m, n = _scores(member_scores, "member_scores"), _scores(nonmember_scores, "nonmember_scores")
    return detection.roc_auc_ci(np.r_[np.ones(m.size, int), np.zeros(n.size, int)], np.r_[m, n],
                                n_resamples=n_resamples, seed=seed, ci=level)
