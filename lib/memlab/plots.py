"""Figure helpers shared by the methods: reference artists (the paper's value, chance and target lines) kept apart
from the data; Wilson and percentile-bootstrap error bars; dodging series drawn at the same x.

A reference artist carries the gid ``"reference"``: :func:`memlab.report.degenerate` skips it, so an all-zeros
figure with the paper's line drawn is still reported as having nothing to show.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from memlab.metrics.intervals import wilson

REFERENCE = "reference"


def reference(*artists):
    """Mark ``artists`` as reference (not data) for :func:`memlab.report.degenerate`; returns the first."""
    for a in artists:
        a.set_gid(REFERENCE)
    return artists[0] if artists else None


def is_reference(artist) -> bool:
    return artist.get_gid() == REFERENCE


def paper_line(ax, mark: tuple[float, str] | None, *, scale: float = 1.0):
    """The paper's value (``mark`` from :func:`memlab.comparison.paper_mark`: value, "paper, <where>") as a dotted
    black horizontal line labelled where the paper gives it; nothing when ``mark`` is None."""
    if mark is None:
        return None
    return reference(ax.axhline(scale * mark[0], c="k", ls=":", lw=1.2, label=mark[1]))


def wilson_bounds(flagged, n, scale: float = 1.0):
    """Lower and upper 95 % Wilson bounds (× ``scale``) of each share ``flagged / n``, as two lists."""
    bounds = [wilson(int(k), int(m)) for k, m in zip(flagged, n)]
    return [scale * lo for lo, _ in bounds], [scale * hi for _, hi in bounds]


def wilson_yerr(flagged, n, scale: float = 1.0):
    """``yerr`` for ``errorbar``: distances from each share to its 95 % Wilson bounds (× ``scale``)."""
    lo, hi = wilson_bounds(flagged, n, scale)
    mid = [scale * int(k) / int(m) if int(m) else 0.0 for k, m in zip(flagged, n)]
    return [max(0.0, m - a) for m, a in zip(mid, lo)], [max(0.0, b - m) for m, b in zip(mid, hi)]


def dodge(i: int, k: int, x) -> float:
    """Horizontal offset of series ``i`` of ``k`` drawn at the same x values, so that their error bars don't hide
    each other: spread over a fifth of the smallest gap between x values (a fifth of 1 for a single x)."""
    xs = sorted(set(float(v) for v in x))
    gap = min((b - a for a, b in zip(xs, xs[1:])), default=1.0)
    return (i - (k - 1) / 2) * gap / 5 / max(k - 1, 1)


def bootstrap_yerr(samples: Iterable[Sequence[float]], *, n_resamples: int, seed: int, ci: float = 0.95):
    """``yerr`` for ``errorbar``: per sample, the distances from its plain mean to the percentile bootstrap interval
    of that mean (:func:`memlab.metrics.bootstrap.bootstrap_mean`, ``n_resamples`` resamples, ``seed``); 0 for an
    empty sample."""
    from memlab.metrics.bootstrap import bootstrap_mean

    lower, upper = [], []
    for x in samples:
        x = [float(v) for v in x]
        if not x:
            lower.append(0.0)
            upper.append(0.0)
            continue
        b = bootstrap_mean(x, n_resamples=n_resamples, seed=seed, ci=ci)
        lower.append(max(0.0, b.estimate - b.ci_low))
        upper.append(max(0.0, b.ci_high - b.estimate))
    return lower, upper


def roc_low_fpr(curves, *, n_members: int, n_nonmembers: int, marks: Sequence[float]):
    """ROC curves on log-log axes, one line per attack (``curves``: attack name → a curve with ``fpr`` and ``tpr``
    arrays, e.g. :func:`memlab.metrics.low_fpr.roc_curve`), for reading TPR at low FPR (Carlini et al. 2022, fig. 1).
    FPR runs from 1/``n_nonmembers`` (the smallest FPR above 0 those non-members can show) to 1, TPR from
    1/``n_members`` to 1; a dotted vertical line at each FPR in ``marks`` (e.g. 1 % and 0.1 %), the chance diagonal,
    and, where a mark lies below 1/n_nonmembers, a grey band over the FPRs these non-members cannot resolve (all
    reference artists). Points at FPR 0 or TPR 0 have no place on log axes and are not drawn. Returns the figure,
    its caption set."""
    import matplotlib.pyplot as plt

    if n_members < 1 or n_nonmembers < 1:
        raise ValueError("roc_low_fpr needs at least one member and one non-member")
    lo_x, lo_y = 1 / n_nonmembers, 1 / n_members
    left = min([lo_x, *marks])
    fig, ax = plt.subplots(figsize=(7.8, 4.2))
    for name, c in curves.items():
        ax.plot(c.fpr, c.tpr, lw=1.3, label=str(name))
    reference(ax.plot([left, 1], [left, 1], c="grey", ls="--", lw=0.8)[0])
    for m in marks:
        reference(ax.axvline(m, c="k", ls=":", lw=0.9))
        ax.annotate(f"{100 * m:g} %", (m, 1), xytext=(2, -10), textcoords="offset points", fontsize=7, gid=REFERENCE)
    if left < lo_x:
        reference(ax.axvspan(left, lo_x, color="0.9", lw=0))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(left, 1)
    ax.set_ylim(min(lo_y, left), 1.05)
    ax.set_xlabel("false-positive rate")
    ax.set_ylabel("true-positive rate")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)  # beside: no curve hidden
    fig.tight_layout()
    fig.set_label(f"ROC curves on log-log axes, one line per attack; {n_members} members, {n_nonmembers} non-members "
                  f"(smallest FPR above 0: {lo_x:.3g}); dotted: FPR = "
                  + ", ".join(f"{100 * m:g} %" for m in marks) + "; dashed: chance; points at FPR 0 not drawn.")
    return fig
