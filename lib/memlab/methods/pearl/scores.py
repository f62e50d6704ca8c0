"""PEARL's sensitivity scores and memorization decision (seed 001 eqs. 2–3 and §3.4, seed 003 eq. 3).

Notation: levels k_0 = 0 < k_1 < … < k_K; X_j = m(Y*_{k_j}) = mean over the i samples at level k_j of the
per-sample performance (seed 001 eq. 2, :mod:`.tasks`).

Sensitivity (seed 001 eq. 3), the maximum performance **falloff** between adjacent levels::

    sensitivity = max_{j = 0..K-1} (X_j − X_{j+1})                    mode = "signed" (default, the paper)
    sensitivity = max_{j = 0..K-1} |X_j − X_{j+1}|                    mode = "absolute" (the authors' code)

The paper writes j ∈ 1..k−1; we include the step from the unperturbed level 0, where the paper's Fig. 1/2
shows the drop of a memorized text happening. A signed sensitivity can be negative (performance only rose).

Generalization Failure Density (seed 003 eq. 3), with neighbourhood N_b(x) = the perturbed inputs::

    GFD = (1/|N|) Σ_{y ∈ N} 1[ m_b(M(x)) − m_b(M(y)) > τ_b ]

``gfd_unit = "level"`` (default): the neighbours are the K perturbed levels, m_b(M(x)) = X_0 and
m_b(M(y)) = X_j (sample means), so GFD ∈ {0, 1/K, …, 1}. ``gfd_unit = "sample"``: every (level, sample)
output is a neighbour, compared with X_0, so GFD has K·i steps.

Decision (seed 001 §3.4): memorized ⇔ score > α, with score = sensitivity or GFD (``decision_score``) and α
calibrated on known non-members (:mod:`.calibration`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from memlab.errors import ConfigError

SENSITIVITY_MODES = ("signed", "absolute")
GFD_UNITS = ("level", "sample")
DECISION_SCORES = ("sensitivity", "gfd")


def level_means(per_sample: Sequence[Sequence[float]]) -> np.ndarray:
    """X_j for every level: the mean of each level's per-sample performances (seed 001 eq. 2)."""
    return np.array([float(np.mean(s)) for s in per_sample])


def sensitivity(level_perf: Sequence[float], mode: str) -> float:
    """max_j (X_j − X_{j+1}) (``signed``) or max_j |X_j − X_{j+1}| (``absolute``) over adjacent levels."""
    if mode not in SENSITIVITY_MODES:
        raise ConfigError(f"sensitivity mode must be one of {SENSITIVITY_MODES}, got {mode!r}")
    x = np.asarray(level_perf, dtype=float)
    if x.size < 2:
        raise ValueError("sensitivity needs at least two levels")
    d = x[:-1] - x[1:]
    return float(np.max(np.abs(d) if mode == "absolute" else d))


def gfd(per_sample: Sequence[Sequence[float]], tau_b: float, unit: str) -> float:
    """Generalization Failure Density (seed 003 eq. 3); ``per_sample[0]`` is the unperturbed level."""
    if unit not in GFD_UNITS:
        raise ConfigError(f"gfd unit must be one of {GFD_UNITS}, got {unit!r}")
    if len(per_sample) < 2:
        raise ValueError("GFD needs at least one perturbed level")
    base = float(np.mean(per_sample[0]))
    if unit == "level":
        neigh = np.array([np.mean(s) for s in per_sample[1:]])
    else:
        neigh = np.concatenate([np.asarray(s, dtype=float) for s in per_sample[1:]])
    return float(np.mean(base - neigh > tau_b))


def memorized(score: float, alpha: float) -> bool:
    """The decision of seed 001 §3.4: memorized ⇔ score > α (strict)."""
    return bool(score > alpha)
