"""SimpleTrace / PROPME figures, each from a table of :mod:`memlab.methods.trace.study`."""

from __future__ import annotations

from typing import Sequence

SETTINGS = ["generic", "specific", "prefix"]


def stage_metrics(summary):
    """ALS, FMR and NVR per training stage, one line per prompt setting; rows = corpus A, B."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(12, 6), sharex=True)
    for i, c in enumerate(["A", "B"]):
        for j, m in enumerate(["ALS", "FMR", "NVR"]):
            ax = axes[i][j]
            for setting, g in summary[summary.corpus == c].groupby("setting"):
                ax.plot(g.stage, g[m], marker="o", label=setting)
            ax.set_title(f"corpus {c}: {m}", fontsize=9)
    axes[0][0].legend()
    fig.set_label("SimpleTrace metrics (ALS, FMR, NVR) of each training stage's generations, one line per prompt "
                  "setting, corpus A (top) and B (bottom); each point averages the stage's prompts of that setting "
                  "(params.n_prompts per corpus).")
    return fig


def stage_propensity(prop):
    """FMR and NVR propensity per stage and setting, one panel per corpus; 0.5 = propensity equals capability."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2), sharey=True)
    for ax, c in zip(axes, ["A", "B"]):
        long = prop[prop.corpus == c].melt(id_vars=["stage", "setting"], value_vars=["FMR_propensity", "NVR_propensity"])
        for (setting, m), g in long.groupby(["setting", "variable"]):
            ax.plot(g.stage, g.value, marker="o", label=f"{setting} {m.split('_')[0]}")
        ax.axhline(0.5, color="grey", lw=0.8, ls="--")
        ax.set_title(f"corpus {c}: propensity", fontsize=9)
    axes[0].legend(fontsize=7)
    fig.set_label("FMR and NVR propensity (non-adversarial over adversarial rate, with ε) per training stage and "
                  "prompt setting, one panel per corpus; dashed: 0.5, propensity equal to capability.")
    return fig


def stage_span_lengths(spans, stages: Sequence[str]):
    """Histograms of kept span lengths per corpus (rows) and stage (columns), one colour per setting."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(stages), figsize=(3.2 * len(stages), 5.5), sharey=True, squeeze=False)
    top = int(spans.span_length.max()) + 2 if len(spans) else 2
    for i, c in enumerate(["A", "B"]):
        for j, st in enumerate(stages):
            ax = axes[i][j]
            for setting in SETTINGS:
                x = spans[(spans.corpus == c) & (spans.stage == st) & (spans.setting == setting)].span_length
                if len(x):
                    ax.hist(x, bins=range(1, top), alpha=0.5, label=setting)
            ax.set_title(f"{c} · {st}", fontsize=9)
            ax.set_yscale("log")
    axes[0][0].legend(fontsize=7)
    fig.set_label(f"Lengths (tokens) of the rarest spans SimpleTrace keeps, per corpus (rows) and stage (columns), "
                  f"one colour per prompt setting, log counts; n = {len(spans)} spans in all.")
    return fig


def span_lengths(spans, groups: Sequence[tuple[str, str]]):
    """Histograms of kept span lengths per (model, corpus), one colour per setting."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(groups), figsize=(4.5 * len(groups), 3.2), squeeze=False)
    for ax, (m, c) in zip(axes[0], groups):
        sel = spans[(spans.model == m) & (spans.corpus == c)]
        for setting in SETTINGS:
            x = sel[sel.setting == setting].span_length
            if len(x):
                ax.hist(x, bins=range(1, int(spans.span_length.max()) + 2), alpha=0.5, label=setting)
        ax.set_title(f"{m}\n{c}", fontsize=9)
        ax.set_xlabel("span length (tokens)")
        ax.set_yscale("log")
    axes[0][0].set_ylabel("kept spans")
    axes[0][0].legend()
    fig.set_label(f"Lengths (tokens) of the rarest spans SimpleTrace keeps, per model and corpus, one colour per "
                  f"prompt setting, log counts; n = {len(spans)} spans in all.")
    return fig
