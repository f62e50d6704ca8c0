"""The change in a share between two conditions on the same items (paired binary outcomes), with an interval that
does not collapse when no item changes (issue 49).

:func:`memlab.metrics.intervals.paired_sign` decides the *direction* of a change (McNemar's exact test on the
discordant items); its interval is conditional on how many items changed, so with no discordant item the change in
the share reads [0, 0]. A claim that a share stays *stable* needs the unconditional size of the change:

* :func:`paired_change` — the change (up − down) / n and a conservative interval: the share of discordant items
  d = (up + down) / n and the share of them that rose s = up / (up + down) each get an exact (Clopper–Pearson)
  interval at level 1 − (1 − level) / 2, so both hold jointly at ≥ ``level`` (Bonferroni), and the change d·(2s − 1)
  ranges over that rectangle. No discordant item among n still leaves |change| ≤ the exact upper limit of 0 / n.
* :func:`equivalence` — the verdict of such an interval against a margin ±m (two one-sided tests at the interval's
  level): within ±m, beyond ±m, or neither.
* :func:`paired_n_for_margin` — the n at which an observed share of discordant items would bound the change within
  ±m.
"""

from __future__ import annotations

from memlab.metrics.intervals import clopper_pearson, wilson_n_to_decide

__all__ = ["paired_change", "equivalence", "paired_n_for_margin"]


def _half_level(level: float) -> float:
    """Each of two intervals' level so that both hold jointly at ``level``."""
    return 1 - (1 - level) / 2


def paired_change(up: int, down: int, n: int, level: float = 0.95) -> tuple[float, float, float]:
    """(change in the share, low, high) for ``n`` items of which ``up`` went 0 → 1 and ``down`` went 1 → 0."""
    if n < 1 or up < 0 or down < 0 or up + down > n:
        raise ValueError(f"paired outcomes need 0 <= up + down <= n, n >= 1; got up {up}, down {down}, n {n}")
    d_lo, d_hi = clopper_pearson(up + down, n, _half_level(level))
    s_lo, s_hi = clopper_pearson(up, up + down, _half_level(level)) if up + down else (0.0, 1.0)
    lo = min(d_lo * (2 * s_lo - 1), d_hi * (2 * s_lo - 1))
    hi = max(d_lo * (2 * s_hi - 1), d_hi * (2 * s_hi - 1))
    return (up - down) / n, lo, hi


def equivalence(ci: tuple[float, float], margin: float) -> str:
    """"reproduced" when the interval lies within (−margin, margin) (the change is negligible), "contradicted" when
    it lies wholly beyond one side (a change larger than the margin), else "inconclusive"."""
    if margin <= 0:
        raise ValueError(f"an equivalence margin must be positive, got {margin}")
    lo, hi = ci
    if -margin < lo and hi < margin:
        return "reproduced"
    return "contradicted" if lo > margin or hi < -margin else "inconclusive"


def paired_n_for_margin(up: int, down: int, n: int, margin: float, level: float = 0.95) -> int | None:
    """The n at which the observed share of discordant items (exact upper limit at the half level) would fall below
    ``margin``, bounding the change within it; None when the discordant share itself is at or above the margin."""
    if not n or (up + down) / n >= margin:
        return None
    return wilson_n_to_decide((up + down) / n, margin, _half_level(level), exact=True)
