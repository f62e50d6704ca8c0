"""Honest figures (issue #31 item 4): intervals drawn where a table has the units to give them, the paper's value
drawn from conf/paper where the figure plots the same quantity, and a figure with nothing to show reported (and shown
in the notebook) as a sentence — even with the paper's line, chance lines or error-bar caps drawn on it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from memlab.comparison import paper_dir  # noqa: E402
from memlab.methods.recap import evaluate as E  # noqa: E402
from memlab.methods.recap import plots as R  # noqa: E402
from memlab.methods.trace import plots as T  # noqa: E402
from memlab.metrics.bootstrap import bootstrap_mean  # noqa: E402
from memlab.metrics.intervals import wilson  # noqa: E402
from memlab.report import degenerate  # noqa: E402
from memlab.results import StudyResult  # noqa: E402

BOOT = {"n_resamples": 200, "seed": 7}


def conf_value(claim_id: str) -> float:
    """The claim's value read straight from conf/paper/*.yaml (not through paper_mark, which the figures use)."""
    for path in sorted(paper_dir().glob("*.yaml")):
        for c in yaml.safe_load(path.read_text()).get("claims", []):
            if c["id"] == claim_id:
                return float(c["value"])
    raise AssertionError(claim_id)


def bars(ax, label: str) -> list[tuple[float, float]]:
    """(low, high) of each error bar of the series ``label`` on ``ax``."""
    for cont in ax.containers:
        if cont.get_label() == label:
            return [(float(s[0][1]), float(s[1][1])) for s in cont.lines[2][0].get_segments()]
    raise AssertionError(f"no error bars labelled {label!r}")


def dotted_at(ax) -> list[float]:
    return [float(ln.get_ydata()[0]) for ln in ax.get_lines() if ln.get_gid() == "reference"]


def gains_events() -> pd.DataFrame:
    """Per-event best ROUGE-L by round, as evaluate.feedback_gains gives it: 5 events of one target, 2 improve."""
    best0 = [0.10, 0.20, 0.05, 0.30, 0.15]
    best1 = [0.10, 0.40, 0.05, 0.35, 0.15]
    rows = [{"target": "t", "category": "public_domain", "split": None, "event": f"e{i}", "round": k, "best": b,
             "gain": b - best0[i], "floor": 0.2} for i in range(5) for k, b in ((0, best0[i]), (1, best1[i]))]
    return pd.DataFrame(rows)


def test_feedback_gains_bars_are_the_seeded_bootstrap_and_wilson():
    ev = gains_events()
    summary = E.gains_summary(ev)
    fig = R.feedback_gains(summary, ev, **BOOT)
    left, right = fig.axes
    for (lo, hi), k in zip(bars(left, "t"), (0, 1)):
        b = bootstrap_mean(ev[ev["round"] == k].best, **BOOT)
        assert (lo, hi) == pytest.approx((b.ci_low, b.ci_high))
        assert lo < ev[ev["round"] == k].best.mean() < hi
    assert bars(right, "t") == [pytest.approx(wilson(0, 5)), pytest.approx(wilson(2, 5))]
    again = R.feedback_gains(summary, ev, **BOOT)  # seeded: the same bars every run
    assert bars(again.axes[0], "t") == bars(left, "t")
    label = fig.get_label()
    assert "percentile bootstrap" in label and "seed 7" in label and "n = 5 events" in label
    assert degenerate(fig) == ""
    plt.close("all")


def test_filter_tradeoff_bars_and_the_papers_value_from_conf():
    events = pd.DataFrame({"feedback_calls": [1, 2, 1, 1], "recap": [0.5, 0.2, 0.6, 0.1],
                           "dsp_jb": [0.3, 0.2, 0.4, 0.1], "hybrid": [0.9, 0.1, 0.4, 0.0],
                           "rouge_l": [0.5, 0.2, 0.6, 0.1], "cosine": [0.8, 0.3, 0.2, 0.1]})
    tr = pd.DataFrame([{"signal": s, "threshold": thr,
                        "rouge_l_filtered": float(events.recap.where(events[s] >= thr, events.dsp_jb).mean()),
                        "queries_saved": float(events.feedback_calls[events[s] < thr].sum() / 5)}
                       for s in ("hybrid", "rouge_l", "cosine") for thr in (0.0, 0.5)])
    from memlab.comparison import paper_mark

    fig = R.filter_tradeoff(tr, events, paper=paper_mark("recap_filter_hybrid"), **BOOT)
    ax = fig.axes[0]
    assert dotted_at(ax) == [pytest.approx(conf_value("recap_filter_hybrid"))]
    filtered = events.recap.where(events.hybrid >= 0.5, events.dsp_jb)  # 0.5, 0.2, 0.4, 0.1
    b = bootstrap_mean(filtered, **BOOT)
    assert bars(ax, "hybrid")[1] == pytest.approx((b.ci_low, b.ci_high))
    assert "dotted: the paper's hybrid-filtered ROUGE-L" in fig.get_label()
    plt.close("all")


def test_stage_metrics_draws_the_papers_prefix_als_on_the_als_panels_only():
    from memlab.comparison import paper_mark

    rows = [{"corpus": c, "stage": st, "setting": s, "longest_span": v, "full_match": v > 5, "nv_recall": v / 10}
            for c in "AB" for st in ("stage0", "stage1") for s in ("prefix", "generic") for v in (2.0, 4.0, 9.0)]
    scores = pd.DataFrame(rows)
    summary = (scores.groupby(["corpus", "stage", "setting"])
               .agg(ALS=("longest_span", "mean"), FMR=("full_match", "mean"), NVR=("nv_recall", "mean")).reset_index())
    fig = T.stage_metrics(summary, scores, paper_mark("propme_t1_als"), 32, seed=0, n_resamples=1000)
    axes = np.asarray(fig.axes).reshape(2, 3)
    for row in axes:
        assert dotted_at(row[0]) == [pytest.approx(conf_value("propme_t1_als"))]
        assert dotted_at(row[1]) == dotted_at(row[2]) == []
    assert "at most 32 new tokens" in fig.get_label()
    plt.close("all")


def test_nothing_to_show_despite_paper_line_and_wilson_caps():
    """All-zeros shares with Wilson bars (caps at 0 and above) and the paper's line: still nothing to show."""
    from memlab.methods.pearl import plots as P

    flags = pd.DataFrame({"kind": ["bitflip"] * 4, "split": ["member", "member", "nonmember", "nonmember"],
                          "alpha": [0.2] * 4, "epoch": [0, 10, 0, 10], "share": [0.0] * 4,
                          "flagged": [0] * 4, "n": [6] * 4})
    fig = P.flagged_by_epoch(flags, ["bitflip"], "sensitivity", (0.2, "paper, Fig. 4 (a)"))
    assert degenerate(fig) == "every plotted value is 0 (4 points)"
    flags.loc[1, ["share", "flagged"]] = [0.5, 3]
    assert degenerate(P.flagged_by_epoch(flags, ["bitflip"], "sensitivity", (0.2, "paper"))) == ""
    ev = gains_events().assign(best=0.0, gain=0.0)
    assert degenerate(R.feedback_gains(E.gains_summary(ev), ev, **BOOT)).startswith("every plotted value is 0")
    plt.close("all")


def test_report_shows_the_sentence_not_the_plot(tmp_path, monkeypatch):
    from tests.report.recording_report import recording_report

    rep, shown = recording_report(tmp_path, monkeypatch)
    res = StudyResult()
    flat, ax = plt.subplots()
    ax.plot([0, 1, 2], [0, 0, 0])
    ax.axhline(0.5).set_gid("reference")
    curve, ax = plt.subplots()
    ax.plot([0, 1, 2], [0.1, 0.3, 0.2])
    res.figure("flat", flat)
    res.figure("curve", curve)
    rep.save(res)
    assert shown == [("text", "**flat: nothing to show** — every plotted value is 0 (3 points)."),
                     ("png", "curve.png")]
    assert (tmp_path / "figures" / "flat.png").exists()


def test_memorization_curve_bands_are_wilson_of_exact_over_n():
    from memlab.methods.memorization_curve import curve_figure

    df = pd.DataFrame({"size": ["s"] * 4, "epoch": [5, 10, 5, 10], "n": [50] * 4, "exact": [3, 13, 0, 1],
                       "split": ["member", "member", "nonmember", "nonmember"]}).assign(rate=lambda d: d.exact / d.n)
    fig = curve_figure(df, 32, "neox")
    bands = [c for c in fig.axes[0].collections if type(c).__name__ in ("FillBetweenPolyCollection", "PolyCollection")]
    assert len(bands) == 2
    for band, (k, n) in zip(bands, [((3, 13), 50), ((0, 1), 50)]):
        ys = band.get_paths()[0].vertices[:, 1]
        for kk in k:
            lo, hi = wilson(kk, n)
            assert np.isclose(ys, lo).any() and np.isclose(ys, hi).any()
    assert "95 % Wilson intervals; n = 50 probes per point" in fig.get_label()
    plt.close("all")


def test_auc_by_epoch_bootstrap_bars_are_seeded_and_within_0_1():
    from memlab.methods.pearl import plots as P
    from memlab.methods.pearl.tables import detection_table

    rng = np.random.default_rng(3)
    scores = pd.DataFrame([{"epoch": e, "member": m, "loss": rng.normal(m * e / 4), "gfd": rng.normal()}
                           for e in (0, 4) for m in (0, 1) for _ in range(12)])
    auc = pd.concat([detection_table(g, "member", ["loss", "gfd"]).assign(epoch=e) for e, g in scores.groupby("epoch")])
    with pytest.raises(ValueError):
        P.auc_by_epoch(auc, scores, n_resamples=200)  # no seed: no unseeded bootstrap
    segs = lambda f: [s for ax in f.axes for c in ax.collections for s in c.get_segments()]  # noqa: E731
    a, b = [segs(P.auc_by_epoch(auc, scores, seed=7, n_resamples=200)) for _ in range(2)]
    assert a and all(np.array_equal(x, y) for x, y in zip(a, b))
    assert all(0.0 <= s[:, 1].min() and s[:, 1].max() <= 1.0 for s in a)
    assert "seed 7" in plt.gcf().get_label()
    plt.close("all")


def test_stage_metrics_nvr_bars_stay_within_0_1():
    rows = [{"corpus": c, "stage": st, "setting": "prefix", "longest_span": 1.0, "full_match": False,
             "nv_recall": v} for c in "AB" for st in ("stage0", "stage1") for v in (0.0, 0.0, 0.0, 0.9)]
    scores = pd.DataFrame(rows)
    summary = (scores.groupby(["corpus", "stage", "setting"])
               .agg(ALS=("longest_span", "mean"), FMR=("full_match", "mean"), NVR=("nv_recall", "mean")).reset_index())
    fig = T.stage_metrics(summary, scores, seed=0, n_resamples=1000)
    nvr = [ax for ax in fig.axes if ax.get_title().endswith("NVR")]
    assert nvr and all(s[:, 1].min() >= 0 for ax in nvr for c in ax.collections for s in c.get_segments())
    assert "percentile bootstrap for NVR" in fig.get_label()
    plt.close("all")
