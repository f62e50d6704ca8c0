"""pearl_sizes' figure (plots.fpr_by_size) marks the run's thresholds: `'params.alphas=[0.1,0.2,0.3]'` sweeps them
inside one run, and the figure shows where each sits on every size's FPR curve, so it differs from the default
thresholds' figure. A small synthetic FPR table, drawn as the study draws it."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from memlab.methods.pearl import plots

GRID = [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3]


def _fpr() -> pd.DataFrame:
    """Two sizes' FPR on 10 non-members falling to 0 along the threshold grid (s sooner than m)."""
    flagged = {"s": (10, 6, 4, 2, 0, 0, 0), "m": (10, 6, 4, 2, 1, 0, 0)}
    rows = [{"size": size, "score": "sensitivity", "threshold": t, "fpr": f / 10, "flagged": f, "n": 10}
            for size, counts in flagged.items() for t, f in zip(GRID, counts)]
    return pd.DataFrame(rows)


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


@pytest.mark.parametrize("alphas", [[0.1, 0.2, 0.3], [0.16, 0.2, 0.25]])
def test_the_figure_marks_the_runs_thresholds(alphas):
    fig = plots.fpr_by_size(_fpr(), ["s", "m"], "sensitivity", alphas)
    (ax,) = fig.axes
    verticals = [line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert verticals == pytest.approx(alphas)
    assert [t.get_text() for t in ax.texts] == [f"α = {a:g}" for a in alphas]
    at_alphas = [line for line in ax.get_lines() if line.get_marker() == "D"]  # each size's FPR at each α
    assert [list(line.get_xdata()) for line in at_alphas] == [alphas, alphas]
    assert "the run's thresholds α = " + ", ".join(f"{a:g}" for a in alphas) in fig.get_label()


def test_swept_thresholds_draw_a_different_figure_from_the_defaults():
    swept = _png(plots.fpr_by_size(_fpr(), ["s", "m"], "sensitivity", [0.1, 0.2, 0.3]))
    default = _png(plots.fpr_by_size(_fpr(), ["s", "m"], "sensitivity", [0.16, 0.2, 0.25]))
    assert swept != default

