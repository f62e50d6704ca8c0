"""Calibrating PEARL's threshold α (τ_b) on known non-members (seed 001 §4.2 Fig. 6, seed 003 Fig. 10).

FPR(α) = #{non-members with score > α} / #non-members, the share of known-unseen documents PEARL would call
memorized at threshold α (:func:`memlab.metrics.detection.rates_at_threshold` with every label 0).
α at a target FPR = the smallest non-member score t with FPR(t) ≤ target
(:func:`memlab.metrics.detection.threshold_at_fpr`); if that is below ``floor`` (e.g. every non-member
score is ≤ 0), ``floor`` is used, since a threshold under the no-drop level says nothing.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from memlab.errors import MemlabError
from memlab.metrics.detection import rates_at_threshold, threshold_at_fpr


def fpr_curve(nonmember_scores: Sequence[float], thresholds: Sequence[float]) -> list[dict]:
    """Rows {threshold, fpr, flagged, n} for every threshold (the FPR-vs-threshold figure)."""
    s = np.asarray(nonmember_scores, dtype=float)
    if s.size == 0:
        raise MemlabError("calibration needs at least one known non-member score")
    zeros = np.zeros(s.size, dtype=int)
    rows = []
    for t in thresholds:
        r = rates_at_threshold(zeros, s, float(t))
        rows.append({"threshold": float(t), "fpr": r.fpr, "flagged": r.fp, "n": int(s.size)})
    return rows


def calibrate_alpha(nonmember_scores: Sequence[float], target_fpr: float, floor: float = 0.0) -> float:
    """α such that at most ``target_fpr`` of the known non-members score above it (never below ``floor``)."""
    if len(nonmember_scores) == 0:
        raise MemlabError("calibration needs at least one known non-member score")
    return max(float(threshold_at_fpr(list(nonmember_scores), target_fpr)), float(floor))
