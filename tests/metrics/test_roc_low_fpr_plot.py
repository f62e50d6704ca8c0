"""The log-log ROC figure (issue 51): a PNG with one data line per attack and the low-FPR marks as references."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from memlab.metrics.low_fpr import roc_curve  # noqa: E402
from memlab.plots import is_reference, roc_low_fpr  # noqa: E402


@pytest.mark.parametrize("n_nonmembers", [2000, 50])
def test_roc_low_fpr_writes_a_png_with_one_line_per_attack(tmp_path, n_nonmembers):
    import matplotlib.pyplot as plt

    from memlab.report import degenerate

    rng = np.random.default_rng(0)
    non = rng.normal(0, 1, n_nonmembers)
    curves = {f"attack {d}": roc_curve(rng.normal(d, 1, 300), non) for d in (0.5, 1.0, 2.0)}
    fig = roc_low_fpr(curves, n_members=300, n_nonmembers=n_nonmembers, marks=(0.01, 0.001))
    path = tmp_path / "roc.png"
    fig.savefig(path, dpi=80)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ax = fig.axes[0]
    data = [ln for ln in ax.get_lines() if not is_reference(ln)]
    assert [ln.get_label() for ln in data] == list(curves)
    assert len([ln for ln in ax.get_lines() if is_reference(ln)]) == 3  # two marks and the chance diagonal
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_xlim() == pytest.approx((min(1 / n_nonmembers, 0.001), 1))
    # the band of unresolvable FPRs is drawn only when a mark lies below 1/n
    assert len(ax.patches) == (1 if 1 / n_nonmembers > 0.001 else 0)
    assert degenerate(fig) == "" and "one line per attack" in fig.get_label()
    # the legend sits beside the axes, never over a curve (inside them every corner can hide one: near-blind attacks
    # run along the chance diagonal, perfect ones along the top)
    fig.canvas.draw()
    legend, axes = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.x0 >= axes.x1 and legend.x1 <= fig.bbox.x1   # right of the axes, inside the figure
    plt.close(fig)
